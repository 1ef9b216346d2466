import * as fs from "node:fs"
import * as path from "node:path"
import { type Effect, Option } from "effect"
import { type OpenSession, SESSION_COOKIE, SESSION_IDLE_MS, type SessionsShape } from "../tenancy/Sessions.ts"
import type { Organization, TenancyShape } from "../tenancy/Tenancy.ts"

/**
 * The dashboard's HTTP side: sign-in and sign-out, the page shell (every page is the same small HTML document; the
 * client renders it from the API), the bundled script and style, and the security headers. The bundle is built by
 * Bun once, on the first request that needs it, and kept in memory.
 */

export interface DashboardOptions {
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly sessions: SessionsShape
  readonly tenancy: TenancyShape
  /** PUBLIC_URL: the cookie is Secure when it is https */
  readonly publicUrl: string
}

const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

export const securityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy": CSP,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin"
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
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim())
  }
  return undefined
}

/** A form POST from another site is refused: its Origin (browsers send one on POST) must be ours. */
const sameOrigin = (request: Request, url: URL) => {
  const origin = request.headers.get("origin")
  return origin === null || origin === url.origin
}

/** A local path to return to after sign-in (never another site). */
const safeNext = (next: string | null) =>
  next?.startsWith("/") && !next.startsWith("//") && !next.startsWith("/\\") ? next : "/"

const loginPage = (next: string, error?: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Greenline</title><link rel="stylesheet" href="/assets/app.css"></head>
<body><main class="login">
<h1>Greenline</h1>
<form method="post" action="/login" class="card">
<label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="${escapeHtml(next)}">
${error === undefined ? "" : `<p class="error" role="alert">${escapeHtml(error)}</p>`}
<button type="submit">Sign in</button>
<p class="muted">Sign in with an API token of your organization (for example the bootstrap token).</p>
</form></main></body></html>`

const shell = (org: Organization, csrf: string, js: string, css: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="greenline-csrf" content="${escapeHtml(csrf)}">
<meta name="greenline-org" content="${escapeHtml(org.slug)}">
<title>Greenline</title><link rel="stylesheet" href="/assets/${css}">
<script type="module" src="/assets/${js}"></script></head>
<body><div id="app"><p class="loading">Loading…</p></div></body></html>`

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
  const secure = options.publicUrl.startsWith("https:")
  const cookie = (value: string, maxAgeSeconds: number) =>
    `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secure ? "; Secure" : ""}`

  const sessionOf = async (request: Request): Promise<{ secret: string; open: OpenSession } | undefined> => {
    const secret = cookieOf(request, SESSION_COOKIE)
    if (secret === undefined) return undefined
    const open = await options.run(options.sessions.resolve(secret))
    return Option.isSome(open) ? { secret, open: open.value } : undefined
  }

  /** For the API router: the session of a request without a token, and whether it carries the anti-CSRF token. */
  const apiSession = async (request: Request) => {
    const s = await sessionOf(request)
    if (s === undefined) return undefined
    return { org: s.open.org, key: s.open.key, csrfOk: request.headers.get("x-csrf-token") === s.open.csrf }
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

  const handle = async (request: Request, url: URL): Promise<Response | undefined> => {
    const { pathname } = url
    if (pathname === "/login") {
      if (request.method === "GET") return html(loginPage(safeNext(url.searchParams.get("next"))))
      if (request.method !== "POST") return undefined
      if (!sameOrigin(request, url)) return html(loginPage("/", "This form must be sent from this site."), 403)
      const form = await readForm(request)
      const token = form?.get("token")
      const next = safeNext(typeof form?.get("next") === "string" ? (form.get("next") as string) : null)
      const secret =
        typeof token === "string" && token.trim() !== ""
          ? await options.run(options.sessions.signIn(token))
          : Option.none()
      if (Option.isNone(secret)) return html(loginPage(next, "That API token is unknown or revoked."), 401)
      return new Response(null, {
        status: 303,
        headers: { location: next, "set-cookie": cookie(secret.value, SESSION_IDLE_MS / 1000), ...securityHeaders }
      })
    }
    if (pathname === "/logout") {
      if (request.method !== "POST") return undefined
      const s = await sessionOf(request)
      const form = await readForm(request)
      if (s !== undefined) {
        if (!sameOrigin(request, url) || form?.get("csrf") !== s.open.csrf) {
          return html("<!doctype html><title>Refused</title><p>Sign-out must be sent from this site.</p>", 403)
        }
        await options.run(options.sessions.signOut(s.secret))
      }
      return new Response(null, {
        status: 303,
        headers: { location: "/login", "set-cookie": cookie("", 0), ...securityHeaders }
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
      return new Response(null, {
        status: 303,
        headers: { location: `/login?next=${encodeURIComponent(pathname + url.search)}`, ...securityHeaders }
      })
    }
    const b = await getBundle()
    // another organization's repository (or none) is not found, as in the API; the client shows the same
    const repo = repoOfPath(pathname)
    const owned =
      repo === undefined ? true : Option.isSome(await options.run(options.tenancy.findRepo(s.open.org, repo)))
    return html(shell(s.open.org, s.open.csrf, b.js.name, b.css.name), owned ? 200 : 404)
  }

  return { handle, apiSession, bundle: getBundle }
}
