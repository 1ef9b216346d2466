import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

const statements = (...list: ReadonlyArray<string>): Effect.Effect<void, unknown, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

/**
 * 0010: what a request changed before the runner stepped it, and the runner's last error.
 * - `entries.request_seq`: the inbox event of the last write an API request made to the entry's row (submit, cancel,
 *   restart, impacted targets). A runner round that did not read that event leaves the row alone, so an answered
 *   write is never undone by a round that started before it (docs/decisions.md, "Read-your-writes").
 * - `queue_runtime.runner_error`, `runner_error_since`: the last failure of the queue's runner, cleared when it runs.
 */
export const requestsAndRunnerErrors = statements(
  `alter table entries add column request_seq bigint`,
  `alter table entries add column request_new boolean not null default false`,
  `create index entries_requested on entries (queue_id) where request_seq is not null`,
  `alter table queue_runtime add column runner_error text`,
  `alter table queue_runtime add column runner_error_since timestamptz`
)

/**
 * 0340 (#37): instances share the queues.
 * - `runner_instances`: each instance's lease loop announces it, its row alive until `alive_until` (renewed at each
 *   pass, removed at a clean stop): the live instances, of which each takes a fair share of the queues.
 * - `queue_runtime.owned_since`: when the queue's owner took it; a queue moves to another live instance only after
 *   its owner held it a minute (bounded churn).
 */
export const runnerSharesMigration = statements(
  `create table runner_instances (
     owner text primary key,
     alive_until timestamptz not null,
     started_at timestamptz not null default now()
   )`,
  `alter table queue_runtime add column owned_since timestamptz`
)
