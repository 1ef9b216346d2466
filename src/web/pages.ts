import * as fs from "node:fs"
import * as path from "node:path"
import { type Effect, Option } from "effect"
import { VERSION } from "../kernel/version.ts"
import {
  OIDC_LOGIN_MS,
  type OpenSession,
  SESSION_COOKIE,
  SESSION_IDLE_MS,
  type SessionsShape
} from "../tenancy/Sessions.ts"
import type { TenancyShape } from "../tenancy/Tenancy.ts"
import { type Oidc, OidcFailure, type OidcIdentity } from "./oidc.ts"

/**
 * The dashboard's HTTP side: sign-in (an API token, or a person through the identity provider) and sign-out, the page shell (every page is the same small HTML document; the
 * client renders it from the API), the bundled script and style, and the security headers. The bundle is built by
 * Bun once, on the first request that needs it, and kept in memory.
 */

export interface DashboardOptions {
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly sessions: SessionsShape
  readonly tenancy: TenancyShape
  /** PUBLIC_URL: cookies are Secure when it is https; a form post must come from its origin */
  readonly publicUrl: string
  /** Whether PUBLIC_URL was set; unset, a form post may also come from the origin the request was addressed to. */
  readonly publicUrlConfigured: boolean
  /** The scheme and origin the browser used (X-Forwarded-* only with TRUST_PROXY), and the client's address. */
  readonly proxy: {
    readonly scheme: (request: Request) => "http" | "https"
    readonly origin: (request: Request) => string
    readonly clientAddress: (request: Request) => string | undefined
  }
  /** Seconds to wait before `key` may try again (0: now): sign-in attempts are limited per client address. */
  readonly limit: (key: string) => number
  /** People's sign-in with an identity provider, when one is configured. */
  readonly oidc?:
    | {
        readonly client: Oidc
        /** The sign-in button's "Sign in with …". */
        readonly providerName: string
        /** The organizations the role rules name (a choice on the sign-in page when there are several). */
        readonly orgs: ReadonlyArray<string>
        /** How long a person's role is used before it is read again (ms). */
        readonly refreshMs: number
      }
    | undefined
  readonly logError?: ((message: string, cause: unknown) => void) | undefined
}

const policy = (styleSrc: string, extra: ReadonlyArray<string> = []) =>
  [
    "default-src 'self'",
    "script-src 'self'",
    `style-src ${styleSrc}`,
    ...extra,
    "img-src 'self' data:",
    "connect-src 'self'",
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'"
  ].join("; ")
const CSP = policy("'self'")

/**
 * The API reference's policy (/docs): the same, but Redoc writes its styles into <style> elements at run time
 * (styled-components), so inline styles are allowed there, and its search runs in a worker made from a blob of its
 * own script. Scripts are still only the server's own.
 */
export const DOCS_CSP = policy("'self' 'unsafe-inline'", ["worker-src 'self' blob:"])

/** The headers every answer of the server carries (server.ts adds them to each one that has none of its own). */
export const securityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy": CSP,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "cross-origin-opener-policy": "same-origin"
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c)

const html = (body: string, status = 200, extra: Record<string, string> = {}) =>
  new Response(body, {
    status,
    headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", ...securityHeaders, ...extra }
  })

const cookieOf = (request: Request, name: string): string | undefined => {
  const header = request.headers.get("cookie")
  if (header === null) return undefined
  for (const part of header.split(";")) {
    const eq = part.indexOf("=")
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim())
      } catch {
        return undefined
      }
    }
  }
  return undefined
}

/** The cookie that finds a sign-in with the provider on its return (only sent to the callback). */
const OIDC_COOKIE = "greenline_oidc"
const OIDC_PATH = "/login/oidc"
const CALLBACK_PATH = "/login/oidc/callback"

