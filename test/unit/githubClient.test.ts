/**
 * GitHubClient against the simulated GitHub (test/support/github/sim.ts): App authentication (JWT -> installation
 * token, cached, refreshed before it expires and after it was revoked), a personal access token, rate limits
 * (secondary limits with retry-after, an exhausted primary budget), conditional requests, typed errors. Every request
 * is checked against GitHub's OpenAPI description by the simulator (`violations()`).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Either, Fiber, TestClock, TestContext } from "effect"
import {
  GitHubAuth,
  type GitHubClientConfig,
  type GitHubClientService,
  makeGitHubClient,
  TOKEN_REFRESH_MARGIN_MS
} from "../../src/github/GitHubClient.ts"
import { type GitHubSim, startGitHubSim } from "../support/github/sim.ts"

let sim: GitHubSim
let repo: { owner: string; name: string }

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const client = (config: Partial<GitHubClientConfig> = {}): Promise<GitHubClientService> =>
  run(makeGitHubClient({ apiUrl: sim.url, appId: String(sim.appId), privateKey: sim.privateKeyPem, ...config }))

const listPulls = (c: GitHubClientService, options: { conditional?: boolean } = {}) =>
  c.request(
    "GET /repos/{owner}/{repo}/pulls",
    { owner: repo.owner, repo: repo.name, state: "open", per_page: 100 },
    GitHubAuth.repository(repo.owner, repo.name),
    options
  )

beforeAll(async () => {
  sim = await startGitHubSim({ webhookSecret: "secret", tokenLifetimeSeconds: 3600 })
  repo = await sim.createRepo("acme", "client", { "README.md": "hello\n" })
  await sim.installApp("acme", ["client"])
  await sim.openPullRequest({ ...repo, title: "First", user: "alice" })
})

afterAll(async () => {
  expect(sim.violations()).toEqual([])
  await sim.stop()
})

describe("GitHubClient", () => {
  test("App: the JWT finds the installation, its token is exchanged once and reused", async () => {
    sim.clearRequests()
    const c = await client()
    expect(c.mode).toBe("app")
    const first = await run(listPulls(c))
    const second = await run(listPulls(c))
    expect(first.data.map((p) => p.title)).toEqual(["First"])
    expect(second.status).toBe(200)
    const requests = sim.requests()
    expect(requests.map((r) => `${r.route} ${r.auth} ${r.status}`)).toEqual([
      "GET /repos/{owner}/{repo}/installation app 200",
      "POST /app/installations/{installation_id}/access_tokens app 201",
      "GET /repos/{owner}/{repo}/pulls installation 200",
      "GET /repos/{owner}/{repo}/pulls installation 200"
    ])
    expect((await run(c.stats)).tokenRequests).toBe(1)
    // the App itself (JWT)
    const installations = await run(c.request("GET /app/installations", {}, GitHubAuth.app))
    expect(installations.data.map((i) => i.account?.login ?? "")).toContain("acme")
  })

  test("App: the private key as a PKCS#8 PEM file path", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "greenline-key-"))
    const file = path.join(dir, "app.pem")
    fs.writeFileSync(file, sim.privateKeyPkcs8Pem)
    try {
      const c = await client({ privateKey: file })
      expect((await run(listPulls(c))).data).toHaveLength(1)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test("App: a key that is not an RSA PEM is a GitHubConfigError naming the problem, not the key", async () => {
    const result = await run(
      Effect.either(makeGitHubClient({ apiUrl: sim.url, appId: "1", privateKey: "-----BEGIN PRIVATE KEY-----\nnope" }))
    )
    expect(Either.isLeft(result) && result.left._tag).toBe("GitHubConfigError")
    const missing = await run(
      Effect.either(makeGitHubClient({ apiUrl: sim.url, appId: "1", privateKey: "/no/such.pem" }))
    )
    expect(Either.isLeft(missing) && missing.left.message).toContain("neither PEM text nor a readable file")
  })

  test("App: the token is refreshed shortly before it expires (Effect's clock), not before", async () => {
    // tokens that live 6 minutes: refreshed from 1 minute after they were issued
    const lifetime = TOKEN_REFRESH_MARGIN_MS + 60_000
    const local = await startGitHubSim({ webhookSecret: "s", tokenLifetimeSeconds: lifetime / 1000 })
    try {
      const r = await local.createRepo("acme", "clock", {})
      await local.installApp("acme", ["clock"])
      const c = await run(
        makeGitHubClient({ apiUrl: local.url, appId: String(local.appId), privateKey: local.privateKeyPem })
      )
      const list = c.request(
        "GET /repos/{owner}/{repo}/pulls",
        { owner: r.owner, repo: r.name },
        GitHubAuth.repository(r.owner, r.name)
      )
      const tokens = () => local.requests().filter((q) => q.route?.endsWith("/access_tokens")).length
      await run(
        Effect.gen(function* () {
          yield* TestClock.setTime(Date.now())
          yield* list
          expect(tokens()).toBe(1)
          yield* TestClock.adjust("50 seconds")
          yield* list
          expect(tokens()).toBe(1)
          yield* TestClock.adjust("11 seconds")
          yield* list
          expect(tokens()).toBe(2)
        }).pipe(Effect.provide(TestContext.TestContext))
      )
      expect(local.violations()).toEqual([])
    } finally {
      await local.stop()
    }
  })

  test("App: a revoked (expired) token is replaced once and the request goes through", async () => {
    const c = await client()
    await run(listPulls(c))
    sim.expireTokens()
    sim.clearRequests()
    const again = await run(listPulls(c))
    expect(again.status).toBe(200)
    expect(sim.requests().map((r) => `${r.route} ${r.status}`)).toEqual([
      "GET /repos/{owner}/{repo}/pulls 401",
      "POST /app/installations/{installation_id}/access_tokens 201",
      "GET /repos/{owner}/{repo}/pulls 200"
    ])
  })

  test("App: installed anew (another installation id): the repository's installation is looked up again", async () => {
    const r = await sim.createRepo("other", "moved", {})
    const first = await sim.installApp("other", ["moved"])
    const c = await client()
    const list = c.request(
      "GET /repos/{owner}/{repo}/pulls",
      { owner: "other", repo: "moved" },
      GitHubAuth.repository(r.owner, r.name)
    )
    await run(list)
    expect(await run(c.installationId("other", "moved"))).toBe(first)
    await sim.uninstallApp("other")
    const second = await sim.installApp("other", ["moved"])
    expect(second).not.toBe(first)
    sim.clearRequests()
    expect((await run(list)).status).toBe(200)
    expect(await run(c.installationId("other", "moved"))).toBe(second)
    expect(sim.requests().map((q) => `${q.route} ${q.status}`)).toEqual([
      "GET /repos/{owner}/{repo}/pulls 401",
      "POST /app/installations/{installation_id}/access_tokens 404",
      "GET /repos/{owner}/{repo}/installation 200",
      "POST /app/installations/{installation_id}/access_tokens 201",
      "GET /repos/{owner}/{repo}/pulls 200"
    ])
  })

  test("App: a repository the App is not installed on is a 404 on the installation lookup", async () => {
    await sim.createRepo("acme", "elsewhere", {})
    const c = await client()
    const result = await run(
      Effect.either(
        c.request(
          "GET /repos/{owner}/{repo}/pulls",
          { owner: "acme", repo: "elsewhere" },
          GitHubAuth.repository("acme", "elsewhere")
        )
      )
    )
    expect(Either.isLeft(result) && result.left).toMatchObject({
      _tag: "GitHubApiError",
      status: 404,
      route: "GET /repos/{owner}/{repo}/installation"
    })
  })

  test("personal access token: every repository request carries it; App routes are refused locally", async () => {
    const token = sim.createPersonalToken("bob")
    const c = await run(makeGitHubClient({ apiUrl: sim.url, token }))
    expect(c.mode).toBe("token")
    sim.clearRequests()
    expect((await run(listPulls(c))).data).toHaveLength(1)
    expect(sim.requests().map((r) => `${r.route} ${r.auth}`)).toEqual(["GET /repos/{owner}/{repo}/pulls pat"])
    const app = await run(Effect.either(c.request("GET /app/installations", {}, GitHubAuth.app)))
    expect(Either.isLeft(app) && app.left).toMatchObject({ _tag: "GitHubApiError", status: 0 })
    expect(sim.requests()).toHaveLength(1)
  })

  test("not configured: requests fail without being sent", async () => {
    const c = await run(makeGitHubClient({ apiUrl: sim.url }))
    expect(c.mode).toBe("none")
    const result = await run(Effect.either(listPulls(c)))
    expect(Either.isLeft(result) && result.left.message).toContain("not configured")
  })

  test("errors are typed: status, route and GitHub's message", async () => {
    const c = await client()
    const result = await run(
      Effect.either(
        c.request(
          "GET /repos/{owner}/{repo}/pulls/{pull_number}",
          { owner: repo.owner, repo: repo.name, pull_number: 999 },
          GitHubAuth.repository(repo.owner, repo.name)
        )
      )
    )
    expect(Either.isLeft(result) && result.left).toMatchObject({
      _tag: "GitHubApiError",
      status: 404,
      route: "GET /repos/{owner}/{repo}/pulls/{pull_number}",
      message: "Not Found"
    })
  })

  test("conditional requests: an unchanged listing is a 304 answered from the cache; a change is seen", async () => {
    const c = await client()
    const first = await run(listPulls(c, { conditional: true }))
    sim.clearRequests()
    const second = await run(listPulls(c, { conditional: true }))
    expect(sim.requests().map((r) => r.status)).toEqual([304])
    expect(second.data).toEqual(first.data)
    expect((await run(c.stats)).notModified).toBe(1)
    await sim.openPullRequest({ ...repo, title: "Second", user: "alice" })
    const third = await run(listPulls(c, { conditional: true }))
    expect(third.data.map((p) => p.title).sort()).toEqual(["First", "Second"])
  })

  for (const status of [403, 429] as const) {
    test(`secondary rate limit (${status} + retry-after): waits, then retries`, async () => {
      const c = await client()
      await run(listPulls(c))
      sim.clearRequests()
      sim.secondaryRateLimit(2, { status, retryAfterSeconds: 1 })
      // the waits are on Effect's clock: move it (in steps, while the requests go out) instead of sleeping
      const result = await run(
        Effect.gen(function* () {
          yield* TestClock.setTime(Date.now())
          const fiber = yield* Effect.fork(listPulls(c))
          for (let i = 0; i < 1000 && sim.requests().length < 3; i++) {
            yield* TestClock.adjust("200 millis")
            yield* Effect.promise(() => Bun.sleep(2))
          }
          return yield* Fiber.join(fiber)
        }).pipe(Effect.provide(TestContext.TestContext))
      )
      expect(result.status).toBe(200)
      expect(sim.requests().map((r) => r.status)).toEqual([status, status, 200])
      expect((await run(c.stats)).rateLimitWaits).toBe(2)
    })
  }

  test("secondary rate limit: retries are bounded, then GitHubRateLimited", async () => {
    const c = await client({ maxAttempts: 2 })
    await run(listPulls(c))
    sim.secondaryRateLimit(5, { status: 429, retryAfterSeconds: 0 })
    sim.clearRequests()
    const result = await run(Effect.either(listPulls(c)))
    expect(Either.isLeft(result) && result.left._tag).toBe("GitHubRateLimited")
    expect(sim.requests()).toHaveLength(2)
    sim.secondaryRateLimit(0)
  })

  test("secondary rate limit: a retry-after longer than the longest wait fails at once", async () => {
    const c = await client({ maxRateLimitWaitMs: 5_000 })
    await run(listPulls(c))
    sim.secondaryRateLimit(1, { status: 403, retryAfterSeconds: 60 })
    const result = await run(Effect.either(listPulls(c)))
    expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "GitHubRateLimited" })
  })

  test("primary budget exhausted: GitHubRateLimited until the reset, and later requests are not sent", async () => {
    const c = await client({ maxRateLimitWaitMs: 10_000 })
    await run(listPulls(c))
    sim.setRateLimitRemaining(0)
    sim.clearRequests()
    const before = Date.now()
    const result = await run(Effect.either(listPulls(c)))
    expect(Either.isLeft(result) && result.left._tag).toBe("GitHubRateLimited")
    if (Either.isLeft(result) && result.left._tag === "GitHubRateLimited") {
      expect(result.left.retryAtMs).toBeGreaterThan(before)
    }
    expect(sim.requests().map((r) => r.status)).toEqual([403])
    // the budget is known to be empty: the next request is refused without asking GitHub
    const again = await run(Effect.either(listPulls(c)))
    expect(Either.isLeft(again) && again.left._tag).toBe("GitHubRateLimited")
    expect(sim.requests()).toHaveLength(1)
    sim.setRateLimitRemaining(5000)
  })

  test("a request GitHub never answers is abandoned after the request timeout, its connection aborted", async () => {
    let aborted = 0
    // GitHub answers everything but the pull request list, which it leaves hanging
    const hanging = ((input: string | URL | Request, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input)
      if (!new URL(url).pathname.endsWith("/pulls")) return fetch(input, init)
      return new Promise<Response>((_, reject) => {
        init?.signal?.addEventListener("abort", () => {
          aborted++
          reject(new DOMException("aborted", "AbortError"))
        })
      })
    }) as typeof fetch
    const c = await client({ fetch: hanging, requestTimeoutMs: 300 })
    const result = await run(Effect.either(listPulls(c)))
    expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "GitHubApiError", status: 0 })
    expect(Either.isLeft(result) && result.left.message).toContain("did not answer within 0.3 s")
    expect(aborted).toBe(1)
  })
})
