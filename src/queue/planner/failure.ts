/**
 * What happens when a run fails: a single entry goes to pending_failure (and to failed once everything ahead of it
 * in the failed run's chain has merged); a group of several entries is bisected.
 *
 * Bisection: the group stays where it is in the chain and is split in two halves, each a "segment" tested in a
 * bisection run (`<root>-bisection-<k>`). The halves are chained like batches (the second half's run contains the
 * first), so a passing half merges fast-forward, in order. With `bisection_skip_redundant_tests` a segment whose
 * run would have exactly the content of a run already known to fail is not run: it is split again, and a single
 * entry in it fails (through pending_failure) without a new run.
 */
import { type Ctx, entryIndex, isRunActive, setState, unmergedItems } from "./context.ts"
import type { Entry, KnownFailure, Run, RunItem, Segment } from "./types.ts"
import { Reasons } from "./types.ts"

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

/** The entries before `entryId` in the run's unmerged content. */
export const aheadInRun = (run: Run, entryId: string): string[] => {
  const out: string[] = []
  for (const it of unmergedItems(run)) {
    if (it.entryId === entryId) break
    out.push(it.entryId)
  }
  return out
}

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
