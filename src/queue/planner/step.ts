/**
 * `step`: apply one event to the queue state, then reconcile (resolve pending failures, drop runs whose content
 * is no longer right, start runs, merge), returning the new state and the commands for the shell.
 */
import { applyChoice, backlogOf, choose, emptyStats, record, restoreBounds, statsOf } from "./adaptive.ts"
import {
  type Ctx,
  endRun,
  entryIndex,
  finalEntries,
  findActiveByPr,
  getRun,
  isRunActive,
  isTerminal,
  makeCtx,
  mergeAllowed,
  notify,
  patchEntry,
  patchRun,
  runIndex,
  setState
} from "./context.ts"
import { aheadInRun, bisectGroup, failEntry, failedBehindSuspect } from "./failure.ts"
import { insertEntry, isLocked, removeEntryAt } from "./order.ts"
import { aloneInLane, chainableCount, createRunsParallel, planMergeParallel } from "./parallel.ts"
import { afterMerge, cancelRun, validityPass } from "./runs.ts"
import { createRunsSingle, type MergePlan, planMergeSingle } from "./single.ts"
import type {
  Entry,
  MergeInFlight,
  NewId,
  PlannerConfig,
  PlannerEvent,
  QueueState,
  RunRecord,
  StepResult
} from "./types.ts"
import { Reasons } from "./types.ts"

export const initialState = (config: PlannerConfig, targetSha: string | null): QueueState => ({
  config,
  targetSha,
  entries: [],
  runs: [],
  nextSeq: 1,
  merging: null,
  switching: null,
  bisectionCounters: {}
})

// ---------------------------------------------------------------- event handlers

const eligible = (ctx: Ctx, e: Entry): boolean => e.ready && (ctx.config.mode !== "parallel" || e.lane !== null)

