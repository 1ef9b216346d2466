/**
 * Runs: creation, cancellation, the validity check every step performs (a run is kept only while its content is
 * exactly what its entries will be merged with), and the bookkeeping after a merge.
 */
import { addRun, type Ctx, endRun, entryIndex, isRunActive, itemOf, setState, unmergedItems } from "./context.ts"
import { lastTestedIndex, parallelDeps, singleExpected } from "./order.ts"
import type { Entry, Run, RunItem } from "./types.ts"
import { Reasons } from "./types.ts"

export const branchFor = (prNumber: number, id: string): string => `trunk-merge/pr-${prNumber}/${id}`

export const createRun = (
  ctx: Ctx,
  id: string,
  queueType: "main" | "bisection",
  parentRunId: string | null,
  prefix: readonly Entry[],
  tested: readonly Entry[],
  parallel: boolean
): Run => {
  const base = ctx.targetSha!
  const items: RunItem[] = []
  for (const e of prefix) items.push(itemOf(e))
  for (const e of tested) items.push(itemOf(e))
  const run: Run = {
    id,
    branch: branchFor(tested[0]!.prNumber, id),
    queueType,
    parentRunId,
    baseSha: base,
    items,
    testedEntryIds: tested.map((e) => e.id),
    dependentPrs: parallel ? prefix.map((e) => e.prNumber) : [],
    status: "building",
    createdAt: ctx.now,
    startedAt: null,
    endedAt: null,
    testBranchSha: null,
    commits: [],
    failureReason: null,
    effectiveBase: base,
    mergedEntryIds: []
  }
  addRun(ctx, run)
  for (const e of tested) {
    const i = entryIndex(ctx, e.id)
    setState(ctx, i, "testing", Reasons.testRunStarted, { runId: id, eligibleAt: e.eligibleAt ?? ctx.now })
  }
  return run
}

/** Cancel a run; its tested entries that are still waiting on it go back to pending. */
export const cancelRun = (ctx: Ctx, i: number, reason: string): void => {
  const run = endRun(ctx, i, "cancelled", reason)
  releaseTested(ctx, run, reason)
}

export const releaseTested = (ctx: Ctx, run: Run, reason: string): void => {
  for (const id of run.testedEntryIds) {
    const j = entryIndex(ctx, id)
    if (j < 0) continue
    const e = ctx.entries[j]!
    if (e.runId !== run.id) continue
    if (e.state === "testing" || e.state === "tests_passed") setState(ctx, j, "pending", reason, { runId: null })
    else ctx.entries[j] = { ...e, runId: null }
  }
}

const sameItems = (a: readonly RunItem[], b: readonly Entry[]): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!
    const y = b[i]!
    if (x.entryId !== y.id || x.headSha !== y.headSha) return false
  }
  return true
}

/** Whether a run is still exactly what its tested entries need. */
export const runIsValid = (ctx: Ctx, run: Run): boolean => {
  if (ctx.merging !== null && ctx.merging.runId === run.id) return true
  for (const id of run.testedEntryIds) {
    const j = entryIndex(ctx, id)
    if (j < 0) return false
    const e = ctx.entries[j]!
    if (e.runId !== run.id) return false
    if (e.state !== "testing" && e.state !== "tests_passed") return false
  }
  const last = lastTestedIndex(ctx, run)
  if (last < 0) return false
  const unmerged = unmergedItems(run)
  if (ctx.config.mode === "single") {
    if (run.effectiveBase !== ctx.targetSha) return false
    return sameItems(unmerged, singleExpected(ctx, last, run))
  }
  // parallel: one tested entry per run; its dependencies ahead, then itself
  if (run.testedEntryIds.length !== 1) return false
  const expected = parallelDeps(ctx, last, run)
  expected.push(ctx.entries[last]!)
  return sameItems(unmerged, expected)
}

export const validityPass = (ctx: Ctx): void => {
  for (let i = 0; i < ctx.runs.length; ) {
    const run = ctx.runs[i]!
    if (runIsValid(ctx, run)) {
      i++
      continue
    }
    cancelRun(ctx, i, ctx.reason)
  }
}

/** When other lanes merged (rebased onto the tip) the items at the front of a built run, its remaining items apply onto
 * the run's own commit after them: a later `rebaseOnto` must replay only those, not the merged ones again. Null when the
 * merged items are not a prefix of the run's items or the run is not built. */
const baseAfterMergedPrefix = (run: Run, mergedEntryIds: readonly string[]): string | null => {
  const merged = new Set(mergedEntryIds)
  const first = run.items.findIndex((it) => !merged.has(it.entryId))
  if (first <= 0) return null
  if (run.items.slice(first).some((it) => merged.has(it.entryId))) return null
  return run.commits[first - 1] ?? null
}

/** After entries merged (in `mergedIds` order) from `expectedSha` to `newSha`: mark them merged in every run, and
 * move the base of runs whose content is a fast-forward continuation. Runs left with nothing to merge end. */
export const afterMerge = (
  ctx: Ctx,
  mergedIds: readonly string[],
  expectedSha: string,
  newSha: string,
  fastForward: boolean
): void => {
  const set = new Set(mergedIds)
  for (let i = 0; i < ctx.runs.length; ) {
    const run = ctx.runs[i]!
    const unmerged = unmergedItems(run)
    const hit = unmerged.filter((it) => set.has(it.entryId))
    if (hit.length === 0) {
      i++
      continue
    }
    let consistent = fastForward && run.effectiveBase === expectedSha && hit.length === mergedIds.length
    if (consistent) {
      for (let k = 0; k < hit.length; k++) {
        if (unmerged[k]!.entryId !== mergedIds[k]) {
          consistent = false
          break
        }
      }
    }
    const mergedEntryIds = [...run.mergedEntryIds, ...hit.map((it) => it.entryId)]
    const next = {
      ...run,
      mergedEntryIds,
      effectiveBase: consistent ? newSha : (baseAfterMergedPrefix(run, mergedEntryIds) ?? run.effectiveBase)
    }
    ctx.runs[i] = next
    if (ctx.changedRuns.has(next.id)) ctx.changedRuns.set(next.id, next)
    if (next.mergedEntryIds.length >= next.items.length) {
      // fully merged: a succeeded run is done, a still running one is superseded
      if (isRunActive(next)) endRun(ctx, i, "cancelled", Reasons.merged)
      else endRun(ctx, i, null)
      continue
    }
    i++
  }
}

export const countActive = (ctx: Ctx, type: "main" | "bisection"): number => {
  let n = 0
  for (const r of ctx.runs) if (r.queueType === type && isRunActive(r)) n++
  return n
}

/** Main runs that passed and wait to merge. */
export const countPassed = (ctx: Ctx): number => {
  let n = 0
  for (const r of ctx.runs) if (r.queueType === "main" && r.status === "succeeded") n++
  return n
}
