import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Data, Effect, Layer, Option, Stream } from "effect"
import { Database } from "../kernel/Database.ts"

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

const hashToken = (token: string) => createHash("sha256").update(token, "utf8").digest()

/** A new API token: 32 random bytes, base64url, with a recognisable prefix. */
export const newToken = () => `glt_${randomBytes(32).toString("base64url")}`

const SLUG = /^[a-z0-9][a-z0-9._-]{0,62}$/i

/** The name of the admin token the first run makes (revoked once a BOOTSTRAP_TOKEN is set). */
const FIRST_RUN_TOKEN_NAME = "first-run admin"

export interface TenancyShape {
  readonly authenticate: (token: string) => Effect.Effect<Option.Option<Organization>, SqlError>
  /**
   * The organization `authenticate` found for `token` less than a few seconds before `now` (epoch ms), without
   * running an effect: the HTTP front's path for a token it saw a moment ago. Undefined: ask `authenticate`.
   */
  readonly remembered: (token: string, now: number) => Organization | undefined
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
  /** Whether `token` is an active admin token (the admin API's guard). */
  readonly isAdmin: (token: string) => Effect.Effect<boolean, SqlError>
  readonly createOrg: (slug: string, claimOnFirstUse?: boolean) => Effect.Effect<Organization, SqlError | TenancyError>
  readonly findOrg: (slug: string) => Effect.Effect<Option.Option<Organization>, SqlError>
  readonly createToken: (
    slug: string,
    name: string,
    admin?: boolean
  ) => Effect.Effect<{ readonly id: string; readonly token: string }, SqlError | TenancyError>
  readonly listTokens: (slug: string) => Effect.Effect<
    ReadonlyArray<{
      readonly id: string
      readonly name: string
      readonly createdAt: Date
      readonly revokedAt: Date | null
      readonly admin: boolean
    }>,
    SqlError | TenancyError
  >
  readonly revokeToken: (id: string) => Effect.Effect<boolean, SqlError>
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
    const authCache = new Map<string, { readonly org: Organization; readonly until: number }>()

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

    const insertToken = (orgId: string, name: string, token: string, admin = false) =>
      Effect.gen(function* () {
        const id = crypto.randomUUID()
        yield* sql`insert into api_tokens (id, org_id, name, token_hash, admin)
                   values (${id}, ${orgId}, ${name}, ${hashToken(token)}, ${admin})
                   on conflict (token_hash) do nothing`
        return id
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
        if (cached !== undefined && cached.until > now) return Option.some(cached.org)
        const rows = yield* sql<OrgRow & { readonly token_hash: Uint8Array }>`
          select o.id, o.slug, o.claim_on_first_use, t.token_hash
          from api_tokens t join organizations o on o.id = t.org_id
          where t.token_hash = ${hash} and t.revoked_at is null`
        const row = rows[0]
        if (row === undefined) return Option.none()
        const stored = Buffer.from(row.token_hash)
        if (stored.length !== hash.length || !timingSafeEqual(stored, hash)) return Option.none()
        const org = toOrg(row)
        if (authCache.size > 10_000) authCache.clear()
        authCache.set(key, { org, until: now + AUTH_CACHE_MS })
        return Option.some(org)
      })

    const remembered: TenancyShape["remembered"] = (token, now) => {
      if (token.length < 16 || token.length > 512) return undefined
      const cached = authCache.get(hashToken(token).toString("base64"))
      return cached !== undefined && cached.until > now ? cached.org : undefined
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
              yield* insertToken(org.id, "bootstrap", token, true)
              // the same token given again (a restart) stays; an older bootstrap token of the organization goes
              yield* sql`update api_tokens set admin = true, revoked_at = null
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
            yield* insertToken(org.id, FIRST_RUN_TOKEN_NAME, token, true)
            return Option.some({ org, token })
          })
        ),
      isAdmin: (token) =>
        Effect.gen(function* () {
          if (token.length < 16 || token.length > 512) return false
          const rows = yield* sql<{ admin: boolean }>`
            select admin from api_tokens where token_hash = ${hashToken(token)} and revoked_at is null`
          return rows[0]?.admin === true
        }),
      createToken: (slug, name, admin = false) =>
        Effect.gen(function* () {
          const org = yield* requireOrg(slug)
          const token = newToken()
          const id = yield* insertToken(org.id, name, token, admin)
          return { id, token }
        }),
      listTokens: (slug) =>
        Effect.gen(function* () {
          const org = yield* requireOrg(slug)
          const rows = yield* sql<{
            id: string
            name: string
            created_at: Date
            revoked_at: Date | null
            admin: boolean
          }>`
            select id, name, created_at, revoked_at, admin from api_tokens where org_id = ${org.id} order by created_at`
          return rows.map((r) => ({
            id: r.id,
            name: r.name,
            createdAt: new Date(r.created_at),
            revokedAt: r.revoked_at === null ? null : new Date(r.revoked_at),
            admin: r.admin === true
          }))
        }),
      revokeToken: (id) =>
        Effect.gen(function* () {
          if (!/^[0-9a-f-]{36}$/i.test(id)) return false
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
