import * as client from "openid-client"
import type { Role } from "../tenancy/principal.ts"
import { claimValues, hasClaim, type RoleRule, rolesOf } from "../tenancy/roleRules.ts"
import type { Person } from "../tenancy/Sessions.ts"

/**
 * People's sign-in with an OpenID Connect provider, through `openid-client` (a certified relying-party library; no
 * protocol code of our own): the authorization code flow with PKCE (S256), state and nonce; the provider's metadata
 * from its discovery document; the person's roles from one claim of the ID token (or of the userinfo answer when the
 * ID token does not carry it), mapped by the rules of tenancy/roleRules.ts.
 */

export interface OidcSettings {
  readonly issuerUrl: string
  readonly clientId: string
  /** Unset: a public client (PKCE alone). */
  readonly clientSecret: string | undefined
  readonly scopes: string
  readonly roleClaim: string
  readonly roleRules: ReadonlyArray<RoleRule>
  /** `<PUBLIC_URL>/login/oidc/callback`, registered at the provider. */
  readonly redirectUri: string
}

/** Who signed in, and what their claims earn them. */
export interface OidcIdentity {
  readonly person: Person
  /** The highest role per organization (organizations in the rules' order); empty: no role anywhere. */
  readonly roles: ReadonlyArray<{ readonly org: string; readonly role: Role }>
  /** The provider's refresh token, when it gave one (to read the role again later without the person). */
  readonly refreshToken: string | undefined
  /** The role claim's values (to say why a person has no role). */
  readonly values: ReadonlyArray<string>
}

/** A sign-in that did not complete, with what to tell the person (never a token or a secret). */
export class OidcFailure extends Error {
  constructor(
    message: string,
    /** 400: the browser's request was wrong (state, code); 502: the provider could not be reached or refused us. */
    readonly status: 400 | 502
  ) {
    super(message)
  }
}

/** The checks a callback must pass, kept by the server between the redirect and the return. */
export interface OidcChecks {
  readonly state: string
  readonly nonce: string
  readonly codeVerifier: string
}

const describe = (error: unknown): OidcFailure => {
  if (error instanceof OidcFailure) return error
  if (error instanceof client.AuthorizationResponseError) {
    // the provider's own answer on the redirect (access_denied, ...)
    return new OidcFailure(
      `The identity provider refused the sign-in: ${error.error}${error.error_description ? ` (${error.error_description})` : ""}.`,
      400
    )
  }
  if (error instanceof client.ResponseBodyError) {
    // the token endpoint's: invalid_grant for a code that expired, was used already or was not ours
    return new OidcFailure(
      `The identity provider did not accept the sign-in: ${error.error}${error.error_description ? ` (${error.error_description})` : ""}. Sign in again.`,
      error.error === "invalid_grant" ? 400 : 502
    )
  }
  // openid-client's ClientError: a code, and the check that failed as its cause
  const e = error as { code?: string; message?: string; cause?: { message?: string } }
  const detail = e?.cause?.message ?? ""
  if (typeof e?.code === "string" && e.code.startsWith("OAUTH_")) {
    if (/"state"/.test(detail)) {
      return new OidcFailure("This sign-in was not started here (its state does not match). Sign in again.", 400)
    }
    if (/"nonce"/.test(detail)) {
      return new OidcFailure("The ID token was not issued for this sign-in (its nonce does not match).", 400)
    }
    return new OidcFailure(
      `The identity provider's answer was not valid: ${e.message ?? e.code}${detail === "" ? "" : ` (${detail})`}.`,
      502
    )
  }
  return new OidcFailure(
    `The identity provider could not be reached: ${error instanceof Error ? error.message : String(error)}.`,
    502
  )
}

const stringClaim = (claims: Readonly<Record<string, unknown>>, name: string) => {
  const v = claims[name]
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined
}

