/** GitHub's REST API as an Effect service: authentication, rate limits, conditional requests (docs/architecture.md). */
import { request as octokitRequest } from "@octokit/request"
import { RequestError } from "@octokit/request-error"
import type { Endpoints, OctokitResponse } from "@octokit/types"
import { Clock, Context, Data, Duration, Effect, Layer, Option, Redacted, SynchronizedRef } from "effect"
import { type LoadedKey, loadPrivateKey, signAppJwt } from "./auth.ts"
import { GitHubEnv } from "./GitHubEnv.ts"

// ---------------------------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------------------------

/** Whom a request is made as. */
export type GitHubAuth =
  | { readonly _tag: "App" }
  | { readonly _tag: "Installation"; readonly installationId: number }
  | { readonly _tag: "Repository"; readonly owner: string; readonly repo: string }

export const GitHubAuth = {
  /** The App itself (JWT): `/app/...` and `GET /repos/{owner}/{repo}/installation`. */
  app: { _tag: "App" } as GitHubAuth,
  installation: (installationId: number): GitHubAuth => ({ _tag: "Installation", installationId }),
  /** The installation that covers `owner/repo` (or the personal access token). */
  repository: (owner: string, repo: string): GitHubAuth => ({ _tag: "Repository", owner, repo })
} as const

export type GitHubRoute = keyof Endpoints
export type GitHubParams<R extends GitHubRoute> = Endpoints[R]["parameters"]
export type GitHubResponse<R extends GitHubRoute> = Endpoints[R]["response"]

/** A request GitHub answered with an error, or that got no answer (status 0). */
export class GitHubApiError extends Data.TaggedError("GitHubApiError")<{
  readonly status: number
  readonly route: string
  readonly message: string
  /** The response body, when there was one. */
  readonly data?: unknown
}> {}

/** A rate limit that outlasted the waits allowed (`retryAtMs`: when GitHub said it may be tried again). */
export class GitHubRateLimited extends Data.TaggedError("GitHubRateLimited")<{
  readonly route: string
  readonly retryAtMs: number
  readonly message: string
}> {}

/** GITHUB_* settings that cannot work (e.g. a private key that is not an RSA PEM). */
export class GitHubConfigError extends Data.TaggedError("GitHubConfigError")<{ readonly message: string }> {}

export type GitHubError = GitHubApiError | GitHubRateLimited

export interface GitHubRequestOptions {
  /** Send `if-none-match` with the etag of the last answer to the same request and reuse it on 304 (GET only). */
  readonly conditional?: boolean
  /** Extra request headers (e.g. `accept` for a media type). */
  readonly headers?: Readonly<Record<string, string>>
}

export interface GitHubClientStats {
  /** HTTP requests sent (retries included, token exchanges included). */
  readonly requests: number
  /** `POST /app/installations/{id}/access_tokens` sent. */
  readonly tokenRequests: number
  /** 304 answers served from the etag cache. */
  readonly notModified: number
  /** Waits for a rate limit. */
  readonly rateLimitWaits: number
}

export interface GitHubClientService {
  /** "app": App + installations; "token": a personal access token; "none": not configured (requests fail). */
  readonly mode: "app" | "token" | "none"
  readonly apiUrl: string
  readonly request: <R extends GitHubRoute>(
    route: R,
    params: GitHubParams<R>,
    auth: GitHubAuth,
    options?: GitHubRequestOptions
  ) => Effect.Effect<GitHubResponse<R>, GitHubError>
  /** The installation id covering `owner/repo` (App mode; cached). 404 when the App is not installed there. */
  readonly installationId: (owner: string, repo: string) => Effect.Effect<number, GitHubError>
  /** Tells the client which installation covers a repository (e.g. from an `installation` webhook). */
  readonly rememberInstallation: (owner: string, repo: string, installationId: number) => Effect.Effect<void>
  /** Forgets a repository's installation (and its token), e.g. after `installation_repositories` removed it. */
  readonly forgetInstallation: (owner: string, repo: string) => Effect.Effect<void>
  readonly stats: Effect.Effect<GitHubClientStats>
}

export class GitHubClient extends Context.Tag("greenline/GitHubClient")<GitHubClient, GitHubClientService>() {}

