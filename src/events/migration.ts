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

/**
 * Migration 0103: one model. Every state change of a queue entry is a record of the log: `entry_id`, `state` and
 * the raw `reason` (what the timeline of getSubmittedPullRequest shows), on the Trunk event it is told as, or on a
 * record of its own when Trunk has no event for it (`type` and `body` null: never delivered nor streamed). The
 * timeline rows written so far (`entry_timeline`) move into the log as such records, in their order, dated when they
 * happened; then that table goes. `event_log_entry` reads a timeline; `event_log_ends_at`, by time, the
 * transitions that end a pull request or restart its tests, and pending failures (getMergeQueueMetrics' last hour,
 * the causes of restarts): only those, so a range reads about a third of the records it would otherwise (the log's
 * rows are wider than the timeline's were).
 */
export const timelineInLogMigration = statements(
  `alter table event_log alter column type drop not null`,
  `alter table event_log alter column body drop not null`,
  `alter table event_log add column entry_id uuid, add column state text, add column reason text`,
  `alter table event_log add constraint event_log_transition
     check ((entry_id is null) = (state is null) and (state is null) = (reason is null)
            and (type is not null or entry_id is not null) and (type is null) = (body is null))`,
  `insert into event_log (id, org_id, repo_id, branch, type, ordering_key, occurred_at, created_at, body,
                          entry_id, state, reason)
   select gen_random_uuid(), r.org_id, r.id, q.branch, null, 'pr:' || r.id || ':' || q.branch || ':' || e.pr_number,
          t.at, t.at, null, t.entry_id, t.state, t.reason
   from entry_timeline t join entries e on e.id = t.entry_id join queues q on q.id = e.queue_id
   join repositories r on r.id = q.repo_id
   order by t.id`,
  `create index event_log_entry on event_log (entry_id, seq) where entry_id is not null`,
  `create index event_log_ends_at on event_log (occurred_at)
     where entry_id is not null
       and (state in ('merged', 'failed', 'cancelled', 'pending_failure') or reason = 'RESTART_REQUESTED')`,
  `drop table entry_timeline`
)

/**
 * Migration 0250: delivery without head-of-line waits, and delivery records a person can read (issue #34).
 * - `webhook_endpoints.probe_at`: while an endpoint fails (`failing_since`), only one message at a time is sent to
 *   it, at this time (the probe); `last_success_at`: its latest delivery, which tells a message's own failure (the
 *   endpoint answered others meanwhile) from the endpoint's.
 * - `webhook_messages.first_attempt_at`, `last_attempt_at`: a message gives up by time (the retry schedule's span),
 *   and on recovery the messages that failed during the outage are due again at once.
 * - `webhook_attempts.request_headers` (JSON), `response_body` (the first 4 KiB), `interrupted` (the server stopped
 *   during the attempt); `webhook_attempts_at` serves retention.
 */
export const deliveryRecordsMigration = statements(
  `alter table webhook_endpoints add column probe_at timestamptz, add column last_success_at timestamptz`,
  `alter table webhook_messages add column first_attempt_at timestamptz, add column last_attempt_at timestamptz`,
  `alter table webhook_attempts add column request_headers text, add column response_body text,
     add column interrupted boolean not null default false`,
  `create index webhook_attempts_at on webhook_attempts (at)`
)
