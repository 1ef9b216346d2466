/**
 * What happens when a run or a batch fails, top to bottom. The other planner modules only call in here.
 *
 * 1. A run fails (`runFailed`: its tests failed, it timed out, or its test branch could not be built). A merge
 *    conflict names its culprit: that entry fails and the others are rebuilt without it. Otherwise one tested entry
 *    fails itself; several are bisected, unless undecided entries are ahead of them (then they wait, see 3).
 * 2. Pending failure (`failEntry`, `pendingFailurePass`): a failed entry first goes to pending_failure, waiting for
 *    the entries ahead of it in the failed content (if one of them fails, the failure may have been theirs: it goes
 *    back to pending) and, with pendingFailureDepth, for up to N runs behind that contain it. Once nothing is left to
 *    wait for, it is failed.
 * 3. Suspects (`isSuspect`, `failedBehindSuspect`): entries in an undecided bisection segment or in pending_failure.
 *    A run of several entries that failed behind a suspect says little: its entries go back to pending (a segment
 *    keeps its place, blocked until what is ahead is decided) instead of being bisected.
 * 4. Bisection (`bisectGroup`, `splitGroup`): the group stays where it is in the chain and is split in two halves,
 *    each a "segment" tested in a bisection run (`<root>-bisection-<k>`). The halves are chained like batches (the
 *    second half's run contains the first), so a passing half merges fast-forward, in order.
 * 5. Skipping redundant tests (`skipRedundantSegment`, with `bisection_skip_redundant_tests`): a segment whose run
 *    would have exactly the content of a run already known to fail is not run: it is split again, and a single entry
 *    in it fails (through pending_failure) without a new run.
 * 6. Optimistic vouching (`canOptimisticallyMerge`): a passing run vouches for every unmerged entry ahead of it in
 *    its content. In single mode the deepest passing run merges all of them (`optimisticMergeSingle`); in parallel
 *    mode a passing run merges with the unmerged entries ahead of it (`mayVouchAhead`); and a passing run behind a
 *    pending failure keeps holding it, since it will land the entry with it (`mayVouchFor`).
 */
import {
  type Ctx,
  endRun,
  entryIndex,
  getRun,
  isRunActive,
  itemOf,
  patchEntry,
  runIndex,
  setState,
  unmergedItems
} from "./context.ts"
import { cancelRun } from "./runs.ts"
import type { Entry, KnownFailure, MergePlan, Run, RunItem, Segment } from "./types.ts"
import { Reasons } from "./types.ts"

// ---------------------------------------------------------------- 1. a run fails

