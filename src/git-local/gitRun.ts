/** Running `git`: its environment, output, failures, and stale ref locks a killed git leaves. */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { GitError } from "../queue/GitHost.ts"
import { gitEnvironment } from "./gitEnv.ts"

// ---------------------------------------------------------------------------------------------------------------
// Running git
// ---------------------------------------------------------------------------------------------------------------

interface GitRunOptions {
  /** Bytes written to git's standard input. */
  readonly stdin?: string
  /** Extra environment variables (e.g. GIT_AUTHOR_NAME). */
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
}

interface GitRunResult {
  readonly exitCode: number
  readonly stdout: string
  readonly stdoutBytes: Uint8Array
  readonly stderr: string
}

export const encoder = new TextEncoder()
export const decoder = new TextDecoder()

/**
 * Runs `git --git-dir=<gitDir> -c core.hooksPath=/dev/null <args>` and returns its exit code and output; fails only
 * when the process cannot be run. Interrupting the effect kills the process.
 */
export const runGit = (
  gitDir: string,
  args: ReadonlyArray<string>,
  options: GitRunOptions = {}
): Effect.Effect<GitRunResult, GitError> =>
  Effect.async<GitRunResult, GitError>((resume) => {
    const cmd = ["git", `--git-dir=${gitDir}`, "-c", "core.hooksPath=/dev/null", ...args]
    const spawn = () =>
      Bun.spawn(cmd, {
        env: gitEnvironment(options.env),
        cwd: options.cwd ?? os.tmpdir(),
        stdin: options.stdin === undefined ? "ignore" : encoder.encode(options.stdin),
        stdout: "pipe",
        stderr: "pipe"
      })
    let proc: ReturnType<typeof spawn>
    try {
      proc = spawn()
    } catch (cause) {
      resume(Effect.fail(new GitError({ args, exitCode: null, stderr: "", message: `cannot run git: ${cause}` })))
      return
    }
    Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]).then(
      ([buffer, stderr, exitCode]) => {
        const stdoutBytes = new Uint8Array(buffer)
        resume(Effect.succeed({ exitCode, stdout: decoder.decode(stdoutBytes), stdoutBytes, stderr }))
      },
      (cause) =>
        resume(Effect.fail(new GitError({ args, exitCode: null, stderr: "", message: `git failed: ${cause}` })))
    )
    return Effect.sync(() => {
      if (proc.exitCode === null) proc.kill("SIGKILL")
    })
  })

export const failure = (args: ReadonlyArray<string>, result: GitRunResult): GitError =>
  new GitError({
    args,
    exitCode: result.exitCode,
    stderr: result.stderr,
    message: `git ${args[0] ?? ""} exited with ${result.exitCode}: ${result.stderr.trim().split("\n").slice(-3).join(" | ")}`
  })

/** A ref lock older than this is left by a git that was killed (a live git holds one for milliseconds). */
const STALE_LOCK_MS = 10_000

/**
 * Removes the `*.lock` file that git's `stderr` says it could not create, when it lies inside `gitDir` and is older
 * than STALE_LOCK_MS (a killed git leaves it behind, and every later update of that ref fails). True when removed.
 */
const clearStaleLock = (gitDir: string, stderr: string): Effect.Effect<boolean> =>
  Effect.sync(() => {
    const lock = /Unable to create '([^']+\.lock)': File exists/.exec(stderr)?.[1]
    if (lock === undefined) return false
    const resolved = path.resolve(gitDir, lock)
    if (!resolved.startsWith(`${path.resolve(gitDir)}${path.sep}`)) return false
    try {
      if (Date.now() - fs.statSync(resolved).mtimeMs < STALE_LOCK_MS) return false
      fs.rmSync(resolved, { force: true })
      return true
    } catch {
      return false
    }
  })

/** `git update-ref`, which removes a stale lock of the ref (clearStaleLock) and tries once more. */
export const updateRef = (gitDir: string, args: ReadonlyArray<string>): Effect.Effect<GitRunResult, GitError> =>
  Effect.flatMap(runGit(gitDir, args), (result) =>
    result.exitCode === 0
      ? Effect.succeed(result)
      : Effect.flatMap(clearStaleLock(gitDir, result.stderr), (cleared) =>
          cleared ? runGit(gitDir, args) : Effect.succeed(result)
        )
  )

/** Runs git and returns its standard output; a non-zero exit fails with GitError. */
export const git = (
  gitDir: string,
  args: ReadonlyArray<string>,
  options: GitRunOptions = {}
): Effect.Effect<string, GitError> =>
  Effect.flatMap(runGit(gitDir, args, options), (result) =>
    result.exitCode === 0 ? Effect.succeed(result.stdout) : Effect.fail(failure(args, result))
  )

// ---------------------------------------------------------------------------------------------------------------
