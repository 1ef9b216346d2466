import { Effect } from "effect"
import { type Command, type PlannerEvent, Reasons } from "../planner/index.ts"
import { resolveRequired } from "./build.ts"
import { type RunnerCtx, runOf, titles } from "./context.ts"

type Merge = Extract<Command, { _tag: "Merge" }>

const mergeFailed = (command: Merge, reason: string, actualTargetSha: string): PlannerEvent => ({
  _tag: "MergeFailed",
  runId: command.runId,
  entryIds: command.entryIds,
  reason,
  actualTargetSha
})

const mergeSucceeded = (command: Merge, newSha: string): PlannerEvent => ({
  _tag: "MergeSucceeded",
  runId: command.runId,
  entryIds: command.entryIds,
  newSha
})

/**
 * Events for the PRs of `prNumbers` whose head moved, that were closed, or (a host with pull requests of its own:
 * GitHub lists open ones only) that were merged outside the queue.
 */
export const headsMoved = (ctx: RunnerCtx, prNumbers: ReadonlyArray<number>) =>
  Effect.gen(function* () {
    const heads = yield* ctx.git.listPullHeads(ctx.repo)
    const events: Array<PlannerEvent> = []
    for (const pr of prNumbers) {
      const entry = ctx.state.entries.find((e) => e.prNumber === pr)
      const head = heads.get(pr)
      if (entry === undefined) continue
      if (head === undefined) {
        const merged =
          ctx.git.remotePullRequests?.(ctx.repo) === true &&
          (yield* ctx.git.getPullRequest(ctx.repo, pr).pipe(
            Effect.as(false),
            Effect.catchAll((e) => Effect.succeed(e._tag === "PrMerged"))
          ))
        events.push(
          merged
            ? { _tag: "MergedOutside", prNumber: pr, sha: entry.headSha }
            : { _tag: "Cancelled", prNumber: pr, reason: "PR_CLOSED" }
        )
      } else if (head !== entry.headSha) events.push({ _tag: "PrHeadMoved", prNumber: pr, sha: head })
    }
    return events
  })

/**
 * Events for the active PRs whose head the target's tip `tip` contains (a provider without pull requests of its own:
 * local Git): they were merged outside the queue. Entries the queue is merging are its own merge's.
 */
export const mergedHeads = (ctx: RunnerCtx, tip: string) =>
  Effect.gen(function* () {
    if (ctx.git.remotePullRequests?.(ctx.repo) === true) return [] as ReadonlyArray<PlannerEvent>
    const waiting = ctx.state.entries.filter(
      (e) => !e.merging && e.state !== "merged" && e.state !== "failed" && e.state !== "cancelled"
    )
    const found = yield* Effect.forEach(
      waiting,
      (e) =>
        ctx.git.isAncestor(ctx.repo, e.headSha, tip).pipe(
          Effect.orElseSucceed(() => false),
          Effect.map((contained) => (contained ? [e] : []))
        ),
      { concurrency: 4 }
    )
    return found.flat().map((e): PlannerEvent => ({ _tag: "MergedOutside", prNumber: e.prNumber, sha: e.headSha }))
  })

/** The commit the Merge lands: the tested one, or the lane replayed onto the expected target (null: it failed). */
const laneTip = (ctx: RunnerCtx, command: Merge) =>
  Effect.gen(function* () {
    if (!command.rebaseOnto) return command.newSha
    const run = runOf(ctx, command.runId)
    const base = run?.effectiveBase ?? run?.baseSha ?? command.expectedSha
    const rebased = yield* ctx.git
      .rebaseOnto({ repo: ctx.repo, baseSha: base, laneSha: command.newSha, ontoSha: command.expectedSha })
      .pipe(Effect.either)
    return rebased._tag === "Left" ? null : rebased.right
  })

