import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Dashboard sessions: the SHA-256 of the session cookie (never the cookie itself), the SHA-256 of the API token it
 * was opened with (a revoked token ends its sessions), and when it was last used (sessions expire after inactivity).
 */
export const webSessionsMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`create table web_sessions (
     id_hash bytea primary key,
     org_id uuid not null references organizations(id) on delete cascade,
     token_hash bytea not null,
     created_at timestamptz not null default now(),
     last_seen_at timestamptz not null default now()
   )`)
  yield* sql.unsafe(`create index web_sessions_last_seen on web_sessions (last_seen_at)`)
})
