/**
 * The built-in command CI (`CI_COMMAND`, contract.md §5): runs a shell command in a temporary checkout of a commit.
 *
 * The checkout is a detached worktree of the bare repository (`git worktree add --detach`) in a fresh temporary
 * folder, removed afterwards in every case (success, failure, timeout, interruption). The command runs as
 * `sh -c <command>` in its own process group with stderr merged into stdout; at the timeout (or on interruption) the
 * whole group is killed with SIGKILL. Output keeps the last 1 MiB.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Scope } from "effect"
import { Effect, Layer, Schedule } from "effect"
import { CommandCi, type CommandCiInput, type CommandCiResult, type CommandCiService } from "../queue/CiRunner.ts"
import { GitError } from "../queue/GitHost.ts"
import { environmentWithoutGit } from "./gitEnv.ts"
import { git, runGit } from "./gitRun.ts"
import { existingGitDir, formatRepo } from "./repoPaths.ts"

export const OUTPUT_LIMIT_BYTES = 1024 * 1024

// the port this adapter implements (the queue's)
export { CommandCi, type CommandCiInput, type CommandCiResult, type CommandCiService } from "../queue/CiRunner.ts"

const commandEnv = (extra: Readonly<Record<string, string>>): Record<string, string> =>
  Object.assign(environmentWithoutGit(), extra)

/**
 * Git's worktree commands are not safe side by side on one repository: each reads the administrative files of every
 * worktree, and one that reads them while another `worktree add` is writing its own fails ("failed to read
 * .../worktrees/<id>/commondir"), which failed CI runs at random. Here they take turns per repository.
 */
const worktreeLocks = new Map<string, Effect.Semaphore>()
const withWorktreeLock = <A, E, R>(gitDir: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  let lock = worktreeLocks.get(gitDir)
  if (lock === undefined) {
    lock = Effect.unsafeMakeSemaphore(1)
    worktreeLocks.set(gitDir, lock)
  }
  return lock.withPermits(1)(effect)
}

/** Attempts of `worktree add` (another process, e.g. a second instance on the same GIT_ROOT, may still collide). */
const ADD_ATTEMPTS = 3

/**
 * A detached worktree of `gitDir` at `sha` in a new temporary folder, removed (worktree metadata included) when the
 * scope closes.
 */
export const temporaryCheckout = (gitDir: string, sha: string): Effect.Effect<string, GitError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      if (!/^[0-9a-f]{40,64}$/.test(sha)) {
        return yield* new GitError({ args: [], exitCode: null, stderr: "", message: `not a full sha: '${sha}'` })
      }
      const add = Effect.gen(function* () {
        const parent = yield* Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "greenline-ci-")))
        const dir = path.join(parent, path.basename(parent))
        yield* git(gitDir, ["worktree", "add", "--detach", "--force", dir, sha]).pipe(
          Effect.tapError(() =>
            Effect.zipRight(
              Effect.sync(() => fs.rmSync(parent, { recursive: true, force: true })),
              Effect.ignore(runGit(gitDir, ["worktree", "prune"]))
            )
          )
        )
        return dir
      })
      return yield* withWorktreeLock(gitDir, add).pipe(
        Effect.retry({ times: ADD_ATTEMPTS - 1, schedule: Schedule.spaced("100 millis") })
      )
    }),
    (dir) =>
      Effect.gen(function* () {
        const removed = yield* withWorktreeLock(
          gitDir,
          runGit(gitDir, ["worktree", "remove", "--force", "--force", dir])
        )
        yield* Effect.sync(() => fs.rmSync(path.dirname(dir), { recursive: true, force: true }))
        if (removed.exitCode !== 0) yield* withWorktreeLock(gitDir, runGit(gitDir, ["worktree", "prune"]))
      }).pipe(Effect.ignore)
  )

const signalNumber = (signal: string | null): number => {
  if (signal === null) return -1
  const n = (os.constants.signals as Readonly<Record<string, number | undefined>>)[signal]
  return n === undefined ? -1 : 128 + n
}

