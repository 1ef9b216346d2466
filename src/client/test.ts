import { spawn } from "node:child_process"
import { statSync } from "node:fs"
import { parseArgs } from "node:util"
import { type ClientIo, defaultIo, type Env, UsageError } from "./io.ts"
import {
  describeSummary,
  expandFiles,
  sendUpload,
  UPLOAD_OPTIONS,
  UPLOAD_OPTIONS_HELP,
  type UploadSummary,
  uploadTarget
} from "./upload.ts"

/**
 * `test -- <command...>`: runs the test command, uploads the JUnit files it wrote, and passes the job when the
 * command failed only on quarantined tests. It fails safe: without an answer from the server, the command's own
 * exit code stands.
 */

export const TEST_USAGE = `usage: greenline test [options] --junit <glob> [--junit <glob>...] -- <command> [args...]

Runs the test command, then uploads the JUnit XML files it wrote (files matching --junit, relative to the
current directory, written or rewritten by the command) to Greenline. When the command fails and every failing
test is quarantined, the job passes (exit 0); otherwise the command's exit code stands.
Fails safe: when the server cannot be reached or refuses the upload, a warning is printed and the command's
own exit code stands. A shell pipeline needs a shell: -- sh -c 'make test | tee log'.

  --junit GLOB           JUnit XML files the command writes, e.g. 'reports/**/*.xml' (repeatable; required)
${UPLOAD_OPTIONS_HELP}
  -h, --help             this text

Exit code: the command's own (0 also when it failed only on quarantined tests); 2 when the command line is wrong.
Trouble with the server (3 or 4 in the other commands) never changes it: it is a warning here.`

export interface Spawner {
  /** Runs `command` with the job's stdio; resolves with its exit code (128 + n for a signal). */
  readonly run: (command: string, args: ReadonlyArray<string>, cwd: string) => Promise<number>
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 }

export const nodeSpawner: Spawner = {
  run: (command, args, cwd) =>
    new Promise((resolve) => {
      const child = spawn(command, [...args], { cwd, stdio: "inherit" })
      // CI cancels a job with SIGINT or SIGTERM: pass it on to the tests, and report what they do with it
      const forward = (signal: NodeJS.Signals) => () => child.kill(signal)
      const onInt = forward("SIGINT")
      const onTerm = forward("SIGTERM")
      process.on("SIGINT", onInt)
      process.on("SIGTERM", onTerm)
      const done = (code: number) => {
        process.off("SIGINT", onInt)
        process.off("SIGTERM", onTerm)
        resolve(code)
      }
      child.on("error", (e) => {
        process.stderr.write(`greenline test: cannot run ${command}: ${e.message}\n`)
        done(127)
      })
      child.on("exit", (code, signal) => done(code ?? 128 + (SIGNALS[signal ?? ""] ?? 1)))
    })
}

export const runTest = async (
  argv: ReadonlyArray<string>,
  env: Env,
  io: ClientIo = defaultIo(),
  spawner: Spawner = nodeSpawner
): Promise<number> => {
  const dash = argv.indexOf("--")
  const own = dash >= 0 ? argv.slice(0, dash) : argv
  const command = dash >= 0 ? argv.slice(dash + 1) : []
  let values: ReturnType<typeof parse>["values"]
  try {
    values = parse(own).values
    if (values.help) {
      io.out(TEST_USAGE)
      return 0
    }
    if (command.length === 0 || command[0] === undefined) throw new UsageError("no command given after --")
    if ((values.junit ?? []).length === 0) throw new UsageError("--junit <glob> is required")
  } catch (e) {
    io.err(`test: ${e instanceof Error ? e.message : String(e)}`)
    io.err(TEST_USAGE.split("\n")[0] ?? "")
    return 2
  }
  const [program, ...args] = command as [string, ...string[]]
  // the reports there before the command ran, with their times: only what the command writes (or rewrites) counts
  const junit = values.junit ?? []
  const before = new Map<string, number>()
  try {
    for (const f of expandFiles(junit, io.cwd, { allowEmpty: true })) before.set(f, statSync(f).mtimeMs)
  } catch {}
  const code = await spawner.run(program, args, io.cwd)
  const warn = (message: string) => {
    io.err(`greenline: warning: ${message}; the test command's exit code (${code}) stands`)
    return code
  }
  let target: ReturnType<typeof uploadTarget>
  let files: ReadonlyArray<string>
  try {
    target = uploadTarget(values, env, io.cwd)
    files = expandFiles(junit, io.cwd, { allowEmpty: true }).filter((f) => before.get(f) !== statSync(f).mtimeMs)
  } catch (e) {
    return warn(`cannot upload: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (files.length === 0) return warn(`no JUnit file matching ${junit.join(", ")} was written`)
  let summary: UploadSummary
  try {
    summary = await sendUpload(io, target.server, target.metadata, files)
  } catch (e) {
    return warn(`the results were not uploaded: ${e instanceof Error ? e.message : String(e)}`)
  }
  describeSummary(io, files.length, target.repo, summary)
  if (code === 0) return 0
  if (summary.failed > 0 && summary.all_failures_quarantined) {
    io.out(`The test command exited with ${code}, but every failure is quarantined: this job passes.`)
    return 0
  }
  if (summary.failed === 0)
    io.err(`greenline: the test command exited with ${code} without a failing test in its reports`)
  return code
}

const parse = (argv: ReadonlyArray<string>) => {
  try {
    return parseArgs({
      args: [...argv],
      options: { ...UPLOAD_OPTIONS, junit: { type: "string", multiple: true } },
      allowPositionals: false,
      strict: true
    })
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
}
