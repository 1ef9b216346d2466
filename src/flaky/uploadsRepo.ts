import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import { copyClient, copyIn, copyInStream } from "../kernel/pgCopy.ts"
import type { FlakyRepoShape } from "./FlakyRepo.ts"
import {
  boolArray,
  COPY_RESULTS,
  COPY_RESULTS_BINARY,
  copyRows,
  dateArray,
  plainArray,
  STAGING,
  textArray
} from "./rowsRepo.ts"

/** Uploads and their results: inserts (bulk, or streamed COPY on PostgreSQL), infra marks, what failed at a sha, pruning. */
export const uploadsRepo = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const shape = {
    insertUpload: (u) =>
      sql`insert into test_uploads (id, repo_id, sha, branch, pr_number, job_name, variant, run_at,
              tests, passed, failed, skipped, ignored, infra)
            values (${u.id}, ${u.repoId}, ${u.sha}, ${u.branch}, ${u.prNumber}, ${u.jobName}, ${u.variant},
              ${u.runAt.toISOString()}::timestamptz, ${u.tests}, ${u.passed}, ${u.failed}, ${u.skipped}, ${u.ignored},
              ${u.infra})`.pipe(Effect.asVoid),

    insertTestCases: (repoId, variant, cases, now) => {
      if (cases.ids.length === 0) return Effect.void
      // the failing ones set (or advance) last_failure_at on conflict; the others do nothing on conflict, so that
      // existing rows are neither locked nor rewritten
      const failing: number[] = []
      const passing: number[] = []
      for (let i = 0; i < cases.ids.length; i++) (cases.lastFailureAt[i] ? failing : passing).push(i)
      const insert = (rows: ReadonlyArray<number>, onFailure: boolean) => {
        if (rows.length === 0) return Effect.void
        const col = <A>(values: ReadonlyArray<A>) =>
          rows.length === values.length ? values : rows.map((i) => values[i] as A)
        const conflict = onFailure
          ? sql`on conflict (repo_id, id) do update
                  set last_failure_at = greatest(test_cases.last_failure_at, excluded.last_failure_at)`
          : sql`on conflict (repo_id, id) do nothing`
        return sql`insert into test_cases (repo_id, id, name, classname, file, parent, variant, status_at,
                  last_failure_at)
                select ${repoId}::uuid, t.id, t.name, t.classname, t.file, t.parent, ${variant}::text,
                  ${now.toISOString()}::timestamptz, t.last_failure_at
                from unnest(${plainArray(col(cases.ids))}::uuid[], ${textArray(col(cases.names))}::text[],
                  ${textArray(col(cases.classnames))}::text[], ${textArray(col(cases.files))}::text[],
                  ${textArray(col(cases.parents))}::text[], ${dateArray(col(cases.lastFailureAt))}::timestamptz[])
                  as t(id, name, classname, file, parent, last_failure_at)
                ${conflict}`.pipe(Effect.asVoid)
      }
      return Effect.zipRight(insert(passing, false), insert(failing, true))
    },

    insertResults: (c, b) =>
      b.testCaseIds.length === 0
        ? Effect.void
        : Effect.flatMap(copyClient, (copy) =>
            Option.isSome(copy)
              ? Effect.asVoid(copyIn(copy.value, COPY_RESULTS, copyRows(c, b)))
              : sql`insert into test_results (repo_id, test_case_id, upload_id, run_at, ord, sha, branch, pr_number,
                  status, retry, failure_key, failure_summary, infra)
                select ${c.repoId}::uuid, t.id, ${c.uploadId}::uuid, ${c.runAt.toISOString()}::timestamptz, t.ord,
                  ${c.sha}::text, ${c.branch}::text, ${c.prNumber}::bigint, t.status, t.retry, t.fkey, t.fsum, false
                from unnest(${plainArray(b.testCaseIds)}::uuid[], ${plainArray(b.ords)}::int[],
                  ${textArray(b.statuses)}::text[], ${boolArray(b.retries)}::bool[],
                  ${textArray(b.failureKeys)}::text[], ${textArray(b.failureSummaries)}::text[])
                  as t(id, ord, status, retry, fkey, fsum)`.pipe(Effect.asVoid)
          ),

    copyResults: (next, onSourceError) =>
      Effect.flatMap(copyClient, (copy) =>
        Option.isNone(copy)
          ? Effect.succeed(Option.none())
          : Effect.map(copyInStream(copy.value, COPY_RESULTS_BINARY, next, onSourceError), Option.some)
      ),

    mergeNewCases: (repoId, variant, rows, now) =>
      Effect.gen(function* () {
        const copy = yield* copyClient
        if (Option.isNone(copy)) return yield* Effect.dieMessage("mergeNewCases needs COPY (PostgreSQL)")
        yield* sql.unsafe(STAGING)
        yield* copyIn(copy.value, "copy flaky_new_cases (id, name, classname, file, parent) from stdin", rows)
        yield* sql`
            with staged as (delete from flaky_new_cases returning id, name, classname, file, parent)
            insert into test_cases (repo_id, id, name, classname, file, parent, variant, status_at)
            select ${repoId}::uuid, s.id, s.name, s.classname, s.file, s.parent, ${variant}::text,
              ${now.toISOString()}::timestamptz
            from staged s
            on conflict (repo_id, id) do nothing`
      }),

    markInfra: (repoId, uploadId, runAt) =>
      sql`update test_results set infra = true
            where repo_id = ${repoId} and run_at = ${runAt.toISOString()}::timestamptz and upload_id = ${uploadId}`.pipe(
        Effect.asVoid
      ),

    quarantinedFailures: (repoId, uploadId, runAt) =>
      Effect.map(
        sql<{ n: number }>`
            select count(*)::int as n from test_results r
            join test_cases tc on tc.repo_id = ${repoId} and tc.id = r.test_case_id
            where r.repo_id = ${repoId} and r.run_at = ${runAt.toISOString()}::timestamptz and r.status = 'failed'
              and r.upload_id = ${uploadId} and not r.retry and tc.quarantined
              and exists (select 1 from test_cases q where q.repo_id = ${repoId} and q.quarantined)`,
        (rows) => rows[0]?.n ?? 0
      ),

    failuresAt: (repoId, sha) =>
      Effect.map(
        sql<{ uploads: number; failed: number; quarantined: number; flaky: number }>`
            with u as (select id, run_at from test_uploads where repo_id = ${repoId} and sha = ${sha}),
            f as (
              select r.test_case_id from u
              join test_results r on r.repo_id = ${repoId} and r.upload_id = u.id and r.run_at = u.run_at
              group by r.upload_id, r.test_case_id
              having bool_or(r.status = 'failed') and not bool_or(r.status = 'passed')
            )
            select (select count(*) from u)::int as uploads, count(distinct f.test_case_id)::int as failed,
              (count(distinct f.test_case_id) filter (where tc.quarantined))::int as quarantined,
              (count(distinct f.test_case_id) filter (where not tc.quarantined and tc.status = 'flaky'))::int as flaky
            from f join test_cases tc on tc.repo_id = ${repoId} and tc.id = f.test_case_id`,
        (rows) => ({
          uploads: rows[0]?.uploads ?? 0,
          failed: rows[0]?.failed ?? 0,
          quarantined: rows[0]?.quarantined ?? 0,
          flaky: rows[0]?.flaky ?? 0
        })
      ),

    latestSha: (repoId) =>
      Effect.map(
        sql<{ sha: string }>`select sha from test_uploads where repo_id = ${repoId}
                               order by run_at desc, created_at desc limit 1`,
        (rows) => rows[0]?.sha
      ),

    prune: (olderThan) =>
      Effect.gen(function* () {
        const at = olderThan.toISOString()
        const deleted = yield* sql<{ n: number }>`
            with d as (
              delete from test_results where repo_id in (select id from repositories)
                and run_at < ${at}::timestamptz returning 1
            ) select count(*)::int as n from d`
        yield* sql`delete from test_uploads where run_at < ${at}::timestamptz`
        return deleted[0]?.n ?? 0
      })
  } satisfies Partial<FlakyRepoShape>
  return shape
})
