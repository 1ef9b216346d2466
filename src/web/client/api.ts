import type { Schema } from "effect"
import type { Ops } from "../../http/Api.ts"

/**
 * The dashboard's only way to the server: the HTTP API itself, with the session cookie and its anti-CSRF header.
 * Request and answer types come from the API's own schemas (their JSON-encoded sides).
 */

export type OpName = keyof Ops
export type Body<N extends OpName> = Schema.Schema.Encoded<Ops[N]["payload"]>
export type Answer<N extends OpName> = Schema.Schema.Encoded<Ops[N]["success"]>

export interface ErrorDetail {
  readonly path: string
  readonly message: string
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ReadonlyArray<ErrorDetail>
  ) {
    super(message)
  }
}

const meta = (name: string) => document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? ""
export const csrf = () => meta("greenline-csrf")
export const orgSlug = () => meta("greenline-org")
/** The signed-in token's or person's role: what the navigation offers (the server decides what is allowed). */
export const role = () => meta("greenline-role")
/** The roles, each including the ones before it (as the server's tenancy/principal.ts). */
export const ROLE_ORDER = ["read", "write", "maintain", "admin"] as const
/** Who is signed in: a person's name, or `token <name>` for a session opened with an API token. */
export const actorName = () => meta("greenline-actor")
export const actorKind = () => meta("greenline-actor-kind")

/** A link to another site only when it is http or https (a `javascript:` URL is no link): else undefined. */
export const httpLink = (url: string | null | undefined): string | undefined => {
  if (url === null || url === undefined || url === "") return undefined
  try {
    const parsed = new URL(url)
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : undefined
  } catch {
    return undefined
  }
}
/** The server's version, for the footer. */
export const serverVersion = () => meta("greenline-version")

const paths: Record<string, string> = {
  getTestDetails: "/flaky-tests/get-test-details",
  listUnhealthyTests: "/flaky-tests/list-unhealthy-tests",
  listQuarantinedTests: "/flaky-tests/list-quarantined-tests",
  setQuarantineOverride: "/flaky-tests/set-quarantine-override",
  getFlakySettings: "/flaky-tests/get-settings",
  updateFlakySettings: "/flaky-tests/update-settings",
  getTestHistory: "/flaky-tests/get-test-history",
  getUpload: "/flaky-tests/get-upload"
}

export const call = async <N extends OpName>(name: N, body: Body<N>): Promise<Answer<N>> => {
  const response = await fetch(`/v1${paths[name] ?? `/${name}`}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", "x-csrf-token": csrf() },
    body: JSON.stringify(body)
  })
  if (response.status === 401) {
    // the session ended (inactivity, sign-out elsewhere, a revoked token): sign in again, then come back
    location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`)
  }
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  if (!response.ok) {
    const error = (parsed as { error?: { code?: string; message?: string; details?: ErrorDetail[] } } | undefined)
      ?.error
    throw new ApiFailure(
      response.status,
      error?.code ?? "INTERNAL",
      error?.message ?? `the server answered ${response.status}`,
      error?.details ?? []
    )
  }
  return parsed as Answer<N>
}
