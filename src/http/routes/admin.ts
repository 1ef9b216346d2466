import { Effect } from "effect"
import { auditedTransaction } from "../../audit/trail.ts"
import { dieUnless } from "../../kernel/errors.ts"
import { PermissionDenied, Tenancy, TenancyError } from "../../tenancy/Tenancy.ts"
import { ops } from "../Api.ts"
import { ApiError, invalidRequest, notFound } from "../errors.ts"
import { CurrentPrincipal, handle } from "../router.ts"

/**
 * The admin API (`/v1/admin/...`): organizations, tokens and repositories of any organization over HTTP, for the
 * role `admin` (http/roles.ts; the router refuses the others). The CLI uses it while a running server holds the
 * embedded database.
 */

const orDie = dieUnless((e): e is ApiError | PermissionDenied => e instanceof ApiError || e instanceof PermissionDenied)

const fromTenancy = (e: TenancyError) =>
  e.message.startsWith("no organization") ? notFound("NOT_FOUND", e.message) : invalidRequest(e.message)

/** A tenancy change in one transaction (the audit record with it), its errors as the contract's. */
const withTenancy = <A, E, R>(
  f: (tenancy: typeof Tenancy.Service) => Effect.Effect<A, E, R>
): Effect.Effect<A, ApiError | PermissionDenied, R | Tenancy | import("@effect/sql/SqlClient").SqlClient> =>
  orDie(
    auditedTransaction(Effect.flatMap(Tenancy, f)).pipe(
      Effect.mapError((e: unknown) => (e instanceof TenancyError ? fromTenancy(e) : e))
    )
  )

export const adminRoutes = [
  handle(ops.adminCreateOrganization, ({ slug }) =>
    withTenancy((t) => Effect.map(t.createOrg(slug), (org) => ({ id: org.id, slug: org.slug })))
  ),
  handle(ops.adminCreateToken, ({ org, name, role, admin }) =>
    Effect.flatMap(CurrentPrincipal, (by) =>
      withTenancy((t) => t.createToken(org, name, role ?? (admin ? "admin" : "write"), by))
    )
  ),
  handle(ops.adminListTokens, ({ org }) =>
    withTenancy((t) =>
      Effect.map(t.listTokens(org), (list) => ({
        tokens: list.map((x) => ({
          id: x.id,
          name: x.name,
          role: x.role,
          admin: x.role === "admin",
          createdAt: x.createdAt.toISOString(),
          revokedAt: x.revokedAt === null ? null : x.revokedAt.toISOString()
        }))
      }))
    )
  ),
  // not in a transaction: every instance forgets the token once the revocation committed (recorded right after)
  handle(ops.adminRevokeToken, ({ id }) =>
    orDie(
      Effect.flatMap(Tenancy, (t) => t.revokeToken(id)).pipe(
        Effect.flatMap((revoked) =>
          revoked ? Effect.succeed({}) : Effect.fail(notFound("NOT_FOUND", `no token ${id}`))
        )
      )
    )
  ),
  handle(ops.adminAddRepository, ({ org, repo }) =>
    withTenancy((t) => Effect.map(t.addRepo(org, repo), (added) => ({ id: added.id, repo })))
  )
]
