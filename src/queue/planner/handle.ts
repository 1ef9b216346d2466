import {
  type Ctx,
  eligible,
  endRun,
  entryIndex,
  findActiveByPr,
  isRunActive,
  isTerminal,
  notify,
  notReadyDeadline,
  patchEntry,
  patchRun,
  runIndex,
  setState
} from "./context.ts"
import { runFailed } from "./failure.ts"
import { insertEntry, isLocked, removeEntryAt } from "./order.ts"
import { afterMerge, cancelRun } from "./runs.ts"
import type { Entry, MergeInFlight, PlannerConfig, PlannerEvent } from "./types.ts"
import { Reasons } from "./types.ts"

const onSubmitted = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "Submitted" }>): void => {
  const i = findActiveByPr(ctx, ev.prNumber)
  // a new priority for an entry that ended meanwhile (merged, say): nothing to change, nothing to queue again
  if (i < 0 && ev.update === true) return
  if (i >= 0) {
    // an entry changes in place (its lock may go): the next submission of a run scans again
    if (ctx.burst !== null) ctx.burst.lastPos = -1
    const e = ctx.entries[i]!
    let next: Entry = { ...e, noBatch: ev.noBatch, ready: ev.ready }
    if (ev.ignoreFreeze === true) next = { ...next, ignoreFreeze: true }
    if (ev.headSha !== e.headSha) {
      forgetLane(ctx, e.id)
      next = { ...next, headSha: ev.headSha, lane: null, directMerge: "none" }
    }
    const priorityChanged = ev.priority !== e.priority
    next = { ...next, priority: ev.priority }
    ctx.entries[i] = next
    if (priorityChanged) {
      const urgent = ev.priority === 0
      if (urgent || !isLocked(next)) {
        if (urgent) ctx.reason = Reasons.skipTheLine
        removeEntryAt(ctx, i)
        insertEntry(ctx, next)
      }
    }
    return
  }
  const entry: Entry = {
    id: ev.entryId,
    prNumber: ev.prNumber,
    headSha: ev.headSha,
    priority: ev.priority,
    noBatch: ev.noBatch,
    submittedAt: ctx.now,
    seq: ctx.nextSeq++,
    state: "not_ready",
    stateChangedAt: ctx.now,
    runId: null,
    verifiedByTestRun: null,
    lane: null,
    ready: ev.ready,
    eligibleAt: null,
    failure: null,
    segment: null,
    merging: false,
    cancelRequested: null,
    directMerge: "none",
    ...(ev.ignoreFreeze === true ? { ignoreFreeze: true } : {})
  }
  const ok = eligible(ctx, entry)
  const first: Entry = ok ? { ...entry, state: "pending", eligibleAt: ctx.now } : entry
  if (first.priority === 0) ctx.reason = Reasons.skipTheLine
  insertEntry(ctx, first)
  ctx.transitions.push({
    entryId: first.id,
    prNumber: first.prNumber,
    from: null,
    to: first.state,
    reason: Reasons.submitted,
    at: ctx.now,
    runId: null,
    verifiedByTestRun: null
  })
  notify(ctx, first, null, first.state, Reasons.submitted)
}

const cancelEntry = (ctx: Ctx, i: number, reason: string): void => {
  const e = ctx.entries[i]!
  if (isTerminal(e)) return
  if (e.merging) {
    patchEntry(ctx, i, { cancelRequested: reason })
    return
  }
  ctx.reason = Reasons.prerequisiteCancelled
  setState(ctx, i, "cancelled", reason, { runId: null, failure: null, segment: null })
}

const onRestart = (ctx: Ctx, prNumber: number): void => {
  const i = findActiveByPr(ctx, prNumber)
  if (i < 0) return
  const e = ctx.entries[i]!
  if (e.merging) return
  ctx.reason = Reasons.restart
  if (e.state === "pending_failure") {
    setState(ctx, i, "pending", Reasons.restart, { failure: null, runId: null })
    return
  }
  if (e.runId !== null) {
    const r = runIndex(ctx, e.runId)
    if (r >= 0) cancelRun(ctx, r, Reasons.restart)
  }
}

