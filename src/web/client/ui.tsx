import type { ComponentChildren } from "preact"
import { type ApiFailure, httpLink } from "./api.ts"

/** Small shared pieces: links to pages, badges, times, error and not-found views. */

export interface RepoKey {
  readonly host: string
  readonly owner: string
  readonly name: string
}

const seg = encodeURIComponent
export const repoPath = (r: RepoKey) => `/repos/${seg(r.host)}/${seg(r.owner)}/${seg(r.name)}`
export const queuePath = (r: RepoKey, branch: string) => `${repoPath(r)}/queues/${branch.split("/").map(seg).join("/")}`
export const prPath = (r: RepoKey, n: number, branch?: string) =>
  `${repoPath(r)}/pull/${n}${branch === undefined ? "" : `?branch=${seg(branch)}`}`
export const runPath = (r: RepoKey, branch: string, id: string) =>
  `${repoPath(r)}/runs/${seg(id)}?branch=${seg(branch)}`
export const testsPath = (r: RepoKey) => `${repoPath(r)}/tests`
export const testPath = (r: RepoKey, id: string) => `${repoPath(r)}/tests/${seg(id)}`
export const uploadPath = (r: RepoKey, id: string) => `${repoPath(r)}/uploads/${seg(id)}`
export const healthPath = (r: RepoKey, branch: string) => `${repoPath(r)}/health?branch=${seg(branch)}`
export const settingsPath = (r: RepoKey, branch: string) => `${repoPath(r)}/settings?branch=${seg(branch)}`

export const shortId = (id: string) => (id.length > 12 ? `${id.slice(0, 8)}${id.slice(36)}` : id)
export const shortSha = (sha: string | null) => (sha === null || sha === "" ? "—" : sha.slice(0, 8))

export const ago = (iso: string | null, now = Date.now()) => {
  if (iso === null) return "—"
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m`
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`
}

export const duration = (seconds: number | null) => {
  if (seconds === null) return "—"
  if (seconds < 60) return `${Math.round(seconds)}s`
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`
  return `${(seconds / 3600).toFixed(1)}h`
}

export const when = (iso: string) => {
  const d = new Date(iso)
  return (
    <time dateTime={iso} title={d.toISOString()}>
      {d.toLocaleString()}
    </time>
  )
}

/** A time ahead, in words: "in 4m", "in 1h 5m", "in 2d 3h"; "any moment" once it is due. */
export const fromNow = (iso: string, now = Date.now()) => {
  const s = Math.round((Date.parse(iso) - now) / 1000)
  if (s < 30) return "any moment"
  if (s < 60) return "in <1m"
  return `in ${ago(new Date(now - s * 1000).toISOString(), now)}`
}

/** Why the API gives no estimate (estimateUnavailableReason), in words. */
const NO_ESTIMATE: Record<string, string> = {
  FEWER_THAN_3_FINISHED_RUNS: "no estimate yet: fewer than 3 finished runs",
  QUEUE_PAUSED: "no estimate while the queue is paused",
  NOT_READY: "no estimate until it is ready"
}

/** A time left in words without "in": "any moment", "<1m", "40m", "1.2h". */
const left = (iso: string, now: number) => {
  const s = fromNow(iso, now)
  return s.startsWith("in ") ? s.slice(3) : s
}

/**
 * An entry's ETA: when it is expected to merge (relative, with the absolute time and the expected testing start on
 * hover) and the range it merges in 8 times in 10 (issue #35), or "—" with the reason there is none.
 */
export const Eta = ({
  mergeAt,
  testingStartAt,
  range,
  unavailable,
  now = Date.now()
}: {
  mergeAt: string | null | undefined
  testingStartAt?: string | null | undefined
  range?: { readonly earliest: string; readonly latest: string } | null | undefined
  unavailable?: string | null | undefined
  now?: number
}) => {
  if (mergeAt === null || mergeAt === undefined) {
    const why =
      unavailable === null || unavailable === undefined ? "no estimate" : (NO_ESTIMATE[unavailable] ?? unavailable)
    return (
      <span class="eta muted" title={why}>
        —
      </span>
    )
  }
  const at = new Date(mergeAt)
  const start =
    testingStartAt === null || testingStartAt === undefined || Date.parse(testingStartAt) <= now
      ? ""
      : ` · testing starts ${fromNow(testingStartAt, now)} (${new Date(testingStartAt).toLocaleString()})`
  const between =
    range === null || range === undefined
      ? ""
      : ` · between ${new Date(range.earliest).toLocaleString()} and ${new Date(range.latest).toLocaleString()}`
  return (
    <time class="eta" dateTime={mergeAt} title={`expected to merge ${at.toLocaleString()}${between}${start}`}>
      {fromNow(mergeAt, now)}
      {range !== null && range !== undefined && (
        <span class="eta-range muted">
          {" "}
          ({left(range.earliest, now)}–{left(range.latest, now)})
        </span>
      )}
    </time>
  )
}

export const Badge = ({ kind, children }: { kind: string; children: ComponentChildren }) => (
  <span class={`badge badge-${kind.replace(/[^a-z_]/gi, "")}`}>{children}</span>
)

export const StateBadge = ({ state }: { state: string }) => <Badge kind={state}>{state.replace(/_/g, " ")}</Badge>

export const PRIORITY: Record<number, string> = { 0: "urgent", 10: "high", 100: "medium", 200: "low" }
export const PriorityBadge = ({ value }: { value: number }) =>
  value === 100 ? null : (
    <Badge kind={`prio_${PRIORITY[value] ?? "custom"}`}>{PRIORITY[value] ?? `priority ${value}`}</Badge>
  )

export const ErrorView = ({ error }: { error: ApiFailure }) =>
  error.status === 404 ? (
    <NotFound message={error.message} />
  ) : (
    <div class="error" role="alert">
      <strong>{error.code}</strong>: {error.message}
    </div>
  )

export const NotFound = ({ message }: { message?: string }) => (
  <section class="card">
    <h1>Not found</h1>
    <p>{message ?? "There is no such page in your organization."}</p>
    <p>
      <a href="/">All queues</a>
    </p>
  </section>
)

export const Loading = () => (
  <p class="loading" aria-busy="true">
    Loading…
  </p>
)

export const Crumbs = ({ items }: { items: ReadonlyArray<readonly [string, string | undefined]> }) => (
  <nav aria-label="Breadcrumb" class="crumbs">
    <ol>
      {items.map(([label, href]) => (
        <li key={label}>
          {href === undefined ? <span aria-current="page">{label}</span> : <a href={href}>{label}</a>}
        </li>
      ))}
    </ol>
  </nav>
)

/** A link to another site (a status's, a check's, a ticket's) only when it is http or https; else the text alone. */
export const ExternalLink = ({ url, children }: { url: string | null | undefined; children: ComponentChildren }) => {
  const href = httpLink(url)
  return href === undefined ? children : <a href={href}>{children}</a>
}