export interface GitHubClientConfig {
  /** REST base URL without a trailing slash, e.g. `https://api.github.com`. */
  readonly apiUrl: string
  readonly appId?: string | undefined
  /** PEM text or a path to a PEM file. */
  readonly privateKey?: string | undefined
  readonly token?: string | undefined
  /** Longest single wait for a rate limit before failing with GitHubRateLimited (default 60 s). */
  readonly maxRateLimitWaitMs?: number
  /** Attempts per request, rate-limit retries and read retries included (default 4). */
  readonly maxAttempts?: number
  readonly userAgent?: string
  /** The fetch implementation (default the global one). */
  readonly fetch?: typeof fetch
  /**
   * How long one HTTP request may take before it is abandoned and fails (default 60 s): a request GitHub never
   * answers must not hold a queue's runner (it runs the command again later).
   */
  readonly requestTimeoutMs?: number
}

// ---------------------------------------------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------------------------------------------

/** Refresh an installation token this long before it expires. */
export const TOKEN_REFRESH_MARGIN_MS = 5 * 60_000
/** Without any hint, a secondary rate limit is waited out for a minute (GitHub's advice). */
const DEFAULT_SECONDARY_WAIT_MS = 60_000
const ETAG_CACHE_SIZE = 1000
const TOKEN_ROUTE = "POST /app/installations/{installation_id}/access_tokens"

interface CachedToken {
  readonly token: string
  readonly refreshAtMs: number
}

interface Budget {
  readonly remaining: number
  readonly resetAtMs: number
}

interface CachedResponse {
  readonly etag: string
  readonly response: OctokitResponse<unknown>
}

const header = (headers: Readonly<Record<string, string | number | undefined>>, name: string): string | undefined => {
  const value = headers[name]
  return value === undefined ? undefined : String(value)
}

const errorData = (e: RequestError): unknown => e.response?.data

const errorMessage = (e: RequestError): string => {
  const data = errorData(e)
  if (typeof data === "object" && data !== null && "message" in data && typeof data.message === "string") {
    return data.message
  }
  return e.message
}

type Attempt<A> =
  | { readonly _tag: "Ok"; readonly value: A }
  | { readonly _tag: "Failed"; readonly error: RequestError | Error }

