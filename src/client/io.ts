import { spawnSync } from "node:child_process"
import { type HttpAnswer, nodeTransport, type Transport, TransportError } from "./http.ts"

/**
 * What the CI client touches of the outside world, so tests can replace it. The client runs on plain Node.js (≥ 20)
 * and on Bun: only `node:` modules and web globals (FormData, File, Response), never `Bun.*`.
 */
export interface ClientIo {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
  /** HTTP (http.ts: `nodeTransport`; tests hand in `fetchTransport` of the server's own handler) */
  readonly request: Transport
  /** waits between attempts (tests may skip the wait) */
  readonly sleep?: ((ms: number) => Promise<void>) | undefined
  readonly cwd: string
}

export const defaultIo = (): ClientIo => ({
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  request: nodeTransport,
  cwd: process.cwd()
})

export type Env = Readonly<Record<string, string | undefined>>

/**
 * The exit codes, the same for every command (`test -- <command>` exits with the command's own code unless every
 * failure is quarantined: it never fails a job for Greenline's sake).
 */
export const EXIT = {
  /** done; for upload and test: no failure, or every failure quarantined */
  ok: 0,
  /** upload: a failure that is not quarantined (or `--exit-code`) */
  failed: 1,
  /** the command line is wrong (an unknown option, a missing value, no such file) */
  usage: 2,
  /** the server could not be reached: DNS, connection refused, TLS, or no answer in time (after the retries) */
  unreachable: 3,
  /** the server answered with an error (4xx or 5xx, after the retries for the ones worth retrying) */
  refused: 4
} as const

export const EXIT_CODES_HELP = `Exit codes (every command): 0 done; 1 a failure that is not quarantined (upload); 2 a wrong command line;
3 the server could not be reached (DNS, refused, TLS, timeout); 4 the server answered with an error.
test -- <command> exits with the command's own code (0 when every failure is quarantined).`

/** A mistake in the command line: exit code 2 and the command's usage. */
export class UsageError extends Error {}

/** The server could not be reached (exit 3), or answered with an error (exit 4). */
export class ServerError extends Error {
  constructor(
    message: string,
    readonly reachable: boolean
  ) {
    super(message)
  }
}

/** The exit code of a command that failed with `error`. */
export const exitCodeOf = (error: unknown): number =>
  error instanceof UsageError
    ? EXIT.usage
    : error instanceof ServerError
      ? error.reachable
        ? EXIT.refused
        : EXIT.unreachable
      : EXIT.failed

/** `git <args>` in `cwd`, its trimmed output, or undefined when git is missing or fails. */
export const git = (cwd: string, ...args: ReadonlyArray<string>): string | undefined => {
  try {
    const r = spawnSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
    const out = r.status === 0 ? r.stdout.trim() : ""
    return out === "" ? undefined : out
  } catch {
    return undefined
  }
}

const nonEmpty = (...values: ReadonlyArray<string | undefined>) => values.find((v) => v !== undefined && v !== "")

/** The options every command takes for how it talks to the server (`parseArgs` specs). */
export const CONNECTION_OPTIONS = {
  timeout: { type: "string" },
  "connect-timeout": { type: "string" },
  retries: { type: "string" },
  "retry-delay": { type: "string" }
} as const

export const CONNECTION_HELP = `  --timeout SECONDS      give up on an answer after this long (default 60; $GREENLINE_TIMEOUT)
  --connect-timeout SECONDS
                         give up connecting after this long, TLS included (default 10; $GREENLINE_CONNECT_TIMEOUT)
  --retries N            attempts after the first, on connection errors, 429 and 5xx (default 3; $GREENLINE_RETRIES)
  --retry-delay SECONDS  the first retry's wait, doubled each time up to 10 s; a server's Retry-After (up to 60 s)
                         when longer (default 0.5)`

const DEFAULTS = { timeoutMs: 60_000, connectTimeoutMs: 10_000, retries: 3, retryDelayMs: 500 }

const secondsOption = (name: string, raw: string | undefined, fallback: number): number => {
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!/^\d+(\.\d+)?$/.test(raw.trim()) || !(value > 0) || value > 86_400) {
    throw new UsageError(`--${name} must be a number of seconds above 0, not ${raw}`)
  }
  return Math.round(value * 1000)
}