const onRunBuilt = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "RunBuilt" }>): void => {
  const r = runIndex(ctx, ev.runId)
  if (r < 0 || ctx.runs[r]!.status !== "building") return
  patchRun(ctx, r, {
    status: "in_progress",
    startedAt: ctx.now,
    testBranchSha: ev.testBranchSha,
    commits: ev.commits.slice()
  })
}

const onRunBuildFailed = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "RunBuildFailed" }>): void => {
  const r = runIndex(ctx, ev.runId)
  if (r < 0 || ctx.runs[r]!.status !== "building") return
  runFailed(ctx, r, ev.reason, ev.entryId)
}

const onRunCompleted = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "RunCompleted" }>): void => {
  const r = runIndex(ctx, ev.runId)
  if (r < 0) return
  const run = ctx.runs[r]!
  if (ev.outcome === "failed") {
    if (!isRunActive(run)) return
    runFailed(ctx, r, ev.reason, null)
    return
  }
  if (run.status !== "in_progress") return
  patchRun(ctx, r, { status: "succeeded", endedAt: ctx.now })
  for (const id of run.testedEntryIds) {
    const j = entryIndex(ctx, id)
    const e = ctx.entries[j]
    if (e !== undefined && e.runId === run.id && e.state === "testing") {
      setState(
        ctx,
        j,
        "tests_passed",
        ev.reason === Reasons.testsPassedQuarantinedOnly ? ev.reason : Reasons.testsPassed
      )
    }
  }
}

const onTick = (ctx: Ctx): void => {
  const limit = ctx.config.testingTimeoutMinutes * 60_000
  for (let r = 0; r < ctx.runs.length; ) {
    const run = ctx.runs[r]!
    if (isRunActive(run) && ctx.now >= (run.startedAt ?? run.createdAt) + limit) {
      runFailed(ctx, r, Reasons.timeout, null)
      continue
    }
    r++
  }
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (e.state === "not_ready" && ctx.now >= notReadyDeadline(ctx, e)) cancelEntry(ctx, i, Reasons.notReadyTimeout)
  }
}

const clearMerging = (ctx: Ctx): void => {
  const m = ctx.merging
  if (m === null) return
  ctx.merging = null
  for (const id of m.entryIds) {
    const i = entryIndex(ctx, id)
    if (i < 0) continue
    const e = ctx.entries[i]!
    patchEntry(ctx, i, { merging: false, directMerge: m.kind === "direct" ? "tried" : e.directMerge })
  }
}

const applyPendingCancels = (ctx: Ctx, ids: readonly string[]): void => {
  for (const id of ids) {
    const i = entryIndex(ctx, id)
    const e = ctx.entries[i]
    if (e !== undefined && e.cancelRequested !== null && !e.merging) cancelEntry(ctx, i, e.cancelRequested)
  }
}

const targetMoved = (ctx: Ctx, sha: string): void => {
  if (sha === ctx.targetSha) return
  const m = ctx.merging
  if (m !== null && m.kind === "run" && m.newSha === sha && !m.rebaseOnto) {
    mergeSucceeded(ctx, m, sha)
    return
  }
  if (m !== null) {
    clearMerging(ctx)
    applyPendingCancels(ctx, m.entryIds)
  }
  ctx.targetSha = sha
  ctx.reason = Reasons.manualPush
  for (let r = 0; r < ctx.runs.length; ) {
    if (ctx.runs[r]!.effectiveBase !== sha) cancelRun(ctx, r, Reasons.manualPush)
    else r++
  }
}

