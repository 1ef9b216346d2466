import { spawnSync } from "node:child_process"

/**
 * What the CI client touches of the outside world, so tests can replace it. The client runs on plain Node.js (≥ 20)
 * and on Bun: only `node:` modules and web globals (fetch, FormData, File), never `Bun.*`.
 */
export interface ClientIo {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
  readonly fetch: (input: string, init: RequestInit) => Promise<Response>
  readonly cwd: string
}

export const defaultIo = (): ClientIo => ({
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  fetch: (input, init) => fetch(input, init),
  cwd: process.cwd()
})

export type Env = Readonly<Record<string, string | undefined>>

/** A mistake in the command line: exit code 2 and the command's usage. */
export class UsageError extends Error {}

/** The server could not be reached, or answered with an error. */
export class ServerError extends Error {
  constructor(
    message: string,
    readonly reachable: boolean
  ) {
    super(message)
  }
}

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

/** The server and token: `--url`/`--token`, else GREENLINE_URL/GREENLINE_TOKEN. */
export const serverOf = (
  options: { readonly url?: string | undefined; readonly token?: string | undefined },
  env: Env
) => {
  const url = (nonEmpty(options.url, env.GREENLINE_URL) ?? "").replace(/\/+$/, "")
  const token = nonEmpty(options.token, env.GREENLINE_TOKEN) ?? ""
  if (url === "") throw new UsageError("--url (or GREENLINE_URL) is required")
  if (!/^https?:\/\//i.test(url)) throw new UsageError(`--url must be an http(s) URL, not ${url}`)
  if (token === "") throw new UsageError("--token (or GREENLINE_TOKEN) is required")
  return { url, token }
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

/** POSTs `body` as JSON to `/v1/<op>`; the parsed answer, or a ServerError saying what went wrong. */
export const call = async (io: ClientIo, server: Server, op: string, body: unknown): Promise<unknown> => {
  let response: Response
  try {
    response = await io.fetch(`${server.url}/v1/${op}`, {
      method: "POST",
      headers: { "x-api-token": server.token, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  } catch (e) {
    throw new ServerError(`cannot reach ${server.url}: ${e instanceof Error ? e.message : String(e)}`, false)
  }
  return answerOf(response, server)
}

export const answerOf = async (response: Response, server: Server): Promise<unknown> => {
  const text = await response.text().catch(() => "")
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  if (!response.ok) {
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error
    throw new ServerError(
      `the server answered ${response.status}${error?.code ? ` ${error.code}` : ""}: ${error?.message ?? (text.slice(0, 500) || response.statusText)}`,
      true
    )
  }
  if (body === undefined) throw new ServerError(`unexpected answer from ${server.url}: ${text.slice(0, 200)}`, true)
  return body
}