/** The server and token: `--url`/`--token`, else GREENLINE_URL/GREENLINE_TOKEN; the timeouts and retries. */
export const serverOf = (
  options: {
    readonly url?: string | undefined
    readonly token?: string | undefined
    readonly timeout?: string | undefined
    readonly "connect-timeout"?: string | undefined
    readonly retries?: string | undefined
    readonly "retry-delay"?: string | undefined
  },
  env: Env
) => {
  const url = (nonEmpty(options.url, env.GREENLINE_URL) ?? "").replace(/\/+$/, "")
  const token = nonEmpty(options.token, env.GREENLINE_TOKEN) ?? ""
  if (url === "") throw new UsageError("--url (or GREENLINE_URL) is required")
  if (!/^https?:\/\//i.test(url)) throw new UsageError(`--url must be an http(s) URL, not ${url}`)
  if (token === "") throw new UsageError("--token (or GREENLINE_TOKEN) is required")
  const retriesRaw = nonEmpty(options.retries, env.GREENLINE_RETRIES)
  if (retriesRaw !== undefined && !/^\d{1,2}$/.test(retriesRaw.trim())) {
    throw new UsageError(`--retries must be an integer from 0 to 99, not ${retriesRaw}`)
  }
  return {
    url,
    token,
    timeoutMs: secondsOption("timeout", nonEmpty(options.timeout, env.GREENLINE_TIMEOUT), DEFAULTS.timeoutMs),
    connectTimeoutMs: secondsOption(
      "connect-timeout",
      nonEmpty(options["connect-timeout"], env.GREENLINE_CONNECT_TIMEOUT),
      DEFAULTS.connectTimeoutMs
    ),
    retries: retriesRaw === undefined ? DEFAULTS.retries : Number(retriesRaw),
    retryDelayMs: secondsOption("retry-delay", options["retry-delay"], DEFAULTS.retryDelayMs)
  }
}

export type Server = ReturnType<typeof serverOf>

export interface RepoRef {
  readonly host: string
  readonly owner: string
  readonly name: string
}

/** `--repo host/owner/name`, else GREENLINE_REPO. */
export const repoOf = (value: string | undefined, env: Env): RepoRef => {
  const raw = nonEmpty(value, env.GREENLINE_REPO)
  if (raw === undefined) throw new UsageError("--repo (or GREENLINE_REPO) is required: <host>/<owner>/<name>")
  const parts = raw.split("/")
  const [host, owner, name] = parts
  if (parts.length !== 3 || !host || !owner || !name) {
    throw new UsageError(`--repo must be <host>/<owner>/<name>, not ${raw}`)
  }
  return { host, owner, name }
}

/** `--org`, else GREENLINE_ORG. */
export const orgOf = (value: string | undefined, env: Env): string => {
  const org = nonEmpty(value, env.GREENLINE_ORG)
  if (org === undefined) throw new UsageError("--org (or GREENLINE_ORG) is required")
  return org
}

/** The commit: `--sha`, else the CI's variable (GitHub Actions, GitLab CI), else `git rev-parse HEAD`. */
export const shaOf = (value: string | undefined, env: Env, cwd: string): string => {
  const sha = nonEmpty(value, env.GITHUB_SHA, env.CI_COMMIT_SHA) ?? git(cwd, "rev-parse", "HEAD")
  if (sha === undefined) throw new UsageError("--sha is required (no GITHUB_SHA, CI_COMMIT_SHA or git checkout)")
  return sha
}

/** The branch: `--branch`, else the CI's variable, else the checkout's branch. */
export const branchOf = (value: string | undefined, env: Env, cwd: string): string => {
  const branch =
    nonEmpty(value, env.GITHUB_HEAD_REF, env.GITHUB_REF_NAME, env.CI_COMMIT_REF_NAME) ??
    git(cwd, "rev-parse", "--abbrev-ref", "HEAD")
  if (branch === undefined || branch === "HEAD") throw new UsageError("--branch is required")
  return branch
}

/** The pull request: `--pr`, else GitHub's `refs/pull/N/merge` or GitLab's merge request. */
export const prOf = (value: string | undefined, env: Env): number | undefined => {
  const raw = nonEmpty(value, /^refs\/pull\/(\d+)\//.exec(env.GITHUB_REF ?? "")?.[1], env.CI_MERGE_REQUEST_IID)
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw.trim()) || Number(raw) < 1) throw new UsageError("--pr must be an integer ≥ 1")
  return Number(raw)
}

/**
 * Whether a request may be sent again after a failure that left it unknown whether the server acted on it (no
 * answer, a 5xx): reads, writes that set rather than add (submit, quarantine set), and uploads (their idempotency key
 * makes the server answer a repeated one with the first one's summary). Others are sent again only when they surely
 * never reached the server (no connection) or were refused without effect (429).
 */
export type Idempotency = "idempotent" | "once"