const onSubmitted = (ctx: Ctx, ev: Extract<PlannerEvent, { _tag: "Submitted" }>): void => {
  const i = findActiveByPr(ctx, ev.prNumber)
  if (i >= 0) {
    // an entry changes in place (its lock may go): the next submission of a run scans again
    if (ctx.burst !== null) ctx.burst.lastPos = -1
    const e = ctx.entries[i]!
    let next: Entry = { ...e, noBatch: ev.noBatch, ready: ev.ready }
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
    directMerge: "none"
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

/** A run failed (tests, timeout or build). */
const runFailed = (ctx: Ctx, r: number, reason: string, culprit: string | null): void => {
  const run = endRun(ctx, r, "failed", reason)
  ctx.reason = Reasons.prerequisiteFailed
  if (culprit !== null && entryIndex(ctx, culprit) >= 0) {
    // a merge conflict of one item: it fails, the others are rebuilt without it
    const ci = entryIndex(ctx, culprit)
    const c = ctx.entries[ci]!
    if (c.runId !== null && c.runId !== run.id) {
      const other = runIndex(ctx, c.runId)
      if (other >= 0) cancelRun(ctx, other, reason)
    }
    for (const id of run.testedEntryIds) {
      if (id === culprit) continue
      const j = entryIndex(ctx, id)
      const e = ctx.entries[j]
      if (e !== undefined && e.runId === run.id && (e.state === "testing" || e.state === "tests_passed")) {
        setState(ctx, j, "pending", Reasons.prerequisiteFailed, { runId: null })
      }
    }
    failEntry(ctx, culprit, reason, run.id, aheadInRun(run, culprit), false)
    return
  }
  const tested = run.testedEntryIds.filter((id) => {
    const e = ctx.entries[entryIndex(ctx, id)]
    return e !== undefined && e.runId === run.id
  })
  if (tested.length === 1) failEntry(ctx, tested[0]!, reason, run.id, aheadInRun(run, tested[0]!), true)
  else if (tested.length > 1 && !failedBehindSuspect(ctx, run)) bisectGroup(ctx, run, reason)
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

/** When a not_ready entry's wait runs out (states stored before the setting existed use its default, 24 h). */
const notReadyDeadline = (ctx: Ctx, e: Entry): number =>
  e.stateChangedAt + (ctx.config.notReadyTimeoutHours ?? 24) * 3_600_000

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

const handle = (ctx: Ctx, ev: PlannerEvent): void => {
  switch (ev._tag) {
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
    case "ReadinessChanged": {
      const i = findActiveByPr(ctx, ev.prNumber)
      if (i >= 0) patchEntry(ctx, i, { ready: ev.ready })
      return
    }
  }
}

// ---------------------------------------------------------------- reconcile passes

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

/** Resolve pending_failure entries, front to back (what they wait on is always ahead of them). */
const pendingFailurePass = (ctx: Ctx): void => {
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (e.state !== "pending_failure" || e.failure === null) continue
    const f = e.failure
    const holds = f.holdRunIds.filter((id) => {
      const r = getRun(ctx, id)
      // a passing held run keeps the hold while optimistic merging will land the entry with it
      return r !== undefined && (isRunActive(r) || (ctx.config.canOptimisticallyMerge && r.status === "succeeded"))
    })
    const waiting: string[] = []
    let prereqFailed = false
    for (const id of f.waitingOn) {
      const p = ctx.entries[entryIndex(ctx, id)]
      if (p === undefined || p.state === "merged") continue
      if (p.state === "failed" || p.state === "cancelled" || p.state === "not_ready") prereqFailed = true
      else waiting.push(id)
    }
    if (prereqFailed) {
      setState(ctx, i, "pending", Reasons.prerequisiteFailed, { failure: null, runId: null })
    } else if (waiting.length === 0 && holds.length === 0) {
      setState(ctx, i, "failed", f.reason, { failure: null }, f.runId)
    } else if (waiting.length !== f.waitingOn.length || holds.length !== f.holdRunIds.length) {
      patchEntry(ctx, i, { failure: { ...f, waitingOn: waiting, holdRunIds: holds } })
    }
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
  for (const id of plan.entryIds) {
    const i = entryIndex(ctx, id)
    if (i < 0) return
    prNumbers.push(ctx.entries[i]!.prNumber)
  }
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

const reconcile = (ctx: Ctx): void => {
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

const finish = (ctx: Ctx): StepResult => {
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
      bisectionCounters: counters
    },
    commands: ctx.commands,
    transitions: ctx.transitions,
    runChanges
  }
}

/** The shell's id source: a random UUID per run created. */
export const randomIds: NewId = () => crypto.randomUUID()

/**
 * Apply one event at time `now` (epoch ms); run ids come from `newId`. Pure given a deterministic `newId`: the input
 * state is not modified.
 */
export const step = (state: QueueState, event: PlannerEvent, now: number, newId: NewId = randomIds): StepResult => {
  const ctx = makeCtx(state, newId, now, Reasons.prerequisiteFailed)
  handle(ctx, event)
  return plan(ctx, state)
}

/** Reconcile with adaptive mode's choice (adaptive.ts) when it is on, and add the step to the observations. */
const plan = (ctx: Ctx, state: QueueState): StepResult => {
  const bounds = ctx.config
  const stats = statsOf(state)
  const choice = bounds.adaptive === true ? choose(bounds, stats, backlogOf(ctx.entries)) : null
  if (choice !== null) ctx.config = applyChoice(bounds, choice)
  reconcile(ctx)
  if (choice !== null) ctx.config = restoreBounds(ctx.config, bounds)
  const result = finish(ctx)
  const next = record(stats, result.runChanges, result.transitions, choice)
  if (next === emptyStats && state.stats === undefined) return result
  return { ...result, state: { ...result.state, stats: next } }
}

/**
 * Apply events that arrived together at time `now`: each is handled in turn, then the queue is reconciled once, as
 * after one event. Only for events that give reconciliation no reason of their own — submissions of PRs not in the
 * queue, not urgent (`joinsSubmissions`) — where it equals the events arriving at the same instant: the runner folds
 * a flood of submissions this way instead of reconciling the whole queue after each. Pure, as `step`.
 */
export const stepMany = (
  state: QueueState,
  events: ReadonlyArray<PlannerEvent>,
  now: number,
  newId: NewId = randomIds
): StepResult => {
  const ctx = makeCtx(state, newId, now, Reasons.prerequisiteFailed)
  // a run of submissions only: each new entry of the same priority goes behind the one before (order.ts)
  if (events.every((e) => e._tag === "Submitted")) ctx.burst = { lastPos: -1, lastPriority: 0 }
  for (const event of events) handle(ctx, event)
  ctx.burst = null
  return plan(ctx, state)
}

/**
 * Whether `event` may join `group` (events for `stepMany`): a submission, not urgent, of a PR neither active
 * (`activePrs`, of the state the group applies to) nor submitted earlier in the group.
 */
export const joinsSubmissions = (
  activePrs: ReadonlySet<number>,
  group: ReadonlyArray<PlannerEvent>,
  event: PlannerEvent
): boolean =>
  event._tag === "Submitted" &&
  event.priority !== 0 &&
  !activePrs.has(event.prNumber) &&
  !group.some((g) => g._tag === "Submitted" && g.prNumber === event.prNumber)

/** PR numbers of the entries of `state` that are not terminal. */
export const activePrNumbers = (state: QueueState): Set<number> => {
  const out = new Set<number>()
  for (const e of state.entries) if (!isTerminal(e)) out.add(e.prNumber)
  return out
}

/** Entries of a state in testing order, with their 1-based position among enqueued ones (for getQueue). */
export const enqueued = (state: QueueState): Entry[] =>
  state.entries.filter((e) => e.state !== "not_ready" && !isTerminal(e))
