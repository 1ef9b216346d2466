import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * A test case's status history (migration 0100), for the dashboard's test page: one row per change of its status
 * (healthy, flaky, broken), of whether it is quarantined, and of its quarantine override, in the order they happened.
 *
 * Written by a trigger on `test_cases`, in the transaction of the change, so that every path that changes a test
 * case (classification after an upload, a user's override, an import, an override's expiry, a change of the
 * quarantine settings) is recorded without each of them having to remember it. The trigger fires only on updates
 * that set one of the three columns, and its WHEN clause skips rows whose values did not change: the bulk inserts of
 * an upload and the `last_failure_at` updates do not run it. The rows are few (one per change), read by test case.
 *
 * - `kind`: `status` (previous/current: healthy, flaky, broken; `reason`: the classification's reason),
 *   `quarantine` (current: `quarantined` or `released`), or `override` (previous/current: always_quarantine,
 *   never_quarantine, unspecified; `actor` the override's owner, `reason` its reason, or `expired`).
 * - The test cases that were not healthy, quarantined or overridden when the table was made get one row each for
 *   what they were then (previous null), at the time they became so.
 */
const statements = (...list: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

export const flakyStatusHistory = statements(
  `create table test_status_history (
     id bigserial primary key,
     repo_id uuid not null,
     test_case_id uuid not null,
     at timestamptz not null,
     kind text not null,
     previous text,
     current text not null,
     reason text not null default '',
     actor text
   )`,
  `create index test_status_history_case on test_status_history (repo_id, test_case_id, id)`,
  `create function test_status_history_record() returns trigger language plpgsql as $$
   begin
     if new.status is distinct from old.status then
       insert into test_status_history (repo_id, test_case_id, at, kind, previous, current, reason)
       values (new.repo_id, new.id, new.status_at, 'status', old.status, new.status, new.status_reason);
     end if;
     if new.quarantine_override is distinct from old.quarantine_override then
       insert into test_status_history (repo_id, test_case_id, at, kind, previous, current, reason, actor)
       values (new.repo_id, new.id, coalesce(new.override_set_at, now()), 'override', old.quarantine_override,
         new.quarantine_override,
         case when new.quarantine_override = 'unspecified' and old.override_expires_at is not null
                and old.override_expires_at <= now() then 'expired'
              else coalesce(new.override_reason, '') end,
         new.override_owner);
     end if;
     if new.quarantined is distinct from old.quarantined then
       insert into test_status_history (repo_id, test_case_id, at, kind, previous, current)
       values (new.repo_id, new.id, coalesce(new.quarantined_at, now()), 'quarantine',
         case when old.quarantined then 'quarantined' else 'released' end,
         case when new.quarantined then 'quarantined' else 'released' end);
     end if;
     return null;
   end $$`,
  `create trigger test_status_history_on_change
     after update of status, quarantined, quarantine_override on test_cases
     for each row
     when (new.status is distinct from old.status or new.quarantined is distinct from old.quarantined
           or new.quarantine_override is distinct from old.quarantine_override)
     execute function test_status_history_record()`,
  `insert into test_status_history (repo_id, test_case_id, at, kind, previous, current, reason)
     select repo_id, id, status_at, 'status', null, status, status_reason from test_cases where status <> 'healthy'`,
  `insert into test_status_history (repo_id, test_case_id, at, kind, previous, current, reason, actor)
     select repo_id, id, coalesce(override_set_at, created_at), 'override', null, quarantine_override,
       coalesce(override_reason, ''), override_owner
     from test_cases where quarantine_override <> 'unspecified'`,
  `insert into test_status_history (repo_id, test_case_id, at, kind, previous, current)
     select repo_id, id, coalesce(quarantined_at, created_at), 'quarantine', null, 'quarantined'
     from test_cases where quarantined`
)
