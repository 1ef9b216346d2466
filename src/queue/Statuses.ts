import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { Database } from "../db/Database.ts"
import { makeStore } from "./store.ts"

/**
 * Commit statuses, as CI reports them (POST /v1/reportStatus, or the built-in command CI), and the verdict of a
 * test run over its required statuses.
 */

export type StatusState = "pending" | "success" | "failure" | "error"
export type Verdict = "pending" | "success" | "failure"

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
  /** Stores a status and tells the runners of the repository's queues, which evaluate their runs at that sha. */
  readonly report: (
    repoId: string,
    sha: string,
    context: string,
    state: StatusState,
    targetUrl: string | null,
    description: string | null
  ) => Effect.Effect<void, SqlError>
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
   * success when every required status succeeded, failure when one failed or errored, else pending. Only statuses
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
      report: (repoId, sha, context, state, targetUrl, description) =>
        Effect.gen(function* () {
          const queues = yield* sql.withTransaction(
            Effect.gen(function* () {
              yield* record(repoId, sha, context, state, targetUrl, description)
              const rows = yield* sql<{ id: string }>`select id from queues where repo_id = ${repoId}`
              for (const q of rows) yield* enqueueEvent(q.id, { _tag: "StatusReported", sha })
              return rows
            })
          )
          for (const q of queues) yield* db.notify(WAKE_CHANNEL, q.id)
        }),
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
          const reported = yield* forSha(repoId, sha)
          const byContext = new Map(
            reported.filter((s) => s.updatedAt.getTime() >= since).map((s) => [s.context, s.state])
          )
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
