import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { Database } from "../kernel/Database.ts"
import { makeStore } from "./store.ts"

/**
 * Commit statuses, as CI reports them (POST /v1/reportStatus, or the built-in command CI), and the verdict of a
 * test run over its required statuses.
 */

export type StatusState = "pending" | "success" | "failure" | "error"
export type Verdict = "pending" | "success" | "failure"

/** A check run (GitHub's checks API), as a webhook or the reconciliation reads it. */
export interface CheckRunReport {
  /** GitHub's id; a re-run is a new check run with a higher id, which replaces the earlier one of the same name */
  readonly checkRunId: number
  readonly suiteId: number | null
  readonly name: string
  /** queued, in_progress, completed (or requested, waiting, pending) */
  readonly status: string
  /** with completed: success, failure, neutral, cancelled, skipped, timed_out, action_required, stale, ... */
  readonly conclusion: string | null
  readonly url: string | null
}

export interface StoredCheckRun extends CheckRunReport {
  readonly updatedAt: Date
}

/**
 * What a check run counts as for required statuses (by its name, as GitHub's branch protection does): pending until
 * it completed; then success for success, neutral and skipped, error for cancelled, failure for the rest.
 */
export const checkRunState = (status: string, conclusion: string | null): StatusState => {
  if (status !== "completed" || conclusion === null) return "pending"
  if (conclusion === "success" || conclusion === "neutral" || conclusion === "skipped") return "success"
  return conclusion === "cancelled" ? "error" : "failure"
}

export interface StatusesShape {
  /** Stores a status (a later report for the same sha and context replaces the earlier one). */
  readonly record: (
    repoId: string,
    sha: string,
    context: string,
    state: StatusState,
    targetUrl: string | null,
    description: string | null
  ) => Effect.Effect<void, SqlError>
  /** `record` for many statuses of one repository in one statement (a later one for the same sha and context wins). */
  readonly recordMany: (
    repoId: string,
    statuses: ReadonlyArray<{
      readonly sha: string
      readonly context: string
      readonly state: StatusState
      readonly targetUrl: string | null
      readonly description: string | null
    }>
  ) => Effect.Effect<void, SqlError>
  /** Stores a status and tells the runners of the repository's queues, which evaluate their runs at that sha. */
  readonly report: (
    repoId: string,
    sha: string,
    context: string,
    state: StatusState,
    targetUrl: string | null,
    description: string | null
  ) => Effect.Effect<void, SqlError>
  /**
   * Stores a check run: the one of highest id per sha and name is kept, and one stored as it is is not stamped again
   * (a run counts only results reported since it was built).
   */
  readonly recordCheckRun: (repoId: string, sha: string, run: CheckRunReport) => Effect.Effect<void, SqlError>
  /** Stores a check run and tells the runners of the repository's queues, as `report` does for a status. */
  readonly reportCheckRun: (repoId: string, sha: string, run: CheckRunReport) => Effect.Effect<void, SqlError>
  /** The latest check run of each name on `sha`, by suite and name. */
  readonly checkRunsForSha: (repoId: string, sha: string) => Effect.Effect<ReadonlyArray<StoredCheckRun>, SqlError>
  /** The database's clock (epoch ms), the clock statuses are stamped with. */
  readonly clock: Effect.Effect<number, SqlError>
  /**
   * Records the required statuses of a run, and `sinceMs` (database clock, taken before its test branch was
   * built): only statuses reported from then on count for the run. A repeated call keeps the earliest `sinceMs`.
   */
  readonly setRequirements: (
    runId: string,
    statuses: ReadonlyArray<string>,
    source: string | null,
    sinceMs?: number
  ) => Effect.Effect<void, SqlError>
  readonly requirements: (runId: string) => Effect.Effect<
    {
      readonly statuses: ReadonlyArray<string>
      readonly source: string | null
      readonly sinceMs: number | null
    } | null,
    SqlError
  >
  /**
   * success when every required status succeeded, failure when one failed or errored, else pending; a check run
   * counts as a status named after it (the later of the two when both exist). Only statuses
   * reported since the run's `sinceMs` count (a rebuilt run can have the same test-branch sha as an earlier one);
   * for a run without one, since `sinceMs` (its creation, process clock) with a second of tolerance.
   */
  readonly verdict: (
    repoId: string,
    runId: string | null,
    sha: string,
    sinceMs: number,
    required?: ReadonlyArray<string>
  ) => Effect.Effect<Verdict, SqlError>
  readonly forSha: (
    repoId: string,
    sha: string
  ) => Effect.Effect<
    ReadonlyArray<{
      readonly context: string
      readonly state: StatusState
      readonly targetUrl: string | null
      readonly updatedAt: Date
    }>,
    SqlError
  >
}

