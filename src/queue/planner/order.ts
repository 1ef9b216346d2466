/**
 * Queue order and chains: where a new entry goes, which entries a run must contain (single mode: the chain
 * ahead; parallel mode: the entries ahead it depends on, transitively).
 */
import { type Ctx, entryIndex, isChainable, isTerminal, reindexFrom } from "./context.ts"
import type { Entry, Run } from "./types.ts"

/** Entries that a new, non-urgent entry may not overtake. */
export const isLocked = (e: Entry): boolean =>
  // the common case first, cheaply: a pending entry waiting for its first run (insertEntry scans many of them)
  (e.state !== "pending" && e.state !== "not_ready") ||
  e.runId !== null ||
  e.merging ||
  e.segment !== null ||
  e.directMerge === "trying"

const before = (a: Entry, b: Entry): boolean => a.priority < b.priority || (a.priority === b.priority && a.seq < b.seq)

/** Whether two entries depend on each other (targets not known yet count as everything). */
export const intersects = (a: Entry, b: Entry): boolean => {
  const x = a.lane
  const y = b.lane
  if (x === "NONE" || y === "NONE") return false
  if (x === null || y === null || x === "ALL" || y === "ALL") return true
  return x.overlaps.includes(b.id) || y.overlaps.includes(a.id)
}

/** Insert `e` in queue order: ahead of every entry not yet testing with a later (priority, seq); urgent (0) takes
 * the head, behind only entries being merged and earlier urgent ones. */
export const insertEntry = (ctx: Ctx, e: Entry): void => {
  const es = ctx.entries
  let pos: number
  if (e.priority === 0) {
    pos = 0
    while (pos < es.length) {
      const x = es[pos]!
      if (x.merging || isTerminal(x) || (x.priority === 0 && x.seq < e.seq)) pos++
      else break
    }
  } else if (ctx.burst !== null && ctx.burst.lastPos >= 0 && ctx.burst.lastPriority === e.priority) {
    // the previous submission of the run had this priority and went to lastPos; this one is newer: right behind it
    pos = ctx.burst.lastPos + 1
  } else {
    const parallel = ctx.config.mode === "parallel"
    let last = -1
    for (let i = es.length - 1; i >= 0; i--) {
      const x = es[i]!
      if (isLocked(x) && (!parallel || intersects(x, e))) {
        last = i
        break
      }
    }
    pos = last + 1
    while (pos < es.length && !before(e, es[pos]!)) pos++
  }
  es.splice(pos, 0, e)
  reindexFrom(ctx, pos, null)
  if (ctx.burst !== null) {
    ctx.burst.lastPos = e.priority === 0 ? -1 : pos
    ctx.burst.lastPriority = e.priority
  }
}

export const removeEntryAt = (ctx: Ctx, i: number): Entry => {
  if (ctx.burst !== null) ctx.burst.lastPos = -1
  const [e] = ctx.entries.splice(i, 1)
  reindexFrom(ctx, i, e!.id)
  return e!
}

/** Whether `e` belongs to the chain seen by `run` (a held pending_failure entry stays in the runs it holds). */
export const includableFor = (e: Entry, run: Run | null): boolean => {
  if (isChainable(e)) return true
  if (run !== null && e.state === "pending_failure" && e.failure !== null) {
    return e.failure.holdRunIds.includes(run.id)
  }
  return false
}

/** Single mode: the entries a run testing the entries up to index `last` must contain, in order. */
export const singleExpected = (ctx: Ctx, last: number, run: Run | null): Entry[] => {
  const out: Entry[] = []
  for (let i = 0; i <= last; i++) {
    const e = ctx.entries[i]!
    if (includableFor(e, run)) out.push(e)
  }
  return out
}

/** The entries gathered so far for a lane: their ids, the ids they list as overlapping, and whether one of them
 * intersects everything. */
interface LaneAcc {
  all: boolean
  readonly ids: Set<string>
  readonly listed: Set<string>
}

const gather = (acc: LaneAcc, e: Entry): void => {
  acc.ids.add(e.id)
  const lane = e.lane
  if (lane === null || lane === "ALL") acc.all = true
  else if (lane !== "NONE") for (const id of lane.overlaps) acc.listed.add(id)
}

const hits = (acc: LaneAcc, e: Entry): boolean => {
  const lane = e.lane
  if (lane === "NONE") return false
  if (lane === null || lane === "ALL" || acc.all || acc.listed.has(e.id)) return true
  for (const id of lane.overlaps) if (acc.ids.has(id)) return true
  return false
}

/** Parallel mode: the entries ahead of index `pos` that the entry there depends on, directly or transitively,
 * in queue order. */
export const parallelDeps = (ctx: Ctx, pos: number, run: Run | null): Entry[] => {
  const self = ctx.entries[pos]!
  const out: Entry[] = []
  if (self.lane === "NONE") return out
  const acc: LaneAcc = { all: false, ids: new Set(), listed: new Set() }
  gather(acc, self)
  for (let i = pos - 1; i >= 0; i--) {
    const e = ctx.entries[i]!
    if (!includableFor(e, run)) continue
    if (hits(acc, e)) {
      out.push(e)
      gather(acc, e)
    }
  }
  out.reverse()
  return out
}

/** Index of the last tested entry of a run (or -1 when one is not active). */
export const lastTestedIndex = (ctx: Ctx, run: Run): number => {
  let last = -1
  for (const id of run.testedEntryIds) {
    const i = entryIndex(ctx, id)
    if (i < 0) return -1
    if (i > last) last = i
  }
  return last
}
