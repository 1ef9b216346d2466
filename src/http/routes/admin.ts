import { Effect } from "effect"
import { dieUnless } from "../../kernel/errors.ts"
import { Tenancy, TenancyError } from "../../tenancy/Tenancy.ts"
import { ops } from "../Api.ts"
import { ApiError, invalidRequest, notFound } from "../errors.ts"
import type { Op } from "../operation.ts"
import { handle, type RawRequest, type Route } from "../router.ts"

/**
 * The admin API (`/v1/admin/...`): organizations, tokens and repositories over HTTP, for admin tokens only. The CLI
 * uses it while a running server holds the embedded database.
 */

const tokenOf = (request: Request): string => {
  const header = request.headers.get("x-api-token")
  if (header !== null && header.trim() !== "") return header.trim()
  return /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization")?.trim() ?? "")?.[1]?.trim() ?? ""
}

const notAdmin = () =>
  new ApiError({
    status: 401,
    code: "UNAUTHORIZED",
    message: "this operation needs an admin token (the bootstrap token, the first-run token, or tokens create --admin)"
  })

const orDie = dieUnless((e): e is ApiError => e instanceof ApiError)

const fromTenancy = (e: TenancyError) =>
  e.message.startsWith("no organization") ? notFound("NOT_FOUND", e.message) : invalidRequest(e.message)

/** `handle`, behind the admin check: the request's token must be an active admin token. */
const admin = <Name extends string, P, PI, S, SI, R>(
  op: Op<Name, P, PI, S, SI>,
  handler: (payload: P) => Effect.Effect<NoInfer<S>, ApiError, R>
): Route<R | Tenancy, Name> => {
  const inner = handle(op, handler)
  return {
    op: inner.op,
    run: (payload: unknown, raw: RawRequest) =>
      Effect.gen(function* () {
        const tenancy = yield* Tenancy
        const ok = yield* orDie(tenancy.isAdmin(tokenOf(raw.request)))
        if (!ok) return yield* notAdmin()
        return yield* inner.run(payload, raw)
      })
  }
}

const withTenancy = <A, E, R>(
  f: (tenancy: typeof Tenancy.Service) => Effect.Effect<A, E, R>
): Effect.Effect<A, ApiError, R | Tenancy> =>
  orDie(
    Effect.flatMap(Tenancy, f).pipe(
      Effect.mapError((e: E | ApiError) => (e instanceof TenancyError ? fromTenancy(e) : e))
    )
  )

export const adminRoutes = [
  admin(ops.adminCreateOrganization, ({ slug }) =>
    withTenancy((t) => Effect.map(t.createOrg(slug), (org) => ({ id: org.id, slug: org.slug })))
  ),
  admin(ops.adminCreateToken, ({ org, name, admin }) => withTenancy((t) => t.createToken(org, name, admin))),
  admin(ops.adminListTokens, ({ org }) =>
    withTenancy((t) =>
      Effect.map(t.listTokens(org), (list) => ({
        tokens: list.map((x) => ({
          id: x.id,
          name: x.name,
          admin: x.admin,
          createdAt: x.createdAt.toISOString(),
          revokedAt: x.revokedAt === null ? null : x.revokedAt.toISOString()
        }))
      }))
    )
  ),
  admin(ops.adminRevokeToken, ({ id }) =>
    withTenancy((t) =>
      Effect.flatMap(t.revokeToken(id), (revoked) =>
        revoked ? Effect.succeed({}) : Effect.fail(notFound("NOT_FOUND", `no token ${id}`))
      )
    )
  ),
  admin(ops.adminAddRepository, ({ org, repo }) =>
    withTenancy((t) => Effect.map(t.addRepo(org, repo), (added) => ({ id: added.id, repo })))
  )
]
