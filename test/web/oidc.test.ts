/**
 * People's sign-in with OpenID Connect over HTTP, against a real provider (oidc-provider on a loopback port,
 * test/support/oidcProvider.ts): the authorization request (PKCE S256, state, nonce), the callback, the role mapped
 * from the `groups` claim per organization, a wrong state, an expired code, a replayed callback, sign-out, and a
 * person whose group loses the role (read again after OIDC_REFRESH_SECONDS). The same in Chromium:
 * signInBrowser.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import { parseRoleRules, type RoleRule } from "../../src/tenancy/roleRules.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { startOidcProvider, type TestProvider } from "../support/oidcProvider.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

const RULES =
  "acme-org:admin=gl-admins; acme-org:write=developers; acme-org:read=acme:readers; other-org:maintain=other-team"
const rules = (): ReadonlyArray<RoleRule> => {
  const parsed = parseRoleRules(RULES)
  if ("error" in parsed) throw new Error(parsed.error)
  return parsed.rules
}

/** A server with OIDC configured against `provider`, on a port chosen first (PUBLIC_URL names it). */
const startOidcServer = async (
  db: "pglite" | "postgres",
  provider: (redirectUri: string) => Promise<TestProvider>,
  extra: { readonly refreshSeconds?: number } = {}
) => {
  const port = freePort()
  const publicUrl = `http://127.0.0.1:${port}`
  const idp = await provider(`${publicUrl}/login/oidc/callback`)
  const server = await startTestServer({
    db,
    config: {
      port,
      publicUrl,
      publicUrlConfigured: true,
      oidcIssuerUrl: Option.some(idp.issuer),
      oidcClientId: Option.some(idp.clientId),
      oidcClientSecret: Option.some(Redacted.make(idp.clientSecret)),
      oidcScopes: "openid profile email groups",
      oidcRoleClaim: "groups",
      oidcRoleRules: rules(),
      oidcRefreshSeconds: extra.refreshSeconds ?? 300,
      oidcProviderName: "Test provider"
    }
  })
  await server.run(Effect.flatMap(Tenancy, (t) => Effect.asVoid(t.createOrg("other-org"))))
  return { server, idp, publicUrl }
}

const cookieValue = (response: Response, name: string) => {
  for (const c of response.headers.getSetCookie()) {
    const m = new RegExp(`^${name}=([^;]*)`).exec(c)
    if (m !== null) return { value: m[1]!, header: c }
  }
  return undefined
}

