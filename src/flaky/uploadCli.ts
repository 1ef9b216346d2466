import { existsSync, readFileSync, statSync } from "node:fs"
import * as path from "node:path"

/**
 * `upload` (contract.md §7): sends JUnit files to a running server and tells the CI job whether it may pass.
 *
 *   upload [--url URL] [--token T] --org <slug> --repo <host>/<owner>/<name> --sha <sha> --branch <branch>
 *          [--pr N] [--variant v] [--job name] [--exit-code N] <junit files or globs>
 *
 * Exit code: 0 when every failure is quarantined (or there is none); else `--exit-code` when given, else 1;
 * 2 for a usage error, an unreachable server or an error answer.
 */

export const UPLOAD_USAGE =
  "usage: upload [--url URL] [--token T] --org <slug> --repo <host>/<owner>/<name> --sha <sha> --branch <branch> " +
  "[--pr N] [--variant v] [--job name] [--exit-code N] <junit files or globs>"

export interface UploadIo {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
  readonly fetch: (input: string, init: RequestInit) => Promise<Response>
  readonly cwd: string
}

const defaultIo = (): UploadIo => ({
  out: (line) => console.log(line),
  err: (line) => console.error(line),
  fetch: (input, init) => fetch(input, init),
  cwd: process.cwd()
})

class UsageError extends Error {}

const VALUE_OPTIONS = ["url", "token", "org", "repo", "sha", "branch", "pr", "variant", "job", "exit-code"] as const
type OptionName = (typeof VALUE_OPTIONS)[number]

export interface UploadArgs {
  readonly options: Partial<Record<OptionName, string>>
  readonly files: ReadonlyArray<string>
}

export const parseUploadArgs = (argv: ReadonlyArray<string>): UploadArgs => {
  const options: Partial<Record<OptionName, string>> = {}
  const files: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? ""
    if (arg === "--") {
      files.push(...argv.slice(i + 1))
      break
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=")
      const name = (eq >= 0 ? arg.slice(2, eq) : arg.slice(2)) as OptionName
      if (!VALUE_OPTIONS.includes(name)) throw new UsageError(`unknown option ${arg}`)
      let value: string | undefined
      if (eq >= 0) value = arg.slice(eq + 1)
      else {
        value = argv[i + 1]
        i++
      }
      if (value === undefined) throw new UsageError(`--${name} needs a value`)
      options[name] = value
      continue
    }
    files.push(arg)
  }
  return { options, files }
}

const isGlob = (s: string) => /[*?[\]{}]/.test(s)

/** Expands the file arguments: plain paths must exist, globs are scanned with `Bun.Glob` (sorted, no duplicates). */
export const expandFiles = (patterns: ReadonlyArray<string>, cwd: string): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const pattern of patterns) {
    if (!isGlob(pattern)) {
      const full = path.resolve(cwd, pattern)
      if (!existsSync(full) || !statSync(full).isFile()) throw new UsageError(`no such file: ${pattern}`)
      out.add(full)
      continue
    }
    const absolute = path.isAbsolute(pattern)
    const base = absolute ? "/" : cwd
    const glob = new Bun.Glob(absolute ? pattern.slice(1) : pattern)
    const matched = [...glob.scanSync({ cwd: base, onlyFiles: true, dot: false })].sort()
    if (matched.length === 0) throw new UsageError(`no file matches ${pattern}`)
    for (const m of matched) out.add(path.resolve(base, m))
  }
  return [...out]
}

interface Summary {
  readonly upload_id: string
  readonly tests: number
  readonly passed: number
  readonly failed: number
  readonly skipped: number
  readonly ignored: number
  readonly quarantined_failures: number
  readonly unquarantined_failures: number
  readonly all_failures_quarantined: boolean
}

const integer = (name: string, raw: string | undefined, min: number): number | undefined => {
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw.trim()) || Number(raw) < min) throw new UsageError(`--${name} must be an integer ≥ ${min}`)
  return Number(raw)
}