/** A run failed (tests, timeout or build). */
export const runFailed = (ctx: Ctx, r: number, reason: string, culprit: string | null): void => {
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

// ---------------------------------------------------------------- 2. pending failure

/** One entry's test failed: pending_failure, waiting for `waitingOn` (entries ahead in the failed content) and, with
 * pendingFailureDepth, for up to N runs behind that contain it. The pending-failure pass resolves it. */
export const failEntry = (
  ctx: Ctx,
  entryId: string,
  reason: string,
  runId: string | null,
  waitingOn: readonly string[],
  allowHold: boolean
): void => {
  const i = entryIndex(ctx, entryId)
  if (i < 0) return
  const e = ctx.entries[i]!
  if (e.state === "merged" || e.state === "failed" || e.state === "cancelled") return
  const depth = allowHold ? Math.max(0, ctx.config.pendingFailureDepth) : 0
  const holds = depth > 0 ? runsBehindContaining(ctx, entryId, runId).slice(0, depth) : []
  setState(
    ctx,
    i,
    "pending_failure",
    reason,
    {
      runId: null,
      segment: null,
      failure: { reason, runId, waitingOn: waitingOn.slice(), holdRunIds: holds.map((r) => r.id) }
    },
    runId
  )
}

/** Runs behind `entryId` (other than `except`) that contain it and are still running, nearest first. */
const runsBehindContaining = (ctx: Ctx, entryId: string, except: string | null): Run[] => {
  const out: { run: Run; pos: number }[] = []
  for (const r of ctx.runs) {
    if (r.id === except || r.queueType !== "main" || !isRunActive(r)) continue
    if (r.testedEntryIds.includes(entryId)) continue
    if (!r.items.some((it) => it.entryId === entryId) || r.mergedEntryIds.includes(entryId)) continue
    let pos = Number.MAX_SAFE_INTEGER
    for (const id of r.testedEntryIds) pos = Math.min(pos, entryIndex(ctx, id))
    out.push({ run: r, pos })
  }
  out.sort((a, b) => a.pos - b.pos)
  return out.map((x) => x.run)
}

/** The entries before `entryId` in the run's unmerged content. */
export const aheadInRun = (run: Run, entryId: string): string[] => {
  const out: string[] = []
  for (const it of unmergedItems(run)) {
    if (it.entryId === entryId) break
    out.push(it.entryId)
  }
  return out
}

/** Resolve pending_failure entries, front to back (what they wait on is always ahead of them). */
export const pendingFailurePass = (ctx: Ctx): void => {
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (e.state !== "pending_failure" || e.failure === null) continue
    const f = e.failure
    const holds = f.holdRunIds.filter((id) => {
      const r = getRun(ctx, id)
      return r !== undefined && (isRunActive(r) || mayVouchFor(ctx, r))
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

// ---------------------------------------------------------------- 3. suspects

/** Undecided entries: in a bisection segment that has not passed, or waiting in pending_failure. A run containing
 * them says little about the entries behind them. */
export const isSuspect = (e: Entry): boolean =>
  (e.segment !== null && e.state !== "tests_passed") || e.state === "pending_failure"

/** A run of several entries failed while undecided entries were ahead of it: they go back to pending (a bisection
 * segment keeps its place and is blocked until what is ahead is decided) instead of being bisected. */
export const failedBehindSuspect = (ctx: Ctx, run: Run): boolean => {
  const first = run.testedEntryIds[0]
  if (first === undefined) return false
  let suspect = false
  for (const id of aheadInRun(run, first)) {
    const e = ctx.entries[entryIndex(ctx, id)]
    if (e !== undefined && isSuspect(e)) {
      suspect = true
      break
    }
  }
  if (!suspect) return false
  for (const id of run.testedEntryIds) {
    const i = entryIndex(ctx, id)
    const e = ctx.entries[i]
    if (e === undefined || e.runId !== run.id) continue
    setState(ctx, i, "pending", Reasons.prerequisiteFailed, {
      runId: null,
      segment: e.segment === null ? null : { ...e.segment, blocked: true }
    })
  }
  return true
}

// ---------------------------------------------------------------- 4. bisection

const nextBisection = (ctx: Ctx, root: string): number => {
  const k = (ctx.bisectionCounters[root] ?? 0) + 1
  ctx.bisectionCounters = { ...ctx.bisectionCounters, [root]: k }
  return k
}

export const bisectionRunId = (ctx: Ctx, root: string): string => `${root}-bisection-${nextBisection(ctx, root)}`

/** Split the (pending) entries `group` into two segments; the second gets `knownFailure`. */
export const splitGroup = (ctx: Ctx, root: string, group: readonly Entry[], known: KnownFailure | null): void => {
  const half = Math.ceil(group.length / 2)
  const s1: Segment = { root, id: `${root}#${nextBisection(ctx, `${root}#seg`)}a`, knownFailure: null, blocked: false }
  const s2: Segment = { root, id: `${root}#${nextBisection(ctx, `${root}#seg`)}b`, knownFailure: known, blocked: false }
  group.forEach((e, k) => {
    const i = entryIndex(ctx, e.id)
    if (i >= 0) ctx.entries[i] = { ...ctx.entries[i]!, segment: k < half ? s1 : s2 }
  })
}

/** A run testing several entries failed: bisect them. */
export const bisectGroup = (ctx: Ctx, run: Run, reason: string): void => {
  const root = run.parentRunId ?? run.id
  const known: KnownFailure | null =
    ctx.config.optimizationMode === "bisection_skip_redundant_tests"
      ? {
          baseSha: run.effectiveBase,
          // aligned with the unmerged items (commits[i] is the sha after run.items[i])
          commits:
            run.commits.length === run.items.length
              ? run.commits.filter((_, k) => !run.mergedEntryIds.includes(run.items[k]!.entryId))
              : [],
          items: unmergedItems(run),
          reason,
          runId: run.id
        }
      : null
  const group: Entry[] = []
  for (const id of run.testedEntryIds) {
    const i = entryIndex(ctx, id)
    if (i < 0) continue
    const e = ctx.entries[i]!
    if (e.runId !== run.id) continue
    group.push(setState(ctx, i, "pending", Reasons.bisection, { runId: null }, run.id))
  }
  if (group.length === 1) {
    failEntry(ctx, group[0]!.id, reason, run.id, aheadInRun(run, group[0]!.id), true)
    return
  }
  if (group.length > 1) splitGroup(ctx, root, group, known)
}

// ---------------------------------------------------------------- 5. skipping redundant tests

/** Whether a prospective run (targetSha + items) has exactly the content of a known failing run. */
export const matchesKnown = (ctx: Ctx, known: KnownFailure, items: readonly RunItem[]): boolean => {
  const tip = ctx.targetSha
  // find j: the content of known after items[0..j] is the tip
  const n = known.items.length
  for (let j = -1; j < n; j++) {
    const sha = j < 0 ? known.baseSha : known.commits[j]
    if (sha === undefined) return false
    if (sha !== tip) continue
    if (n - (j + 1) !== items.length) return false
    for (let k = 0; k < items.length; k++) {
      const a = known.items[j + 1 + k]!
      const b = items[k]!
      if (a.entryId !== b.entryId || a.headSha !== b.headSha) return false
    }
    return true
  }
  return false
}

/**
 * With `bisection_skip_redundant_tests`: a segment about to get a run (behind `prefix`) whose content is exactly that
 * of a run known to fail is not run. A single entry fails (through pending_failure) without a run ("failed": the
 * caller reconciles again); a group is split again ("split": the caller reads the group again).
 */
export const skipRedundantSegment = (
  ctx: Ctx,
  e: Entry,
  group: readonly Entry[],
  prefix: readonly Entry[]
): "failed" | "split" | null => {
  const known = e.segment?.knownFailure ?? null
  if (e.segment === null || known === null || ctx.config.optimizationMode !== "bisection_skip_redundant_tests")
    return null
  const items = [...prefix.map(itemOf), ...group.map(itemOf)]
  if (!matchesKnown(ctx, known, items)) return null
  if (group.length === 1) {
    failEntry(
      ctx,
      e.id,
      known.reason,
      known.runId,
      prefix.map((p) => p.id),
      true
    )
    return "failed"
  }
  splitGroup(ctx, e.segment.root, group, known)
  return "split"
}

// ---------------------------------------------------------------- 6. optimistic vouching

/** Whether a passing run may merge `unmerged` (its content not merged yet), entries ahead of its own included. */
export const mayVouchAhead = (ctx: Ctx, run: Run, unmerged: readonly RunItem[]): boolean =>
  ctx.config.canOptimisticallyMerge || unmerged.length === run.testedEntryIds.length

/** Whether `run`, a run behind a pending failure that contains it, will land that entry by passing. */
const mayVouchFor = (ctx: Ctx, run: Run): boolean => ctx.config.canOptimisticallyMerge && run.status === "succeeded"

/** Single mode, optimistic: the deepest passing run merges everything ahead of it in its chain. */
export const optimisticMergeSingle = (ctx: Ctx): MergePlan | null => {
  // the deepest passing run merges everything ahead of it in its chain
  let best: { runId: string; pos: number } | null = null
  for (const r of ctx.runs) {
    if (r.status !== "succeeded") continue
    let pos = -1
    for (const id of r.testedEntryIds) pos = Math.max(pos, entryIndex(ctx, id))
    if (best === null || pos > best.pos) best = { runId: r.id, pos }
  }
  if (best === null) return null
  const run = getRun(ctx, best.runId)!
  const items = unmergedItems(run)
  const last = items[items.length - 1]
  if (last === undefined) return null
  const k = run.items.findIndex((it) => it.entryId === last.entryId)
  const sha = run.commits[k]
  if (sha === undefined) return null
  return { runId: run.id, entryIds: items.map((it) => it.entryId), newSha: sha, rebaseOnto: false }
}
