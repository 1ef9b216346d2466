import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Schema } from "effect"
import { RepoRef } from "../queue/schemas.ts"

/**
 * A test case's history for the dashboard's test page (extension endpoint): runs and failures per day, its latest
 * results with the upload they came in, and its status history (the changes of its status, quarantine and override,
 * recorded in `test_status_history`, see historyMigration.ts); and one upload with its failed tests, for the page the
 * results link to. Read-only, over the flaky feature's own tables.
 */

export const TestHistoryRequest = Schema.Struct({
  repo: RepoRef,
  test_id: Schema.UUID.annotations({ message: () => "must be a UUID" }),
  days: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 90, { message: () => "must be an integer from 1 to 90" })),
    { exact: true }
  )
}).annotations({ identifier: "TestHistoryRequest" })

/** One change of a test case: its status, whether it is quarantined, or its quarantine override. */
export const TestStatusChange = Schema.Struct({
  at: Schema.String,
  kind: Schema.Literal("status", "quarantine", "override"),
  /** null: the state it had when the history began */
  previous: Schema.NullOr(Schema.String),
  /** status: healthy, flaky or broken; quarantine: quarantined or released; override: always_quarantine,
   * never_quarantine or unspecified */
  current: Schema.String,
  /** status: the classification's reason; override: the override's reason, or "expired" */
  reason: Schema.String,
  /** override: its owner */
  actor: Schema.NullOr(Schema.String)
}).annotations({ identifier: "TestStatusChange" })

/** Changes of the status history returned, newest first. */
const STATUS_CHANGES = 100

export const TestHistory = Schema.Struct({
  daily: Schema.Array(
    Schema.Struct({ day: Schema.String, runs: Schema.Number, failures: Schema.Number, failureRate: Schema.Number })
  ),
  recent: Schema.Array(
    Schema.Struct({
      runAt: Schema.String,
      sha: Schema.String,
      branch: Schema.String,
      prNumber: Schema.NullOr(Schema.Number),
      status: Schema.String,
      failureSummary: Schema.NullOr(Schema.String),
      uploadId: Schema.String
    })
  ),
  /** the last 100 changes of its status, quarantine and override, newest first */
  statusHistory: Schema.Array(TestStatusChange)
}).annotations({ identifier: "TestHistory" })
export type TestHistory = typeof TestHistory.Type
export type TestStatusChange = typeof TestStatusChange.Type

export const UploadRequest = Schema.Struct({
  repo: RepoRef,
  upload_id: Schema.UUID.annotations({ message: () => "must be a UUID" })
}).annotations({ identifier: "UploadRequest" })

/** Failed test cases listed with an upload, at most. */
const UPLOAD_FAILURES = 200

/** One upload of test results: what CI sent, its counts, and the tests that failed in it. */
export const UploadView = Schema.Struct({
  id: Schema.String,
  sha: Schema.String,
  branch: Schema.String,
  prNumber: Schema.NullOr(Schema.Number),
  jobName: Schema.NullOr(Schema.String),
  variant: Schema.String,
  runAt: Schema.String,
  receivedAt: Schema.String,
  tests: Schema.Number,
  passed: Schema.Number,
  failed: Schema.Number,
  skipped: Schema.Number,
  ignored: Schema.Number,
  /** the upload reported an infrastructure failure (its failures do not count against the tests) */
  infra: Schema.Boolean,
  /** the failed test cases, by name, at most 200 */
  failures: Schema.Array(
    Schema.Struct({ testId: Schema.String, name: Schema.String, failureSummary: Schema.NullOr(Schema.String) })
  )
}).annotations({ identifier: "UploadView" })
export type UploadView = typeof UploadView.Type

export interface TestHistoryShape {
  /** Days with no result are left out; `days` counts back from now. */
  readonly history: (repoId: string, testId: string, days: number) => Effect.Effect<TestHistory, SqlError>
  /** One upload of the repository; null when it has none of that id (or it was pruned). */
  readonly upload: (repoId: string, uploadId: string) => Effect.Effect<UploadView | null, SqlError>
}

export class TestHistoryReader extends Context.Tag("greenline/TestHistory")<TestHistoryReader, TestHistoryShape>() {}

