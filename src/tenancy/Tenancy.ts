import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Data, Effect, Layer, Option, Stream } from "effect"
import { Database } from "../kernel/Database.ts"
import { type Actor, type Principal, ROLES, type Role, roleAllows } from "./principal.ts"

/** A repository by its host, owner and name (the API's `repo` object). */
export interface RepoRef {
  readonly host: string
  readonly owner: string
  readonly name: string
}

/** Organizations, their API tokens, and which organization owns which repository (contract.md §1). */

export interface Organization {
  readonly id: string
  readonly slug: string
  readonly claimOnFirstUse: boolean
}

export interface Repository {
  readonly id: string
  readonly orgId: string
  readonly host: string
  readonly owner: string
  readonly name: string
}

export class TenancyError extends Data.TaggedError("TenancyError")<{ readonly message: string }> {}

/**
 * The caller's role does not allow what it asked of the tenancy service (the HTTP edge answers 403
 * `PERMISSION_DENIED`): a token above its own role, or another's token managed by a caller below `admin`.
 */
export class PermissionDenied extends Data.TaggedError("PermissionDenied")<{ readonly message: string }> {}

/** What a valid API token stands for: its organization, and who calls with it in which role. */
export interface Authenticated {
  readonly org: Organization
  readonly principal: Principal
}

/** An API token as listed: its role, and who made it (`created_by`: `token:<id>`, `person:<subject>`, or null). */
export interface TokenInfo {
  readonly id: string
  readonly name: string
  readonly role: Role
  readonly createdAt: Date
  readonly revokedAt: Date | null
  readonly createdBy: string | null
}

/** How a token's maker is stored: `token:<id>` or `person:<subject>`. */
export const actorKey = (actor: Actor): string =>
  actor.kind === "token" ? `token:${actor.id}` : `person:${actor.subject}`

const isRole = (value: unknown): value is Role =>
  typeof value === "string" && (ROLES as ReadonlyArray<string>).includes(value)

const hashToken = (token: string) => createHash("sha256").update(token, "utf8").digest()

/** A new API token: 32 random bytes, base64url, with a recognisable prefix. */
export const newToken = () => `glt_${randomBytes(32).toString("base64url")}`

const SLUG = /^[a-z0-9][a-z0-9._-]{0,62}$/i

/** The name of the admin token the first run makes (revoked once a BOOTSTRAP_TOKEN is set). */
const FIRST_RUN_TOKEN_NAME = "first-run admin"

export interface TenancyShape {
  /** The organization and principal (the token as actor, with its role) of an active token. */
  readonly authenticate: (token: string) => Effect.Effect<Option.Option<Authenticated>, SqlError>
  /**
   * What `authenticate` found for `token` less than a few seconds before `now` (epoch ms), without running an
   * effect: the HTTP front's path for a token it saw a moment ago (the same object each time). Undefined: ask
   * `authenticate`.
   */
  readonly remembered: (token: string, now: number) => Authenticated | undefined
  /** Clears remembered tokens whenever any instance revokes one (runs until interrupted; the server runs it). */
  readonly followRevocations: Effect.Effect<void>
  /**
   * The BOOTSTRAP_TOKEN: `slug` exists and claims on first use, `token` is its admin token named "bootstrap", and
   * every other bootstrap token of that organization is revoked (a new BOOTSTRAP_TOKEN replaces the previous one), and
   * so is the first-run admin token, which the BOOTSTRAP_TOKEN replaces as well (docs/decisions.md); its id is
   * returned, to be logged.
   */
  readonly ensureBootstrap: (
    slug: string,
    token: string
  ) => Effect.Effect<
    { readonly org: Organization; readonly revokedFirstRun: ReadonlyArray<string> },
    SqlError | TenancyError
  >
  /**
   * First run: when the database has no organization and no token at all, creates `slug` (claiming on first use) and
   * one admin token, and returns that token (to be shown once). None when anything exists already.
   */
  readonly firstRun: (
    slug: string
  ) => Effect.Effect<Option.Option<{ readonly org: Organization; readonly token: string }>, SqlError | TenancyError>
  readonly createOrg: (slug: string, claimOnFirstUse?: boolean) => Effect.Effect<Organization, SqlError | TenancyError>
  readonly findOrg: (slug: string) => Effect.Effect<Option.Option<Organization>, SqlError>
  /**
   * A new token of `slug` with `role` (default `write`). With `by` (the caller), the token's role may not be above
   * the caller's (PermissionDenied), and the caller is recorded as its maker; without it, the operator made it (the
   * CLI, the bootstrap).
   */
  readonly createToken: (
    slug: string,
    name: string,
    role?: Role,
    by?: Principal
  ) => Effect.Effect<
    { readonly id: string; readonly token: string; readonly role: Role },
    SqlError | TenancyError | PermissionDenied
  >
  /**
   * The tokens of `slug`, oldest first. With `by` below `admin`: only the caller's own (the ones it made, and itself).
   */
  readonly listTokens: (
    slug: string,
    by?: Principal
  ) => Effect.Effect<ReadonlyArray<TokenInfo>, SqlError | TenancyError>
  /**
   * Revokes token `id`: false when there is none (with `within`, none of that organization). With `within.by` below
   * `admin`, only the caller's own tokens of its role or below (PermissionDenied). Tells every instance to forget the
   * token: run it outside a transaction, or the others may hear before it committed.
   */
  readonly revokeToken: (
    id: string,
    within?: { readonly org: Organization; readonly by: Principal }
  ) => Effect.Effect<boolean, SqlError | PermissionDenied>
  readonly addRepo: (slug: string, repo: RepoRef) => Effect.Effect<Repository, SqlError | TenancyError>
  /** The repository if it belongs to `org`; with `claim`, an unowned repository is claimed when `org` may do so. */
  readonly findRepo: (
    org: Organization,
    repo: RepoRef,
    options?: { readonly claim?: boolean }
  ) => Effect.Effect<Option.Option<Repository>, SqlError>
}

