import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Tables of the flaky-test service (semantics §8), for PostgreSQL and PGlite: one single statement at a time.
 *
 * - `flaky_settings`: per repository, quarantining and auto-quarantine (both off when there is no row).
 * - `test_uploads`: one row per JUnit upload, with its counts and whether it was an infrastructure failure.
 * - `test_cases`: one row per test case of a repository (id = the contract's UUID v5), with its classification,
 *   quarantine override and state, ticket, and the time of its last failure (which says whether an upload must
 *   re-classify it).
 *   The pages order by name: the failing page sorts its (filtered) set, the others read their partial index in order.
 * - `test_results`: one row per result (retries included), written in bulk; no foreign keys, so that inserts cost
 *   nothing but the row and its indexes. Read by (test case, time), and by time alone through a BRIN index (see
 *   `flakyResultsByTime`); the partial index on failures answers list-failing-tests without reading passes.
 */
const statements = (...list: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

export const flakyMigration = statements(
  `create table flaky_settings (
     repo_id uuid primary key references repositories(id) on delete cascade,
     quarantining_enabled boolean not null default false,
     auto_quarantine boolean not null default false,
     updated_at timestamptz not null default now()
   )`,
  `create table test_uploads (
     id uuid primary key,
     repo_id uuid not null references repositories(id) on delete cascade,
     sha text not null,
     branch text not null,
     pr_number bigint,
     job_name text,
     variant text not null default '',
     run_at timestamptz not null,
     tests integer not null,
     passed integer not null,
     failed integer not null,
     skipped integer not null,
     ignored integer not null,
     infra boolean not null,
     created_at timestamptz not null default now()
   )`,
  `create index test_uploads_repo_time on test_uploads (repo_id, run_at)`,
  // no foreign key on repo_id: a checking trigger per inserted row costs more than the row (uploads insert
  // thousands of test cases at once); test cases are read only through their repository
  `create table test_cases (
     repo_id uuid not null,
     id uuid not null,
     name text not null,
     classname text not null default '',
     file text not null default '',
     parent text not null default '',
     variant text not null default '',
     status text not null default 'healthy',
     status_reason text not null default '',
     status_at timestamptz not null,
     flaky_signal_at timestamptz,
     quarantine_override text not null default 'unspecified',
     quarantined boolean not null default false,
     quarantined_at timestamptz,
     ticket_id text,
     ticket_url text,
     last_failure_at timestamptz,
     created_at timestamptz not null default now(),
     primary key (repo_id, id)
   )`,
  `create index test_cases_unhealthy on test_cases (repo_id, status, name, id) where status <> 'healthy'`,
  `create index test_cases_quarantined on test_cases (repo_id, name, id) where quarantined`,
  `create index test_cases_recent_failure on test_cases (repo_id, last_failure_at) where last_failure_at is not null`,
  `create table test_results (
     repo_id uuid not null,
     test_case_id uuid not null,
     upload_id uuid not null,
     run_at timestamptz not null,
     ord integer not null,
     sha text not null,
     branch text not null,
     pr_number bigint,
     status text not null,
     retry boolean not null default false,
     failure_key text,
     failure_summary text,
     infra boolean not null default false
   )`,
  `create index test_results_repo_time on test_results (repo_id, run_at)`,
  `create index test_results_case_time on test_results (test_case_id, run_at)`,
  `create index test_results_failures on test_results (repo_id, run_at, test_case_id) where status = 'failed'`
)

/**
 * Results by time through a BRIN index instead of a b-tree on (repository, time): rows arrive in time order, the
 * only readers by time alone are pruning and marking an upload as an infrastructure failure, and a b-tree entry per
 * row cost ~15% of a bulk load (list-failing-tests reads the partial index on failures).
 */
export const flakyResultsByTime = statements(
  `drop index if exists test_results_repo_time`,
  `create index test_results_time on test_results using brin (run_at)`
)

/**
 * Quarantine with an owner and an end (migration 0050): an override carries an owner, a reason, a ticket URL and an
 * expiry (an expired override lapses to `unspecified`); `clean_runs` counts a test's runs without a failed attempt
 * since its last failure (the auto-quarantine releases a test after `auto_release_clean_runs` of them, default 20).
 */
export const flakyQuarantineLifecycle = statements(
  `alter table test_cases add column override_owner text`,
  `alter table test_cases add column override_reason text`,
  `alter table test_cases add column override_ticket_url text`,
  `alter table test_cases add column override_expires_at timestamptz`,
  `alter table test_cases add column override_set_at timestamptz`,
  `alter table test_cases add column clean_runs integer not null default 0`,
  `create index test_cases_override_expiry on test_cases (repo_id, override_expires_at)
     where override_expires_at is not null`,
  `alter table flaky_settings add column auto_release_clean_runs integer not null default 20`,
  // the merge queue asks for the uploads of a test-branch sha
  `create index test_uploads_repo_sha on test_uploads (repo_id, sha)`
)
