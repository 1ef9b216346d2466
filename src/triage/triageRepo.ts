import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What failure triage reads of the queue's tables (issue #33): the failure records of the log (`event_log` rows of
 * an entry's `failed` state), the runs that failed, and the PR whose failure took another out at the same instant.
 * Read only; the queue's own modules write these rows.
 */
export const makeTriageRepo = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  /** The latest failure record of an entry. */
  const lastFailure = (entryId: string) =>
    Effect.map(
      sql<{ at: Date | string; reason: string }>`
        select occurred_at as at, reason from event_log
        where entry_id = ${entryId} and state = 'failed' order by seq desc limit 1`,
      (rows) => rows[0]
    )

  /** A run's test-branch sha (null when it was never built, undefined when there is no such run). */
  const runSha = (queueId: string, runId: string) =>
    Effect.map(
      sql<{
        sha: string | null
      }>`select test_branch_sha as sha from test_runs where id = ${runId} and queue_id = ${queueId}`,
      (rows) => (rows[0] === undefined ? undefined : rows[0].sha)
    )

  /** The failed run, ended at `at` or before, that tested entry `entryId`: the run whose failure is the entry's. */
  const failedRunOf = (queueId: string, entryId: string, at: string) =>
    Effect.map(
      sql<{ id: string }>`
        select id from test_runs
        where queue_id = ${queueId} and status = 'failed' and ended_at <= ${at}::timestamptz
          and record->'testedEntryIds' @> jsonb_build_array(${entryId}::text)
        order by ended_at desc limit 1`,
      (rows) => rows[0]?.id ?? null
    )

  /** Another entry of the queue that failed (or went pending_failure) at `at`: the cause of a PREREQUISITE_* end. */
  const causeAt = (queueId: string, entryId: string, at: string) =>
    Effect.map(
      sql<{ id: string; pr_number: string | number }>`
        select e.id, e.pr_number from event_log t join entries e on e.id = t.entry_id
        where t.entry_id is not null and e.queue_id = ${queueId} and e.id <> ${entryId}
          and t.state in ('failed', 'pending_failure') and t.occurred_at = ${at}::timestamptz
        order by t.seq limit 1`,
      (rows) => (rows[0] === undefined ? undefined : { entryId: rows[0].id, prNumber: Number(rows[0].pr_number) })
    )

  /** The entry of PR `prNumber` in the queue. */
  const entryOf = (queueId: string, prNumber: number) =>
    Effect.map(
      sql<{ id: string }>`select id from entries where queue_id = ${queueId} and pr_number = ${prNumber}`,
      (rows) => rows[0]?.id
    )

  /** The queue's latest `limit` failure records, newest first. */
  const recentFailures = (queueId: string, limit: number) =>
    sql<{ entry_id: string; pr_number: string | number; title: string; at: Date | string; reason: string }>`
      select t.entry_id, e.pr_number, e.title, t.occurred_at as at, t.reason
      from event_log t join entries e on e.id = t.entry_id
      where e.queue_id = ${queueId} and t.entry_id is not null and t.state = 'failed'
      order by t.seq desc limit ${limit}`

  return { lastFailure, runSha, failedRunOf, causeAt, entryOf, recentFailures }
})
