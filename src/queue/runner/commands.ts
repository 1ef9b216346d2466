import { Cause, Effect, FiberMap } from "effect"
import { GitError, heldRefLock } from "../GitHost.ts"
import type { Command, PlannerEvent } from "../planner/index.ts"
import { buildRun } from "./build.ts"
import type { RunnerCtx } from "./context.ts"
import { recordNotes } from "./feedback.ts"
import { directMerge, merge } from "./merge.ts"

/** How long a command that failed unexpectedly waits before it runs again. */
export const RETRY_MS = 2_000

/**
 * Whether a command failed only because a ref's lock file exists: another git holds it for a moment, or a killed git
 * left it, which is removed once stale. Either passes by itself, so the retry is a warning, not an error.
 */
export const failedOnHeldLock = (cause: Cause.Cause<unknown>): boolean => {
  const errors = [...Cause.failures(cause), ...Cause.defects(cause)]
  return errors.length > 0 && errors.every((e) => e instanceof GitError && heldRefLock(e.stderr))
}

/** Runs one command; its results are the next round's events. One that fails unexpectedly is kept to run again. */
export const execute = (ctx: RunnerCtx, command: Command): Effect.Effect<ReadonlyArray<PlannerEvent>> => {
  const effect: Effect.Effect<ReadonlyArray<PlannerEvent>, unknown> = Effect.gen(function* () {
    switch (command._tag) {
      case "BuildRun":
        return yield* buildRun(ctx, command)
      case "DeleteBranch":
        yield* FiberMap.remove(ctx.ciJobs, command.runId)
        yield* ctx.git.deleteBranch(ctx.repo, command.branch)
        return []
      case "Merge":
        return yield* merge(ctx, command)
      case "TryDirectMerge":
        return yield* directMerge(ctx, command)
      case "Comment":
      case "SetStatus":
        yield* recordNotes(ctx, [command])
        return []
      case "ScheduleWake":
        ctx.nextWake = Math.min(ctx.nextWake, command.at)
        return []
      case "Wake":
        return [{ _tag: "Tick" }]
    }
  })
  return effect.pipe(
    Effect.catchAllCause((cause) => {
      // commands are idempotent: one that failed unexpectedly is tried again (a Merge left unanswered would leave
      // its entries merging for good)
      ctx.failed.push(command)
      const message = `command ${command._tag} failed; trying it again in ${RETRY_MS} ms`
      return Effect.as(
        failedOnHeldLock(cause) ? Effect.logWarning(message, cause) : Effect.logError(message, cause),
        [] as ReadonlyArray<PlannerEvent>
      )
    })
  )
}

/** The run a command acts on, if any. */
const runIdOf = (command: Command): string | null =>
  command._tag === "BuildRun"
    ? command.run.id
    : command._tag === "DeleteBranch" || command._tag === "Merge"
      ? command.runId
      : null

/**
 * Commands in groups that run one after another: those of one run in their order (a DeleteBranch never races its
 * own BuildRun), every other command alone. The groups run concurrently.
 */
export const byRun = (commands: ReadonlyArray<Command>): ReadonlyArray<ReadonlyArray<Command>> => {
  const groups: Array<Array<Command>> = []
  const ofRun = new Map<string, Array<Command>>()
  for (const command of commands) {
    const runId = runIdOf(command)
    const group = runId === null ? undefined : ofRun.get(runId)
    if (group !== undefined) {
      group.push(command)
      continue
    }
    const fresh = [command]
    groups.push(fresh)
    if (runId !== null) ofRun.set(runId, fresh)
  }
  return groups
}

/** Runs a round's commands: comments and statuses together first, then the others, 4 groups at a time. */
export const executeAll = (ctx: RunnerCtx, commands: ReadonlyArray<Command>) =>
  Effect.gen(function* () {
    const notes = commands.filter((c) => c._tag === "Comment" || c._tag === "SetStatus")
    if (notes.length > 0) {
      yield* recordNotes(ctx, notes).pipe(
        Effect.catchAllCause((cause) => {
          ctx.failed.push(...notes)
          return Effect.logError(`recording ${notes.length} comments and statuses failed; trying again`, cause)
        })
      )
    }
    const others = commands.filter((c) => c._tag !== "Comment" && c._tag !== "SetStatus")
    const groups = yield* Effect.forEach(
      byRun(others),
      (group) => Effect.forEach(group, (command) => execute(ctx, command)),
      { concurrency: 4 }
    )
    return groups.flat(2)
  })