/** Builds the client; fails when the App's private key cannot be loaded. */
export const makeGitHubClient = (config: GitHubClientConfig): Effect.Effect<GitHubClientService, GitHubConfigError> =>
  Effect.gen(function* () {
    const apiUrl = config.apiUrl.replace(/\/+$/, "")
    const maxWaitMs = config.maxRateLimitWaitMs ?? 60_000
    const maxAttempts = Math.max(1, config.maxAttempts ?? 4)
    const requestTimeoutMs = config.requestTimeoutMs ?? 60_000
    const appId = config.appId?.trim()
    const token = config.token?.trim()
    let key: LoadedKey | undefined
    if (appId !== undefined && appId !== "" && config.privateKey !== undefined && config.privateKey.trim() !== "") {
      key = yield* Effect.try({
        try: () => loadPrivateKey(config.privateKey ?? ""),
        catch: (cause) => new GitHubConfigError({ message: cause instanceof Error ? cause.message : String(cause) })
      })
    }
    const mode: GitHubClientService["mode"] =
      key !== undefined ? "app" : token !== undefined && token !== "" ? "token" : "none"

    const base = octokitRequest.defaults({
      baseUrl: apiUrl,
      headers: {
        "user-agent": config.userAgent ?? "greenline",
        accept: "application/vnd.github+json",
        "x-github-api-version": "2022-11-28"
      },
      ...(config.fetch === undefined ? {} : { request: { fetch: config.fetch } })
    })

    const counters = { requests: 0, tokenRequests: 0, notModified: 0, rateLimitWaits: 0 }
    const budgets = new Map<string, Budget>()
    const etags = new Map<string, CachedResponse>()
    let jwt: { token: string; refreshAtMs: number } | undefined
    const tokens = yield* SynchronizedRef.make(new Map<number, CachedToken>())
    const installations = new Map<string, number>()
    const repoKey = (owner: string, repo: string) => `${owner.toLowerCase()}/${repo.toLowerCase()}`

    const appJwt = Effect.gen(function* () {
      if (key === undefined || appId === undefined) {
        return yield* new GitHubApiError({ status: 0, route: "", message: "GitHub App credentials are not configured" })
      }
      const now = yield* Clock.currentTimeMillis
      if (jwt !== undefined && now < jwt.refreshAtMs) return jwt.token
      const signed = signAppJwt(appId, key, now)
      jwt = { token: signed.token, refreshAtMs: signed.expiresAtMs - 60_000 }
      return signed.token
    })

    /** Sends one HTTP request (no retries), recording the rate-limit headers of whatever comes back. */
    const sendOnce = (
      route: string,
      params: Record<string, unknown>,
      budgetKey: string
    ): Effect.Effect<Attempt<OctokitResponse<unknown>>> =>
      Effect.gen(function* () {
        counters.requests++
        const attempt = yield* Effect.tryPromise({
          try: (signal) =>
            base(route, {
              ...params,
              request: { ...(config.fetch === undefined ? {} : { fetch: config.fetch }), signal }
            }),
          catch: (e) => (e instanceof RequestError || e instanceof Error ? e : new Error(String(e)))
        }).pipe(
          // interrupting the request aborts it (its signal)
          Effect.timeoutFail({
            duration: Duration.millis(requestTimeoutMs),
            onTimeout: () => new Error(`${route}: GitHub did not answer within ${requestTimeoutMs / 1000} s`)
          }),
          Effect.map((value): Attempt<OctokitResponse<unknown>> => ({ _tag: "Ok", value })),
          Effect.catchAll((error) => Effect.succeed<Attempt<OctokitResponse<unknown>>>({ _tag: "Failed", error }))
        )
        const headers =
          attempt._tag === "Ok"
            ? attempt.value.headers
            : attempt.error instanceof RequestError
              ? attempt.error.response?.headers
              : undefined
        if (headers !== undefined) {
          const remaining = header(headers, "x-ratelimit-remaining")
          const reset = header(headers, "x-ratelimit-reset")
          if (remaining !== undefined && reset !== undefined && Number.isFinite(Number(remaining))) {
            budgets.set(budgetKey, { remaining: Number(remaining), resetAtMs: Number(reset) * 1000 })
          }
        }
        return attempt
      })

    /**
     * Sends with retries: waits out rate limits (bounded), retries reads on 5xx/network failures, and calls
     * `onUnauthorized` once on a 401 (a revoked or expired token) before trying again.
     */
    const send = (
      route: string,
      params: Record<string, unknown>,
      budgetKey: string,
      authorization: Effect.Effect<string, GitHubError>,
      onUnauthorized: Effect.Effect<void>,
      options: GitHubRequestOptions
    ): Effect.Effect<OctokitResponse<unknown>, GitHubError> =>
      Effect.gen(function* () {
        const method = route.split(" ")[0] ?? "GET"
        const isRead = method === "GET" || method === "HEAD"
        const cacheKey =
          options.conditional === true && isRead ? `${budgetKey} ${route} ${JSON.stringify(params)}` : undefined
        let unauthorizedRetried = false
        for (let attempt = 1; ; attempt++) {
          // An exhausted budget: wait for its reset (or give up when that is too far away).
          const budget = budgets.get(budgetKey)
          if (budget !== undefined && budget.remaining <= 0) {
            const now = yield* Clock.currentTimeMillis
            if (budget.resetAtMs > now) {
              const wait = budget.resetAtMs - now + 1000
              if (wait > maxWaitMs) {
                return yield* new GitHubRateLimited({
                  route,
                  retryAtMs: budget.resetAtMs,
                  message: `rate limit exhausted until ${new Date(budget.resetAtMs).toISOString()}`
                })
              }
              counters.rateLimitWaits++
              yield* Effect.sleep(Duration.millis(wait))
            }
            budgets.delete(budgetKey)
          }
          const auth = yield* authorization
          const cached = cacheKey === undefined ? undefined : etags.get(cacheKey)
          const headers: Record<string, string> = { ...options.headers, authorization: auth }
          if (cached !== undefined) headers["if-none-match"] = cached.etag
          const result = yield* sendOnce(route, { ...params, headers }, budgetKey)
          if (result._tag === "Ok") {
            const etag = header(result.value.headers, "etag")
            if (cacheKey !== undefined && etag !== undefined) {
              etags.delete(cacheKey)
              etags.set(cacheKey, { etag, response: result.value })
              if (etags.size > ETAG_CACHE_SIZE) {
                const oldest = etags.keys().next().value
                if (oldest !== undefined) etags.delete(oldest)
              }
            }
            return result.value
          }
          const error = result.error
          if (!(error instanceof RequestError)) {
            return yield* new GitHubApiError({ status: 0, route, message: error.message })
          }
          const status = error.status
          if (status === 304 && cached !== undefined && cacheKey !== undefined) {
            counters.notModified++
            etags.delete(cacheKey)
            etags.set(cacheKey, cached)
            return cached.response
          }
          const responseHeaders = error.response?.headers ?? {}
          const apiError = new GitHubApiError({ status, route, message: errorMessage(error), data: errorData(error) })
          if (status === 401 && !unauthorizedRetried) {
            unauthorizedRetried = true
            yield* onUnauthorized
            continue
          }
          if (status === 403 || status === 429) {
            const now = yield* Clock.currentTimeMillis
            const retryAfter = header(responseHeaders, "retry-after")
            const remaining = header(responseHeaders, "x-ratelimit-remaining")
            const reset = header(responseHeaders, "x-ratelimit-reset")
            let waitMs: number | undefined
            if (retryAfter !== undefined && Number.isFinite(Number(retryAfter))) {
              waitMs = Math.max(0, Number(retryAfter) * 1000)
            } else if (remaining === "0" && reset !== undefined) {
              waitMs = Math.max(0, Number(reset) * 1000 - now) + 1000
            } else if (status === 429 || /rate limit/i.test(apiError.message)) {
              waitMs = DEFAULT_SECONDARY_WAIT_MS
            }
            if (waitMs !== undefined) {
              if (waitMs > maxWaitMs || attempt >= maxAttempts) {
                return yield* new GitHubRateLimited({
                  route,
                  retryAtMs: now + waitMs,
                  message: `rate limited (${status}): ${apiError.message}`
                })
              }
              // the wait is done here: forget the exhausted budget so the loop does not wait for it again
              budgets.delete(budgetKey)
              counters.rateLimitWaits++
              yield* Effect.sleep(Duration.millis(waitMs))
              continue
            }
            return yield* apiError
          }
          const transient = status >= 500 || status === 0
          if (transient && isRead && attempt < maxAttempts) {
            yield* Effect.sleep(Duration.millis(200 * 2 ** (attempt - 1)))
            continue
          }
          return yield* apiError
        }
      })

    const jwtAuthorization = Effect.map(appJwt, (t) => `Bearer ${t}`)

    const installationToken = (installationId: number): Effect.Effect<string, GitHubError> =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const hit = (yield* SynchronizedRef.get(tokens)).get(installationId)
        if (hit !== undefined && now < hit.refreshAtMs) return hit.token
        // One exchange at a time; a fiber that waited finds the token its predecessor fetched.
        return yield* SynchronizedRef.modifyEffect(tokens, (map) =>
          Effect.gen(function* () {
            const at = yield* Clock.currentTimeMillis
            const again = map.get(installationId)
            if (again !== undefined && at < again.refreshAtMs) return [again.token, map] as const
            counters.tokenRequests++
            const response = yield* send(
              TOKEN_ROUTE,
              { installation_id: installationId },
              "app",
              jwtAuthorization,
              Effect.sync(() => {
                jwt = undefined
              }),
              {}
            )
            const data = response.data as { token?: unknown; expires_at?: unknown }
            if (typeof data.token !== "string") {
              return yield* new GitHubApiError({
                status: response.status,
                route: TOKEN_ROUTE,
                message: "the answer has no token"
              })
            }
            const expires = typeof data.expires_at === "string" ? Date.parse(data.expires_at) : Number.NaN
            // GitHub's tokens live an hour; without a readable expiry assume that from now.
            const expiresAtMs = Number.isFinite(expires) ? expires : at + 3_600_000
            const next = new Map(map)
            next.set(installationId, {
              token: data.token,
              refreshAtMs: Math.max(at, expiresAtMs - TOKEN_REFRESH_MARGIN_MS)
            })
            return [data.token, next] as const
          })
        )
      })

    const forgetToken = (installationId: number) =>
      SynchronizedRef.update(tokens, (map) => {
        if (!map.has(installationId)) return map
        const next = new Map(map)
        next.delete(installationId)
        return next
      })

    const installationId = (owner: string, repo: string): Effect.Effect<number, GitHubError> =>
      Effect.gen(function* () {
        const k = repoKey(owner, repo)
        const known = installations.get(k)
        if (known !== undefined) return known
        const response = yield* send(
          "GET /repos/{owner}/{repo}/installation",
          { owner, repo },
          "app",
          jwtAuthorization,
          Effect.sync(() => {
            jwt = undefined
          }),
          {}
        )
        const id = (response.data as { id?: unknown }).id
        if (typeof id !== "number") {
          return yield* new GitHubApiError({
            status: response.status,
            route: "GET /repos/{owner}/{repo}/installation",
            message: "the answer has no installation id"
          })
        }
        installations.set(k, id)
        return id
      })

    const forgetRepository = (owner: string, repo: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const k = repoKey(owner, repo)
        const id = installations.get(k)
        installations.delete(k)
        return id === undefined ? Effect.void : forgetToken(id)
      })

    const notConfigured = (route: string) =>
      new GitHubApiError({
        status: 0,
        route,
        message: "GitHub is not configured (GITHUB_APP_ID + key, or GITHUB_TOKEN)"
      })

    const request = <R extends GitHubRoute>(
      route: R,
      params: GitHubParams<R>,
      auth: GitHubAuth,
      options: GitHubRequestOptions = {}
    ): Effect.Effect<GitHubResponse<R>, GitHubError> => {
      const p = params as Record<string, unknown>
      const typed = (effect: Effect.Effect<OctokitResponse<unknown>, GitHubError>) =>
        effect as unknown as Effect.Effect<GitHubResponse<R>, GitHubError>
      if (mode === "none") return Effect.fail(notConfigured(route))
      if (mode === "token") {
        if (auth._tag === "App") {
          return Effect.fail(new GitHubApiError({ status: 0, route, message: "this request needs a GitHub App" }))
        }
        return typed(send(route, p, "token", Effect.succeed(`token ${token}`), Effect.void, options))
      }
      switch (auth._tag) {
        case "App":
          return typed(
            send(
              route,
              p,
              "app",
              jwtAuthorization,
              Effect.sync(() => {
                jwt = undefined
              }),
              options
            )
          )
        case "Installation":
          return typed(
            send(
              route,
              p,
              `installation:${auth.installationId}`,
              Effect.map(installationToken(auth.installationId), (t) => `token ${t}`),
              forgetToken(auth.installationId),
              options
            )
          )
        case "Repository": {
          const viaInstallation = Effect.flatMap(installationId(auth.owner, auth.repo), (id) =>
            send(
              route,
              p,
              `installation:${id}`,
              Effect.map(installationToken(id), (t) => `token ${t}`),
              forgetToken(id),
              options
            )
          )
          // the remembered installation is gone (the App was removed, or installed anew under another id): look the
          // repository's installation up again, once
          return typed(
            viaInstallation.pipe(
              Effect.catchIf(
                (e) =>
                  e._tag === "GitHubApiError" &&
                  e.route === TOKEN_ROUTE &&
                  (e.status === 401 || e.status === 403 || e.status === 404),
                () => Effect.zipRight(forgetRepository(auth.owner, auth.repo), viaInstallation)
              )
            )
          )
        }
      }
    }

    const service: GitHubClientService = {
      mode,
      apiUrl,
      request,
      installationId: (owner, repo) =>
        mode === "app"
          ? installationId(owner, repo)
          : Effect.fail(
              new GitHubApiError({
                status: 0,
                route: "GET /repos/{owner}/{repo}/installation",
                message: "not a GitHub App"
              })
            ),
      rememberInstallation: (owner, repo, id) => Effect.sync(() => void installations.set(repoKey(owner, repo), id)),
      forgetInstallation: forgetRepository,
      stats: Effect.sync(() => ({ ...counters }))
    }
    return service
  })

/** True when the configuration enables the GitHub provider (an App with its key, or a personal access token). */
export const githubConfigured = (c: {
  readonly githubAppId: Option.Option<string>
  readonly githubAppPrivateKey: Option.Option<Redacted.Redacted<string>>
  readonly githubToken: Option.Option<Redacted.Redacted<string>>
}): boolean => (Option.isSome(c.githubAppId) && Option.isSome(c.githubAppPrivateKey)) || Option.isSome(c.githubToken)

/** The client from GitHubEnv's GITHUB_* settings (mode "none" when GitHub is not configured). */
export const GitHubClientLive: Layer.Layer<GitHubClient, GitHubConfigError, GitHubEnv> = Layer.effect(
  GitHubClient,
  Effect.flatMap(GitHubEnv, (c) =>
    makeGitHubClient({
      apiUrl: c.githubApiUrl,
      appId: Option.getOrUndefined(c.githubAppId),
      privateKey: Option.getOrUndefined(Option.map(c.githubAppPrivateKey, Redacted.value)),
      token: Option.getOrUndefined(Option.map(c.githubToken, Redacted.value))
    })
  )
)
