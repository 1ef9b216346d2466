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

/**
 * People's sessions (0210, issue 30): a session opened by signing in with the identity provider has no token; it
 * keeps the person (the provider's `sub`, a name, an e-mail), the role their claims mapped to in the session's
 * organization, when those claims were read, and the provider's refresh token encrypted with a key derived from the
 * session's cookie (which is not stored: a copy of the database does not give the refresh tokens). `oidc_logins`
 * holds a sign-in between the redirect to the provider and its return: the state, nonce and PKCE verifier, found
 * by the hash of a short-lived cookie of the browser that started it.
 */
export const peopleSessionsMigration = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe(`alter table web_sessions alter column token_hash drop not null`)
  yield* sql.unsafe(`alter table web_sessions add column subject text`)
  yield* sql.unsafe(`alter table web_sessions add column person_name text`)
  yield* sql.unsafe(`alter table web_sessions add column person_email text`)
  yield* sql.unsafe(`alter table web_sessions add column role text`)
  yield* sql.unsafe(`alter table web_sessions add column claims_read_at timestamptz`)
  yield* sql.unsafe(`alter table web_sessions add column refresh_token bytea`)
  yield* sql.unsafe(`alter table web_sessions add constraint web_sessions_token_or_person
     check ((token_hash is null) <> (subject is null))`)
  yield* sql.unsafe(`create table oidc_logins (
     id_hash bytea primary key,
     state text not null,
     nonce text not null,
     code_verifier text not null,
     next text not null,
     org text,
     created_at timestamptz not null default now()
   )`)
  yield* sql.unsafe(`create index oidc_logins_created on oidc_logins (created_at)`)
})
