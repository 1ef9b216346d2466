import { Context, type Effect } from "effect"
import type { GitError, RepoNotFound, RepoRef } from "./GitHost.ts"

/**
 * Port: the built-in CI (`CI_COMMAND`, contract.md §5), which runs a shell command on a commit and tells its result.
 * The runner starts it for every test branch it builds; the composition root provides the adapter
 * (git-local/CommandCi.ts: a temporary checkout of the bare repository).
 */
export interface CommandCiInput {
  readonly repo: RepoRef
  readonly sha: string
  /** Run with `sh -c` in the checkout. */
  readonly command: string
  readonly timeoutMs: number
  /** Extra environment variables for the command. */
  readonly env?: Readonly<Record<string, string>>
}

export interface CommandCiResult {
  /** The exit code; 128 + signal number when the command was killed by a signal (e.g. 137 after a timeout). */
  readonly exitCode: number
  readonly timedOut: boolean
  /** Combined stdout + stderr; when longer than 1 MiB, a "[... truncated ...]" line followed by the tail. */
  readonly output: string
  readonly truncated: boolean
  readonly durationMs: number
}

export interface CommandCiService {
  readonly run: (input: CommandCiInput) => Effect.Effect<CommandCiResult, RepoNotFound | GitError>
}

export class CommandCi extends Context.Tag("greenline/CommandCi")<CommandCi, CommandCiService>() {}
