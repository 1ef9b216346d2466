/**
 * GitHub's CI results into the engine: the one path both the webhooks (`status`, `check_run`, `check_suite`) and the
 * periodic reconciliation take, so a result seen twice (a webhook and a later reconciliation, or a redelivery) is
 * recorded once and wakes the queues once.
 *
 * - `commitStatusState` maps a commit status's state to the engine's (`StatusState`); check runs go through
 *   `Statuses.reportCheckRun` (with `checkRunState`), which applies the same "unchanged is not re-stamped" rule.
 * - `ingestStatus` stores a result through `Statuses.report` (which wakes the repository's queues) only when it
 *   differs from what is stored for that sha and context: an unchanged result is not stamped again (a run counts
 *   only the statuses reported since it was built, Statuses.verdict).
 * - `repositoryIds` finds the Greenline repositories of a GitHub repository (host GITHUB_HOST).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { Statuses, type StatusState } from "../queue/Statuses.ts"

/** A commit status's state (`error`, `failure`, `pending`, `success`). */
export const commitStatusState = (state: string): StatusState =>
  state === "success" ? "success" : state === "failure" ? "failure" : state === "error" ? "error" : "pending"

export interface IngestedStatus {
  readonly context: string
  readonly state: StatusState
  readonly targetUrl: string | null
  readonly description: string | null
}

/**
 * Records CI results for `sha` of a repository and wakes its queues, skipping those already stored as they are.
 * Returns how many were recorded.
 */
export const ingestStatuses = (
  repoId: string,
  sha: string,
  results: ReadonlyArray<IngestedStatus>
): Effect.Effect<number, SqlError, Statuses> =>
  Effect.gen(function* () {
    if (results.length === 0) return 0
    const statuses = yield* Statuses
    const stored = new Map((yield* statuses.forSha(repoId, sha)).map((s) => [s.context, s] as const))
    let recorded = 0
    for (const r of results) {
      const known = stored.get(r.context)
      // the description is not compared: a status reported through the API keeps its own
      if (known !== undefined && known.state === r.state && (r.targetUrl === null || known.targetUrl === r.targetUrl)) {
        continue
      }
      yield* statuses.report(repoId, sha, r.context, r.state, r.targetUrl, r.description)
      recorded++
    }
    return recorded
  })

/** One result (see ingestStatuses). */
export const ingestStatus = (
  repoId: string,
  sha: string,
  context: string,
  state: StatusState,
  targetUrl: string | null,
  description: string | null
): Effect.Effect<boolean, SqlError, Statuses> =>
  Effect.map(ingestStatuses(repoId, sha, [{ context, state, targetUrl, description }]), (n) => n > 0)

/** Greenline repository ids of the GitHub repository `owner/name` on `host` (case-insensitive, as GitHub is). */
export const repositoryIds = (
  host: string,
  owner: string,
  name: string
): Effect.Effect<ReadonlyArray<string>, SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ id: string }>`select id from repositories
        where lower(host) = ${host.toLowerCase()} and lower(owner) = ${owner.toLowerCase()}
          and lower(name) = ${name.toLowerCase()}`,
      (rows) => rows.map((r) => r.id)
    )
  )
