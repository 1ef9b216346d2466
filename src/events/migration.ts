import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Tables of the outgoing events (migration ids 0030-0039), for PostgreSQL and PGlite, one statement at a time.
 *
 * - `event_log`: the append-only log, one row per domain event, written in the transaction of the change. `seq`
 *   orders it; `xid` (the writing transaction) lets a reader take only rows no running transaction can still add
 *   to (`xid < pg_snapshot_xmin`), so the live stream resumes without gaps (EventLogLive.ts). `body` is the
 *   message as sent: `{type, timestamp, data}`.
 * - `webhook_endpoints`: per organization; `secret` and, during a rotation, `previous_secret` until it expires.
 * - `webhook_messages`: one row per event and endpoint that wants it (fanned out in the event's transaction), with
 *   its delivery state; `locked_until` is the lease of the instance sending it.
 * - `webhook_attempts`: every attempt of a message (time, HTTP status, duration, error).
 */
const statements = (...list: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

export const eventsMigration = statements(
  `create table event_log (
     seq bigserial primary key,
     id uuid not null unique,
     xid xid8 not null default pg_current_xact_id(),
     org_id uuid not null references organizations(id) on delete cascade,
     repo_id uuid,
     branch text,
     type text not null,
     ordering_key text not null,
     dedupe_key text,
     occurred_at timestamptz not null,
     created_at timestamptz not null default now(),
     body text not null
   )`,
  `create index event_log_org on event_log (org_id, xid, seq)`,
  `create unique index event_log_dedupe on event_log (org_id, dedupe_key) where dedupe_key is not null`,
  `create index event_log_created on event_log (created_at)`,
  `create table webhook_endpoints (
     id uuid primary key,
     org_id uuid not null references organizations(id) on delete cascade,
     url text not null,
     description text not null default '',
     event_types text[],
     repo_id uuid references repositories(id) on delete cascade,
     secret text not null,
     previous_secret text,
     previous_secret_until timestamptz,
     disabled boolean not null default false,
     disabled_reason text,
     failing_since timestamptz,
     created_at timestamptz not null default now(),
     updated_at timestamptz not null default now()
   )`,
  `create index webhook_endpoints_org on webhook_endpoints (org_id) where not disabled`,
  `create table webhook_messages (
     endpoint_id uuid not null references webhook_endpoints(id) on delete cascade,
     event_seq bigint not null references event_log(seq) on delete cascade,
     org_id uuid not null,
     ordering_key text not null,
     status text not null default 'pending',
     attempts integer not null default 0,
     next_attempt_at timestamptz not null default now(),
     locked_until timestamptz,
     created_at timestamptz not null default now(),
     ended_at timestamptz,
     primary key (endpoint_id, event_seq)
   )`,
  `create index webhook_messages_due on webhook_messages (next_attempt_at) where status = 'pending'`,
  `create index webhook_messages_order on webhook_messages (endpoint_id, ordering_key, event_seq) where status = 'pending'`,
  `create index webhook_messages_event on webhook_messages (event_seq)`,
  `create table webhook_attempts (
     id bigserial primary key,
     endpoint_id uuid not null,
     event_seq bigint not null,
     at timestamptz not null,
     http_status integer,
     duration_ms integer not null,
     error text,
     foreign key (endpoint_id, event_seq) references webhook_messages(endpoint_id, event_seq) on delete cascade
   )`,
  `create index webhook_attempts_message on webhook_attempts (endpoint_id, event_seq, id)`
)

/**
 * Migration 0102: which organizations' events someone streams (events/StreamWakeups.ts): a row per organization and
 * instance with open streams, valid until `until`. `append` notifies only organizations found here.
 */
export const streamPresenceMigration = statements(
  `create table event_stream_presence (
     org_id uuid not null references organizations(id) on delete cascade,
     instance text not null,
     until timestamptz not null,
     primary key (org_id, instance)
   )`
)
