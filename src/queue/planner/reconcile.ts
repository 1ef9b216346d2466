import {
  type Ctx,
  eligible,
  entryIndex,
  finalEntries,
  freezeLets,
  isRunActive,
  mergeAllowed,
  notReadyDeadline,
  patchEntry,
  setState
} from "./context.ts"
import { pendingFailurePass } from "./failure.ts"
import { aloneInLane, chainableCount, createRunsParallel, planMergeParallel } from "./parallel.ts"
import { validityPass } from "./runs.ts"
import { createRunsSingle, planMergeSingle } from "./single.ts"
import type { Entry, MergePlan, RunRecord, StepResult } from "./types.ts"
import { Reasons } from "./types.ts"

const readinessPass = (ctx: Ctx): void => {
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if ((e.state !== "not_ready" && e.state !== "pending") || e.runId !== null || e.merging) continue
    if (e.directMerge === "trying" || e.segment !== null) continue
    const ok = eligible(ctx, e)
    if (ok && e.state === "not_ready")
      setState(ctx, i, "pending", Reasons.ready, { eligibleAt: e.eligibleAt ?? ctx.now })
    else if (!ok && e.state === "pending") setState(ctx, i, "not_ready", Reasons.notReady)
  }
}

const switchingPass = (ctx: Ctx): boolean => {
  const sw = ctx.switching
  // running runs finish and passed runs merge first: a run of the new mode must not be built on a merge to come
  if (sw === null || ctx.merging !== null || ctx.runs.some(isRunActive)) return false
  // ...unless no passed run can merge any more without a new run (an entry ahead of it went back to pending, and the
  // switch holds new runs back): waiting for it would never end
  if (ctx.runs.some((r) => r.status === "succeeded")) {
    const plan = ctx.config.mode === "single" ? planMergeSingle(ctx) : planMergeParallel(ctx)
    if (!mergeAllowed(ctx) || plan !== null) return false
  }
  ctx.switching = null
  ctx.config = { ...ctx.config, mode: sw.mode, state: sw.resumeState }
  ctx.reason = Reasons.modeSwitched
  return true
}

const directMergePass = (ctx: Ctx): void => {
  const cfg = ctx.config
  if (cfg.directMergeMode !== "always" || cfg.state !== "running" || ctx.switching !== null) return
  if (ctx.merging !== null || ctx.targetSha === null) return
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (e.state !== "pending" || e.runId !== null || e.directMerge !== "none" || e.segment !== null) continue
    if (!freezeLets(ctx, [e])) {
      if (cfg.mode === "single") return
      continue
    }
    const alone = cfg.mode === "single" ? chainableCount(ctx) === 1 && ctx.runs.length === 0 : aloneInLane(ctx, i)
    if (!alone) {
      if (cfg.mode === "single") return
      continue
    }
    patchEntry(ctx, i, { directMerge: "trying", merging: true })
    ctx.merging = {
      kind: "direct",
      runId: null,
      entryIds: [e.id],
      expectedSha: ctx.targetSha,
      newSha: null,
      rebaseOnto: false
    }
    ctx.commands.push({
      _tag: "TryDirectMerge",
      entryId: e.id,
      prNumber: e.prNumber,
      headSha: e.headSha,
      expectedSha: ctx.targetSha
    })
    return
  }
}

const mergePass = (ctx: Ctx): void => {
  if (ctx.merging !== null || !mergeAllowed(ctx)) return
  const plan: MergePlan | null = ctx.config.mode === "single" ? planMergeSingle(ctx) : planMergeParallel(ctx)
  if (plan === null) return
  const prNumbers: number[] = []
  const planned: Entry[] = []
  for (const id of plan.entryIds) {
    const i = entryIndex(ctx, id)
    if (i < 0) return
    prNumbers.push(ctx.entries[i]!.prNumber)
    planned.push(ctx.entries[i]!)
  }
  // extension (#31): passed runs wait at the head while a freeze is in force
  if (!freezeLets(ctx, planned)) return
  for (const id of plan.entryIds) patchEntry(ctx, entryIndex(ctx, id), { merging: true })
  const expectedSha = ctx.targetSha!
  ctx.merging = {
    kind: "run",
    runId: plan.runId,
    entryIds: plan.entryIds,
    expectedSha,
    newSha: plan.newSha,
    rebaseOnto: plan.rebaseOnto,
    ...(plan.verifiedBy !== undefined ? { verifiedBy: plan.verifiedBy } : {})
  }
  ctx.commands.push({
    _tag: "Merge",
    runId: plan.runId,
    entryIds: plan.entryIds,
    prNumbers,
    expectedSha,
    newSha: plan.newSha,
    rebaseOnto: plan.rebaseOnto,
    mergeMethod: ctx.config.mergeMethod
  })
}

export const reconcile = (ctx: Ctx): void => {
  readinessPass(ctx)
  for (let round = 0; round < 8; round++) {
    pendingFailurePass(ctx)
    validityPass(ctx)
    if (switchingPass(ctx)) {
      readinessPass(ctx)
      validityPass(ctx)
    }
    directMergePass(ctx)
    if (ctx.config.mode === "parallel") {
      createRunsParallel(ctx)
      break
    }
    if (!createRunsSingle(ctx)) break
  }
  mergePass(ctx)
  // timeouts
  const limit = ctx.config.testingTimeoutMinutes * 60_000
  for (const r of ctx.runs) {
    if (isRunActive(r)) {
      const at = (r.startedAt ?? r.createdAt) + limit
      if (ctx.wakeAt === null || at < ctx.wakeAt) ctx.wakeAt = at
    }
  }
  for (const e of ctx.entries) {
    if (e.state !== "not_ready") continue
    const at = notReadyDeadline(ctx, e)
    if (ctx.wakeAt === null || at < ctx.wakeAt) ctx.wakeAt = at
  }
}

export const finish = (ctx: Ctx): StepResult => {
  const entries = finalEntries(ctx)
  // forget bisection counters nobody refers to any more
  let counters = ctx.bisectionCounters
  const keys = ctx.ended || ctx.changedRuns.size > 0 ? Object.keys(counters) : []
  if (keys.length > 0) {
    const live = new Set<string>()
    for (const e of entries) if (e.segment !== null) live.add(e.segment.root)
    for (const r of ctx.runs) {
      live.add(r.id)
      if (r.parentRunId !== null) live.add(r.parentRunId)
    }
    const kept: Record<string, number> = {}
    let dropped = false
    for (const k of keys) {
      const root = k.endsWith("#seg") ? k.slice(0, -4) : k
      if (live.has(root)) kept[k] = counters[k]!
      else dropped = true
    }
    if (dropped) counters = kept
  }
  if (ctx.wakeAt !== null) ctx.commands.push({ _tag: "ScheduleWake", at: ctx.wakeAt })
  const runChanges: RunRecord[] = [...ctx.changedRuns.values()]
  return {
    state: {
      config: ctx.config,
      targetSha: ctx.targetSha,
      entries,
      runs: ctx.runs,
      nextSeq: ctx.nextSeq,
      merging: ctx.merging,
      switching: ctx.switching,
      bisectionCounters: counters,
      ...(ctx.freeze !== null ? { freeze: ctx.freeze } : {})
    },
    commands: ctx.commands,
    transitions: ctx.transitions,
    runChanges
  }
}
