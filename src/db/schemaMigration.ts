import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The schema's own bookkeeping (migrations 0230 and 0231, schema.ts):
 * - `greenline_schema`: which Greenline version applied each migration, and whether it was safe while older
 *   instances ran, so that an older server can say which version the database needs;
 * - `greenline_instances`: the servers running on the database (a heartbeat every 10 s, removed at a clean stop), so
 *   that a migration that is not safe while older instances run is never applied under them.
 */
export const schemaVersionsMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`create table greenline_schema (
     migration_id integer primary key,
     name text not null,
     app_version text not null,
     safe_with_older_instances boolean not null,
     applied_at timestamptz not null default now()
   )`)
})

export const instancesMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`create table greenline_instances (
     id text primary key,
     app_version text not null,
     host text not null,
     pid integer not null,
     started_at timestamptz not null default now(),
     seen_at timestamptz not null default now()
   )`)
})
