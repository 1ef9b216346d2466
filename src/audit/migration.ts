import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The audit log (0201, issue #30): one row per change made through the API or the dashboard, allowed or refused,
 * with who made it (a token's id and name, or a person's subject, name and e-mail), in which role, the operation,
 * its target, the time and the source address. Append-only: a trigger refuses every update, and every delete but
 * retention's (which says so in its transaction: `greenline.audit_prune`); truncation too.
 */
export const auditMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`create table audit_events (
     id bigserial primary key,
     org_id uuid not null references organizations(id),
     at timestamptz not null default now(),
     actor_kind text not null check (actor_kind in ('token', 'person')),
     actor_id text not null,
     actor_name text not null,
     actor_email text,
     role text not null,
     action text not null,
     target text not null default '',
     outcome text not null check (outcome in ('allowed', 'refused')),
     source_ip text
   )`)
  yield* sql.unsafe(`create index audit_events_org on audit_events (org_id, id)`)
  yield* sql.unsafe(`create index audit_events_at on audit_events (at)`)
  yield* sql.unsafe(`create function audit_events_append_only() returns trigger language plpgsql as $$
    begin
      if tg_op = 'DELETE' and current_setting('greenline.audit_prune', true) = 'on' then
        return old;
      end if;
      raise exception 'audit_events is append-only (% refused)', tg_op;
    end $$`)
  yield* sql.unsafe(`create trigger audit_events_append_only before update or delete on audit_events
     for each row execute function audit_events_append_only()`)
  yield* sql.unsafe(`create trigger audit_events_no_truncate before truncate on audit_events
     for each statement execute function audit_events_append_only()`)
})
