import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Admin tokens (0070): a token with `admin` may manage organizations, tokens and repositories through the admin API
 * (`/v1/admin/...`), which the CLI uses while the embedded database is held by the running server. The bootstrap
 * token and the token made on first run are admin tokens.
 */
export const adminTokensMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`alter table api_tokens add column admin boolean not null default false`)
  yield* sql.unsafe(`update api_tokens set admin = true where name = 'bootstrap'`)
})
