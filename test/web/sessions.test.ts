/**
 * The dashboard's sign-in and its extension endpoints over HTTP (no browser): cookies and their flags, sessions stored
 * hashed and ended by sign-out or by revoking their token, the anti-CSRF header, cross-site form posts, security
 * headers, and tenancy of the extension endpoints.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { createTestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()
const FORM = "application/x-www-form-urlencoded"

for (const db of databases) {
  describe(`dashboard sessions and extension endpoints (${db})`, () => {
    let server: TestServer
    let root: string
    let otherToken: string
    const key = { repo: { host: "local", owner: "acme", name: "web" }, targetBranch: "main" }

    const signIn = async (token: string, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": FORM, ...headers },
        body: form({ token, next: "/repos/local/acme/web/queues/main" })
      })
    const cookieOf = (response: Response) =>
      /greenline_session=([^;]*)/.exec(response.headers.get("set-cookie") ?? "")?.[1]
    const csrfOf = async (cookie: string) => {
      const page = await fetch(`${server.url}/`, { headers: { cookie: `greenline_session=${cookie}` } })
      expect(page.status).toBe(200)
      return /name="greenline-csrf" content="([^"]+)"/.exec(await page.text())?.[1] ?? ""
    }
    const api = (op: string, body: unknown, headers: Record<string, string>) =>
      fetch(`${server.url}/v1/${op}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body)
      })

    beforeAll(async () => {
      root = tempDir("greenline-web-sessions-")
      createTestRepo({ root, repo: key.repo })
      server = await startTestServer({ db, gitRoot: root })
      expect((await server.post("createQueue", key)).status).toBe(200)
      otherToken = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          yield* tenancy.createOrg("other-org")
          yield* tenancy.addRepo("other-org", { host: "local", owner: "other", name: "theirs" })
          return (yield* tenancy.createToken("other-org", "test", "admin")).token
        })
      )
    })
    afterAll(async () => {
      await server?.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test("sign-in: 303 to the page asked for, an HttpOnly SameSite=Lax cookie stored only as its hash", async () => {
      const bad = await signIn("glt_not-a-real-token-at-all-0000")
      expect(bad.status).toBe(401)
      expect(cookieOf(bad)).toBeUndefined()
      expect(await bad.text()).toContain("unknown or revoked")

      const good = await signIn(server.token)
      expect(good.status).toBe(303)
      expect(good.headers.get("location")).toBe("/repos/local/acme/web/queues/main")
      const setCookie = good.headers.get("set-cookie") ?? ""
      expect(setCookie).toContain("HttpOnly")
      expect(setCookie).toContain("SameSite=Lax")
      expect(setCookie).not.toContain("Secure")
      const cookie = cookieOf(good)!
      const stored = await server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ id_hash: Uint8Array }>`select id_hash from web_sessions`)
      )
      const hash = createHash("sha256").update(cookie).digest("hex")
      expect(stored.map((r) => Buffer.from(r.id_hash).toString("hex"))).toContain(hash)

      // a next that leaves the site is not followed
      const away = await fetch(`${server.url}/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": FORM },
        body: form({ token: server.token, next: "//evil.example/x" })
      })
      expect(away.headers.get("location")).toBe("/")
    })

    test("a form posted from another site is refused; pages carry CSP and X-Frame-Options", async () => {
      const cross = await signIn(server.token, { origin: "https://evil.example" })
      expect(cross.status).toBe(403)
      expect(cookieOf(cross)).toBeUndefined()
      const login = await fetch(`${server.url}/login`)
      expect(login.headers.get("content-security-policy")).toContain("script-src 'self'")
      expect(login.headers.get("content-security-policy")).not.toContain("unsafe-inline")
      expect(login.headers.get("x-frame-options")).toBe("DENY")
    })

    test("the session reads and writes the API; a write without the CSRF header is refused and changes nothing", async () => {
      const cookie = cookieOf(await signIn(server.token))!
      const csrf = await csrfOf(cookie)
      expect(csrf.length).toBeGreaterThan(20)
      const session = { cookie: `greenline_session=${cookie}` }
      const noCsrf = await api("updateQueue", { ...key, state: "paused" }, session)
      expect(noCsrf.status).toBe(403)
      expect(((await server.post("getQueue", key)).body as { state: string }).state).toBe("running")
      const paused = await api("updateQueue", { ...key, state: "paused" }, { ...session, "x-csrf-token": csrf })
      expect(paused.status).toBe(200)
      expect(((await server.post("getQueue", key)).body as { state: string }).state).toBe("paused")
      await server.post("updateQueue", { ...key, state: "running" })
      const listed = await api("listQueues", {}, { ...session, "x-csrf-token": csrf })
      expect(
        ((await listed.json()) as { queues: Array<{ repo: { name: string } }> }).queues.map((q) => q.repo.name)
      ).toEqual(["web"])
    })

    test("sign-out needs the CSRF value and ends the session", async () => {
      const cookie = cookieOf(await signIn(server.token))!
      const headers = { cookie: `greenline_session=${cookie}`, "content-type": FORM }
      const refused = await fetch(`${server.url}/logout`, { method: "POST", redirect: "manual", headers, body: "" })
      expect(refused.status).toBe(403)
      const csrf = await csrfOf(cookie)
      const out = await fetch(`${server.url}/logout`, {
        method: "POST",
        redirect: "manual",
        headers,
        body: form({ csrf })
      })
      expect(out.status).toBe(303)
      const page = await fetch(`${server.url}/`, {
        redirect: "manual",
        headers: { cookie: `greenline_session=${cookie}` }
      })
      expect(page.status).toBe(303)
      expect(page.headers.get("location")).toStartWith("/login")
    })

    test("the page's script and style: hashed names, cached for good, gzipped; their weights printed", async () => {
      const cookie = cookieOf(await signIn(server.token))!
      const shell = await (await fetch(`${server.url}/`, { headers: { cookie: `greenline_session=${cookie}` } })).text()
      const names = [...shell.matchAll(/\/assets\/(app-[0-9a-f]{12}\.(?:js|css))/g)].map((m) => m[1]!)
      expect(names.length).toBe(2)
      const weights: string[] = []
      for (const name of names) {
        const r = await fetch(`${server.url}/assets/${name}`, { headers: { "accept-encoding": "gzip" } })
        expect(r.status).toBe(200)
        expect(r.headers.get("content-encoding")).toBe("gzip")
        expect(r.headers.get("cache-control")).toContain("immutable")
        const gz = Number(r.headers.get("content-length"))
        const plain = (await r.arrayBuffer()).byteLength
        weights.push(
          `${name.endsWith(".js") ? "JS" : "CSS"} ${(gz / 1024).toFixed(1)} KiB gzipped (${(plain / 1024).toFixed(1)} KiB)`
        )
      }
      console.log(`dashboard page weight (${db}): ${weights.join(", ")}`)
    })

    test("revoking the token ends its sessions", async () => {
      const created = (await server.post("createApiToken", { name: "short-lived" })).body as {
        id: string
        token: string
      }
      const cookie = cookieOf(await signIn(created.token))!
      const csrf = await csrfOf(cookie)
      expect((await server.post("revokeApiToken", { id: created.id })).status).toBe(200)
      const after = await api("listQueues", {}, { cookie: `greenline_session=${cookie}`, "x-csrf-token": csrf })
      expect(after.status).toBe(401)
    })

    test("extension endpoints are scoped to the caller's organization", async () => {
      const other = { "x-api-token": otherToken }
      expect((await api("getQueueActivity", key, other)).status).toBe(404)
      expect((await api("getQueueHealth", key, other)).status).toBe(404)
      expect((await api("getPullRequestActivity", { repo: key.repo, pr: { number: 1 } }, other)).status).toBe(404)
      expect(
        (
          await api(
            "flaky-tests/get-test-history",
            { repo: key.repo, test_id: "00000000-0000-4000-8000-000000000000" },
            other
          )
        ).status
      ).toBe(404)
      const mine = (await server.post("listApiTokens", {})).body as { tokens: Array<{ id: string }> }
      expect((await api("revokeApiToken", { id: mine.tokens[0]!.id }, other)).status).toBe(404)
      const theirs = (await (await api("listQueues", {}, other)).json()) as { queues: unknown[] }
      expect(theirs.queues).toEqual([])
      // validation as everywhere
      const bad = await server.post("getQueueHealth", { ...key, days: 0 })
      expect(bad.status).toBe(400)
      expect(JSON.stringify(bad.body)).toContain("days")
      // the OpenAPI document lists them
      const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, unknown> }
      for (const path of [
        "/v1/listQueues",
        "/v1/getQueueActivity",
        "/v1/getPullRequestActivity",
        "/v1/getQueueHealth"
      ]) {
        expect(Object.keys(doc.paths)).toContain(path)
      }
    })
  })
}

test("the cookie is Secure when PUBLIC_URL is https", async () => {
  const server = await startTestServer({ db: "pglite", config: { publicUrl: "https://greenline.example" } })
  try {
    const response = await fetch(`${server.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": FORM },
      body: form({ token: server.token })
    })
    expect(response.status).toBe(303)
    expect(response.headers.get("set-cookie")).toContain("; Secure")
  } finally {
    await server.close()
  }
})
