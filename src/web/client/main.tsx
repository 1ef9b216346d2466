import { render } from "preact"
import { useEffect } from "preact/hooks"
import { actorKind, actorName, csrf, orgSlug, role, serverVersion } from "./api.ts"
import { AuditPage } from "./audit.tsx"
import { FailuresPage } from "./failure.tsx"
import { FlakyListPage, TestPage, UploadPage } from "./flaky.tsx"
import { HealthPage } from "./health.tsx"
import { HomePage, RepoPage } from "./home.tsx"
import { interceptLinks, useLocation, useOffline } from "./hooks.ts"
import { PrPage, RunPage } from "./pr.tsx"
import { QueuePage } from "./queue.tsx"
import { QueueSettingsPage, TokensPage } from "./settings.tsx"
import { NotFound, type RepoKey } from "./ui.tsx"
import { EndpointPage, WebhooksPage } from "./webhooks.tsx"

/** The dashboard: one small page shell, routes by path, every page a client of the API. */

const decode = (s: string) => {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

const route = (pathname: string, search: string) => {
  const params = new URLSearchParams(search)
  if (pathname === "/") return <HomePage />
  if (pathname === "/settings") return <TokensPage />
  if (pathname === "/audit") return <AuditPage />
  if (pathname === "/webhooks") return <WebhooksPage />
  const hook = /^\/webhooks\/([^/]+)$/.exec(pathname)
  if (hook !== null) return <EndpointPage key={pathname} id={decode(hook[1]!)} />
  const m = /^\/repos\/([^/]+)\/([^/]+)\/([^/]+)(\/.*)?$/.exec(pathname)
  if (m === null) return <NotFound />
  const repo: RepoKey = { host: decode(m[1]!), owner: decode(m[2]!), name: decode(m[3]!) }
  const rest = m[4] ?? ""
  const branch = params.get("branch") ?? undefined
  if (rest === "" || rest === "/") return <RepoPage repo={repo} />
  const queue = /^\/queues\/(.+)$/.exec(rest)
  if (queue !== null) return <QueuePage key={rest} repo={repo} branch={queue[1]!.split("/").map(decode).join("/")} />
  const pr = /^\/pull\/(\d+)$/.exec(rest)
  if (pr !== null) return <PrPage key={rest + search} repo={repo} number={Number(pr[1])} branch={branch} />
  const run = /^\/runs\/([^/]+)$/.exec(rest)
  if (run !== null && branch !== undefined)
    return <RunPage key={rest + search} repo={repo} branch={branch} id={decode(run[1]!)} />
  if (rest === "/tests") return <FlakyListPage repo={repo} />
  const test = /^\/tests\/([^/]+)$/.exec(rest)
  if (test !== null) return <TestPage key={rest} repo={repo} id={decode(test[1]!)} />
  const upload = /^\/uploads\/([^/]+)$/.exec(rest)
  if (upload !== null) return <UploadPage key={rest} repo={repo} id={decode(upload[1]!)} />
  if (rest === "/health" && branch !== undefined) return <HealthPage repo={repo} branch={branch} />
  if (rest === "/failures" && branch !== undefined) return <FailuresPage repo={repo} branch={branch} />
  if (rest === "/settings" && branch !== undefined) return <QueueSettingsPage repo={repo} branch={branch} />
  return <NotFound />
}

/** Each page's title (issue #33): what it shows, then where, then "Greenline". */
export const titleOf = (pathname: string, search: string): string => {
  const branch = new URLSearchParams(search).get("branch")
  const m = /^\/repos\/([^/]+)\/([^/]+)\/([^/]+)(\/.*)?$/.exec(pathname)
  const parts: Array<string> = []
  if (pathname === "/") parts.push("Queues")
  else if (pathname === "/settings") parts.push("API tokens")
  else if (pathname === "/audit") parts.push("Audit log")
  else if (pathname.startsWith("/webhooks")) parts.push("Webhooks")
  else if (m !== null) {
    const repo = `${decode(m[2]!)}/${decode(m[3]!)}`
    const rest = m[4] ?? ""
    const queue = /^\/queues\/(.+)$/.exec(rest)
    const pr = /^\/pull\/(\d+)$/.exec(rest)
    const run = /^\/runs\/([^/]+)$/.exec(rest)
    const page: Record<string, string> = {
      "/tests": "Flaky tests",
      "/health": `Health of ${branch ?? ""}`,
      "/failures": `Failures of ${branch ?? ""}`,
      "/settings": `Settings of ${branch ?? ""}`
    }
    if (queue !== null) parts.push(`Queue ${decode(queue[1]!)}`)
    else if (pr !== null) parts.push(`#${pr[1]}`)
    else if (run !== null) parts.push(`Run ${decode(run[1]!).slice(0, 8)}`)
    else if (rest.startsWith("/tests/")) parts.push("Test")
    else if (rest.startsWith("/uploads/")) parts.push("Upload")
    else if (page[rest] !== undefined) parts.push(page[rest]!)
    parts.push(repo)
  } else parts.push("Not found")
  return [...parts, "Greenline"].join(" · ")
}

const App = () => {
  const loc = useLocation()
  const offline = useOffline()
  useEffect(() => {
    document.title = titleOf(loc.pathname, loc.search)
  }, [loc.pathname, loc.search])
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/">
          Greenline
        </a>
        <nav aria-label="Main">
          <a href="/">Queues</a> {role() !== "read" && role() !== "write" && <a href="/webhooks">Webhooks</a>}{" "}
          {role() !== "read" && role() !== "write" && <a href="/settings">API tokens</a>}{" "}
          {role() === "admin" && <a href="/audit">Audit log</a>}
        </nav>
        <span class="org">{orgSlug()}</span>
        <span class="who" title={actorKind() === "person" ? "signed in as" : "signed in with an API token"}>
          <span class="actor">{actorName()}</span> · <span class="role">{role()}</span>
        </span>
        <form method="post" action="/logout" class="logout">
          <input type="hidden" name="csrf" value={csrf()} />
          <button type="submit">Sign out</button>
        </form>
      </header>
      {offline && (
        <div class="offline-banner" role="alert" id="offline">
          Offline: the server cannot be reached. What you see may be out of date; it updates again once the server is
          back.
        </div>
      )}
      <main id="main" tabIndex={-1}>
        {route(loc.pathname, loc.search)}
      </main>
      <footer class="foot">Greenline {serverVersion()}</footer>
    </>
  )
}

interceptLinks()
const root = document.getElementById("app")
if (root !== null) {
  root.textContent = ""
  render(<App />, root)
}