export class Tenancy extends Context.Tag("greenline/Tenancy")<Tenancy, TenancyShape>() {}

/**
 * Whether a repository may be claimed by an organization at all (e.g. with a GitHub App, only repositories the App is
 * installed on). Optional: without it every repository may be claimed.
 */
export class RepoClaimGuard extends Context.Tag("greenline/RepoClaimGuard")<
  RepoClaimGuard,
  {
    /** undefined when `repo` may be claimed, else the reason it may not. */
    readonly refusal: (repo: RepoRef) => Effect.Effect<string | undefined, SqlError>
  }
>() {}

interface OrgRow {
  readonly id: string
  readonly slug: string
  readonly claim_on_first_use: boolean
}
interface TokenRow {
  readonly id: string
  readonly name: string
  readonly role: string
  readonly created_at: Date
  readonly revoked_at: Date | null
  readonly created_by: string | null
}
interface RepoRow {
  readonly id: string
  readonly org_id: string
  readonly host: string
  readonly owner: string
  readonly name: string
}

const toOrg = (row: OrgRow): Organization => ({ id: row.id, slug: row.slug, claimOnFirstUse: row.claim_on_first_use })
const toRepo = (row: RepoRow): Repository => ({
  id: row.id,
  orgId: row.org_id,
  host: row.host,
  owner: row.owner,
  name: row.name
})

/** Authenticated tokens are remembered this long; a revocation clears them at once, on every instance. */
const AUTH_CACHE_MS = 10_000
export const TOKENS_CHANNEL = "greenline_tokens"