const LOCAL = "http://greenline.invalid"
/**
 * A local path to return to after sign-in, else `/`: it must start with one `/` and contain no backslash, no
 * control character (a tab or new line in `/\t/evil.example` is dropped by browsers, leaving `//evil.example`) and
 * nothing that makes it leave the site once resolved; the answer is the path as URL-serialized (ASCII only).
 */
export const safeNext = (next: unknown): string => {
  if (typeof next !== "string" || next.length > 2048 || !next.startsWith("/") || next.startsWith("//")) return "/"
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses
  if (/[\\\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(next)) return "/"
  try {
    const url = new URL(next, LOCAL)
    if (url.origin !== LOCAL) return "/"
    const path = `${url.pathname}${url.search}${url.hash}`
    return path.startsWith("/") && !path.startsWith("//") ? path : "/"
  } catch {
    return "/"
  }
}

/** The dashboard's icon (issue #33): a green check in a rounded square, served at /favicon.ico and /favicon.svg. */
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#1a7f37"/><path d="M9 16.5l4.5 4.5L23 11.5" fill="none" stroke="#fff" stroke-width="3.2" stroke-linecap="round" stroke-linejoin="round"/></svg>`
const ICON_LINK = `<link rel="icon" href="/favicon.svg" type="image/svg+xml">`

const page = (title: string, body: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Greenline</title>${ICON_LINK}<link rel="stylesheet" href="/assets/app.css"></head>
<body><main class="login">
<h1>Greenline</h1>
${body}
</main><footer class="foot">Greenline ${escapeHtml(VERSION)}</footer></body></html>`

const loginPage = (
  next: string,
  options: { readonly error?: string | undefined; readonly oidc?: DashboardOptions["oidc"] }
) => {
  const oidc = options.oidc
  const error = options.error === undefined ? "" : `<p class="error" role="alert">${escapeHtml(options.error)}</p>`
  // links, not a form: a form's redirect to the provider would be stopped by the CSP's form-action 'self'
  const start = (org?: string) =>
    `${OIDC_PATH}?${new URLSearchParams({ next, ...(org === undefined ? {} : { org }) }).toString()}`
  const person =
    oidc === undefined
      ? ""
      : `<div class="card sso">${
          oidc.orgs.length < 2
            ? `<a class="button" id="sso" href="${escapeHtml(start())}">Sign in with ${escapeHtml(oidc.providerName)}</a>`
            : oidc.orgs
                .map(
                  (o) =>
                    `<a class="button" href="${escapeHtml(start(o))}">Sign in with ${escapeHtml(oidc.providerName)} to ${escapeHtml(o)}</a>`
                )
                .join("\n")
        }</div>
<p class="muted or">or</p>`
  return page(
    "Sign in",
    `${error}${person}
<form method="post" action="/login" class="card">
<label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required${oidc === undefined ? " autofocus" : ""}>
<input type="hidden" name="next" value="${escapeHtml(next)}">
<button type="submit">Sign in</button>
<p class="muted">Sign in with an API token of your organization (for example the bootstrap token).</p>
</form>`
  )
}

/** A sign-in with the provider that did not complete: why, and the way back. */
const failurePage = (message: string) =>
  page(
    "Sign-in failed",
    `<p class="error" role="alert">${escapeHtml(message)}</p>
<p><a href="/login">Back to sign-in</a></p>`
  )

const shell = (session: OpenSession, js: string, css: string) => {
  const actor = session.principal.actor
  const who = actor.kind === "person" ? actor.name : `token ${actor.name}`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="greenline-csrf" content="${escapeHtml(session.csrf)}">
<meta name="greenline-org" content="${escapeHtml(session.org.slug)}">
<meta name="greenline-actor" content="${escapeHtml(who)}">
<meta name="greenline-actor-kind" content="${actor.kind}">
<meta name="greenline-role" content="${escapeHtml(session.principal.role)}">
<meta name="greenline-version" content="${escapeHtml(VERSION)}">
<title>Greenline</title>${ICON_LINK}<link rel="stylesheet" href="/assets/${css}">
<script type="module" src="/assets/${js}"></script></head>
<body><div id="app"><p class="loading">Loading…</p></div></body></html>`
}

interface Asset {
  readonly name: string
  readonly body: Uint8Array
  /** the same bytes gzipped once, for browsers that accept it (Bun.serve does not compress) */
  readonly gzip: Uint8Array
}

interface Bundle {
  readonly js: Asset
  readonly css: Asset
}

const asset = (base: string, ext: string, body: Uint8Array): Asset => ({
  name: hashName(base, ext, body),
  body,
  gzip: Bun.gzipSync(body as Uint8Array<ArrayBuffer>)
})

const clientDir = path.join(import.meta.dir, "client")

const hashName = (base: string, ext: string, body: Uint8Array) =>
  `${base}-${new Bun.CryptoHasher("sha256").update(body).digest("hex").slice(0, 12)}.${ext}`

/** Bundles the client with Bun (minified, for browsers) and its style sheets; once per process. */
const buildBundle = async (): Promise<Bundle> => {
  const result = await Bun.build({
    entrypoints: [path.join(clientDir, "main.tsx")],
    target: "browser",
    minify: true,
    format: "esm",
    define: { "process.env.NODE_ENV": JSON.stringify("production") }
  })
  if (!result.success) throw new AggregateError(result.logs, "the dashboard bundle did not build")
  const output = result.outputs.find((o) => o.kind === "entry-point")
  if (output === undefined) throw new Error("the dashboard bundle has no entry point")
  const js = new Uint8Array(await output.arrayBuffer())
  const uplotCss = fs.readFileSync(require.resolve("uplot/dist/uPlot.min.css"), "utf8")
  const css = new TextEncoder().encode(`${uplotCss}\n${fs.readFileSync(path.join(clientDir, "app.css"), "utf8")}`)
  return { js: asset("app", "js", js), css: asset("app", "css", css) }
}

/** The repository a page path names (`/repos/<host>/<owner>/<name>/...`). */
const repoOfPath = (pathname: string) => {
  const m = /^\/repos\/([^/]+)\/([^/]+)\/([^/]+)(?:\/|$)/.exec(pathname)
  if (m === null) return undefined
  try {
    return { host: decodeURIComponent(m[1]!), owner: decodeURIComponent(m[2]!), name: decodeURIComponent(m[3]!) }
  } catch {
    return undefined
  }
}

const isPage = (pathname: string) =>
  pathname === "/" ||
  pathname.startsWith("/repos/") ||
  pathname === "/settings" ||
  pathname === "/audit" ||
  pathname === "/webhooks" ||
  pathname.startsWith("/webhooks/")

export const makeDashboard = (options: DashboardOptions) => {
  let bundle: Promise<Bundle> | undefined
  const getBundle = () => {
    bundle ??= buildBundle().catch((e) => {
      bundle = undefined
      throw e
    })
    return bundle
  }
  const publicOrigin = new URL(options.publicUrl).origin
  const secureOf = (request: Request) =>
    options.publicUrl.startsWith("https:") || options.proxy.scheme(request) === "https"
  const cookie = (request: Request, value: string, maxAgeSeconds: number) =>
    `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secureOf(request) ? "; Secure" : ""}`
  const oidcCookie = (request: Request, value: string, maxAgeSeconds: number) =>
    `${OIDC_COOKIE}=${value}; Path=${OIDC_PATH}; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secureOf(request) ? "; Secure" : ""}`

  /**
   * A form post from another site is refused: its Origin (browsers send one on every POST) must be PUBLIC_URL's
   * origin, or, while PUBLIC_URL is unset, the one the request was addressed to.
   */
  const sameOrigin = (request: Request) => {
    if (request.headers.get("sec-fetch-site") === "cross-site") return false
    const origin = request.headers.get("origin")
    if (origin === null) return true
    return origin === publicOrigin || (!options.publicUrlConfigured && origin === options.proxy.origin(request))
  }
  const crossSite = (request: Request) => {
    const origin = request.headers.get("origin") ?? "another site"
    return `This form must be sent from this site (${options.publicUrlConfigured ? publicOrigin : options.proxy.origin(request)}), not from ${origin}. Behind a proxy, set PUBLIC_URL to the address people use.`
  }

  /** Sign-in attempts per client address: past the limit, 429 with Retry-After. */
  const limited = (request: Request): Response | undefined => {
    const wait = options.limit(`sign-in:${options.proxy.clientAddress(request) ?? "unknown"}`)
    if (wait === 0) return undefined
    return html(
      page("Sign in", `<p class="error" role="alert">Too many sign-in attempts: try again in ${wait} s.</p>`),
      429,
      {
        "retry-after": String(wait)
      }
    )
  }

  /**
   * A person's session whose role was read longer ago than OIDC_REFRESH_SECONDS: one request (of any instance) reads
   * it again with the refresh token; the person's role changes, or the session ends when they have none left in its
   * organization, the provider refuses the refresh token, or there is none. Requests meanwhile go on with the role
   * they have. docs/decisions.md, "When a person's role is read".
   */
  const reread = async (secret: string, open: OpenSession): Promise<OpenSession | undefined> => {
    const person = open.person
    if (person === undefined || open.principal.actor.kind !== "person") return open
    const oidc = options.oidc
    if (oidc === undefined) {
      // people's sessions need the provider they came from
      await options.run(options.sessions.signOut(secret))
      return undefined
    }
    if (Date.now() - person.claimsReadAt.getTime() < oidc.refreshMs) return open
    if (!(await options.run(options.sessions.claimReread(secret, person.claimsReadAt)))) return open
    if (person.refreshToken === undefined) {
      await options.run(options.sessions.signOut(secret))
      return undefined
    }
    try {
      const id = await oidc.client.reread(person.refreshToken, open.principal.actor.subject)
      const role = id.roles.find((r) => r.org === open.org.slug)?.role
      if (role === undefined) {
        await options.run(options.sessions.signOut(secret))
        return undefined
      }
      await options.run(options.sessions.rereadPerson(secret, id.person, role, id.refreshToken))
      return {
        ...open,
        principal: { actor: { kind: "person", ...id.person }, role },
        person: { claimsReadAt: new Date(), refreshToken: id.refreshToken }
      }
    } catch (error) {
      if (error instanceof OidcFailure && error.status === 400) {
        // the refresh token was refused (revoked, expired, the person disabled): the session ends
        await options.run(options.sessions.signOut(secret))
        return undefined
      }
      // the provider could not be reached: the role stands until the next try, OIDC_REFRESH_SECONDS later
      options.logError?.("reading a person's role again failed; it is tried again later", error)
      return open
    }
  }

  const sessionOf = async (request: Request): Promise<{ secret: string; open: OpenSession } | undefined> => {
    const secret = cookieOf(request, SESSION_COOKIE)
    if (secret === undefined) return undefined
    const found = await options.run(options.sessions.resolve(secret))
    if (Option.isNone(found)) return undefined
    const open = await reread(secret, found.value)
    return open === undefined ? undefined : { secret, open }
  }

  /** For the API router: the session of a request without a token, and whether it carries the anti-CSRF token. */
  const apiSession = async (request: Request) => {
    const s = await sessionOf(request)
    if (s === undefined) return undefined
    return {
      org: s.open.org,
      principal: s.open.principal,
      key: s.open.key,
      csrfOk: request.headers.get("x-csrf-token") === s.open.csrf
    }
  }

  const readForm = async (request: Request) => {
    const type = request.headers.get("content-type") ?? ""
    if (!type.startsWith("application/x-www-form-urlencoded") && !type.startsWith("multipart/form-data")) {
      return undefined
    }
    try {
      return await request.formData()
    } catch {
      return undefined
    }
  }

  const redirect = (location: string, cookies: ReadonlyArray<string> = []) => {
    const headers = new Headers({ location, "cache-control": "no-store", ...securityHeaders })
    for (const c of cookies) headers.append("set-cookie", c)
    return new Response(null, { status: 303, headers })
  }

  /** GET /login/oidc: to the provider, with a new state, nonce and PKCE challenge kept for the return. */
  const startOidc = async (request: Request, url: URL, oidc: NonNullable<DashboardOptions["oidc"]>) => {
    const refused = limited(request)
    if (refused !== undefined) return refused
    const next = safeNext(url.searchParams.get("next"))
    const org = url.searchParams.get("org") ?? undefined
    try {
      const { url: to, checks } = await oidc.client.start()
      const value = await options.run(options.sessions.beginLogin({ ...checks, next, org }))
      return redirect(to.href, [oidcCookie(request, value, OIDC_LOGIN_MS / 1000)])
    } catch (error) {
      const failure = error instanceof OidcFailure ? error : new OidcFailure(String(error), 502)
      options.logError?.("sign-in with the identity provider could not start", error)
      return html(failurePage(failure.message), failure.status)
    }
  }

  /** GET /login/oidc/callback: the provider's answer, checked, and a session for the person's organization. */
  const finishOidc = async (request: Request, url: URL, oidc: NonNullable<DashboardOptions["oidc"]>) => {
    const refused = limited(request)
    if (refused !== undefined) return refused
    const clear = { "set-cookie": oidcCookie(request, "", 0) }
    const value = cookieOf(request, OIDC_COOKIE)
    const pending = value === undefined ? Option.none() : await options.run(options.sessions.takeLogin(value))
    if (Option.isNone(pending)) {
      return html(
        failurePage(
          "This sign-in was not started in this browser, was completed already, or took longer than 10 minutes. Sign in again."
        ),
        400,
        clear
      )
    }
    let id: OidcIdentity
    try {
      id = await oidc.client.finish(url.search, pending.value)
    } catch (error) {
      const failure = error instanceof OidcFailure ? error : new OidcFailure(String(error), 502)
      if (failure.status >= 500) options.logError?.("sign-in with the identity provider failed", error)
      return html(failurePage(failure.message), failure.status, clear)
    }
    const asked = pending.value.org
    const candidates = asked === undefined ? id.roles : id.roles.filter((r) => r.org === asked)
    for (const { org: slug, role } of candidates) {
      const org = await options.run(options.tenancy.findOrg(slug))
      if (Option.isNone(org)) continue
      const secret = await options.run(options.sessions.signInPerson(org.value, id.person, role, id.refreshToken))
      return redirect(pending.value.next, [cookie(request, secret, SESSION_IDLE_MS / 1000), oidcCookie(request, "", 0)])
    }
    return html(
      failurePage(
        `${id.person.name} has no role in ${asked === undefined ? "any organization of this Greenline" : `the organization ${asked}`}: ${oidc.client.noRoleReason(id)}. An administrator gives roles through OIDC_ROLE_RULES.`
      ),
      403,
      clear
    )
  }

  const handle = async (request: Request, url: URL): Promise<Response | undefined> => {
    const { pathname } = url
    if (pathname === OIDC_PATH || pathname === CALLBACK_PATH) {
      if (options.oidc === undefined || (request.method !== "GET" && request.method !== "HEAD")) return undefined
      return pathname === OIDC_PATH ? startOidc(request, url, options.oidc) : finishOidc(request, url, options.oidc)
    }
    if (pathname === "/login") {
      if (request.method === "GET" || request.method === "HEAD") {
        return html(loginPage(safeNext(url.searchParams.get("next")), { oidc: options.oidc }))
      }
      if (request.method !== "POST") return undefined
      if (!sameOrigin(request)) return html(loginPage("/", { error: crossSite(request), oidc: options.oidc }), 403)
      const refused = limited(request)
      if (refused !== undefined) return refused
      const form = await readForm(request)
      const token = form?.get("token")
      const next = safeNext(form?.get("next"))
      const secret =
        typeof token === "string" && token.trim() !== ""
          ? await options.run(options.sessions.signIn(token))
          : Option.none()
      if (Option.isNone(secret)) {
        return html(loginPage(next, { error: "That API token is unknown or revoked.", oidc: options.oidc }), 401)
      }
      return redirect(next, [cookie(request, secret.value, SESSION_IDLE_MS / 1000)])
    }
    if (pathname === "/logout") {
      if (request.method !== "POST") return undefined
      const s = await sessionOf(request)
      const form = await readForm(request)
      if (s !== undefined) {
        if (!sameOrigin(request) || form?.get("csrf") !== s.open.csrf) {
          return html(page("Refused", "<p>Sign-out must be sent from this site.</p>"), 403)
        }
        await options.run(options.sessions.signOut(s.secret))
      }
      return redirect("/login", [cookie(request, "", 0)])
    }
    if (pathname === "/favicon.ico" || pathname === "/favicon.svg") {
      if (request.method !== "GET" && request.method !== "HEAD") return undefined
      return new Response(FAVICON_SVG, {
        headers: { "content-type": "image/svg+xml", "cache-control": "public, max-age=86400", ...securityHeaders }
      })
    }
    if (pathname.startsWith("/assets/")) {
      if (request.method !== "GET" && request.method !== "HEAD") return undefined
      const b = await getBundle()
      const name = pathname.slice("/assets/".length)
      const found =
        name === b.js.name || name === "app.js"
          ? { asset: b.js, type: "text/javascript; charset=utf-8" }
          : name === b.css.name || name === "app.css"
            ? { asset: b.css, type: "text/css; charset=utf-8" }
            : undefined
      if (found === undefined) return undefined
      const gzip = /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "")
      return new Response(gzip ? found.asset.gzip : found.asset.body, {
        headers: {
          "content-type": found.type,
          vary: "accept-encoding",
          ...(gzip ? { "content-encoding": "gzip" } : {}),
          // the hashed names never change content; the plain names (the sign-in page's) are revalidated
          "cache-control": name.includes("-") ? "public, max-age=31536000, immutable" : "no-cache",
          ...securityHeaders
        }
      })
    }
    if (!isPage(pathname) || (request.method !== "GET" && request.method !== "HEAD")) return undefined
    const s = await sessionOf(request)
    if (s === undefined) {
      return redirect(`/login?next=${encodeURIComponent(pathname + url.search)}`)
    }
    const b = await getBundle()
    // another organization's repository (or none) is not found, as in the API; the client shows the same
    const repo = repoOfPath(pathname)
    const owned =
      repo === undefined ? true : Option.isSome(await options.run(options.tenancy.findRepo(s.open.org, repo)))
    // the session's cookie lasts SESSION_IDLE_MS from its last use, as the server's record does (#33): renewed here
    return html(shell(s.open, b.js.name, b.css.name), owned ? 200 : 404, {
      "set-cookie": cookie(request, s.secret, SESSION_IDLE_MS / 1000)
    })
  }

  /**
   * What a browser gets for a path nothing serves (issue #33): a page saying so, with a way back, instead of the
   * API's JSON envelope; undefined for the API's paths and for clients that do not ask for HTML.
   */
  const notFound = (request: Request, url: URL): Response | undefined =>
    (request.method === "GET" || request.method === "HEAD") &&
    !url.pathname.startsWith("/v1/") &&
    (request.headers.get("accept") ?? "").includes("text/html")
      ? html(
          page(
            "Not found",
            `<h2>Not found</h2><p>Nothing is at <code>${escapeHtml(url.pathname)}</code>.</p><p><a href="/">All queues</a></p>`
          ),
          404
        )
      : undefined

  return { handle, apiSession, bundle: getBundle, notFound }
}
