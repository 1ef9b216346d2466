import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Roles of API tokens (0200, issue #30): every token has one of `read`, `write`, `maintain`, `admin` in place of the
 * `admin` flag, and who made it (`created_by`: `token:<id>` or `person:<subject>`; null for the operator's: the CLI,
 * BOOTSTRAP_TOKEN, the first run). The tokens that exist become `admin` where they were admin tokens (the bootstrap
 * and first-run tokens, and `tokens create --admin`), `write` otherwise: what CI tokens do (the upgrade notes in
 * CHANGELOG.md and docs/security.md).
 */
export const tokenRolesMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`alter table api_tokens add column role text not null default 'write'`)
  yield* sql.unsafe(`update api_tokens set role = 'admin' where admin`)
  yield* sql.unsafe(
    `alter table api_tokens add constraint api_tokens_role check (role in ('read', 'write', 'maintain', 'admin'))`
  )
  yield* sql.unsafe(`alter table api_tokens add column created_by text`)
  yield* sql.unsafe(`alter table api_tokens drop column admin`)
})
