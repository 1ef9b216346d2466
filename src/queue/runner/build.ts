import { Effect, Option } from "effect"
import { GitHost } from "../GitHost.ts"
import type { Command, PlannerEvent, RunRecord } from "../planner/index.ts"
import { Reasons } from "../planner/index.ts"

type MergeMethod = Extract<Command, { _tag: "BuildRun" }>["mergeMethod"]

import { readRequiredStatuses } from "../trunkConfig.ts"
import { startCi } from "./ci.ts"
import { type RunnerCtx, titles } from "./context.ts"
import { statusCheckName } from "./feedback.ts"
import { completion } from "./verdict.ts"

/** The statuses a run must pass: the queue's own list, the repository's .trunk config, or branch protection. */
export const resolveRequired = (ctx: RunnerCtx, sha: string) =>
  Effect.gen(function* () {
    const { queue, git, repo } = ctx
    if (queue.config.requiredStatuses.length > 0) {
      return { statuses: queue.config.requiredStatuses, source: "merge_instance" as const }
    }
    const fromFile = yield* readRequiredStatuses(repo, sha).pipe(
      Effect.provideService(GitHost, git),
      Effect.orElseSucceed(() => null)
    )
    if (fromFile !== null && fromFile.statuses.length > 0) {
      return { statuses: fromFile.statuses, source: "trunk_config" as const }
    }
    // the queue's own status check (set on PR heads) may be required by the branch; it never runs on test branches
    const own = statusCheckName(queue.branch)
    const fromProtection = (yield* git
      .requiredStatusChecks(repo, queue.branch)
      .pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))).filter((name) => name !== own)
    if (fromProtection.length > 0) {
      return { statuses: fromProtection, source: "repo_provider_branch_protection" as const }
    }
    return { statuses: [] as ReadonlyArray<string>, source: null }
  })

const pushBranch = (ctx: RunnerCtx, run: RunRecord, method: MergeMethod) =>
  Effect.gen(function* () {
    const names = yield* titles(
      ctx,
      run.items.map((i) => i.entryId)
    )
    return yield* ctx.git.buildTestBranch({
      repo: ctx.repo,
      branch: run.branch,
      baseSha: run.baseSha,
      method,
      items: run.items.map((i) => ({ prNumber: i.prNumber, headSha: i.headSha, title: names.get(i.entryId) ?? "" })),
      pullRequest: ctx.queue.config.createPrsForTestingBranches ? { base: ctx.queue.branch } : undefined
    })
  })

/**
 * BuildRun: records the run's status window, pushes its test branch, records what it requires, starts the built-in
 * CI, and tells the verdict when the statuses are there already.
 */
export const buildRun = (ctx: RunnerCtx, command: Extract<Command, { _tag: "BuildRun" }>) =>
  Effect.gen(function* () {
    const run = command.run
    // a run that ended before its build ran (cancelled in the same round, or a retried build): its branch is not
    // pushed (its DeleteBranch follows or ran already)
    if (!ctx.state.runs.some((r) => r.id === run.id && r.status === "building")) return []
    // statuses count for this run from now on (database clock), not those of an earlier run that built the same
    // test-branch sha; recorded before the branch is pushed, so that a replay of this build after a crash keeps the
    // window open from here (setRequirements keeps the earliest start) and a status reported between the push and
    // the record still counts
    const since = yield* ctx.statuses.clock
    if ((yield* ctx.statuses.requirements(run.id)) === null)
      yield* ctx.statuses.setRequirements(run.id, [], null, since)
    const built = yield* pushBranch(ctx, run, command.mergeMethod).pipe(Effect.either)
    if (built._tag === "Left") {
      const error = built.left
      const conflict = error._tag === "MergeConflict"
      if (!conflict) yield* Effect.logWarning("building a test branch failed", error)
      return [
        {
          _tag: "RunBuildFailed",
          runId: run.id,
          entryId: conflict ? (run.items[error.index]?.entryId ?? null) : null,
          reason: conflict ? Reasons.mergeConflict : "START_TEST_RUN_FAILED"
        }
      ] satisfies ReadonlyArray<PlannerEvent>
    }
    const { sha, commits } = built.right
    if (Option.isSome(ctx.probe)) yield* ctx.probe.value.afterPush(run.id, sha)
    const required = yield* resolveRequired(ctx, sha)
    yield* ctx.statuses.setRequirements(run.id, required.statuses, required.source, since)
    const events: Array<PlannerEvent> = [{ _tag: "RunBuilt", runId: run.id, testBranchSha: sha, commits }]
    if (required.statuses.length === 0) {
      events.push({
        _tag: "RunCompleted",
        runId: run.id,
        outcome: "failed",
        reason: "START_TEST_RUN_NO_REQUIRED_STATUSES"
      })
      return events
    }
    yield* startCi(ctx, run, sha)
    const verdict = yield* ctx.statuses.verdict(ctx.queue.repo.id, run.id, sha, run.createdAt)
    return [...events, ...Option.toArray(yield* completion(ctx, run, sha, verdict))]
  })

/**
 * Taking a queue over: the test branch of a run in progress may be missing (the last owner died while it pushed, or
 * it was deleted); the build is deterministic, so pushing it again gives the same sha.
 */
export const rebuildMissingBranches = (ctx: RunnerCtx) =>
  Effect.gen(function* () {
    for (const run of ctx.state.runs) {
      if (run.status !== "in_progress" || run.testBranchSha === null) continue
      const onHost = yield* ctx.git.getBranchSha(ctx.repo, run.branch).pipe(Effect.orElseSucceed(() => null))
      if (onHost === run.testBranchSha) continue
      const rebuilt = yield* pushBranch(ctx, run, ctx.state.config.mergeMethod).pipe(Effect.either)
      if (rebuilt._tag === "Left") yield* Effect.logWarning(`rebuilding test branch ${run.branch} failed`, rebuilt.left)
    }
  })
