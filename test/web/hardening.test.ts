/**
 * Input hardening and the proxy settings over HTTP (issue 30): `next` accepts only a same-origin path; status and
 * ticket links only http and https; every answer, /docs and /ci/output included, carries the same security headers;
 * /docs loads nothing from elsewhere; behind a TLS-terminating proxy (PUBLIC_URL on https, TRUST_PROXY) a sign-in
 * form is accepted from the https origin and its cookie is Secure. The browser sides: signInBrowser.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { safeNext } from "../../src/web/pages.ts"
import { createTestRepo } from "../support/git.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

const FORM = "application/x-www-form-urlencoded"
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()

/** Every `next` that must not leave the site, as the attacker would send it (raw in a query, or a form value). */
const HOSTILE_NEXT = [
  "/\t/evil.example/",
  "/\t/evil.example/x?y=1",
  "//x",
  "//evil.example/",
  "/\\x",
  "/\\/evil.example",
  "\\\\evil.example",
  "/\n/evil.example",
  "/\r/evil.example",
  "/x\r\nSet-Cookie: a=b",
  "/x\u0000",
  "/x\u007f",
  "/x\u2028",
  "%0a",
  "%0d",
  "%0d%0aSet-Cookie:%20a=b",
  "javascript:alert(1)",
  "JavaScript:alert(1)",
  "data:text/html,<script>alert(1)</script>",
  "https://evil.example/",
  "http:evil.example",
  "evil.example",
  "",
  " /x",
  `/${"a".repeat(3000)}`
]

describe("next: only a same-origin path", () => {
  test("hostile values become /", () => {
    for (const next of HOSTILE_NEXT) expect({ next, safe: safeNext(next) }).toEqual({ next, safe: "/" })
    expect(safeNext(undefined)).toBe("/")
    expect(safeNext(null)).toBe("/")
  })
  test("local paths stay, URL-serialized (ASCII only)", () => {
    expect(safeNext("/")).toBe("/")
    expect(safeNext("/repos/local/acme/web/queues/main?branch=a#x")).toBe(
      "/repos/local/acme/web/queues/main?branch=a#x"
    )
    expect(safeNext("/repos/x/%2F%2Fy")).toBe("/repos/x/%2F%2Fy")
    expect(safeNext("/é€")).toBe("/%C3%A9%E2%82%AC")
    expect(safeNext("/a/../b")).toBe("/b")
    // dot segments cannot climb to another authority
    expect(safeNext("/..//evil.example")).toBe("/")
  })
})