const mergeSucceeded = (ctx: Ctx, m: MergeInFlight, newSha: string): void => {
  ctx.merging = null
  const prev = ctx.targetSha ?? m.expectedSha
  ctx.targetSha = newSha
  const verified = m.kind === "run" ? m.runId : null
  for (const id of m.entryIds) {
    const i = entryIndex(ctx, id)
    if (i < 0) continue
    const e = ctx.entries[i]!
    if (isTerminal(e)) continue
    const by = m.verifiedBy?.[id] ?? verified
    setState(
      ctx,
      i,
      "merged",
      m.kind === "direct" ? Reasons.directMerge : Reasons.merged,
      { merging: false, verifiedByTestRun: by, failure: null, cancelRequested: null },
      by
    )
  }
  afterMerge(ctx, m.entryIds, prev, newSha, m.kind === "run" && !m.rebaseOnto)
}

const sameIds = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((x, k) => x === b[k])

const onMergeSucceeded = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "MergeSucceeded" }>): void => {
  const m = ctx.merging
  if (m === null || m.kind !== "run" || m.runId !== ev.runId || !sameIds(m.entryIds, ev.entryIds)) return
  mergeSucceeded(ctx, m, ev.newSha)
}

const onMergeFailed = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "MergeFailed" }>): void => {
  const m = ctx.merging
  if (m === null || m.kind !== "run" || m.runId !== ev.runId || !sameIds(m.entryIds, ev.entryIds)) return
  if (!m.rebaseOnto && ev.actualTargetSha === m.newSha) {
    // the target already is the merged commit (a replayed Merge after a crash): it did merge
    mergeSucceeded(ctx, m, m.newSha!)
    return
  }
  clearMerging(ctx)
  applyPendingCancels(ctx, m.entryIds)
  if (ev.actualTargetSha !== ctx.targetSha) {
    targetMoved(ctx, ev.actualTargetSha)
    return
  }
  const r = m.runId === null ? -1 : runIndex(ctx, m.runId)
  if (m.rebaseOnto) {
    // the lane's change does not combine with the current tip: test it again on the tip
    if (r >= 0) cancelRun(ctx, r, Reasons.mergeRebaseFailed)
    return
  }
  if (r >= 0) endRun(ctx, r, "failed", ev.reason)
  ctx.reason = Reasons.prerequisiteFailed
  for (const id of m.entryIds) {
    const i = entryIndex(ctx, id)
    if (i >= 0 && !isTerminal(ctx.entries[i]!)) {
      setState(ctx, i, "failed", ev.reason, { runId: null, failure: null, segment: null })
    }
  }
}

const onConfigChanged = (ctx: Ctx, config: PlannerConfig): void => {
  const wanted: PlannerConfig = config.state === "switching_modes" ? { ...config, state: "running" } : config
  const current = ctx.switching?.mode ?? ctx.config.mode
  const busy = ctx.runs.some(isRunActive) || ctx.merging !== null
  if (ctx.switching !== null) {
    if (wanted.mode === ctx.config.mode) {
      ctx.switching = null
      ctx.config = wanted
    } else {
      ctx.switching = { mode: wanted.mode, resumeState: wanted.state }
      ctx.config = { ...wanted, mode: ctx.config.mode, state: "switching_modes" }
    }
    return
  }
  if (wanted.mode !== current && busy) {
    ctx.switching = { mode: wanted.mode, resumeState: wanted.state }
    ctx.config = { ...wanted, mode: ctx.config.mode, state: "switching_modes" }
    return
  }
  if (wanted.mode !== ctx.config.mode) ctx.reason = Reasons.modeSwitched
  ctx.config = wanted
}

/** Drops `id` from the overlap lists of the other entries (its targets changed or are no longer known). */
const forgetLane = (ctx: Ctx, id: string): void => {
  for (let j = 0; j < ctx.entries.length; j++) {
    const lane = ctx.entries[j]!.lane
    if (lane !== null && typeof lane !== "string" && lane.overlaps.includes(id)) {
      patchEntry(ctx, j, { lane: { overlaps: lane.overlaps.filter((x) => x !== id) } })
    }
  }
}

