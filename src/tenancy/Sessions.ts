import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option } from "effect"
import { type Principal, ROLES, type Role } from "./principal.ts"
import { type Organization, Tenancy } from "./Tenancy.ts"

/**
 * Dashboard sign-in (the web adapter serves it): sessions opened with an API token or by a person signing in with
 * the identity provider, stored hashed, ended by inactivity, by sign-out, or by revoking the token.
 */

/** A session unused this long is over (the next request signs in again). */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000
/** last_seen_at is written at most this often per session (not on every request). */
const TOUCH_EVERY_MS = 60 * 1000
/** A sign-in with the identity provider must come back within this time. */
export const OIDC_LOGIN_MS = 10 * 60 * 1000

export const SESSION_COOKIE = "greenline_session"

const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest()

/** The anti-CSRF token of a session: derived from its secret, so nothing more is stored and it cannot be guessed. */
export const csrfOf = (secret: string) => createHash("sha256").update(`csrf:${secret}`, "utf8").digest("base64url")

/**
 * The provider's refresh token, encrypted (AES-256-GCM) with a key derived from the session's secret, the cookie
 * value, which the database does not hold: only the browser that has the session can have it decrypted.
 */
const keyOf = (secret: string) =>
  Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.alloc(0), "greenline refresh token", 32))
const seal = (secret: string, plain: string): Buffer => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", keyOf(secret), iv)
  const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body])
}
const unseal = (secret: string, sealed: Uint8Array): string | undefined => {
  try {
    const b = Buffer.from(sealed)
    const decipher = createDecipheriv("aes-256-gcm", keyOf(secret), b.subarray(0, 12))
    decipher.setAuthTag(b.subarray(12, 28))
    return Buffer.concat([decipher.update(b.subarray(28)), decipher.final()]).toString("utf8")
  } catch {
    return undefined
  }
}

/** A person as the identity provider names them. */
export interface Person {
  /** The provider's `sub`: stable and unique at that provider. */
  readonly subject: string
  readonly name: string
  readonly email?: string | undefined
}

export interface OpenSession {
  readonly org: Organization
  readonly csrf: string
  /** A stable key for the rate limiter (not the secret). */
  readonly key: string
  /** Who is signed in, with which role: a session opened with a token acts as that token, in its role. */
  readonly principal: Principal
  /** A person's session: when the role was last read from the provider, and the refresh token to read it again. */
  readonly person?: { readonly claimsReadAt: Date; readonly refreshToken: string | undefined } | undefined
}

/** What a sign-in with the identity provider keeps between the redirect to the provider and its return. */
export interface PendingLogin {
  readonly state: string
  readonly nonce: string
  readonly codeVerifier: string
  /** Where to go after sign-in (already checked: a local path). */
  readonly next: string
  /** The organization asked for, if any. */
  readonly org: string | undefined
}

export interface SessionsShape {
  /** A new session for `token` (none when the token is unknown or revoked): the cookie's secret value. */
  readonly signIn: (token: string) => Effect.Effect<Option.Option<string>, SqlError>
  /** A new session of a person in `org` with `role` (their claims were read now): the cookie's secret value. */
  readonly signInPerson: (
    org: Organization,
    person: Person,
    role: Role,
    refreshToken: string | undefined
  ) => Effect.Effect<string, SqlError>
  /** The session of a cookie value, if it is open; marks it as used. */
  readonly resolve: (secret: string) => Effect.Effect<Option.Option<OpenSession>, SqlError>
  /**
   * Takes the re-reading of a person's role, whose claims were read at `readAt`: true for exactly one caller (of
   * any instance), which then calls `rereadPerson` or `signOut`; the others go on with the role read at `readAt`.
   */
  readonly claimReread: (secret: string, readAt: Date) => Effect.Effect<boolean, SqlError>
  /** The person's role as read again now (and the provider's new refresh token, if it gave one). */
  readonly rereadPerson: (
    secret: string,
    person: Person,
    role: Role,
    refreshToken: string | undefined
  ) => Effect.Effect<void, SqlError>
  readonly signOut: (secret: string) => Effect.Effect<void, SqlError>
  /** Keeps a sign-in with the provider until it returns: the value of the browser's cookie that finds it. */
  readonly beginLogin: (pending: PendingLogin) => Effect.Effect<string, SqlError>
  /** The sign-in that cookie value started (at most OIDC_LOGIN_MS ago), removed: it can be completed once. */
  readonly takeLogin: (cookie: string) => Effect.Effect<Option.Option<PendingLogin>, SqlError>
}

export class Sessions extends Context.Tag("greenline/Sessions")<Sessions, SessionsShape>() {}

interface SessionRow {
  readonly org_id: string
  readonly slug: string
  readonly claim_on_first_use: boolean
  readonly last_seen_at: Date | string
  readonly token_id: string | null
  readonly token_name: string | null
  readonly subject: string | null
  readonly person_name: string | null
  readonly person_email: string | null
  readonly role: string | null
  /** The token's role, for a session opened with a token. */
  readonly token_role: string | null
  readonly claims_read_at: Date | string | null
  readonly refresh_token: Uint8Array | null
}

const asRole = (role: string | null): Role | undefined =>
  (ROLES as ReadonlyArray<string>).includes(role ?? "") ? (role as Role) : undefined

