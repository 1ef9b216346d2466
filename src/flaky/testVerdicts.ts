import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { type FailedTest, type FailedTestMark, TestVerdicts } from "../queue/TestVerdicts.ts"
import { FlakyRepo } from "./FlakyRepo.ts"

/**
 * The flaky feature's side of the queue's `TestVerdicts` port (issue #20): the tests that failed in a test-branch
 * sha's uploads (and did not pass on retry in the same upload), how many are quarantined now, and how many are known
 * flaky without being quarantined. The queue decides what that means for its run.
 *
 * `failedTests` (issue #33, failure triage): the same failed tests one by one, each with its last-7-days failure
 * rate, its quarantine, and its latest result on the target branch, which marks it (`FailedTestMark`).
 */
export const FlakyTestVerdictsLive = Layer.effect(
  TestVerdicts,
  Effect.gen(function* () {
    const repo = yield* FlakyRepo
    const sql = yield* SqlClient.SqlClient
    return {
      explainFailure: (repoId: string, sha: string) =>
        Effect.map(repo.failuresAt(repoId, sha), (f) => ({
          uploads: f.uploads,
          failedTests: f.failed,
          quarantined: f.quarantined,
          knownFlaky: f.flaky
        })),
      failedTests: (repoId: string, sha: string, targetBranch: string, limit: number) =>
        Effect.map(
          sql<{
            uploads: number
            id: string | null
            name: string | null
            classname: string | null
            file: string | null
            status: string | null
            quarantined: boolean | null
            failure_key: string | null
            failure_summary: string | null
            runs: number | null
            failed: number | null
            on_target: string | null
          }>`
            with u as (select id, run_at from test_uploads where repo_id = ${repoId} and sha = ${sha}),
            per_upload as (
              select r.test_case_id,
                (array_agg(r.failure_key order by r.ord) filter (where r.status = 'failed'))[1] as failure_key,
                (array_agg(r.failure_summary order by r.ord) filter (where r.status = 'failed'))[1] as failure_summary
              from u join test_results r on r.repo_id = ${repoId} and r.upload_id = u.id and r.run_at = u.run_at
              group by r.upload_id, r.test_case_id
              having bool_or(r.status = 'failed') and not bool_or(r.status = 'passed')
            ),
            f as (
              select test_case_id, min(failure_key) as failure_key, min(failure_summary) as failure_summary
              from per_upload group by test_case_id
            ),
            t as (
              select tc.id, tc.name, tc.classname, tc.file, tc.status, tc.quarantined, f.failure_key, f.failure_summary
              from f join test_cases tc on tc.repo_id = ${repoId} and tc.id = f.test_case_id
              order by tc.name, tc.classname, tc.id limit ${limit}
            )
            select (select count(*) from u)::int as uploads, t.id, t.name, t.classname, t.file, t.status,
              t.quarantined, t.failure_key, t.failure_summary, s.runs, s.failed, l.status as on_target
            from (select 1) one
            left join t on true
            left join lateral (
              select count(*)::int as runs, (count(*) filter (where x.status = 'failed'))::int as failed
              from test_results x where x.test_case_id = t.id and x.repo_id = ${repoId}
                and x.run_at >= now() - interval '7 days' and x.status in ('passed', 'failed')
            ) s on t.id is not null
            left join lateral (
              select x.status from test_results x
              where x.test_case_id = t.id and x.repo_id = ${repoId} and x.branch = ${targetBranch}
                and x.status in ('passed', 'failed')
              order by x.run_at desc, x.ord desc limit 1
            ) l on t.id is not null
            order by t.name, t.classname, t.id`,
          (rows) => {
            const tests: Array<FailedTest> = []
            for (const r of rows) {
              if (r.id === null) continue
              const quarantined = r.quarantined === true
              const mark: FailedTestMark =
                quarantined || r.status === "flaky"
                  ? "known_flaky"
                  : r.on_target === "failed"
                    ? "broken_on_target"
                    : "new"
              const runs = r.runs ?? 0
              tests.push({
                testCaseId: r.id,
                name: r.name ?? "",
                classname: r.classname ?? "",
                file: r.file ?? "",
                message: r.failure_summary ?? "",
                failureKey: r.failure_key,
                mark,
                failureRate: runs === 0 ? 0 : (r.failed ?? 0) / runs,
                quarantined
              })
            }
            return { uploads: rows[0]?.uploads ?? 0, tests }
          }
        )
    }
  })
)
