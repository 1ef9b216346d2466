import { generateKeyPairSync, randomUUID } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A real OpenID Connect provider for the tests: `oidc-provider` (a certified implementation) on a loopback port, with
 * one confidential client, accounts the test changes as it goes (their `groups` claim), a sign-in page of its own
 * (a login field, no password) and no consent prompt. The authorization code's lifetime can be shortened, to see an
 * expired code refused.
 */

export interface TestAccount {
  readonly name: string
  readonly email: string
  groups: Array<string>
}

export interface TestProvider {
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  readonly accounts: Map<string, TestAccount>
  /** Lifetime of the authorization codes it issues from now on (seconds; default 60). */
  setCodeTtl: (seconds: number) => void
  /**
   * Signs `login` in without a browser, from the address Greenline's /login/oidc redirected to: follows the
   * provider's redirects and its login form, and returns the URL it sends the browser back to (the callback).
   */
  signIn: (authorizationUrl: string, login: string) => Promise<URL>
  readonly close: () => Promise<void>
}

const readBody = (req: http.IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (chunk: string) => {
      body += chunk
    })
    req.on("end", () => resolve(body))
    req.on("error", reject)
  })

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

export const startOidcProvider = async (options: {
  readonly redirectUris: ReadonlyArray<string>
}): Promise<TestProvider> => {
  const accounts = new Map<string, TestAccount>()
  let codeTtl = 60
  const clientId = "greenline"
  const clientSecret = `secret-${randomUUID()}`
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const key = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" })

  // the package warns, once per process, that it wants Node.js (it runs on Bun here) and that its in-memory store is
  // for development: both are what a test provider is, so those two lines are left out of the tests' output
  const warn = console.warn
  console.warn = (...args: Array<unknown>) => {
    if (!String(args[0]).startsWith("oidc-provider WARNING")) warn(...args)
  }
  const { default: ProviderClass } = await import("oidc-provider")
  const provider = new ProviderClass(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [...options.redirectUris],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"]
      }
    ],
    jwks: { keys: [{ ...key, kid: "test", use: "sig", alg: "RS256" }] },
    cookies: { keys: [randomUUID()] },
    scopes: ["openid", "offline_access", "profile", "email", "groups"],
    claims: { openid: ["sub"], profile: ["name"], email: ["email", "email_verified"], groups: ["groups"] },
    findAccount: (_ctx, id) => {
      const account = accounts.get(id)
      if (account === undefined) return undefined
      return {
        accountId: id,
        // read at every token and userinfo answer: a change of groups shows at the next refresh
        claims: () => ({
          sub: id,
          name: account.name,
          email: account.email,
          email_verified: true,
          groups: [...account.groups]
        })
      }
    },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    pkce: { required: () => true },
    ttl: {
      AuthorizationCode: () => codeTtl,
      AccessToken: 3600,
      IdToken: 3600,
      RefreshToken: 86400,
      Grant: 86400,
      Interaction: 600,
      Session: 86400
    },
    // a refresh token for every code of a client allowed them (no offline_access and consent prompt needed)
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    // first-party: every scope asked for is granted without a consent page
    loadExistingGrant: async (ctx) => {
      const { oidc } = ctx
      const clientId = oidc.client?.clientId
      const accountId = oidc.session?.accountId
      if (clientId === undefined || accountId === undefined) return undefined
      const existing =
        (oidc.result?.consent as { grantId?: string } | undefined)?.grantId ?? oidc.session?.grantIdFor(clientId)
      if (existing !== undefined) {
        const found = await oidc.provider.Grant.find(existing)
        if (found !== undefined) return found
      }
      const grant = new oidc.provider.Grant({ clientId, accountId })
      grant.addOIDCScope("openid offline_access profile email groups")
      await grant.save()
      return grant
    }
  })
  console.warn = warn

  const callback = provider.callback()
  server.on("request", async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const m = /^\/interaction\/([^/?]+)(\/login)?/.exec(req.url ?? "")
    if (m === null) {
      callback(req, res)
      return
    }
    try {
      const details = await provider.interactionDetails(req, res)
      if (m[2] === "/login" && req.method === "POST") {
        const login = new URLSearchParams(await readBody(req)).get("login") ?? ""
        if (!accounts.has(login)) {
          res.writeHead(400, { "content-type": "text/html" })
          res.end(`<p id="unknown">No such account: ${escapeHtml(login)}</p>`)
          return
        }
        await provider.interactionFinished(
          req,
          res,
          { login: { accountId: login } },
          { mergeWithLastSubmission: false }
        )
        return
      }
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
      res.end(`<!doctype html><title>Test provider</title>
<form method="post" action="/interaction/${escapeHtml(details.uid)}/login">
<label for="login">Login</label> <input id="login" name="login" autofocus>
<button id="provider-sign-in" type="submit">Sign in</button></form>`)
    } catch (error) {
      res.writeHead(400, { "content-type": "text/plain" })
      res.end(`interaction failed: ${String(error)}`)
    }
  })

  /** A cookie jar as a browser would keep the provider's cookies (paths ignored: one site). */
  const signIn = async (authorizationUrl: string, login: string): Promise<URL> => {
    const jar = new Map<string, string>()
    const keep = (response: Response) => {
      for (const c of response.headers.getSetCookie()) {
        const [pair] = c.split(";")
        const eq = pair?.indexOf("=") ?? -1
        if (pair !== undefined && eq > 0) jar.set(pair.slice(0, eq), pair.slice(eq + 1))
      }
    }
    const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join("; ")
    let url = new URL(authorizationUrl)
    for (let hop = 0; hop < 10; hop++) {
      if (url.origin !== issuer) return url
      if (url.pathname.startsWith("/interaction/")) {
        const page = await fetch(url, { headers: { cookie: cookie() }, redirect: "manual" })
        keep(page)
        const action = /action="([^"]+)"/.exec(await page.text())?.[1]
        if (action === undefined) throw new Error(`the provider's page at ${url} has no form`)
        const posted = await fetch(new URL(action, issuer), {
          method: "POST",
          headers: { cookie: cookie(), "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ login }).toString(),
          redirect: "manual"
        })
        keep(posted)
        const location = posted.headers.get("location")
        if (location === null)
          throw new Error(`the provider refused the login: ${posted.status} ${await posted.text()}`)
        url = new URL(location, issuer)
        continue
      }
      const response = await fetch(url, { headers: { cookie: cookie() }, redirect: "manual" })
      keep(response)
      const location = response.headers.get("location")
      if (location === null) throw new Error(`the provider answered ${response.status}: ${await response.text()}`)
      url = new URL(location, issuer)
    }
    throw new Error("the provider redirected too often")
  }

  return {
    issuer,
    clientId,
    clientSecret,
    accounts,
    setCodeTtl: (seconds) => {
      codeTtl = seconds
    },
    signIn,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
