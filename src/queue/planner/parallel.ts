/**
 * Parallel mode: each entry's run is built on the tip plus only the entries ahead of it that it depends on
 * (intersecting impacted targets, transitively). Disjoint lanes test and merge independently; a lane whose run
 * was built on an older tip merges with `rebaseOnto` (the shell combines it with the current tip).
 */
import { type Ctx, entryIndex, isChainable, runsAllowed, takeId, unmergedItems } from "./context.ts"
import { mayVouchAhead } from "./failure.ts"
import { parallelDeps } from "./order.ts"
import { countActive, createRun } from "./runs.ts"
import type { MergePlan } from "./types.ts"

export const createRunsParallel = (ctx: Ctx): void => {
  if (!runsAllowed(ctx)) return
  let slots = ctx.config.concurrency - countActive(ctx, "main")
  for (let i = 0; i < ctx.entries.length && slots > 0; i++) {
    const e = ctx.entries[i]!
    if (e.state !== "pending" || e.runId !== null || e.merging || e.directMerge === "trying") continue
    const deps = parallelDeps(ctx, i, null)
    createRun(ctx, takeId(ctx), "main", null, deps, [e], true)
    slots--
  }
}

export const planMergeParallel = (ctx: Ctx): MergePlan | null => {
  let best: { plan: MergePlan; pos: number } | null = null
  for (const run of ctx.runs) {
    if (run.status !== "succeeded") continue
    const items = unmergedItems(run)
    if (!mayVouchAhead(ctx, run, items)) continue
    const last = items[items.length - 1]
    if (last === undefined) continue
    const k = run.items.findIndex((it) => it.entryId === last.entryId)
    const sha = run.commits[k]
    if (sha === undefined) continue
    const pos = entryIndex(ctx, run.testedEntryIds[0]!)
    if (best !== null && best.pos <= pos) continue
    best = {
      pos,
      plan: {
        runId: run.id,
        entryIds: items.map((it) => it.entryId),
        newSha: sha,
        rebaseOnto: run.effectiveBase !== ctx.targetSha
      }
    }
  }
  return best?.plan ?? null
}

/** An entry is alone in its lane when nothing ahead of it shares a target. */
export const aloneInLane = (ctx: Ctx, i: number): boolean => parallelDeps(ctx, i, null).length === 0

export const chainableCount = (ctx: Ctx): number => {
  let n = 0
  for (const e of ctx.entries) if (isChainable(e)) n++
  return n
}
