import { readFileSync, statSync } from "node:fs"
import * as path from "node:path"
import { parseArgs } from "node:util"
import { gzipSync } from "node:zlib"
import { globSync, isDynamicPattern } from "tinyglobby"
import {
  branchOf,
  type ClientIo,
  CONNECTION_HELP,
  CONNECTION_OPTIONS,
  defaultIo,
  type Env,
  EXIT,
  EXIT_CODES_HELP,
  exitCodeOf,
  orgOf,
  parseAnswer,
  prOf,
  repoOf,
  type Server,
  ServerError,
  send,
  serverOf,
  shaOf,
  UsageError
} from "./io.ts"

/**
 * `upload` (contract.md §7): sends JUnit files to a running server and tells the CI job whether it may pass.
 * Exit code: 0 when every failure is quarantined (or there is none); else `--exit-code` when given, else 1;
 * 2 for a usage error, 3 when the server cannot be reached, 4 when it answers with an error (io.ts `EXIT`).
 */

export type UploadIo = ClientIo

/** The options `upload` and `test` share: where to send the results, and what they are of. */
export const UPLOAD_OPTIONS = {
  url: { type: "string" },
  token: { type: "string" },
  org: { type: "string" },
  repo: { type: "string" },
  sha: { type: "string" },
  branch: { type: "string" },
  pr: { type: "string" },
  variant: { type: "string" },
  job: { type: "string" },
  help: { type: "boolean", short: "h" },
  ...CONNECTION_OPTIONS
} as const

export const UPLOAD_OPTIONS_HELP = `Where the results go:
  --url URL              the Greenline server (default: $GREENLINE_URL)
  --token TOKEN          an API token of the organization (default: $GREENLINE_TOKEN)
  --org SLUG             the organization (default: $GREENLINE_ORG)
  --repo HOST/OWNER/NAME the repository, e.g. github.com/acme/web (default: $GREENLINE_REPO)
What they are of:
  --sha SHA              the tested commit (default: $GITHUB_SHA, $CI_COMMIT_SHA, or git rev-parse HEAD)
  --branch NAME          its branch (default: $GITHUB_HEAD_REF, $GITHUB_REF_NAME, $CI_COMMIT_REF_NAME, or git)
  --pr N                 the pull request (default: from $GITHUB_REF refs/pull/N/..., or $CI_MERGE_REQUEST_IID)
  --variant NAME         a variant of the same tests (e.g. an OS), kept apart in the statistics
  --job NAME             the CI job's name
How it talks to the server:
${CONNECTION_HELP}`

export const UPLOAD_USAGE = `usage: greenline upload [options] <JUnit files or globs...>

Uploads JUnit XML files to Greenline, which records every result, classifies the tests (healthy, flaky,
broken) and answers which failures are quarantined. Globs are relative to the current directory and quoted so
the shell does not expand them, e.g. 'reports/**/*.xml'.

${UPLOAD_OPTIONS_HELP}
  --exit-code N          the exit code when a failure is not quarantined (default 1; e.g. the test command's)
  -h, --help             this text

The upload carries an idempotency key: sent again after a lost answer, it is stored once.

${EXIT_CODES_HELP}
--exit-code N replaces 1.`

/** Expands the file arguments: plain paths must exist, globs are matched relative to `cwd` (sorted, no duplicates). */
export const expandFiles = (
  patterns: ReadonlyArray<string>,
  cwd: string,
  options: { readonly allowEmpty?: boolean } = {}
): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const pattern of patterns) {
    if (!isDynamicPattern(pattern)) {
      const full = path.resolve(cwd, pattern)
      let isFile = false
      try {
        isFile = statSync(full).isFile()
      } catch {}
      if (!isFile) {
        if (options.allowEmpty) continue
        throw new UsageError(`no such file: ${pattern}`)
      }
      out.add(full)
      continue
    }
    const matched = globSync(pattern, { cwd, onlyFiles: true, dot: false, absolute: true }).sort()
    if (matched.length === 0 && !options.allowEmpty) throw new UsageError(`no file matches ${pattern}`)
    for (const m of matched) out.add(path.resolve(m))
  }
  return [...out]
}

