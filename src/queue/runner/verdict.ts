import { Effect, Option } from "effect"
import { type PlannerEvent, Reasons, type RunRecord } from "../planner/index.ts"
import type { Verdict } from "../Statuses.ts"
import type { RunnerCtx } from "./context.ts"

/** The one mapping from a run's verdict to the planner's event: none while it is pending. */
export const completionOf = (runId: string, verdict: Verdict): Option.Option<PlannerEvent> =>
  verdict === "pending"
    ? Option.none()
    : Option.some({
        _tag: "RunCompleted",
        runId,
        outcome: verdict === "success" ? "succeeded" : "failed",
        reason: verdict === "success" ? Reasons.testsPassed : Reasons.requiredStatusFailed
      })

/** The verdict of a run in progress from the statuses stored, as an event. */
export const evaluate = (ctx: RunnerCtx, run: RunRecord) =>
  Effect.gen(function* () {
    if (run.status !== "in_progress" || run.testBranchSha === null) return Option.none<PlannerEvent>()
    const verdict = yield* ctx.statuses.verdict(ctx.queue.repo.id, run.id, run.testBranchSha, run.createdAt)
    return completionOf(run.id, verdict)
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