const DAY_MS = 86_400_000

export const TestHistoryLive = Layer.effect(
  TestHistoryReader,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      upload: (repoId, uploadId) =>
        Effect.gen(function* () {
          const rows = yield* sql<{
            id: string
            sha: string
            branch: string
            pr_number: number | string | null
            job_name: string | null
            variant: string
            run_at: Date | string
            created_at: Date | string
            tests: number
            passed: number
            failed: number
            skipped: number
            ignored: number
            infra: boolean
          }>`
            select id, sha, branch, pr_number, job_name, variant, run_at, created_at, tests, passed, failed, skipped,
              ignored, infra
            from test_uploads where repo_id = ${repoId} and id = ${uploadId}`
          const u = rows[0]
          if (u === undefined) return null
          // the upload's results carry its run_at: the index of failures by time finds them
          const failures = yield* sql<{ test_id: string; name: string; failure_summary: string | null }>`
            select r.test_case_id as test_id, c.name, r.failure_summary
            from test_results r join test_cases c on c.repo_id = r.repo_id and c.id = r.test_case_id
            where r.repo_id = ${repoId} and r.run_at = ${new Date(u.run_at).toISOString()}::timestamptz
              and r.upload_id = ${uploadId} and r.status = 'failed'
            order by c.name, r.ord limit ${UPLOAD_FAILURES}`
          return {
            id: u.id,
            sha: u.sha,
            branch: u.branch,
            prNumber: u.pr_number === null ? null : Number(u.pr_number),
            jobName: u.job_name,
            variant: u.variant,
            runAt: new Date(u.run_at).toISOString(),
            receivedAt: new Date(u.created_at).toISOString(),
            tests: Number(u.tests),
            passed: Number(u.passed),
            failed: Number(u.failed),
            skipped: Number(u.skipped),
            ignored: Number(u.ignored),
            infra: u.infra,
            failures: failures.map((f) => ({ testId: f.test_id, name: f.name, failureSummary: f.failure_summary }))
          }
        }),
      history: (repoId, testId, days) =>
        Effect.gen(function* () {
          const since = new Date(Math.floor((Date.now() - (days - 1) * DAY_MS) / DAY_MS) * DAY_MS)
          const daily = yield* sql<{ day: string; runs: number | string; failures: number | string }>`
            select to_char(run_at at time zone 'UTC', 'YYYY-MM-DD') as day, count(*) as runs,
              count(*) filter (where status = 'failed') as failures
            from test_results
            where repo_id = ${repoId} and test_case_id = ${testId} and run_at >= ${since}
            group by 1 order by 1`
          const recent = yield* sql<{
            run_at: Date | string
            sha: string
            branch: string
            pr_number: number | string | null
            status: string
            failure_summary: string | null
            upload_id: string
          }>`
            select run_at, sha, branch, pr_number, status, failure_summary, upload_id from test_results
            where repo_id = ${repoId} and test_case_id = ${testId}
            order by run_at desc, ord desc limit 30`
          const changes = yield* sql<{
            at: Date | string
            kind: TestStatusChange["kind"]
            previous: string | null
            current: string
            reason: string
            actor: string | null
          }>`
            select at, kind, previous, current, reason, actor from test_status_history
            where repo_id = ${repoId} and test_case_id = ${testId}
            order by id desc limit ${STATUS_CHANGES}`
          return {
            daily: daily.map((d) => {
              const runs = Number(d.runs)
              const failures = Number(d.failures)
              return { day: d.day, runs, failures, failureRate: runs === 0 ? 0 : failures / runs }
            }),
            recent: recent.map((r) => ({
              runAt: new Date(r.run_at).toISOString(),
              sha: r.sha,
              branch: r.branch,
              prNumber: r.pr_number === null ? null : Number(r.pr_number),
              status: r.status,
              failureSummary: r.failure_summary,
              uploadId: r.upload_id
            })),
            statusHistory: changes.map((c) => ({
              at: new Date(c.at).toISOString(),
              kind: c.kind,
              previous: c.previous,
              current: c.current,
              reason: c.reason,
              actor: c.actor
            }))
          }
        })
    }
  })
)