export const TenancyLive = Layer.effect(
  Tenancy,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const guard = yield* Effect.serviceOption(RepoClaimGuard)
    const refusal = (repo: RepoRef) =>
      Option.isSome(guard) ? guard.value.refusal(repo) : Effect.succeed<string | undefined>(undefined)
    const authCache = new Map<string, { readonly found: Authenticated; readonly until: number }>()

    const findOrg = (slug: string) =>
      Effect.map(sql<OrgRow>`select id, slug, claim_on_first_use from organizations where slug = ${slug}`, (rows) =>
        Option.map(Option.fromNullable(rows[0]), toOrg)
      )

    const requireOrg = (slug: string) =>
      Effect.flatMap(findOrg(slug), (o) =>
        Option.match(o, {
          onNone: () => Effect.fail(new TenancyError({ message: `no organization '${slug}'` })),
          onSome: Effect.succeed
        })
      )

    const createOrg = (slug: string, claimOnFirstUse = false) =>
      Effect.gen(function* () {
        if (!SLUG.test(slug)) {
          return yield* new TenancyError({
            message: `'${slug}' is not a valid organization slug (letters, digits, . _ -)`
          })
        }
        yield* sql`insert into organizations (id, slug, claim_on_first_use)
                   values (${crypto.randomUUID()}, ${slug}, ${claimOnFirstUse})
                   on conflict (slug) do nothing`
        return yield* requireOrg(slug)
      })

    const insertToken = (orgId: string, name: string, token: string, role: Role, createdBy: string | null = null) =>
      Effect.gen(function* () {
        const id = crypto.randomUUID()
        yield* sql`insert into api_tokens (id, org_id, name, token_hash, role, created_by)
                   values (${id}, ${orgId}, ${name}, ${hashToken(token)}, ${role}, ${createdBy})
                   on conflict (token_hash) do nothing`
        return id
      })

    /** Whether token `t` is one of `by`'s own: one it made, or itself. */
    const owns = (by: Principal, t: { readonly id: string; readonly created_by: string | null }) =>
      t.created_by === actorKey(by.actor) || (by.actor.kind === "token" && by.actor.id === t.id)

    const toTokenInfo = (r: TokenRow): TokenInfo => ({
      id: r.id,
      name: r.name,
      role: isRole(r.role) ? r.role : "read",
      createdAt: new Date(r.created_at),
      revokedAt: r.revoked_at === null ? null : new Date(r.revoked_at),
      createdBy: r.created_by
    })

    const revoked = (ids: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        authCache.clear()
        for (const id of ids) yield* db.notify(TOKENS_CHANNEL, id)
      })

    const authenticate = (token: string) =>
      Effect.gen(function* () {
        if (token.length < 16 || token.length > 512) return Option.none()
        const hash = hashToken(token)
        const key = hash.toString("base64")
        const now = yield* Clock.currentTimeMillis
        const cached = authCache.get(key)
        if (cached !== undefined && cached.until > now) return Option.some(cached.found)
        const rows = yield* sql<
          OrgRow & { readonly token_hash: Uint8Array; token_id: string; token_name: string; role: string }
        >`
          select o.id, o.slug, o.claim_on_first_use, t.token_hash, t.id as token_id, t.name as token_name, t.role
          from api_tokens t join organizations o on o.id = t.org_id
          where t.token_hash = ${hash} and t.revoked_at is null`
        const row = rows[0]
        if (row === undefined) return Option.none()
        const stored = Buffer.from(row.token_hash)
        if (stored.length !== hash.length || !timingSafeEqual(stored, hash)) return Option.none()
        const found: Authenticated = {
          org: toOrg(row),
          principal: {
            actor: { kind: "token", id: row.token_id, name: row.token_name },
            // a role this version does not know grants the least
            role: isRole(row.role) ? row.role : "read"
          }
        }
        if (authCache.size > 10_000) authCache.clear()
        authCache.set(key, { found, until: now + AUTH_CACHE_MS })
        return Option.some(found)
      })

    const remembered: TenancyShape["remembered"] = (token, now) => {
      if (token.length < 16 || token.length > 512) return undefined
      const cached = authCache.get(hashToken(token).toString("base64"))
      return cached !== undefined && cached.until > now ? cached.found : undefined
    }

    const findRepo: TenancyShape["findRepo"] = (org, repo, options) =>
      Effect.gen(function* () {
        const rows = yield* sql<RepoRow>`
          select id, org_id, host, owner, name from repositories
          where host = ${repo.host} and owner = ${repo.owner} and name = ${repo.name}`
        const row = rows[0]
        if (row !== undefined) return row.org_id === org.id ? Option.some(toRepo(row)) : Option.none()
        if (!(options?.claim && org.claimOnFirstUse)) return Option.none()
        if ((yield* refusal(repo)) !== undefined) return Option.none()
        yield* sql`insert into repositories (id, org_id, host, owner, name)
                   values (${crypto.randomUUID()}, ${org.id}, ${repo.host}, ${repo.owner}, ${repo.name})
                   on conflict (host, owner, name) do nothing`
        const claimed = yield* sql<RepoRow>`
          select id, org_id, host, owner, name from repositories
          where host = ${repo.host} and owner = ${repo.owner} and name = ${repo.name}`
        const c = claimed[0]
        return c !== undefined && c.org_id === org.id ? Option.some(toRepo(c)) : Option.none()
      })

    return {
      authenticate,
      remembered,
      followRevocations: db.listen(TOKENS_CHANNEL).pipe(Stream.runForEach(() => Effect.sync(() => authCache.clear()))),
      findRepo,
      findOrg,
      createOrg,
      ensureBootstrap: (slug, token) =>
        Effect.gen(function* () {
          const { org, replaced, revokedFirstRun } = yield* sql.withTransaction(
            Effect.gen(function* () {
              const org = yield* createOrg(slug, true)
              yield* sql`update organizations set claim_on_first_use = true where id = ${org.id}`
              const hash = hashToken(token)
              yield* insertToken(org.id, "bootstrap", token, "admin")
              // the same token given again (a restart) stays; an older bootstrap token of the organization goes
              yield* sql`update api_tokens set role = 'admin', revoked_at = null
                         where token_hash = ${hash} and org_id = ${org.id} and name = 'bootstrap'`
              const replaced = yield* sql<{ id: string }>`
                update api_tokens set revoked_at = now()
                where org_id = ${org.id} and name = 'bootstrap' and revoked_at is null and token_hash <> ${hash}
                returning id`
              // the first run's admin token was the bootstrap credential before BOOTSTRAP_TOKEN was set
              const firstRun = yield* sql<{ id: string }>`
                update api_tokens set revoked_at = now()
                where name = ${FIRST_RUN_TOKEN_NAME} and revoked_at is null and token_hash <> ${hash}
                returning id`
              return {
                org: { ...org, claimOnFirstUse: true },
                replaced: [...replaced, ...firstRun].map((r) => r.id),
                revokedFirstRun: firstRun.map((r) => r.id)
              }
            })
          )
          if (replaced.length > 0) yield* revoked(replaced)
          return { org, revokedFirstRun }
        }),
      firstRun: (slug) =>
        sql.withTransaction(
          Effect.gen(function* () {
            // two instances starting at once on one PostgreSQL: one makes the token, the other sees it made
            yield* sql`select pg_advisory_xact_lock(7070)`
            const [counts] = yield* sql<{ orgs: number; tokens: number }>`
              select (select count(*)::int from organizations) as orgs, (select count(*)::int from api_tokens) as tokens`
            if (counts === undefined || Number(counts.orgs) > 0 || Number(counts.tokens) > 0) return Option.none()
            const org = yield* createOrg(slug, true)
            const token = newToken()
            yield* insertToken(org.id, FIRST_RUN_TOKEN_NAME, token, "admin")
            return Option.some({ org, token })
          })
        ),
      createToken: (slug, name, role = "write", by) =>
        Effect.gen(function* () {
          const org = yield* requireOrg(slug)
          if (by !== undefined && !roleAllows(by.role, role)) {
            return yield* new PermissionDenied({
              message: `a ${by.role} token or person can create tokens of role ${by.role} or below, not ${role}`
            })
          }
          const token = newToken()
          const id = yield* insertToken(org.id, name, token, role, by === undefined ? null : actorKey(by.actor))
          return { id, token, role }
        }),
      listTokens: (slug, by) =>
        Effect.gen(function* () {
          const org = yield* requireOrg(slug)
          const rows = yield* sql<TokenRow>`
            select id, name, role, created_at, revoked_at, created_by
            from api_tokens where org_id = ${org.id} order by created_at, id`
          const visible = by === undefined || by.role === "admin" ? rows : rows.filter((r) => owns(by, r))
          return visible.map(toTokenInfo)
        }),
      revokeToken: (id, within) =>
        Effect.gen(function* () {
          if (!/^[0-9a-f-]{36}$/i.test(id)) return false
          if (within !== undefined) {
            const [row] = yield* sql<TokenRow>`
              select id, name, role, created_at, revoked_at, created_by
              from api_tokens where id = ${id} and org_id = ${within.org.id}`
            if (row === undefined) return false
            const { by } = within
            if (by.role !== "admin") {
              if (!owns(by, row)) {
                return yield* new PermissionDenied({
                  message: "only an admin revokes tokens that another token or person made"
                })
              }
              if (!roleAllows(by.role, toTokenInfo(row).role)) {
                return yield* new PermissionDenied({ message: `a ${by.role} cannot revoke a ${row.role} token` })
              }
            }
          }
          const rows = yield* sql<{ id: string }>`
            update api_tokens set revoked_at = coalesce(revoked_at, now()) where id = ${id} returning id`
          yield* revoked([id])
          return rows.length > 0
        }),
      addRepo: (slug, repo) =>
        Effect.gen(function* () {
          const org = yield* requireOrg(slug)
          const refused = yield* refusal(repo)
          if (refused !== undefined) {
            const owned = yield* findRepo(org, repo)
            if (Option.isSome(owned)) return owned.value
            return yield* new TenancyError({ message: refused })
          }
          const found = yield* findRepo({ ...org, claimOnFirstUse: true }, repo, { claim: true })
          return yield* Option.match(found, {
            onNone: () =>
              Effect.fail(
                new TenancyError({ message: `${repo.host}/${repo.owner}/${repo.name} belongs to another organization` })
              ),
            onSome: Effect.succeed
          })
        })
    }
  })
)
