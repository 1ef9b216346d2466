import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { auditMigration } from "../audit/migration.ts"
import {
  deliveryRecordsMigration,
  eventsMigration,
  streamPresenceMigration,
  timelineInLogMigration
} from "../events/migration.ts"
import { flakyStatusHistory } from "../flaky/historyMigration.ts"
import { flakyMigration, flakyQuarantineLifecycle, flakyResultsByTime } from "../flaky/migration.ts"
import { flakyUploadKeys } from "../flaky/uploadKeysMigration.ts"
import { freezesMigration, mergeSchedulesMigration } from "../queue/freezeStore.ts"
import { requestsAndRunnerErrors, runnerSharesMigration } from "../queue/migration.ts"
import { adminTokensMigration } from "../tenancy/migration.ts"
import { tokenRolesMigration } from "../tenancy/rolesMigration.ts"
import { peopleSessionsMigration, webSessionsMigration } from "../tenancy/sessionsMigration.ts"
import { instancesMigration, schemaVersionsMigration } from "./schemaMigration.ts"

/**
 * One set of migrations for PostgreSQL and PGlite. Each is a list of single statements (PGlite's extended protocol
 * takes one statement at a time), run in order inside the migrator's transaction.
 */
const statements = (...list: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

const foundation = statements(
  `create table organizations (
     id uuid primary key,
     slug text not null unique,
     claim_on_first_use boolean not null default false,
     created_at timestamptz not null default now()
   )`,
  `create table api_tokens (
     id uuid primary key,
     org_id uuid not null references organizations(id) on delete cascade,
     name text not null default '',
     token_hash bytea not null unique,
     created_at timestamptz not null default now(),
     revoked_at timestamptz
   )`,
  `create table repositories (
     id uuid primary key,
     org_id uuid not null references organizations(id) on delete cascade,
     host text not null,
     owner text not null,
     name text not null,
     created_at timestamptz not null default now(),
     unique (host, owner, name)
   )`,
  `create table queues (
     id uuid primary key,
     repo_id uuid not null references repositories(id) on delete cascade,
     branch text not null,
     config jsonb not null,
     created_at timestamptz not null default now(),
     updated_at timestamptz not null default now(),
     unique (repo_id, branch)
   )`
)

const engine = statements(
  // The planner's state of a queue, one JSON document, with a version for optimistic concurrency and the lease
  // that says which instance runs the queue.
  `create table queue_runtime (
     queue_id uuid primary key references queues(id) on delete cascade,
     state jsonb not null,
     version bigint not null default 0,
     outbox jsonb not null default '[]'::jsonb,
     owner text,
     lease_until timestamptz,
     fencing bigint not null default 0
   )`,
  // Inbox of events for a queue's runner, so that any instance can accept a request and the owner applies it.
  `create table queue_events (
     seq bigserial primary key,
     queue_id uuid not null references queues(id) on delete cascade,
     event jsonb not null,
     created_at timestamptz not null default now()
   )`,
  `create index queue_events_queue on queue_events (queue_id, seq)`,
  // One row per pull request and queue: the latest entry (a resubmission reuses the id).
  `create table entries (
     id uuid primary key,
     queue_id uuid not null references queues(id) on delete cascade,
     pr_number bigint not null,
     state text not null,
     state_changed_at timestamptz not null,
     submitted_at timestamptz not null,
     first_tested_at timestamptz,
     ended_at timestamptz,
     priority integer not null,
     no_batch boolean not null default false,
     head_sha text not null,
     title text not null default '',
     author text not null default '',
     run_id text,
     verified_by_test_run text,
     restarts integer not null default 0,
     unique (queue_id, pr_number)
   )`,
  `create index entries_active on entries (queue_id) where state in ('not_ready','pending','testing','tests_passed','pending_failure')`,
  `create index entries_ended on entries (ended_at)`,
  `create table entry_timeline (
     id bigserial primary key,
     entry_id uuid not null references entries(id) on delete cascade,
     at timestamptz not null,
     state text not null,
     reason text not null
   )`,
  `create index entry_timeline_entry on entry_timeline (entry_id, id)`,
  `create table test_runs (
     id text primary key,
     queue_id uuid not null references queues(id) on delete cascade,
     record jsonb not null,
     status text not null,
     test_branch_sha text,
     created_at timestamptz not null,
     ended_at timestamptz
   )`,
  `create index test_runs_sha on test_runs (test_branch_sha)`,
  `create index test_runs_queue_status on test_runs (queue_id, status)`,
  `create table commit_statuses (
     repo_id uuid not null references repositories(id) on delete cascade,
     sha text not null,
     context text not null,
     state text not null,
     target_url text,
     description text,
     updated_at timestamptz not null,
     primary key (repo_id, sha, context)
   )`,
  `create table impacted_targets (
     repo_id uuid not null references repositories(id) on delete cascade,
     pr_number bigint not null,
     sha text not null,
     all_targets boolean not null,
     targets text[] not null,
     updated_at timestamptz not null,
     primary key (repo_id, pr_number, sha)
   )`,
  // Required statuses of a run, resolved when its test branch is built.
  `create table run_requirements (
     run_id text primary key,
     statuses jsonb not null,
     source text
   )`,
  // Comments the queue posts on pull requests (the local provider keeps them here; GitHub shows them on the PR).
  `create table pr_comments (
     id bigserial primary key,
     repo_id uuid not null references repositories(id) on delete cascade,
     pr_number bigint not null,
     entry_id uuid,
     body text not null,
     created_at timestamptz not null default now()
   )`,
  `create index pr_comments_pr on pr_comments (repo_id, pr_number, id)`,
  `create table ci_outputs (
     id uuid primary key,
     run_id text not null,
     repo_id uuid not null references repositories(id) on delete cascade,
     sha text not null,
     exit_code integer,
     output text not null,
     created_at timestamptz not null default now()
   )`
)

// The GitHub provider: webhook deliveries already handled (idempotency), the App's installations and the
// repositories they cover, the one queue comment per pull request, and check runs (CI results beside statuses).
const github = statements(
  `create table github_deliveries (
     id text primary key,
     event text not null,
     received_at timestamptz not null default now()
   )`,
  `create index github_deliveries_received on github_deliveries (received_at)`,
  `create table github_installations (
     id bigint primary key,
     account text not null,
     suspended boolean not null default false,
     updated_at timestamptz not null default now()
   )`,
  // owner and name in lower case (GitHub's names are case-insensitive)
  `create table github_installation_repos (
     installation_id bigint not null references github_installations(id) on delete cascade,
     host text not null,
     owner text not null,
     name text not null,
     primary key (host, owner, name)
   )`,
  `create index github_installation_repos_installation on github_installation_repos (installation_id)`,
  `create table github_pr_comments (
     repo_id uuid not null references repositories(id) on delete cascade,
     pr_number bigint not null,
     comment_id bigint not null,
     body text not null,
     updated_at timestamptz not null default now(),
     primary key (repo_id, pr_number)
   )`,
  // The latest check run of each name on a commit (a re-run has a higher id and replaces it).
  `create table check_runs (
     repo_id uuid not null references repositories(id) on delete cascade,
     sha text not null,
     name text not null,
     check_run_id bigint not null,
     suite_id bigint,
     status text not null,
     conclusion text,
     url text,
     updated_at timestamptz not null,
     primary key (repo_id, sha, name)
   )`
)

// GET /v1/getMergeQueueMetrics reads the last hour: timeline rows, first tests and finished test runs by time.
const metricsIndexes = statements(
  `create index entry_timeline_at on entry_timeline (at)`,
  `create index entries_first_tested on entries (first_tested_at)`,
  `create index test_runs_ended on test_runs (ended_at)`
)

// Impacted targets kept as the JSON text they arrive in: a list of 100,000s of names is stored and read back as one
// string (building and parsing a text[] of that size took most of a setImpactedTargets request).
const targetsJson = statements(
  `alter table impacted_targets add column targets_json text not null default '[]'`,
  `update impacted_targets set targets_json = array_to_json(targets)::text`,
  `alter table impacted_targets drop column targets`
)

// GET /v1/getMergeQueueMetrics finds the entries that changed lately (their timeline rows of the last hour) by time.
const entriesChanged = statements(`create index entries_state_changed on entries (state_changed_at)`)

// The runner rewrites a queue's planner state every round: stored as json (checked, kept as text) instead of jsonb
// (PostgreSQL parsed a 2.5 MB state into its binary form in 100-200 ms; json takes 40), with the ids of the entries
// that have a position, in order, beside it for getSubmittedPullRequest.
const runtimeJson = statements(
  `alter table queue_runtime add column positions uuid[] not null default '{}'`,
  `update queue_runtime set positions = array(
     select (x.value->>'id')::uuid from jsonb_array_elements(state->'entries') with ordinality as x(value, ord)
     where x.value->>'state' not in ('not_ready', 'merged', 'failed', 'cancelled') order by x.ord)`,
  `alter table queue_runtime alter column state type json using state::json`
)

/** The runs that tested a pull request, found by its entry id: batch events look up a pull request's latest batch. */
const testRunsByEntry = statements(`create index test_runs_tested on test_runs using gin ((record->'testedEntryIds'))`)

/**
 * A migration, and whether it is safe while instances of the previous version still run on the database: `true`
 * when it only adds what older code ignores (a table, an index, a column that is nullable or has a default), so
 * instances can be replaced one at a time (a rolling upgrade); `false` when older code would break on the result (a
 * dropped or retyped column, data moved elsewhere), so every older instance must be stopped before it runs (a server
 * refuses to apply it while others are running: schema.ts).
 */
export interface Migration {
  readonly run: Effect.Effect<void, unknown, SqlClient.SqlClient>
  readonly safeWithOlderInstances: boolean
}

/** An entry: a `Migration`, or a plain effect, which says nothing and so counts as not safe with older instances. */
export type MigrationEntry = Migration | Effect.Effect<void, unknown, SqlClient.SqlClient>

const additive = (run: Effect.Effect<void, unknown, SqlClient.SqlClient>): Migration => ({
  run,
  safeWithOlderInstances: true
})
const breaking = (run: Effect.Effect<void, unknown, SqlClient.SqlClient>): Migration => ({
  run,
  safeWithOlderInstances: false
})

export const migrations: Record<string, MigrationEntry> = {
  "0001_foundation": additive(foundation),
  "0002_engine": additive(engine),
  "0003_flaky": additive(flakyMigration),
  "0004_github": additive(github),
  "0005_metrics_indexes": additive(metricsIndexes),
  // drops impacted_targets.targets, which older servers write
  "0006_targets_json": breaking(targetsJson),
  "0007_entries_state_changed": additive(entriesChanged),
  "0008_flaky_results_by_time": additive(flakyResultsByTime),
  // queue_runtime.positions must follow every state written: older servers do not keep it
  "0009_runtime_json": breaking(runtimeJson),
  "0010_requests_runner_errors": additive(requestsAndRunnerErrors),
  "0030_events": additive(eventsMigration),
  "0040_web_sessions": additive(webSessionsMigration),
  "0050_flaky_quarantine_lifecycle": additive(flakyQuarantineLifecycle),
  "0070_admin_tokens": additive(adminTokensMigration),
  "0100_flaky_status_history": additive(flakyStatusHistory),
  "0101_test_runs_by_entry": additive(testRunsByEntry),
  "0102_event_stream_presence": additive(streamPresenceMigration),
  // drops entry_timeline, which older servers write
  "0103_timeline_in_event_log": breaking(timelineInLogMigration),
  // drops api_tokens.admin, which older servers read (a token's role replaces it)
  "0200_token_roles": breaking(tokenRolesMigration),
  "0201_audit_events": additive(auditMigration),
  // people's sessions have no token_hash; older servers find sessions by joining their token, so they skip them
  "0210_people_sessions": additive(peopleSessionsMigration),
  "0230_schema_versions": additive(schemaVersionsMigration),
  "0231_instances": additive(instancesMigration),
  // a new table (the upload's idempotency keys): older servers do not know it
  "0240_flaky_upload_keys": additive(flakyUploadKeys),
  "0250_webhook_delivery_records": additive(deliveryRecordsMigration),
  "0300_queue_freezes": additive(statements(...freezesMigration)),
  "0301_merge_schedules": additive(statements(...mergeSchedulesMigration)),
  // a new table and column: older instances take every free queue (no share), as before
  "0340_runner_shares": additive(runnerSharesMigration)
}

const isMigration = (entry: MigrationEntry): entry is Migration =>
  typeof entry === "object" && entry !== null && "safeWithOlderInstances" in entry

/** The effect of an entry. */
export const runOf = (entry: MigrationEntry): Effect.Effect<void, unknown, SqlClient.SqlClient> =>
  isMigration(entry) ? entry.run : entry

/** Whether an entry is safe while older instances run (a plain effect: no). */
export const safeWithOlderInstances = (entry: MigrationEntry): boolean =>
  isMigration(entry) ? entry.safeWithOlderInstances : false

/** The migrations of `record` (by default, every one this version knows), by id, in order. */
export const knownMigrations = (record: Record<string, MigrationEntry> = migrations) =>
  Object.entries(record)
    .map(([key, entry]) => ({
      id: Number(key.slice(0, key.indexOf("_"))),
      key,
      safeWithOlderInstances: safeWithOlderInstances(entry),
      declared: isMigration(entry)
    }))
    .sort((a, b) => a.id - b.id)
