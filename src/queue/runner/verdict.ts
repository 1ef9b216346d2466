import { Effect, Option } from "effect"
import type { PlannerEvent, RunRecord } from "../planner/index.ts"
import type { Verdict } from "../Statuses.ts"
import { runCompletion } from "../TestVerdicts.ts"
import type { RunnerCtx } from "./context.ts"

/**
 * A run's verdict as the planner's event (none while it is pending; TestVerdicts.ts `runCompletion`), with a failure
 * explained by the flaky-test results when the queue's settings ask for it (#20): only quarantined failures pass,
 * known-flaky ones retry the run.
 */
export const completion = (
  ctx: RunnerCtx,
  run: RunRecord,
  sha: string,
  verdict: Verdict
): Effect.Effect<Option.Option<PlannerEvent>> =>
  verdict === "pending"
    ? Effect.succeed(Option.none())
    : Effect.map(
        runCompletion(ctx.testVerdicts, ctx.queue.config, ctx.flakyRetries, ctx.queue.repo.id, run, sha, verdict),
        Option.some
      )

/** The verdict of a run in progress from the statuses stored, as an event. */
export const evaluate = (ctx: RunnerCtx, run: RunRecord) =>
  Effect.gen(function* () {
    if (run.status !== "in_progress" || run.testBranchSha === null) return Option.none<PlannerEvent>()
    const verdict = yield* ctx.statuses.verdict(ctx.queue.repo.id, run.id, run.testBranchSha, run.createdAt)
    return yield* completion(ctx, run, run.testBranchSha, verdict)
  })

/** Verdicts of every run in progress (a status reported while no runner listened, or before its run was recorded). */
export const reevaluate = (ctx: RunnerCtx) =>
  Effect.gen(function* () {
    const out: Array<PlannerEvent> = []
    for (const run of ctx.state.runs) {
      const e = yield* evaluate(ctx, run)
      if (Option.isSome(e)) out.push(e.value)
    }
    return out
  })