describe("over HTTP", () => {
  let server: TestServer
  let root: string
  const repo = { host: "local", owner: "acme", name: "web" }
  const key = { repo, targetBranch: "main" }

  beforeAll(async () => {
    root = tempDir("greenline-hardening-")
    createTestRepo({ root, repo })
    server = await startTestServer({ db: "pglite", gitRoot: root })
    expect((await server.post("createQueue", key)).status).toBe(200)
  })
  afterAll(async () => {
    await server?.close()
    fs.rmSync(root, { recursive: true, force: true })
  })

  test("POST /login: a hostile next redirects to /, never 500", async () => {
    for (const next of HOSTILE_NEXT) {
      const response = await fetch(`${server.url}/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": FORM },
        body: form({ token: server.token, next })
      })
      expect({ next, status: response.status, location: response.headers.get("location") }).toEqual({
        next,
        status: 303,
        location: "/"
      })
    }
    // the issue's own request, its tab percent-encoded in the body as a browser sends it
    const raw = await fetch(`${server.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": FORM },
      body: `token=${encodeURIComponent(server.token)}&next=/%09/evil.example/`
    })
    expect(raw.headers.get("location")).toBe("/")
    const newline = await fetch(`${server.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": FORM },
      body: `token=${encodeURIComponent(server.token)}&next=/x%0d%0aSet-Cookie:%20a=b`
    })
    expect(newline.status).toBe(303)
    expect(newline.headers.get("location")).toBe("/")
    // a wrong token keeps the page, with the safe next in its form
    const wrong = await fetch(`${server.url}/login`, {
      method: "POST",
      headers: { "content-type": FORM },
      body: form({ token: "glt_not-a-token-of-anyone-0000000", next: "//evil.example" })
    })
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).toContain('name="next" value="/"')
  })

  test("GET /login?next=…: the form carries / for a hostile next, never 500", async () => {
    for (const query of [
      "/%09/evil.example/",
      "//x",
      "/%5Cx",
      "%0a",
      "%0d",
      "/%0a/x",
      "javascript:alert(1)",
      "%E0%A4%A"
    ]) {
      const response = await fetch(`${server.url}/login?next=${query}`)
      expect({ query, status: response.status }).toEqual({ query, status: 200 })
      expect(await response.text()).toContain('name="next" value="/"')
    }
    const kept = await fetch(`${server.url}/login?next=${encodeURIComponent("/repos/local/acme/web?x=1&y=<b>")}`)
    expect(await kept.text()).toContain('name="next" value="/repos/local/acme/web?x=1&amp;y=%3Cb%3E"')
  })

  test("status and ticket links: only http and https", async () => {
    const sha = "0".repeat(40)
    for (const url of [
      "javascript:alert(1)",
      "JAVASCRIPT:alert(1)",
      "data:text/html,x",
      "vbscript:x",
      "/relative",
      "ftp://x/y"
    ]) {
      const status = await server.post("reportStatus", { repo, sha, context: "ci", state: "success", targetUrl: url })
      expect({ url, status: status.status }).toEqual({ url, status: 400 })
      expect(JSON.stringify(status.body)).toContain("targetUrl")
      const ticket = await server.post("flaky-tests/link-ticket-to-test-case", {
        repo,
        test_case_id: randomUUID(),
        external_ticket_id: "PAY-1",
        html_url: url
      })
      expect({ url, status: ticket.status }).toEqual({ url, status: 400 })
      const override = await server.post("flaky-tests/set-quarantine-override", {
        repo,
        org_url_slug: "acme-org",
        test_case_id: randomUUID(),
        override: "always_quarantine",
        ticket_url: url
      })
      expect({ url, status: override.status }).toEqual({ url, status: 400 })
    }
    const ok = await server.post("reportStatus", {
      repo,
      sha,
      context: "ci",
      state: "success",
      targetUrl: "https://ci.example/runs/1"
    })
    expect(ok.status).toBe(200)
    // past validation: a well-formed link for a test that does not exist
    const ticket = await server.post("flaky-tests/link-ticket-to-test-case", {
      repo,
      test_case_id: randomUUID(),
      external_ticket_id: "PAY-1",
      html_url: "https://tracker.example/PAY-1"
    })
    expect(ticket.status).toBe(404)
  })

  test("every answer carries the same security headers: pages, /docs, /ci/output, the API, errors", async () => {
    const outputId = randomUUID()
    await server.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const tenancy = yield* Tenancy
        const org = yield* tenancy.findOrg("acme-org")
        const found = yield* tenancy.findRepo(Option.getOrThrow(org), repo)
        yield* sql`insert into ci_outputs (id, run_id, repo_id, sha, exit_code, output)
                   values (${outputId}, 'run-1', ${Option.getOrThrow(found).id}, 'abc', 0, '<script>alert(1)</script>')`
      })
    )
    const login = await fetch(`${server.url}/login`)
    const dashboardCsp = login.headers.get("content-security-policy")!
    expect(dashboardCsp).toContain("frame-ancestors 'none'")
    const paths = [
      "/login",
      "/",
      "/docs",
      "/docs/redoc.standalone.js",
      `/ci/output/${outputId}`,
      `/ci/output/${randomUUID()}`,
      "/v1/openapi.json",
      "/healthz",
      "/readyz",
      "/metrics",
      "/cli/greenline.mjs",
      "/assets/app.css",
      "/no/such/page",
      "/webhooks/github"
    ]
    for (const p of paths) {
      const response = await fetch(`${server.url}${p}`, { redirect: "manual" })
      const h = (name: string) => response.headers.get(name)
      expect({
        p,
        frame: h("x-frame-options"),
        nosniff: h("x-content-type-options"),
        referrer: h("referrer-policy")
      }).toEqual({ p, frame: "DENY", nosniff: "nosniff", referrer: "same-origin" })
      const csp = h("content-security-policy") ?? ""
      // /docs differs only where Redoc needs it: its run-time <style> elements and its search worker
      if (p === "/docs") {
        expect(csp).toContain("style-src 'self' 'unsafe-inline'")
        expect(csp).toContain("script-src 'self';")
        expect(csp).toContain("frame-ancestors 'none'")
      } else expect({ p, csp }).toEqual({ p, csp: dashboardCsp })
      await response.arrayBuffer()
    }
    const output = await fetch(`${server.url}/ci/output/${outputId}`)
    expect(output.headers.get("content-type")).toStartWith("text/plain")
    // the API's answers too
    const api = await fetch(`${server.url}/v1/getQueue`, { method: "POST", body: "{}" })
    expect(api.status).toBe(401)
    expect(api.headers.get("x-frame-options")).toBe("DENY")
  })

  test("/docs names nothing outside the server: no CDN logo in the page or the bundle it loads", async () => {
    const page = await (await fetch(`${server.url}/docs`)).text()
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//)
    const bundle = await (await fetch(`${server.url}/docs/redoc.standalone.js`)).text()
    expect(bundle).not.toContain("cdn.redoc.ly")
  })
})

describe("behind a TLS-terminating proxy", () => {
  const signIn = (server: TestServer, headers: Record<string, string>) =>
    fetch(`${server.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": FORM, ...headers },
      body: form({ token: server.token, next: "/" })
    })

  test("PUBLIC_URL on https and TRUST_PROXY: the https origin is accepted, the cookie is Secure; others are refused", async () => {
    const server = await startTestServer({
      db: "pglite",
      config: { publicUrl: "https://greenline.example", publicUrlConfigured: true, trustProxy: true }
    })
    try {
      const accepted = await signIn(server, {
        origin: "https://greenline.example",
        "x-forwarded-proto": "https",
        "x-forwarded-host": "greenline.example",
        "x-forwarded-for": "203.0.113.7"
      })
      expect(accepted.status).toBe(303)
      const cookie = accepted.headers.get("set-cookie") ?? ""
      expect(cookie).toContain("greenline_session=")
      expect(cookie).toContain("; Secure")
      expect(cookie).toContain("HttpOnly")
      expect(accepted.headers.get("strict-transport-security")).toContain("max-age=")
      // the http origin the server itself sees, and any other site, are refused, and say what was expected
      for (const origin of ["http://greenline.example", server.url, "https://evil.example"]) {
        const refused = await signIn(server, { origin, "x-forwarded-proto": "https" })
        expect({ origin, status: refused.status }).toEqual({ origin, status: 403 })
        expect(refused.headers.get("set-cookie")).toBeNull()
        expect(await refused.text()).toContain("https://greenline.example")
      }
      // a browser that says the post is cross-site
      const crossSite = await signIn(server, { origin: "https://greenline.example", "sec-fetch-site": "cross-site" })
      expect(crossSite.status).toBe(403)
    } finally {
      await server.close()
    }
  })

  test("PUBLIC_URL unset: TRUST_PROXY makes the forwarded origin count, and the cookie Secure; without it, not", async () => {
    const trusting = await startTestServer({ db: "pglite", config: { trustProxy: true } })
    const host = new URL(trusting.url).host
    try {
      const accepted = await signIn(trusting, { origin: `https://${host}`, "x-forwarded-proto": "https" })
      expect(accepted.status).toBe(303)
      expect(accepted.headers.get("set-cookie")).toContain("; Secure")
      const direct = await signIn(trusting, { origin: trusting.url })
      expect(direct.status).toBe(303)
      expect(direct.headers.get("set-cookie")).not.toContain("Secure")
    } finally {
      await trusting.close()
    }
    const plain = await startTestServer({ db: "pglite" })
    try {
      const host2 = new URL(plain.url).host
      // X-Forwarded-Proto from anyone does not count without TRUST_PROXY
      const refused = await signIn(plain, { origin: `https://${host2}`, "x-forwarded-proto": "https" })
      expect(refused.status).toBe(403)
      const accepted = await signIn(plain, { origin: plain.url, "x-forwarded-proto": "https" })
      expect(accepted.status).toBe(303)
      expect(accepted.headers.get("set-cookie")).not.toContain("Secure")
    } finally {
      await plain.close()
    }
  })
})
