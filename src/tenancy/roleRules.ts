import { ROLES, type Role, roleAllows } from "./principal.ts"

/**
 * Which role a person signed in with an identity provider holds in which organization: rules that map a value of one
 * claim of theirs (OIDC_ROLE_CLAIM, e.g. `groups`) to a role in an organization (OIDC_ROLE_RULES). Pure: the
 * configuration is parsed here and the mapping is a function of the claims.
 *
 * A rule is `<org>:<role>=<claim value>`, rules separated by `;` or new lines, e.g.
 * `acme:admin=greenline-admins; acme:write=developers; acme:read=*`. The value is everything after the first `=`
 * (trimmed; it may contain `:`, `=`, spaces, as GitHub teams through Dex do: `acme:platform`); `*` matches everyone
 * the provider signs in. A person holds, in each organization, the highest role of the rules they match.
 */

export interface RoleRule {
  readonly org: string
  readonly role: Role
  /** The claim's value that grants it; `*`: every person. */
  readonly value: string
}

const SLUG = /^[a-z0-9][a-z0-9._-]{0,62}$/i

/** The rules of OIDC_ROLE_RULES, or the first problem found (with the rule it is in). */
export const parseRoleRules = (text: string): { rules: ReadonlyArray<RoleRule> } | { error: string } => {
  const rules: Array<RoleRule> = []
  for (const raw of text.split(/[;\n]/)) {
    const rule = raw.trim()
    if (rule === "") continue
    const eq = rule.indexOf("=")
    if (eq < 0) return { error: `"${rule}" is not <org>:<role>=<claim value>` }
    const target = rule.slice(0, eq).trim()
    const value = rule.slice(eq + 1).trim()
    const colon = target.lastIndexOf(":")
    const org = target.slice(0, colon).trim()
    const role = target
      .slice(colon + 1)
      .trim()
      .toLowerCase()
    if (colon < 0 || !SLUG.test(org)) return { error: `"${rule}": "${target}" is not <org>:<role>` }
    if (!(ROLES as ReadonlyArray<string>).includes(role)) {
      return { error: `"${rule}": the role must be one of ${ROLES.join(", ")}, not "${role}"` }
    }
    if (value === "") return { error: `"${rule}": the claim value is empty (use * for everyone)` }
    rules.push({ org, role: role as Role, value })
  }
  return { rules }
}

/**
 * The claim's values: a string (one value), an array of strings, or, for a dotted path (`realm_access.roles`, as
 * Keycloak nests realm roles), the value found along it. Anything else: no values.
 */
export const claimValues = (claims: Readonly<Record<string, unknown>>, claim: string): ReadonlyArray<string> => {
  let value: unknown = claim in claims ? claims[claim] : undefined
  if (value === undefined && claim.includes(".")) {
    value = claims
    for (const part of claim.split(".")) {
      value = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[part] : undefined
    }
  }
  if (typeof value === "string") return [value]
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === "string")
  return []
}

/** Whether the claim is in these claims at all (else it is asked of the provider's userinfo endpoint). */
export const hasClaim = (claims: Readonly<Record<string, unknown>>, claim: string): boolean => {
  if (claim in claims) return true
  if (!claim.includes(".")) return false
  let value: unknown = claims
  for (const part of claim.split(".")) {
    if (value === null || typeof value !== "object" || !(part in value)) return false
    value = (value as Record<string, unknown>)[part]
  }
  return true
}

/** The highest role per organization that the values earn (organizations in the rules' order; none: no role). */
export const rolesOf = (
  rules: ReadonlyArray<RoleRule>,
  values: ReadonlyArray<string>
): ReadonlyArray<{ readonly org: string; readonly role: Role }> => {
  const held = new Set(values)
  const best = new Map<string, Role>()
  for (const rule of rules) {
    if (rule.value !== "*" && !held.has(rule.value)) continue
    const current = best.get(rule.org)
    if (current === undefined || !roleAllows(current, rule.role)) best.set(rule.org, rule.role)
  }
  return [...best].map(([org, role]) => ({ org, role }))
}

/** The organizations the rules name, in their order. */
export const orgsOfRules = (rules: ReadonlyArray<RoleRule>): ReadonlyArray<string> => [
  ...new Set(rules.map((r) => r.org))
]