export interface UploadSummary {
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

type UploadValues = {
  readonly [K in keyof typeof UPLOAD_OPTIONS]?: (typeof UPLOAD_OPTIONS)[K]["type"] extends "string" ? string : boolean
}

/** What an upload needs besides its files, from the options, the environment and the checkout. */
export const uploadTarget = (values: UploadValues, env: Env, cwd: string) => {
  const server = serverOf(values, env)
  const repo = repoOf(values.repo, env)
  const metadata = {
    repo,
    org_url_slug: orgOf(values.org, env),
    sha: shaOf(values.sha, env, cwd),
    branch: branchOf(values.branch, env, cwd),
    ...((pr) => (pr !== undefined ? { pr_number: pr } : {}))(prOf(values.pr, env)),
    ...(values.variant !== undefined ? { variant: values.variant } : {}),
    ...(values.job !== undefined ? { job_name: values.job } : {})
  }
  return { server, metadata, repo: `${repo.host}/${repo.owner}/${repo.name}` }
}

export type UploadTarget = ReturnType<typeof uploadTarget>

/**
 * Sends `files` (gzipped) in one multipart upload; the server's summary, or a ServerError. It carries an
 * `Idempotency-Key` (one per upload, the same in each attempt): when an answer is lost and the upload is sent again,
 * the server stores it once and answers with the first one's summary.
 */
export const sendUpload = async (
  io: ClientIo,
  server: Server,
  metadata: unknown,
  files: ReadonlyArray<string>
): Promise<UploadSummary> => {
  const form = new FormData()
  form.append("metadata", JSON.stringify(metadata))
  for (const file of files) {
    const gz = gzipSync(readFileSync(file))
    form.append("junit", new File([new Uint8Array(gz)], path.basename(file), { type: "application/gzip" }))
  }
  // the multipart body as bytes, once: every attempt sends the same (its type read first: Bun forgets it once the
  // body is read)
  const encoded = new Response(form)
  const contentType = encoded.headers.get("content-type") ?? "multipart/form-data"
  const body = new Uint8Array(await encoded.arrayBuffer())
  const answer = await send(
    io,
    server,
    {
      method: "POST",
      path: "/v1/flaky-tests/upload",
      headers: {
        "content-type": contentType,
        "idempotency-key": crypto.randomUUID()
      },
      body
    },
    "idempotent"
  )
  const summary = parseAnswer(answer, server) as UploadSummary
  if (typeof summary.tests !== "number") throw new ServerError(`unexpected answer from ${server.url}`, true)
  return summary
}

export const describeSummary = (io: ClientIo, count: number, repo: string, summary: UploadSummary) => {
  io.out(
    `Uploaded ${count} file${count === 1 ? "" : "s"} to ${repo} (upload ${summary.upload_id}): ` +
      `${summary.tests} tests, ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped, ${summary.ignored} ignored`
  )
  if (summary.failed === 0) io.out("No failures.")
  else
    io.out(`Failures: ${summary.quarantined_failures} quarantined, ${summary.unquarantined_failures} not quarantined`)
}

const integer = (name: string, raw: string | undefined, min: number): number | undefined => {
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw.trim()) || Number(raw) < min) throw new UsageError(`--${name} must be an integer ≥ ${min}`)
  return Number(raw)
}

export const runUpload = async (argv: ReadonlyArray<string>, env: Env, io: UploadIo = defaultIo()): Promise<number> => {
  let target: UploadTarget
  let files: ReadonlyArray<string>
  let exitCode: number | undefined
  try {
    const { values, positionals } = (() => {
      try {
        return parseArgs({
          args: [...argv],
          options: { ...UPLOAD_OPTIONS, "exit-code": { type: "string" } },
          allowPositionals: true,
          strict: true
        })
      } catch (e) {
        throw new UsageError(e instanceof Error ? e.message : String(e))
      }
    })()
    if (values.help) {
      io.out(UPLOAD_USAGE)
      return 0
    }
    target = uploadTarget(values, env, io.cwd)
    exitCode = integer("exit-code", values["exit-code"], 0)
    if (positionals.length === 0) throw new UsageError("no JUnit files given")
    files = expandFiles(positionals, io.cwd)
  } catch (e) {
    io.err(`upload: ${e instanceof Error ? e.message : String(e)}`)
    if (e instanceof UsageError) io.err(UPLOAD_USAGE.split("\n")[0] ?? "")
    return exitCodeOf(e)
  }
  let summary: UploadSummary
  try {
    summary = await sendUpload(io, target.server, target.metadata, files)
  } catch (e) {
    io.err(`upload: ${e instanceof Error ? e.message : String(e)}`)
    return exitCodeOf(e)
  }
  describeSummary(io, files.length, target.repo, summary)
  if (summary.failed === 0) return EXIT.ok
  if (summary.all_failures_quarantined) {
    io.out("Every failure is quarantined: this job may pass.")
    return EXIT.ok
  }
  return exitCode ?? EXIT.failed
}