/** Asks the host to merge; null when the target was not at the expected tip (nothing merged). */
const land = (ctx: RunnerCtx, command: Merge, newSha: string) =>
  Effect.gen(function* () {
    const names = yield* titles(ctx, command.entryIds)
    const pulls = command.entryIds.flatMap((id) => {
      const entry = ctx.state.entries.find((e) => e.id === id)
      return entry === undefined
        ? []
        : [{ prNumber: entry.prNumber, headSha: entry.headSha, title: names.get(id) ?? "" }]
    })
    const merged = yield* ctx.git
      .merge({
        repo: ctx.repo,
        branch: ctx.queue.branch,
        expectedOld: command.expectedSha,
        newSha,
        method: command.mergeMethod,
        pulls
      })
      .pipe(Effect.either)
    if (merged._tag === "Left" && merged.left._tag === "MergeRefused") {
      // the host refused to merge (GitHub's pull request merge API): the entries fail with its reason
      yield* Effect.logWarning(merged.left.message)
      return [mergeFailed(command, "GITHUB_API_MERGE_PR_FAILED", merged.left.actualSha ?? command.expectedSha)]
    }
    if (merged._tag === "Left") return yield* merged.left
    return merged.right === null ? null : [mergeSucceeded(command, merged.right)]
  })

/**
 * Merge: lands a passed run on the target by compare-and-swap from the tip the planner expects. A replayed Merge (the
 * service stopped before recording its result) finds the target moved: a host that merges through its pull
 * requests (GitHub) recognises what it merged and finishes the rest.
 */
export const merge = (ctx: RunnerCtx, command: Merge) =>
  Effect.gen(function* () {
    const current = yield* ctx.git.getBranchSha(ctx.repo, ctx.queue.branch)
    if (current === command.newSha && !command.rebaseOnto) return [mergeSucceeded(command, command.newSha)]
    if (current !== null && current !== command.expectedSha) {
      const tip = yield* laneTip(ctx, command)
      const landed = tip === null ? null : yield* land(ctx, command, tip)
      if (landed !== null) return landed
    }
    const moved = yield* headsMoved(ctx, command.prNumbers)
    if (moved.length > 0) return [...moved, mergeFailed(command, Reasons.prPushedTo, current ?? command.expectedSha)]
    if (current !== command.expectedSha) return [mergeFailed(command, "TARGET_MOVED", current ?? command.expectedSha)]
    const newSha = yield* laneTip(ctx, command)
    if (newSha === null) return [mergeFailed(command, Reasons.mergeRebaseFailed, command.expectedSha)]
    const landed = yield* land(ctx, command, newSha)
    if (landed !== null) return landed
    const actual = yield* ctx.git.getBranchSha(ctx.repo, ctx.queue.branch)
    return [mergeFailed(command, "TARGET_MOVED", actual ?? command.expectedSha)]
  })

/** TryDirectMerge: fast-forwards the target to a PR head that is up to date and passed its required statuses. */
export const directMerge = (ctx: RunnerCtx, command: Extract<Command, { _tag: "TryDirectMerge" }>) =>
  Effect.gen(function* () {
    const refuse = [
      { _tag: "DirectMergeResult", entryId: command.entryId, merged: false, newSha: null }
    ] satisfies ReadonlyArray<PlannerEvent>
    const upToDate = yield* ctx.git.isAncestor(ctx.repo, command.expectedSha, command.headSha)
    if (!upToDate) return refuse
    const required = yield* resolveRequired(ctx, command.headSha)
    if (required.statuses.length === 0) return refuse
    const verdict = yield* ctx.statuses.verdict(ctx.queue.repo.id, null, command.headSha, 0, required.statuses)
    if (verdict !== "success") return refuse
    const swapped = yield* ctx.git.compareAndSwap(ctx.repo, ctx.queue.branch, command.expectedSha, command.headSha)
    if (!swapped) return refuse
    return [
      { _tag: "DirectMergeResult", entryId: command.entryId, merged: true, newSha: command.headSha }
    ] satisfies ReadonlyArray<PlannerEvent>
  })
