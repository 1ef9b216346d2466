/**
 * Queue order and chains: where a new entry goes, which entries a run must contain (single mode: the chain
 * ahead; parallel mode: the entries ahead it depends on, transitively).
 */
import { type Ctx, entryIndex, isChainable, isTerminal, reindexFrom } from "./ctx.ts"
import type { Entry, ImpactedTargets, Run } from "./types.ts"

/** Entries that a new, non-urgent entry may not overtake. */
export const isLocked = (e: Entry): boolean =>
  e.runId !== null ||
  e.merging ||
  e.state === "testing" ||
  e.state === "tests_passed" ||
  e.state === "pending_failure" ||
  e.segment !== null ||
  e.directMerge === "trying" ||
  isTerminal(e)

const before = (a: Entry, b: Entry): boolean => a.priority < b.priority || (a.priority === b.priority && a.seq < b.seq)

export const intersects = (a: ImpactedTargets | null, b: ImpactedTargets | null): boolean => {
  if (a === null || b === null || a === "ALL" || b === "ALL") return true
  if (a.length === 0 || b.length === 0) return false
  if (a.length > b.length) return intersects(b, a)
  for (const t of a) if (b.includes(t)) return true
  return false
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
  } else {
    const parallel = ctx.config.mode === "parallel"
    let last = -1
    for (let i = es.length - 1; i >= 0; i--) {
      const x = es[i]!
      if (isLocked(x) && (!parallel || intersects(x.impactedTargets, e.impactedTargets))) {
        last = i
        break
      }
    }
    pos = last + 1
    while (pos < es.length && !before(e, es[pos]!)) pos++
  }
  es.splice(pos, 0, e)
  reindexFrom(ctx, pos, null)
}

export const removeEntryAt = (ctx: Ctx, i: number): Entry => {
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

const unionTargets = (acc: Set<string> | "ALL", t: ImpactedTargets | null): Set<string> | "ALL" => {
  if (acc === "ALL" || t === null || t === "ALL") return "ALL"
  for (const x of t) acc.add(x)
  return acc
}

const hits = (acc: Set<string> | "ALL", t: ImpactedTargets | null): boolean => {
  if (t === null || t === "ALL") return true
  if (acc === "ALL") return t.length > 0
  for (const x of t) if (acc.has(x)) return true
  return false
}

/** Parallel mode: the entries ahead of index `pos` that the entry there depends on, directly or transitively,
 * in queue order. */
export const parallelDeps = (ctx: Ctx, pos: number, run: Run | null): Entry[] => {
  const self = ctx.entries[pos]!
  let acc: Set<string> | "ALL" = unionTargets(new Set<string>(), self.impactedTargets)
  const out: Entry[] = []
  if (acc !== "ALL" && acc.size === 0) return out
  for (let i = pos - 1; i >= 0; i--) {
    const e = ctx.entries[i]!
    if (!includableFor(e, run)) continue
    if (hits(acc, e.impactedTargets)) {
      out.push(e)
      acc = unionTargets(acc, e.impactedTargets)
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