export class Statuses extends Context.Tag("greenline/Statuses")<Statuses, StatusesShape>() {}

export const WAKE_CHANNEL = "greenline_wake"

export const StatusesLive = Layer.effect(
  Statuses,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const { enqueueEvent } = makeStore(sql)

    const record: StatusesShape["record"] = (repoId, sha, context, state, targetUrl, description) =>
      sql`insert into commit_statuses (repo_id, sha, context, state, target_url, description, updated_at)
          values (${repoId}, ${sha}, ${context}, ${state}, ${targetUrl}, ${description}, clock_timestamp())
          on conflict (repo_id, sha, context) do update set state = excluded.state, target_url = excluded.target_url,
            description = excluded.description, updated_at = excluded.updated_at`.pipe(Effect.asVoid)

    const recordMany: StatusesShape["recordMany"] = (repoId, list) => {
      // one row per sha and context (an upsert may not touch a row twice), the last one given
      const last = new Map(list.map((s) => [`${s.sha}\n${s.context}`, s]))
      if (last.size === 0) return Effect.void
      const rows = [...last.values()].map((s) => ({
        sha: s.sha,
        context: s.context,
        state: s.state,
        target_url: s.targetUrl,
        description: s.description
      }))
      return sql`insert into commit_statuses (repo_id, sha, context, state, target_url, description, updated_at)
          select ${repoId}, v.sha, v.context, v.state, v.target_url, v.description, clock_timestamp()
          from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
            as v(sha text, context text, state text, target_url text, description text)
          on conflict (repo_id, sha, context) do update set state = excluded.state, target_url = excluded.target_url,
            description = excluded.description, updated_at = excluded.updated_at`.pipe(Effect.asVoid)
    }

    const recordCheckRun: StatusesShape["recordCheckRun"] = (repoId, sha, run) =>
      sql`insert into check_runs (repo_id, sha, name, check_run_id, suite_id, status, conclusion, url, updated_at)
          values (${repoId}, ${sha}, ${run.name}, ${run.checkRunId}, ${run.suiteId}, ${run.status}, ${run.conclusion},
                  ${run.url}, clock_timestamp())
          on conflict (repo_id, sha, name) do update set check_run_id = excluded.check_run_id,
            suite_id = excluded.suite_id, status = excluded.status, conclusion = excluded.conclusion, url = excluded.url,
            updated_at = excluded.updated_at
          where check_runs.check_run_id < excluded.check_run_id
             or (check_runs.check_run_id = excluded.check_run_id
                 and (check_runs.status, check_runs.conclusion, check_runs.url, check_runs.suite_id)
                     is distinct from (excluded.status, excluded.conclusion, excluded.url, excluded.suite_id))`.pipe(
        Effect.asVoid
      )

    const checkRunsForSha: StatusesShape["checkRunsForSha"] = (repoId, sha) =>
      Effect.map(
        sql<{
          name: string
          check_run_id: string | number
          suite_id: string | number | null
          status: string
          conclusion: string | null
          url: string | null
          updated_at: Date | string
        }>`select name, check_run_id, suite_id, status, conclusion, url, updated_at from check_runs
           where repo_id = ${repoId} and sha = ${sha} order by suite_id nulls last, name`,
        (rows) =>
          rows.map((r) => ({
            checkRunId: Number(r.check_run_id),
            suiteId: r.suite_id === null ? null : Number(r.suite_id),
            name: r.name,
            status: r.status,
            conclusion: r.conclusion,
            url: r.url,
            updatedAt: new Date(r.updated_at)
          }))
      )

    /** Stores with `write`, queues a StatusReported for every queue of the repository, then wakes their runners. */
    const reported = (repoId: string, sha: string, write: Effect.Effect<void, SqlError>) =>
      Effect.gen(function* () {
        const queues = yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* write
            // held (key share) until the event is stored: a deleteQueue racing the report waits for it, or has
            // deleted the queue first and the row is skipped (never an event for a queue that is gone: a 500)
            const rows = yield* sql<{ id: string }>`select id from queues where repo_id = ${repoId}
              order by id for key share`
            for (const q of rows) yield* enqueueEvent(q.id, { _tag: "StatusReported", sha })
            return rows
          })
        )
        for (const q of queues) yield* db.notify(WAKE_CHANNEL, q.id)
      })

    const requirements: StatusesShape["requirements"] = (runId) =>
      Effect.map(
        sql<{
          statuses: unknown
          source: string | null
        }>`select statuses, source from run_requirements where run_id = ${runId}`,
        (rows) => {
          const row = rows[0]
          if (row === undefined) return null
          // stored as { statuses, sinceMs }, or (older rows) as the bare list
          const raw = (typeof row.statuses === "string" ? JSON.parse(row.statuses) : row.statuses) as
            | Array<string>
            | { statuses: Array<string>; sinceMs: number | null }
          return Array.isArray(raw)
            ? { statuses: raw, source: row.source, sinceMs: null }
            : { statuses: raw.statuses, source: row.source, sinceMs: raw.sinceMs ?? null }
        }
      )

    const forSha: StatusesShape["forSha"] = (repoId, sha) =>
      Effect.map(
        sql<{ context: string; state: StatusState; target_url: string | null; updated_at: Date | string }>`
          select context, state, target_url, updated_at from commit_statuses where repo_id = ${repoId} and sha = ${sha}
          order by context`,
        (rows) =>
          rows.map((r) => ({
            context: r.context,
            state: r.state,
            targetUrl: r.target_url,
            updatedAt: new Date(r.updated_at)
          }))
      )

    return {
      record,
      recordMany,
      report: (repoId, sha, context, state, targetUrl, description) =>
        reported(repoId, sha, record(repoId, sha, context, state, targetUrl, description)),
      recordCheckRun,
      reportCheckRun: (repoId, sha, run) => reported(repoId, sha, recordCheckRun(repoId, sha, run)),
      checkRunsForSha,
      clock: Effect.map(sql<{ now: Date | string }>`select clock_timestamp() as now`, (rows) =>
        new Date(rows[0]!.now).getTime()
      ),
      setRequirements: (runId, statuses, source, sinceMs) =>
        Effect.gen(function* () {
          const earlier = yield* requirements(runId)
          const since =
            earlier?.sinceMs != null && sinceMs !== undefined
              ? Math.min(earlier.sinceMs, sinceMs)
              : (sinceMs ?? earlier?.sinceMs ?? null)
          const doc = JSON.stringify({ statuses, sinceMs: since })
          yield* sql`insert into run_requirements (run_id, statuses, source) values (${runId}, ${doc}::jsonb, ${source})
            on conflict (run_id) do update set statuses = excluded.statuses, source = excluded.source`
        }),
      requirements,
      forSha,
      verdict: (repoId, runId, sha, sinceMs, required) =>
        Effect.gen(function* () {
          const stored = runId === null ? null : yield* requirements(runId)
          const names = required ?? stored?.statuses ?? []
          if (names.length === 0) return "pending" as const
          const since = stored?.sinceMs ?? sinceMs - 1000
          const statuses = yield* forSha(repoId, sha)
          const checks = yield* checkRunsForSha(repoId, sha)
          const all = [
            ...statuses,
            ...checks.map((c) => ({
              context: c.name,
              state: checkRunState(c.status, c.conclusion),
              updatedAt: c.updatedAt
            }))
          ]
            .filter((s) => s.updatedAt.getTime() >= since)
            .sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime())
          const byContext = new Map(all.map((s) => [s.context, s.state]))
          let allSuccess = true
          for (const name of names) {
            const state = byContext.get(name)
            if (state === "failure" || state === "error") return "failure" as const
            if (state !== "success") allSuccess = false
          }
          return allSuccess ? ("success" as const) : ("pending" as const)
        })
    }
  })
)