for (const db of databases) {
  describe(`sign-in with OpenID Connect (${db})`, () => {
    let server: TestServer
    let idp: TestProvider
    let publicUrl: string

    beforeAll(async () => {
      const started = await startOidcServer(db, (redirectUri) => startOidcProvider({ redirectUris: [redirectUri] }), {
        refreshSeconds: 1
      })
      server = started.server
      idp = started.idp
      publicUrl = started.publicUrl
      idp.accounts.set("alice", { name: "Alice Example", email: "alice@example.com", groups: ["gl-admins"] })
      idp.accounts.set("bob", { name: "Bob Builder", email: "bob@example.com", groups: ["developers", "x"] })
      idp.accounts.set("rita", { name: "Rita Reader", email: "rita@example.com", groups: ["acme:readers"] })
      idp.accounts.set("carol", { name: "Carol Nobody", email: "carol@example.com", groups: ["nobody"] })
      idp.accounts.set("olga", {
        name: "Olga Both",
        email: "olga@example.com",
        groups: ["other-team", "developers"]
      })
    })
    afterAll(async () => {
      await server?.close()
      await idp?.close()
    })

    /** GET /login/oidc: the redirect to the provider and the cookie that finds this sign-in on its return. */
    const start = async (query: Record<string, string> = {}) => {
      const response = await fetch(`${publicUrl}/login/oidc?${new URLSearchParams(query)}`, { redirect: "manual" })
      expect(response.status).toBe(303)
      const cookie = cookieValue(response, "greenline_oidc")
      expect(cookie).toBeDefined()
      return { location: response.headers.get("location")!, cookie: cookie!.value, setCookie: cookie!.header }
    }
    const callback = (url: URL | string, oidcCookie: string | undefined) =>
      fetch(url, {
        redirect: "manual",
        headers: oidcCookie === undefined ? {} : { cookie: `greenline_oidc=${oidcCookie}` }
      })
    /** The whole sign-in of `login`: the session cookie, or the callback's answer when there is none. */
    const signIn = async (login: string, query: Record<string, string> = {}) => {
      const s = await start(query)
      const back = await idp.signIn(s.location, login)
      const response = await callback(back, s.cookie)
      return { response, session: cookieValue(response, "greenline_session")?.value }
    }
    const shell = async (session: string) => {
      const page = await fetch(`${publicUrl}/`, {
        redirect: "manual",
        headers: { cookie: `greenline_session=${session}` }
      })
      if (page.status !== 200) return { status: page.status, location: page.headers.get("location") }
      const text = await page.text()
      const meta = (name: string) => new RegExp(`name="${name}" content="([^"]*)"`).exec(text)?.[1]
      return {
        status: 200,
        actor: meta("greenline-actor"),
        kind: meta("greenline-actor-kind"),
        role: meta("greenline-role"),
        org: meta("greenline-org"),
        csrf: meta("greenline-csrf")
      }
    }

    test("the sign-in page offers the provider; the authorization request has PKCE (S256), state and nonce", async () => {
      const login = await (await fetch(`${publicUrl}/login?next=/settings`)).text()
      expect(login).toContain("Sign in with Test provider")
      // one link per organization the rules name
      expect(login).toContain(`href="/login/oidc?next=%2Fsettings&amp;org=acme-org"`)
      expect(login).toContain(`href="/login/oidc?next=%2Fsettings&amp;org=other-org"`)
      expect(login).toContain('id="token"')

      const s = await start({ next: "/settings" })
      const to = new URL(s.location)
      expect(to.origin).toBe(idp.issuer)
      expect(to.searchParams.get("client_id")).toBe(idp.clientId)
      expect(to.searchParams.get("redirect_uri")).toBe(`${publicUrl}/login/oidc/callback`)
      expect(to.searchParams.get("response_type")).toBe("code")
      expect(to.searchParams.get("scope")).toBe("openid profile email groups")
      expect(to.searchParams.get("code_challenge_method")).toBe("S256")
      expect(to.searchParams.get("code_challenge")?.length).toBeGreaterThanOrEqual(43)
      expect(to.searchParams.get("state")?.length).toBeGreaterThanOrEqual(20)
      expect(to.searchParams.get("nonce")?.length).toBeGreaterThanOrEqual(20)
      expect(s.setCookie).toContain("Path=/login/oidc")
      expect(s.setCookie).toContain("HttpOnly")
      expect(s.setCookie).toContain("SameSite=Lax")
      // the verifier is kept by the server, never sent to the browser
      expect(s.location).not.toContain("code_verifier")
    })

    test("sign-in: the person's session, their name and role on the dashboard, stored without a token", async () => {
      const { response, session } = await signIn("alice", { next: "/settings" })
      expect(response.status).toBe(303)
      expect(response.headers.get("location")).toBe("/settings")
      expect(session).toBeDefined()
      // the sign-in's own cookie is cleared
      expect(cookieValue(response, "greenline_oidc")?.header).toContain("Max-Age=0")
      const page = await shell(session!)
      expect(page).toMatchObject({
        status: 200,
        actor: "Alice Example",
        kind: "person",
        role: "admin",
        org: "acme-org"
      })
      const rows = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ subject: string; role: string; token_hash: Uint8Array | null }>`
            select subject, role, token_hash from web_sessions where subject is not null`
        )
      )
      expect(rows.find((r) => r.subject === "alice")).toMatchObject({ role: "admin", token_hash: null })
      // the session works the API as the dashboard does
      const listed = await fetch(`${publicUrl}/v1/listQueues`, {
        method: "POST",
        headers: {
          cookie: `greenline_session=${session}`,
          "content-type": "application/json",
          "x-csrf-token": page.csrf!
        },
        body: "{}"
      })
      expect(listed.status).toBe(200)
    })

    test("role mapping: the highest role a person's groups earn, per organization; none, no session", async () => {
      const bob = await signIn("bob")
      expect(await shell(bob.session!)).toMatchObject({ actor: "Bob Builder", role: "write", org: "acme-org" })
      const rita = await signIn("rita")
      expect(await shell(rita.session!)).toMatchObject({ role: "read", org: "acme-org" })

      // a person in two organizations: the first the rules name, or the one asked for
      const olga = await signIn("olga")
      expect(await shell(olga.session!)).toMatchObject({ role: "write", org: "acme-org" })
      const olgaOther = await signIn("olga", { org: "other-org" })
      expect(await shell(olgaOther.session!)).toMatchObject({ role: "maintain", org: "other-org" })
      // an organization they have no role in
      const bobOther = await signIn("bob", { org: "other-org" })
      expect(bobOther.response.status).toBe(403)
      expect(bobOther.session).toBeUndefined()
      expect(await bobOther.response.text()).toContain("Bob Builder has no role in the organization other-org")

      const carol = await signIn("carol")
      expect(carol.response.status).toBe(403)
      expect(carol.session).toBeUndefined()
      const why = await carol.response.text()
      expect(why).toContain("Carol Nobody has no role in any organization")
      // and why: the claim's values, which no rule names
      expect(why).toContain("their groups (&quot;nobody&quot;) match no rule")
    })

    test("a wrong state is refused and creates no session; the sign-in cannot be completed after it", async () => {
      const s = await start()
      const back = await idp.signIn(s.location, "alice")
      const forged = new URL(back)
      forged.searchParams.set("state", "not-the-state-this-browser-was-given")
      const refused = await callback(forged, s.cookie)
      expect(refused.status).toBe(400)
      expect(cookieValue(refused, "greenline_session")).toBeUndefined()
      expect(await refused.text()).toContain("state does not match")
      // the pending sign-in was used up: the genuine answer is refused too
      const again = await callback(back, s.cookie)
      expect(again.status).toBe(400)
      expect(cookieValue(again, "greenline_session")).toBeUndefined()
      // a callback without this browser's cookie (a login CSRF: someone else's code) is refused
      const s2 = await start()
      const other = await idp.signIn(s2.location, "alice")
      const noCookie = await callback(other, undefined)
      expect(noCookie.status).toBe(400)
      expect(await noCookie.text()).toContain("not started in this browser")
    })

    test("an expired code is refused by the provider, and no session is created", async () => {
      idp.setCodeTtl(1)
      try {
        const s = await start()
        const back = await idp.signIn(s.location, "bob")
        await Bun.sleep(2100)
        const refused = await callback(back, s.cookie)
        expect(refused.status).toBe(400)
        expect(cookieValue(refused, "greenline_session")).toBeUndefined()
        expect(await refused.text()).toContain("invalid_grant")
      } finally {
        idp.setCodeTtl(60)
      }
    })

    test("sign-out ends the person's session", async () => {
      const { session } = await signIn("bob")
      const page = await shell(session!)
      const out = await fetch(`${publicUrl}/logout`, {
        method: "POST",
        redirect: "manual",
        headers: {
          cookie: `greenline_session=${session}`,
          "content-type": "application/x-www-form-urlencoded",
          origin: publicUrl
        },
        body: new URLSearchParams({ csrf: page.csrf! }).toString()
      })
      expect(out.status).toBe(303)
      expect(out.headers.get("location")).toBe("/login")
      expect(cookieValue(out, "greenline_session")?.header).toContain("Max-Age=0")
      expect(await shell(session!)).toMatchObject({ status: 303 })
    })

    test("a person whose group loses the role: read again after OIDC_REFRESH_SECONDS, lowered, then ended", async () => {
      idp.accounts.set("dana", { name: "Dana Demoted", email: "dana@example.com", groups: ["gl-admins"] })
      const { session } = await signIn("dana")
      expect(await shell(session!)).toMatchObject({ role: "admin" })
      idp.accounts.get("dana")!.groups = ["acme:readers"]
      // within OIDC_REFRESH_SECONDS (1 s here) the role read at sign-in stands
      await Bun.sleep(1100)
      expect(await shell(session!)).toMatchObject({ status: 200, role: "read", actor: "Dana Demoted" })
      idp.accounts.get("dana")!.groups = []
      await Bun.sleep(1100)
      const ended = await shell(session!)
      expect(ended.status).toBe(303)
      expect(ended.location).toStartWith("/login")
      // and it stays ended when the group comes back: a new sign-in is needed
      idp.accounts.get("dana")!.groups = ["gl-admins"]
      expect((await shell(session!)).status).toBe(303)
    })
  })
}