export const SessionsLive = Layer.effect(
  Sessions,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tenancy = yield* Tenancy
    const idleSeconds = SESSION_IDLE_MS / 1000
    const loginSeconds = OIDC_LOGIN_MS / 1000
    // sessions idle for too long are removed as new ones open
    const sweep = sql`delete from web_sessions where last_seen_at < now() - make_interval(secs => ${idleSeconds})`
    return {
      signIn: (token) =>
        Effect.gen(function* () {
          const found = yield* tenancy.authenticate(token.trim())
          if (Option.isNone(found)) return Option.none()
          const secret = randomBytes(32).toString("base64url")
          yield* sql`insert into web_sessions (id_hash, org_id, token_hash)
                     values (${sha256(secret)}, ${found.value.org.id}, ${sha256(token.trim())})`
          yield* sweep
          return Option.some(secret)
        }),
      signInPerson: (org, person, role, refreshToken) =>
        Effect.gen(function* () {
          const secret = randomBytes(32).toString("base64url")
          const sealed = refreshToken === undefined ? null : seal(secret, refreshToken)
          yield* sql`insert into web_sessions
                       (id_hash, org_id, subject, person_name, person_email, role, claims_read_at, refresh_token)
                     values (${sha256(secret)}, ${org.id}, ${person.subject}, ${person.name},
                             ${person.email ?? null}, ${role}, now(), ${sealed})`
          yield* sweep
          return secret
        }),
      resolve: (secret) =>
        Effect.gen(function* () {
          if (secret.length < 20 || secret.length > 100) return Option.none()
          const hash = sha256(secret)
          // a token's session lasts while the token is valid: revoking it ends the sessions it opened
          const rows = yield* sql<SessionRow>`
            select o.id as org_id, o.slug, o.claim_on_first_use, s.last_seen_at, t.id as token_id,
                   t.name as token_name, t.role as token_role, s.subject, s.person_name, s.person_email, s.role,
                   s.claims_read_at, s.refresh_token
            from web_sessions s
            join organizations o on o.id = s.org_id
            left join api_tokens t on t.token_hash = s.token_hash and t.revoked_at is null and t.org_id = o.id
            where s.id_hash = ${hash} and s.last_seen_at > now() - make_interval(secs => ${idleSeconds})
              and (t.id is not null or s.subject is not null)`
          const row = rows[0]
          if (row === undefined) return Option.none()
          const role = asRole(row.role)
          if (row.subject !== null && role === undefined) return Option.none()
          if (Date.now() - new Date(row.last_seen_at).getTime() > TOUCH_EVERY_MS) {
            yield* sql`update web_sessions set last_seen_at = now() where id_hash = ${hash}`
          }
          const org = { id: row.org_id, slug: row.slug, claimOnFirstUse: row.claim_on_first_use }
          const base = { org, csrf: csrfOf(secret), key: `session:${hash.toString("base64url").slice(0, 16)}` }
          if (row.subject !== null && role !== undefined) {
            return Option.some({
              ...base,
              principal: {
                actor: {
                  kind: "person",
                  subject: row.subject,
                  name: row.person_name ?? row.subject,
                  email: row.person_email ?? undefined
                },
                role
              },
              person: {
                claimsReadAt: new Date(row.claims_read_at ?? 0),
                refreshToken: row.refresh_token === null ? undefined : unseal(secret, row.refresh_token)
              }
            } satisfies OpenSession)
          }
          return Option.some({
            ...base,
            principal: {
              actor: { kind: "token", id: row.token_id ?? "", name: row.token_name ?? "" },
              role: asRole(row.token_role) ?? "read"
            }
          } satisfies OpenSession)
        }),
      claimReread: (secret, readAt) =>
        Effect.map(
          sql<{ id_hash: Uint8Array }>`update web_sessions set claims_read_at = now()
            where id_hash = ${sha256(secret)} and date_trunc('milliseconds', claims_read_at) = ${readAt}
            returning id_hash`,
          (rows) => rows.length === 1
        ),
      rereadPerson: (secret, person, role, refreshToken) =>
        Effect.asVoid(
          refreshToken === undefined
            ? sql`update web_sessions set role = ${role}, person_name = ${person.name},
                    person_email = ${person.email ?? null}, claims_read_at = now()
                  where id_hash = ${sha256(secret)}`
            : sql`update web_sessions set role = ${role}, person_name = ${person.name},
                    person_email = ${person.email ?? null}, claims_read_at = now(),
                    refresh_token = ${seal(secret, refreshToken)}
                  where id_hash = ${sha256(secret)}`
        ),
      signOut: (secret) => Effect.asVoid(sql`delete from web_sessions where id_hash = ${sha256(secret)}`),
      beginLogin: (pending) =>
        Effect.gen(function* () {
          const cookie = randomBytes(32).toString("base64url")
          yield* sql`insert into oidc_logins (id_hash, state, nonce, code_verifier, next, org)
                     values (${sha256(cookie)}, ${pending.state}, ${pending.nonce}, ${pending.codeVerifier},
                             ${pending.next}, ${pending.org ?? null})`
          yield* sql`delete from oidc_logins where created_at < now() - make_interval(secs => ${loginSeconds})`
          return cookie
        }),
      takeLogin: (cookie) =>
        Effect.gen(function* () {
          if (cookie.length < 20 || cookie.length > 100) return Option.none()
          const rows = yield* sql<{
            state: string
            nonce: string
            code_verifier: string
            next: string
            org: string | null
          }>`delete from oidc_logins
             where id_hash = ${sha256(cookie)} and created_at > now() - make_interval(secs => ${loginSeconds})
             returning state, nonce, code_verifier, next, org`
          const row = rows[0]
          if (row === undefined) return Option.none()
          return Option.some({
            state: row.state,
            nonce: row.nonce,
            codeVerifier: row.code_verifier,
            next: row.next,
            org: row.org ?? undefined
          })
        })
    }
  })
)
