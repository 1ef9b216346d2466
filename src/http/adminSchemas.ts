import { Schema } from "effect"
import { RepoRef } from "../queue/schemas.ts"
import { ROLES } from "../tenancy/principal.ts"
import { RoleValue } from "./dashboardSchemas.ts"

/** The admin API's requests and answers (`/v1/admin/...`, admin tokens only). */

const Slug = Schema.String.pipe(Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,62}$/i)).annotations({
  identifier: "OrganizationSlug",
  description: "letters, digits, `.`, `_` and `-`, at most 63 characters",
  examples: ["acme"]
})

export const CreateOrganizationRequest = Schema.Struct({ slug: Slug }).annotations({
  identifier: "CreateOrganizationRequest"
})
export const Organization = Schema.Struct({ id: Schema.UUID, slug: Schema.String }).annotations({
  identifier: "Organization"
})

export const CreateTokenRequest = Schema.Struct({
  org: Slug,
  name: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "" }),
  role: Schema.optionalWith(RoleValue, { exact: true }).annotations({
    description: "the token's role (default `write`, or `admin` with `admin: true`)"
  }),
  admin: Schema.optionalWith(Schema.Boolean, { default: () => false }).annotations({
    description: "before roles: `true` is `role: admin` (when `role` is not given)"
  })
}).annotations({ identifier: "CreateTokenRequest" })
export const CreatedToken = Schema.Struct({
  id: Schema.UUID,
  role: Schema.Literal(...ROLES),
  token: Schema.String.annotations({ description: "the token itself: shown only in this answer, stored as a hash" })
}).annotations({ identifier: "CreatedToken" })

export const OrgRequest = Schema.Struct({ org: Slug }).annotations({ identifier: "OrganizationKey" })
export const TokenInfo = Schema.Struct({
  id: Schema.UUID,
  name: Schema.String,
  role: Schema.Literal(...ROLES),
  admin: Schema.Boolean.annotations({ description: "`role` is admin (kept for clients from before roles)" }),
  createdAt: Schema.String.annotations({ description: "ISO 8601" }),
  revokedAt: Schema.NullOr(Schema.String).annotations({ description: "ISO 8601, null while the token is active" })
}).annotations({ identifier: "TokenInfo" })
export const TokenList = Schema.Struct({ tokens: Schema.Array(TokenInfo) }).annotations({ identifier: "TokenList" })

export const RevokeTokenRequest = Schema.Struct({ id: Schema.UUID }).annotations({ identifier: "RevokeTokenRequest" })

export const AddRepositoryRequest = Schema.Struct({ org: Slug, repo: RepoRef }).annotations({
  identifier: "AddRepositoryRequest"
})
export const AddedRepository = Schema.Struct({ id: Schema.UUID, repo: RepoRef }).annotations({
  identifier: "AddedRepository"
})
