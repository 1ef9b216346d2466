import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, type ParseResult, Schema } from "effect"
import { Engine } from "../queue/Engine.ts"
import type { Statuses } from "../queue/Statuses.ts"
import type { GitHubClient } from "./GitHubClient.ts"
import { GitHubEnv } from "./GitHubEnv.ts"

/** What every GitHub event handler works with: its payload decoded, the plan of a delivery, the payload's repository. */

// Payloads: only the fields used; others are ignored.

export const Repository = Schema.Struct({ name: Schema.String, owner: Schema.Struct({ login: Schema.String }) })
export const OptionalString = Schema.optional(Schema.NullOr(Schema.String))

/** A payload that is not what its event promises. */
export class PayloadInvalid extends Error {
  constructor(
    readonly event: string,
    readonly parseError: ParseResult.ParseError
  ) {
    super(`the ${event} payload is not valid: ${parseError.message}`)
  }
}

export const decode =
  <A, I>(event: string, schema: Schema.Schema<A, I>) =>
  (payload: unknown) =>
    Effect.mapError(Schema.decodeUnknown(schema)(payload), (e) => new PayloadInvalid(event, e))

export type Services = SqlClient.SqlClient | GitHubEnv | GitHubClient | Engine | Statuses

/** What a delivery did, decided inside its transaction. */
export interface Outcome {
  readonly result: string
  /** queues whose runners to wake once the transaction committed */
  readonly wake: ReadonlyArray<string>
  /** best effort, after the commit (reactions, replies, the client's installation cache) */
  readonly after: Effect.Effect<void, unknown, Services>
}

/** The effects of a delivery, to run inside its transaction. */
export type Plan = Effect.Effect<Outcome, SqlError, Services>

export const done = (
  result: string,
  wake: ReadonlyArray<string> = [],
  after: Outcome["after"] = Effect.void
): Outcome => ({
  result,
  wake,
  after
})
export const nothing = (result: string): Plan => Effect.succeed(done(result))

/** The Greenline repositories of the payload's repository (GITHUB_HOST; GitHub's names are case-insensitive). */
export const repositoriesOf = (repo: typeof Repository.Type) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GitHubEnv
    return yield* sql<{ id: string }>`
      select id from repositories
      where lower(host) = ${config.githubHost} and lower(owner) = ${repo.owner.login.toLowerCase()}
        and lower(name) = ${repo.name.toLowerCase()}`
  })

/** The queues of the payload's repository, with their branches. */
export const queuesOf = (repo: typeof Repository.Type) =>
  Effect.gen(function* () {
    const config = yield* GitHubEnv
    const engine = yield* Engine
    return yield* engine.queuesOfRepository(config.githubHost, repo.owner.login, repo.name)
  })