export const makeOidc = (settings: OidcSettings) => {
  /** Why a person has no role: the claim's values they have, which no rule names. */
  const noRoleReason = (id: OidcIdentity) => {
    const shown = id.values.slice(0, 20).map((v) => JSON.stringify(v))
    return id.values.length === 0
      ? `the provider sent no ${settings.roleClaim} claim for them (is it in OIDC_SCOPES and released to this client?)`
      : `their ${settings.roleClaim} (${shown.join(", ")}${id.values.length > 20 ? ", …" : ""}) match no rule`
  }
  let configuration: Promise<client.Configuration> | undefined
  /** The provider's metadata, discovered on first use and kept; a failed discovery is tried again next time. */
  const config = () => {
    configuration ??= client
      .discovery(
        new URL(settings.issuerUrl),
        settings.clientId,
        settings.clientSecret,
        settings.clientSecret === undefined ? client.None() : client.ClientSecretBasic(settings.clientSecret),
        {
          // a provider on plain http (a private network, the tests' loopback provider) is the operator's choice
          execute: settings.issuerUrl.startsWith("http:") ? [client.allowInsecureRequests] : [],
          timeout: 10
        }
      )
      .catch((error: unknown) => {
        configuration = undefined
        throw error
      })
    return configuration
  }

  /** The person and their roles, from the ID token's claims (and the userinfo answer for a claim it lacks). */
  const identity = async (
    c: client.Configuration,
    tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers,
    expectedSubject: string | undefined
  ): Promise<OidcIdentity> => {
    let claims: Record<string, unknown> = { ...(tokens.claims() ?? {}) }
    const subject = stringClaim(claims, "sub") ?? expectedSubject
    if (subject === undefined) throw new OidcFailure("The identity provider's answer has no ID token.", 502)
    if (expectedSubject !== undefined && subject !== expectedSubject) {
      throw new OidcFailure("The identity provider answered for another person.", 502)
    }
    if (!hasClaim(claims, settings.roleClaim) || stringClaim(claims, "name") === undefined) {
      const info = await client.fetchUserInfo(c, tokens.access_token, subject)
      claims = { ...info, ...claims, ...(hasClaim(claims, settings.roleClaim) ? {} : pick(info, settings.roleClaim)) }
    }
    const email = stringClaim(claims, "email")
    const values = claimValues(claims, settings.roleClaim)
    return {
      person: {
        subject,
        name: stringClaim(claims, "name") ?? stringClaim(claims, "preferred_username") ?? email ?? subject,
        email
      },
      roles: rolesOf(settings.roleRules, values),
      refreshToken: tokens.refresh_token,
      values
    }
  }

  return {
    noRoleReason,
    /** Where to send the browser, and the checks to keep for its return. */
    start: async (): Promise<{ readonly url: URL; readonly checks: OidcChecks }> => {
      try {
        const c = await config()
        const checks = {
          state: client.randomState(),
          nonce: client.randomNonce(),
          codeVerifier: client.randomPKCECodeVerifier()
        }
        const url = client.buildAuthorizationUrl(c, {
          redirect_uri: settings.redirectUri,
          scope: settings.scopes,
          response_type: "code",
          state: checks.state,
          nonce: checks.nonce,
          code_challenge: await client.calculatePKCECodeChallenge(checks.codeVerifier),
          code_challenge_method: "S256"
        })
        return { url, checks }
      } catch (error) {
        throw describe(error)
      }
    },
    /**
     * The return from the provider (`search`: the callback's query): the state is checked, the code exchanged with
     * the PKCE verifier, the ID token verified (signature, issuer, audience, expiry, nonce).
     */
    finish: async (search: string, checks: OidcChecks): Promise<OidcIdentity> => {
      try {
        const c = await config()
        const current = new URL(settings.redirectUri)
        current.search = search
        const tokens = await client.authorizationCodeGrant(c, current, {
          pkceCodeVerifier: checks.codeVerifier,
          expectedState: checks.state,
          expectedNonce: checks.nonce,
          idTokenExpected: true
        })
        return await identity(c, tokens, undefined)
      } catch (error) {
        throw describe(error)
      }
    },
    /** The person's roles read again with a refresh token (the provider refusing it: an OidcFailure). */
    reread: async (refreshToken: string, subject: string): Promise<OidcIdentity> => {
      try {
        const c = await config()
        const tokens = await client.refreshTokenGrant(c, refreshToken)
        const id = await identity(c, tokens, subject)
        return { ...id, refreshToken: tokens.refresh_token ?? refreshToken }
      } catch (error) {
        throw describe(error)
      }
    }
  }
}

export type Oidc = ReturnType<typeof makeOidc>

/** The claim (a top-level name, or the first part of a dotted path) out of a userinfo answer. */
const pick = (claims: Readonly<Record<string, unknown>>, claim: string): Record<string, unknown> => {
  const top = claim in claims ? claim : (claim.split(".")[0] ?? claim)
  return top in claims ? { [top]: claims[top] } : {}
}