const MAX_RETRY_DELAY_MS = 10_000
const MAX_RETRY_AFTER_MS = 60_000

/** An HTTP answer worth another attempt: rate limited, or the server's (or a proxy's) failure. */
const retryable = (status: number) =>
  status === 429 || status === 502 || status === 503 || status === 504 || status === 500

const retryAfterMs = (headers: Readonly<Record<string, string>>): number | undefined => {
  const raw = headers["retry-after"]
  if (raw === undefined) return undefined
  const secondsValue = Number(raw)
  if (Number.isFinite(secondsValue) && secondsValue >= 0) return Math.min(MAX_RETRY_AFTER_MS, secondsValue * 1000)
  const at = Date.parse(raw)
  return Number.isNaN(at) ? undefined : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, at - Date.now()))
}

const envelopeOf = (text: string): { code?: string; message?: string } | undefined => {
  try {
    return (JSON.parse(text) as { error?: { code?: string; message?: string } }).error
  } catch {
    return undefined
  }
}

/**
 * Sends a request to `path` of the server, with the timeouts and the retries of `server`: on connection errors, 429
 * and 5xx, waiting the backoff (or the server's Retry-After when longer) between attempts. Resolves with a 2xx
 * answer; fails with a ServerError that names the cause (unreachable: exit 3; an error answer: exit 4).
 */
export const send = async (
  io: ClientIo,
  server: Server,
  request: {
    readonly method: "GET" | "POST"
    readonly path: string
    readonly headers: Readonly<Record<string, string>>
    readonly body?: Uint8Array | undefined
  },
  idempotency: Idempotency
): Promise<HttpAnswer> => {
  const sleep = io.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)))
  const attempts = server.retries + 1
  for (let attempt = 1; ; attempt++) {
    const after = attempt > 1 ? ` (after ${attempt} attempts)` : ""
    let wait: number | undefined
    let failure: ServerError
    try {
      const answer = await io.request({
        url: `${server.url}${request.path}`,
        method: request.method,
        headers: { "x-api-token": server.token, ...request.headers },
        body: request.body,
        connectTimeoutMs: server.connectTimeoutMs,
        timeoutMs: server.timeoutMs
      })
      if (answer.status >= 200 && answer.status < 300) return answer
      const error = envelopeOf(answer.text)
      failure = new ServerError(
        `the server answered ${answer.status}${error?.code ? ` ${error.code}` : ""}: ${error?.message ?? (answer.text.slice(0, 500) || "no message")}${after}`,
        true
      )
      // a 5xx may have done something: only what is safe to repeat is repeated (a 429 did nothing)
      if (!retryable(answer.status) || (answer.status !== 429 && idempotency === "once") || attempt >= attempts) {
        throw failure
      }
      wait = retryAfterMs(answer.headers)
    } catch (error) {
      if (error instanceof ServerError) throw error
      const t =
        error instanceof TransportError
          ? error
          : new TransportError(
              `cannot reach ${server.url}: ${error instanceof Error ? error.message : String(error)}`,
              "other",
              true
            )
      failure = new ServerError(`${t.message}${after}`, false)
      // a refused certificate does not change by itself; a request that may have arrived is repeated only when safe
      if (t.kind === "tls" || (t.sent && idempotency === "once") || attempt >= attempts) throw failure
    }
    const backoff = Math.min(MAX_RETRY_DELAY_MS, server.retryDelayMs * 2 ** (attempt - 1))
    const delay = Math.max(backoff, wait ?? 0)
    io.err(
      `greenline: ${failure.message}; trying again in ${Number((delay / 1000).toFixed(delay < 1000 ? 2 : 1))} s (attempt ${attempt + 1} of ${attempts})`
    )
    await sleep(delay)
  }
}

/** POSTs `body` as JSON to `/v1/<op>`; the parsed answer, or a ServerError saying what went wrong. */
export const call = async (
  io: ClientIo,
  server: Server,
  op: string,
  body: unknown,
  idempotency: Idempotency
): Promise<unknown> => {
  const answer = await send(
    io,
    server,
    {
      method: "POST",
      path: `/v1/${op}`,
      headers: { "content-type": "application/json" },
      body: new TextEncoder().encode(JSON.stringify(body))
    },
    idempotency
  )
  return parseAnswer(answer, server)
}

/** The JSON of a 2xx answer, or a ServerError when it is not JSON. */
export const parseAnswer = (answer: HttpAnswer, server: Server): unknown => {
  try {
    return JSON.parse(answer.text)
  } catch {
    throw new ServerError(`unexpected answer from ${server.url}: ${answer.text.slice(0, 200)}`, true)
  }
}
