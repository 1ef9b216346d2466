import { createHash, randomBytes } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option } from "effect"
import { type Principal, ROLES, type Role } from "./principal.ts"
import { type Organization, Tenancy } from "./Tenancy.ts"

/** Dashboard sign-in (the web adapter serves it): sessions opened with an API token, stored hashed, ended by inactivity or by revoking the token. */

/** A session unused this long is over (the next request signs in again). */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000
/** last_seen_at is written at most this often per session (not on every request). */
const TOUCH_EVERY_MS = 60 * 1000

export const SESSION_COOKIE = "greenline_session"

const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest()

/** The anti-CSRF token of a session: derived from its secret, so nothing more is stored and it cannot be guessed. */
export const csrfOf = (secret: string) => createHash("sha256").update(`csrf:${secret}`, "utf8").digest("base64url")

export interface OpenSession {
  readonly org: Organization
  /** Who is signed in, with which role: a session opened with a token acts as that token, in its role. */
  readonly principal: Principal
  readonly csrf: string
  /** A stable key for the rate limiter (not the secret). */
  readonly key: string
}

export interface SessionsShape {
  /** A new session for `token` (none when the token is unknown or revoked): the cookie's secret value. */
  readonly signIn: (token: string) => Effect.Effect<Option.Option<string>, SqlError>
  /** The session of a cookie value, if it is open; marks it as used. */
  readonly resolve: (secret: string) => Effect.Effect<Option.Option<OpenSession>, SqlError>
  readonly signOut: (secret: string) => Effect.Effect<void, SqlError>
}

export class Sessions extends Context.Tag("greenline/Sessions")<Sessions, SessionsShape>() {}

interface SessionRow {
  readonly token_id: string
  readonly token_name: string
  readonly role: string
  readonly org_id: string
  readonly slug: string
  readonly claim_on_first_use: boolean
  readonly last_seen_at: Date | string
}

export const SessionsLive = Layer.effect(
  Sessions,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tenancy = yield* Tenancy
    const idleSeconds = SESSION_IDLE_MS / 1000
    return {
      signIn: (token) =>
        Effect.gen(function* () {
          const found = yield* tenancy.authenticate(token.trim())
          if (Option.isNone(found)) return Option.none()
          const secret = randomBytes(32).toString("base64url")
          yield* sql`insert into web_sessions (id_hash, org_id, token_hash)
                     values (${sha256(secret)}, ${found.value.org.id}, ${sha256(token.trim())})`
          // sessions idle for too long are removed as new ones open
          yield* sql`delete from web_sessions where last_seen_at < now() - make_interval(secs => ${idleSeconds})`
          return Option.some(secret)
        }),
      resolve: (secret) =>
        Effect.gen(function* () {
          if (secret.length < 20 || secret.length > 100) return Option.none()
          const hash = sha256(secret)
          // the token must still be valid: revoking it ends the sessions it opened
          const rows = yield* sql<SessionRow>`
            select t.id as token_id, t.name as token_name, t.role,
                   o.id as org_id, o.slug, o.claim_on_first_use, s.last_seen_at
            from web_sessions s
            join api_tokens t on t.token_hash = s.token_hash and t.revoked_at is null
            join organizations o on o.id = s.org_id and o.id = t.org_id
            where s.id_hash = ${hash} and s.last_seen_at > now() - make_interval(secs => ${idleSeconds})`
          const row = rows[0]
          if (row === undefined) return Option.none()
          if (Date.now() - new Date(row.last_seen_at).getTime() > TOUCH_EVERY_MS) {
            yield* sql`update web_sessions set last_seen_at = now() where id_hash = ${hash}`
          }
          return Option.some({
            org: { id: row.org_id, slug: row.slug, claimOnFirstUse: row.claim_on_first_use },
            principal: {
              actor: { kind: "token", id: row.token_id, name: row.token_name },
              role: (ROLES as ReadonlyArray<string>).includes(row.role) ? (row.role as Role) : "read"
            },
            csrf: csrfOf(secret),
            key: `session:${hash.toString("base64url").slice(0, 16)}`
          })
        }),
      signOut: (secret) => Effect.asVoid(sql`delete from web_sessions where id_hash = ${sha256(secret)}`)
    }
  })
)