const onImpactedTargets = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "ImpactedTargetsSet" }>): void => {
  const i = findActiveByPr(ctx, ev.prNumber)
  if (i < 0) return
  const e = ctx.entries[i]!
  if (e.headSha !== ev.sha) return
  forgetLane(ctx, e.id)
  const lane = typeof ev.lane === "string" ? ev.lane : { overlaps: ev.lane.overlaps.filter((id) => id !== e.id) }
  const wasNotReady = e.state === "not_ready"
  const next = patchEntry(ctx, i, { lane })
  if (wasNotReady && ctx.config.mode === "parallel" && !isLocked(next)) {
    // re-place it now that its lane is known
    removeEntryAt(ctx, i)
    insertEntry(ctx, next)
  }
}

const onDirectMergeResult = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "DirectMergeResult" }>): void => {
  const m = ctx.merging
  if (m === null || m.kind !== "direct" || m.entryIds[0] !== ev.entryId) return
  if (ev.merged && ev.newSha !== null) {
    mergeSucceeded(ctx, m, ev.newSha)
    return
  }
  clearMerging(ctx)
  applyPendingCancels(ctx, m.entryIds)
}

export const handle = (ctx: Ctx, ev: PlannerEvent): void => {
  switch (ev._tag) {
    case "FreezeChanged":
      ctx.freeze = ev.freeze
      return
    case "Submitted":
      onSubmitted(ctx, ev)
      return
    case "Cancelled": {
      const i = findActiveByPr(ctx, ev.prNumber)
      if (i >= 0) cancelEntry(ctx, i, ev.reason)
      return
    }
    case "PrHeadMoved": {
      const i = findActiveByPr(ctx, ev.prNumber)
      if (i >= 0 && ctx.entries[i]!.headSha !== ev.sha) cancelEntry(ctx, i, Reasons.prPushedTo)
      return
    }
    case "RestartRequested":
      onRestart(ctx, ev.prNumber)
      return
    case "RunBuilt":
      onRunBuilt(ctx, ev)
      return
    case "RunBuildFailed":
      onRunBuildFailed(ctx, ev)
      return
    case "RunCompleted":
      onRunCompleted(ctx, ev)
      return
    case "Tick":
      onTick(ctx)
      return
    case "TargetMoved":
      targetMoved(ctx, ev.sha)
      return
    case "ConfigChanged":
      onConfigChanged(ctx, ev.config)
      return
    case "MergeSucceeded":
      onMergeSucceeded(ctx, ev)
      return
    case "MergeFailed":
      onMergeFailed(ctx, ev)
      return
    case "ImpactedTargetsSet":
      onImpactedTargets(ctx, ev)
      return
    case "DirectMergeResult":
      onDirectMergeResult(ctx, ev)
      return
    case "RunRetryRequested": {
      // its entries go back to pending and are tested again in a new run
      const r = runIndex(ctx, ev.runId)
      if (r < 0 || !isRunActive(ctx.runs[r]!)) return
      ctx.reason = ev.reason
      cancelRun(ctx, r, ev.reason)
      return
    }
    case "MergedOutside": {
      const i = findActiveByPr(ctx, ev.prNumber)
      // an entry in a merge of the queue's own: that merge decides (it lands it, or finds the target moved)
      if (i < 0 || ctx.entries[i]!.merging) return
      ctx.reason = Reasons.prerequisiteManuallyMerged
      setState(ctx, i, "merged", Reasons.manualMerge, {
        runId: null,
        failure: null,
        segment: null,
        cancelRequested: null
      })
      return
    }
    case "ReadinessChanged": {
      const i = findActiveByPr(ctx, ev.prNumber)
      if (i >= 0) patchEntry(ctx, i, { ready: ev.ready })
      return
    }
  }
}
