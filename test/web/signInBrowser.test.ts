/**
 * Sign-in in a real browser (Debian's chromium through playwright-core) through a real TLS-terminating proxy
 * (Debian's nginx with a self-signed certificate made by the test, test/support/nginx.ts) in front of the server,
 * which has PUBLIC_URL on the proxy's https address and TRUST_PROXY: with an API token, and as a person through a real
 * OpenID Connect provider (oidc-provider, test/support/oidcProvider.ts). The dashboard shows who is signed in and
 * their role; the cookies are Secure; sign-out ends the session.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Option, Redacted } from "effect"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { parseRoleRules } from "../../src/tenancy/roleRules.ts"
import { reserveProxyPort, startTlsProxy, type TlsProxy } from "../support/nginx.ts"
import { startOidcProvider, type TestProvider } from "../support/oidcProvider.ts"
import { startTestServer, type TestServer } from "../support/server.ts"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

describe("sign-in in Chromium, through nginx with TLS", () => {
  let browser: Browser
  let context: BrowserContext
  let page: Page
  let server: TestServer
  let idp: TestProvider
  let proxy: TlsProxy
  let publicUrl: string
  const outside: Array<string> = []

  beforeAll(async () => {
    const proxyPort = reserveProxyPort()
    publicUrl = `https://127.0.0.1:${proxyPort}`
    idp = await startOidcProvider({ redirectUris: [`${publicUrl}/login/oidc/callback`] })
    idp.accounts.set("alice", { name: "Alice Example", email: "alice@example.com", groups: ["gl-admins"] })
    const rules = parseRoleRules("acme-org:admin=gl-admins; acme-org:read=*")
    if ("error" in rules) throw new Error(rules.error)
    server = await startTestServer({
      db: "pglite",
      config: {
        publicUrl,
        publicUrlConfigured: true,
        trustProxy: true,
        oidcIssuerUrl: Option.some(idp.issuer),
        oidcClientId: Option.some(idp.clientId),
        oidcClientSecret: Option.some(Redacted.make(idp.clientSecret)),
        oidcScopes: "openid profile email groups",
        oidcRoleRules: rules.rules,
        oidcProviderName: "Test provider"
      }
    })
    proxy = await startTlsProxy(server.port, proxyPort)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    })
    // the certificate is the test's own, self-signed
    context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1100, height: 700 } })
    page = await context.newPage()
    page.on("request", (r) => {
      const url = new URL(r.url())
      if (url.origin !== publicUrl && url.origin !== idp.issuer && url.protocol !== "data:") outside.push(r.url())
    })
  })
  afterAll(async () => {
    await context?.close()
    if (browser !== undefined) await Promise.race([browser.close(), Bun.sleep(10_000)])
    await proxy?.stop()
    await server?.close()
    await idp?.close()
  })

  const sessionCookie = async () => (await context.cookies(publicUrl)).find((c) => c.name === "greenline_session")
  const signOut = async () => {
    await Promise.all([page.waitForURL(`${publicUrl}/login`), page.click(".logout button[type=submit]")])
    expect(await sessionCookie()).toBeUndefined()
    const again = await page.goto(`${publicUrl}/settings`)
    expect(again?.url()).toBe(`${publicUrl}/login?next=%2Fsettings`)
  }
  /** The dashboard's own API call with the session (as its pages make them). */
  const listQueues = async () =>
    (await page.evaluate(`(async () => {
      const csrf = document.querySelector('meta[name="greenline-csrf"]').content
      const r = await fetch("/v1/listQueues", {
        method: "POST",
        headers: { "content-type": "application/json", "x-csrf-token": csrf },
        body: "{}"
      })
      return r.status
    })()`)) as unknown

  test("with an API token: the form over https, a Secure cookie, the dashboard with who and role", async () => {
    const first = await page.goto(`${publicUrl}/`)
    expect(page.url()).toBe(`${publicUrl}/login?next=%2F`)
    expect(first?.headers()["strict-transport-security"]).toContain("max-age=")
    await page.fill("#token", server.token)
    await Promise.all([page.waitForURL(`${publicUrl}/`), page.click("form[action='/login'] button[type=submit]")])
    await page.waitForSelector(".top .who")
    expect(await page.textContent(".top .who")).toBe("token bootstrap · admin")
    const cookie = await sessionCookie()
    expect(cookie).toMatchObject({ secure: true, httpOnly: true, sameSite: "Lax" })
    expect(await listQueues()).toBe(200)
    await signOut()
  })

  test("as a person through the identity provider: its page, back with name and role, sign-out", async () => {
    await page.goto(`${publicUrl}/login?next=%2Fsettings`)
    await Promise.all([page.waitForURL(`${idp.issuer}/interaction/**`), page.click("#sso")])
    await page.fill("#login", "alice")
    await Promise.all([page.waitForURL(`${publicUrl}/settings`), page.click("#provider-sign-in")])
    await page.waitForSelector(".top .who")
    expect(await page.textContent(".top .who .actor")).toBe("Alice Example")
    expect(await page.textContent(".top .who .role")).toBe("admin")
    expect(await page.textContent(".top .org")).toBe("acme-org")
    expect(await sessionCookie()).toMatchObject({ secure: true, httpOnly: true })
    // the sign-in's own cookie was cleared on the way back
    expect((await context.cookies(`${publicUrl}/login/oidc/callback`)).some((c) => c.name === "greenline_oidc")).toBe(
      false
    )
    expect(await listQueues()).toBe(200)
    await signOut()
    // a second person, whose groups earn only the rule for everyone
    idp.accounts.set("rob", { name: "Rob Reader", email: "rob@example.com", groups: [] })
    await context.clearCookies()
    await page.goto(`${publicUrl}/login`)
    await Promise.all([page.waitForURL(`${idp.issuer}/interaction/**`), page.click("#sso")])
    await page.fill("#login", "rob")
    await Promise.all([page.waitForURL(`${publicUrl}/`), page.click("#provider-sign-in")])
    await page.waitForSelector(".top .who")
    expect(await page.textContent(".top .who")).toBe("Rob Reader · read")
    expect(outside).toEqual([])
  })
})