class TailBuffer {
  private chunks: Array<Uint8Array> = []
  private size = 0
  truncated = false
  constructor(private readonly limit: number) {}
  push(chunk: Uint8Array): void {
    this.chunks.push(chunk)
    this.size += chunk.byteLength
    if (this.size > this.limit * 2) this.compact()
  }
  private compact(): void {
    const all = Buffer.concat(this.chunks)
    if (all.byteLength > this.limit) this.truncated = true
    const tail = all.subarray(Math.max(0, all.byteLength - this.limit))
    this.chunks = [tail]
    this.size = tail.byteLength
  }
  text(): string {
    this.compact()
    const body = new TextDecoder().decode(Buffer.concat(this.chunks))
    return this.truncated ? `[... output truncated, last ${this.limit} bytes kept ...]\n${body}` : body
  }
}

/**
 * Runs `sh -c command` in `cwd` (own process group, stderr merged into stdout), kills the group at `timeoutMs` or
 * on interruption.
 */
export const runShell = (input: {
  readonly cwd: string
  readonly command: string
  readonly timeoutMs: number
  readonly env?: Readonly<Record<string, string>>
  readonly outputLimitBytes?: number
}): Effect.Effect<CommandCiResult> =>
  Effect.async<CommandCiResult>((resume) => {
    const started = performance.now()
    const buffer = new TailBuffer(input.outputLimitBytes ?? OUTPUT_LIMIT_BYTES)
    let timedOut = false
    const spawn = () =>
      Bun.spawn(["sh", "-c", 'exec 2>&1; exec sh -c "$1"', "sh", input.command], {
        cwd: input.cwd,
        env: commandEnv(input.env ?? {}),
        stdin: "ignore",
        stdout: "pipe",
        stderr: "ignore",
        detached: true
      })
    let proc: ReturnType<typeof spawn>
    try {
      proc = spawn()
    } catch (cause) {
      resume(
        Effect.succeed({
          exitCode: 127,
          timedOut: false,
          output: `cannot run the command: ${cause}`,
          truncated: false,
          durationMs: 0
        })
      )
      return
    }
    const killGroup = () => {
      try {
        process.kill(-proc.pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
    const timer = setTimeout(
      () => {
        timedOut = true
        killGroup()
      },
      Math.max(0, input.timeoutMs)
    )
    const reader = proc.stdout.getReader()
    const drained = (async () => {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return
        buffer.push(value)
      }
    })().catch(() => undefined)
    proc.exited.then(async () => {
      clearTimeout(timer)
      const durationMs = Math.round(performance.now() - started)
      // Leftover background processes of the command would keep the pipe open: end them, then drain briefly.
      killGroup()
      let graceTimer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([drained, new Promise((r) => (graceTimer = setTimeout(r, 2000)))])
      clearTimeout(graceTimer)
      reader.cancel().catch(() => undefined)
      resume(
        Effect.succeed({
          exitCode: proc.exitCode ?? signalNumber(proc.signalCode),
          timedOut,
          output: buffer.text(),
          truncated: buffer.truncated,
          durationMs
        })
      )
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      killGroup()
    })
  })

/** Runs the command in a temporary checkout of `sha` of the bare repository `gitDir`. */
export const runInCheckout = (
  gitDir: string,
  input: Omit<CommandCiInput, "repo"> & { readonly repoLabel?: string }
): Effect.Effect<CommandCiResult, GitError> =>
  Effect.scoped(
    Effect.flatMap(temporaryCheckout(gitDir, input.sha), (cwd) =>
      runShell({
        cwd,
        command: input.command,
        timeoutMs: input.timeoutMs,
        env: {
          CI: "true",
          GREENLINE_SHA: input.sha,
          ...(input.repoLabel === undefined ? {} : { GREENLINE_REPO: input.repoLabel }),
          ...input.env
        }
      })
    )
  )

export const makeCommandCi = (gitRoot: string): CommandCiService => ({
  run: (input) =>
    Effect.flatMap(existingGitDir(gitRoot, input.repo), (gitDir) =>
      runInCheckout(gitDir, { ...input, repoLabel: formatRepo(input.repo) })
    )
})

/** The built-in command CI over the bare repositories under `gitRoot` (GIT_ROOT). */
export const CommandCiLayer = (gitRoot: string): Layer.Layer<CommandCi> =>
  Layer.succeed(CommandCi, makeCommandCi(gitRoot))
