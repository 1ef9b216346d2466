/**
 * Who may do what. Roles are named as GitHub names repository roles, and each includes the ones below it:
 * `read` < `write` < `maintain` < `admin` (contract.md §1, `PERMISSION_DENIED`).
 */
export const ROLES = ["read", "write", "maintain", "admin"] as const
export type Role = (typeof ROLES)[number]

/** Whether a holder of `held` may do what needs `needed`. */
export const roleAllows = (held: Role, needed: Role): boolean => ROLES.indexOf(held) >= ROLES.indexOf(needed)

/** Who made a request: an API token, or a person signed in to the dashboard. */
export type Actor =
  | { readonly kind: "token"; readonly id: string; readonly name: string }
  | { readonly kind: "person"; readonly subject: string; readonly name: string; readonly email?: string | undefined }

/** A request's actor and the role it holds in its organization. */
export interface Principal {
  readonly actor: Actor
  readonly role: Role
}