export const runUpload = async (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>>,
  io: UploadIo = defaultIo()
): Promise<number> => {
  let request: { url: string; token: string; form: FormData; repo: string; count: number }
  let exitCode: number | undefined
  try {
    const { options, files } = parseUploadArgs(argv)
    const url = (options.url ?? env.GREENLINE_URL ?? "").replace(/\/+$/, "")
    const token = options.token ?? env.GREENLINE_TOKEN ?? ""
    if (url === "") throw new UsageError("--url (or GREENLINE_URL) is required")
    if (!/^https?:\/\//i.test(url)) throw new UsageError(`--url must be an http(s) URL, not ${url}`)
    if (token === "") throw new UsageError("--token (or GREENLINE_TOKEN) is required")
    for (const name of ["org", "repo", "sha", "branch"] as const) {
      if ((options[name] ?? "").trim() === "") throw new UsageError(`--${name} is required`)
    }
    const repoParts = (options.repo ?? "").split("/")
    const [host, owner, name] = repoParts
    if (repoParts.length !== 3 || !host || !owner || !name) {
      throw new UsageError(`--repo must be <host>/<owner>/<name>, not ${options.repo}`)
    }
    const pr = integer("pr", options.pr, 1)
    exitCode = integer("exit-code", options["exit-code"], 0)
    if (files.length === 0) throw new UsageError("no JUnit files given")
    const paths = expandFiles(files, io.cwd)
    const metadata = {
      repo: { host, owner, name },
      org_url_slug: options.org,
      sha: options.sha,
      branch: options.branch,
      ...(pr !== undefined ? { pr_number: pr } : {}),
      ...(options.variant !== undefined ? { variant: options.variant } : {}),
      ...(options.job !== undefined ? { job_name: options.job } : {})
    }
    const form = new FormData()
    form.append("metadata", JSON.stringify(metadata))
    for (const file of paths) {
      const gz = Bun.gzipSync(new Uint8Array(readFileSync(file)))
      form.append("junit", new File([gz], path.basename(file), { type: "application/gzip" }))
    }
    request = { url, token, form, repo: `${host}/${owner}/${name}`, count: paths.length }
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`upload: ${e.message}`)
      io.err(UPLOAD_USAGE)
      return 2
    }
    io.err(`upload: ${e instanceof Error ? e.message : String(e)}`)
    return 2
  }

  let response: Response
  try {
    response = await io.fetch(`${request.url}/v1/flaky-tests/upload`, {
      method: "POST",
      headers: { "x-api-token": request.token },
      body: request.form
    })
  } catch (e) {
    io.err(`upload: cannot reach ${request.url}: ${e instanceof Error ? e.message : String(e)}`)
    return 2
  }
  const text = await response.text().catch(() => "")
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  if (!response.ok) {
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error
    io.err(
      `upload: the server answered ${response.status}${error?.code ? ` ${error.code}` : ""}: ${error?.message ?? (text.slice(0, 500) || response.statusText)}`
    )
    return 2
  }
  const summary = body as Summary | undefined
  if (summary === undefined || typeof summary.tests !== "number") {
    io.err(`upload: unexpected answer from ${request.url}: ${text.slice(0, 200)}`)
    return 2
  }
  io.out(
    `Uploaded ${request.count} file${request.count === 1 ? "" : "s"} to ${request.repo} (upload ${summary.upload_id}): ` +
      `${summary.tests} tests, ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped, ${summary.ignored} ignored`
  )
  if (summary.failed === 0) {
    io.out("No failures.")
    return 0
  }
  io.out(`Failures: ${summary.quarantined_failures} quarantined, ${summary.unquarantined_failures} not quarantined`)
  if (summary.all_failures_quarantined) {
    io.out("Every failure is quarantined: this job may pass.")
    return 0
  }
  return exitCode ?? 1
}
