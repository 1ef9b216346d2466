import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { HistoryResult, ResultStatus } from "./classify.ts"
import type { ClassifyInput, FlakyRepoShape, HistoryRow } from "./FlakyRepo.ts"
import { BATCH_ROWS, FAILURE_TIME_SLACK_MS } from "./FlakyRepo.ts"
import { type CandidateRow, chunks, dateArray, dateOrNull, plainArray, textArray, toCandidate } from "./rowsRepo.ts"

/** What classifying an upload reads and writes: candidates with their history, failure times, statuses. */
export const statusRepo = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const shape: Pick<
    FlakyRepoShape,
    "queueBranches" | "classifyInputs" | "recordFailures" | "statusOf" | "history" | "saveStatuses"
  > = {
    queueBranches: (repoId) =>
      Effect.map(sql<{ branch: string }>`select branch from queues where repo_id = ${repoId}`, (rows) =>
        rows.map((r) => r.branch)
      ),

    classifyInputs: (repoId, upload, since, ids) =>
      Effect.gen(function* () {
        // the scan goes back to the upload's own time when that is older than the window (its rows say whether
        // a candidate was touched), the history keeps the window
        const s = since.toISOString()
        const from = new Date(Math.min(since.getTime(), upload.runAt.getTime())).toISOString()
        const set =
          ids === undefined
            ? sql`
                select id, status, status_reason, status_at, flaky_signal_at, clean_runs, last_failure_at from test_cases
                where repo_id = ${repoId} and status <> 'healthy'
                union
                select id, status, status_reason, status_at, flaky_signal_at, clean_runs, last_failure_at from test_cases
                where repo_id = ${repoId}
                  and last_failure_at >= ${new Date(since.getTime() - FAILURE_TIME_SLACK_MS).toISOString()}::timestamptz`
            : sql`
                select tc.id, tc.status, tc.status_reason, tc.status_at, tc.flaky_signal_at, tc.clean_runs,
                  tc.last_failure_at
                from unnest(${plainArray(ids)}::uuid[]) as i(id)
                join test_cases tc on tc.repo_id = ${repoId} and tc.id = i.id`
        // each test's results through the (test case, time) index, one scan per test (fenced, so that stale
        // statistics cannot turn this into a scan of the repository's week); its runs come back as one string,
        // `<upload id><p|f>,…` oldest first, and the uploads' sha, branch and time once
        const rows = yield* sql<CandidateRow & { last_failure_at: unknown; runs: string | null }>`
            with c as materialized (${set})
            select c.id, c.status, c.status_reason, c.status_at, c.flaky_signal_at, c.clean_runs, c.last_failure_at,
              h.runs
            from c cross join lateral (
              select
                string_agg(r.upload_id::text || case when r.status = 'failed' then 'f' else 'p' end, ','
                           order by r.run_at, r.ord)
                  filter (where r.status <> 'skipped' and not r.infra and r.run_at >= ${s}::timestamptz) as runs,
                bool_or(r.upload_id = ${upload.id}) as touched
              from (
                select upload_id, status, run_at, ord, infra from test_results
                where test_case_id = c.id and repo_id::text = ${repoId}::text and run_at >= ${from}::timestamptz
                offset 0) r
            ) h
            where h.touched or ${ids !== undefined}`
        if (rows.length === 0) return []
        const uploads = yield* sql<{ id: string; sha: string; branch: string; at: number }>`
            select id, sha, branch, (extract(epoch from run_at) * 1000)::float8 as at from test_uploads
            where repo_id = ${repoId} and run_at >= ${s}::timestamptz`
        // one shared (immutable) history entry per upload and status
        const byUpload = new Map<string, { passed: HistoryResult; failed: HistoryResult }>()
        const of = (id: string, status: ResultStatus, u: { sha: string; branch: string; at: number }) => ({
          at: Math.round(Number(u.at)),
          sha: u.sha,
          branch: u.branch,
          status,
          uploadId: id,
          infra: false
        })
        for (const u of uploads) byUpload.set(u.id, { passed: of(u.id, "passed", u), failed: of(u.id, "failed", u) })
        let missing = false
        const out = rows.map((row): ClassifyInput => {
          const history: HistoryResult[] = []
          if (row.runs !== null && row.runs !== "") {
            for (const run of row.runs.split(",")) {
              const u = byUpload.get(run.slice(0, 36))
              if (u === undefined) missing = true
              else history.push(run.charCodeAt(36) === 0x66 ? u.failed : u.passed)
            }
          }
          return { ...toCandidate(row), lastFailureAt: dateOrNull(row.last_failure_at), history }
        })
        if (!missing) return out
        // results whose upload row is not there (not written by this service): read them the long way
        const full = yield* shape.history(
          repoId,
          rows.map((r) => r.id),
          since
        )
        const byTest = new Map<string, HistoryResult[]>()
        for (const h of full) {
          const list = byTest.get(h.testCaseId)
          if (list === undefined) byTest.set(h.testCaseId, [h])
          else list.push(h)
        }
        return out.map((c) => ({ ...c, history: byTest.get(c.id) ?? [] }))
      }),

    recordFailures: (repoId, ids, at) =>
      Effect.forEach(
        chunks(ids, BATCH_ROWS),
        (part) =>
          sql`update test_cases set last_failure_at = ${at.toISOString()}::timestamptz
                where repo_id = ${repoId} and id = any(${plainArray(part)}::uuid[])
                  and (last_failure_at is null
                    or last_failure_at < ${new Date(at.getTime() - FAILURE_TIME_SLACK_MS).toISOString()}::timestamptz)`,
        { discard: true }
      ),

    statusOf: (repoId, ids) =>
      ids.length === 0
        ? Effect.succeed([])
        : Effect.map(
            Effect.forEach(
              chunks(ids, BATCH_ROWS),
              (part) => sql<CandidateRow>`
                  select id, status, status_reason, status_at, flaky_signal_at, clean_runs from test_cases
                  where repo_id = ${repoId} and id = any(${plainArray(part)}::uuid[])`
            ),
            (parts) => parts.flat().map(toCandidate)
          ),

    history: (repoId, ids, since) =>
      ids.length === 0
        ? Effect.succeed([])
        : Effect.map(
            Effect.forEach(
              chunks(ids, BATCH_ROWS),
              (part) => sql<{
                test_case_id: string
                at: number
                sha: string
                branch: string
                status: string
                upload_id: string
              }>`
                  select r.test_case_id, (extract(epoch from r.run_at) * 1000)::float8 as at, r.sha, r.branch,
                    r.status, r.upload_id
                  from unnest(${plainArray(part)}::uuid[]) as c(id)
                  cross join lateral (
                    select test_case_id, run_at, ord, sha, branch, status, upload_id, infra from test_results
                    where test_case_id = c.id and repo_id::text = ${repoId}::text
                      and run_at >= ${since.toISOString()}::timestamptz and status <> 'skipped' and not infra
                    offset 0
                  ) r
                  order by r.test_case_id, r.run_at, r.ord`
            ),
            (parts) =>
              parts.flat().map(
                (r): HistoryRow => ({
                  testCaseId: r.test_case_id,
                  at: Math.round(Number(r.at)),
                  sha: r.sha,
                  branch: r.branch,
                  status: r.status as ResultStatus,
                  uploadId: r.upload_id,
                  infra: false
                })
              )
          ),

    saveStatuses: (repoId, updates) =>
      Effect.forEach(
        chunks(updates, BATCH_ROWS),
        (part) =>
          sql`update test_cases tc set status = u.status, status_reason = u.reason, status_at = u.status_at,
                  flaky_signal_at = u.flaky_signal_at, clean_runs = u.clean_runs
                from unnest(${plainArray(part.map((u) => u.id))}::uuid[], ${textArray(part.map((u) => u.status))}::text[],
                  ${textArray(part.map((u) => u.reason))}::text[],
                  ${dateArray(part.map((u) => u.statusAt))}::timestamptz[],
                  ${dateArray(part.map((u) => u.flakySignalAt))}::timestamptz[],
                  ${plainArray(part.map((u) => u.cleanRuns))}::int[])
                  as u(id, status, reason, status_at, flaky_signal_at, clean_runs)
                where tc.repo_id = ${repoId} and tc.id = u.id`,
        { discard: true }
      )
  }
  return shape
})
