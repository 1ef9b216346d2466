/**
 * Single mode (predictive testing): runs are started along the chain, each on the target tip plus every entry
 * ahead of it that has not failed; batches and bisection segments are groups of that chain. Merges happen in
 * queue order (or, with optimistic merging, up to the deepest passing run).
 */
import { type Ctx, entryIndex, getRun, isChainable, runsAllowed, takeId, unmergedItems, wakeAt } from "./context.ts"
import { bisectionRunId, isSuspect, optimisticMergeSingle, skipRedundantSegment } from "./failure.ts"
import { countActive, countPassed, createRun } from "./runs.ts"
import type { Entry, MergePlan, Run, RunItem } from "./types.ts"

const startable = (e: Entry): boolean =>
  e.state === "pending" && e.runId === null && !e.merging && e.directMerge !== "trying"

/** Collect the group starting at index `i`: entries of the same segment, or a batch. Returns the group and the
 * index after it, or "wait" when a batch should wait for more entries. */
const collectGroup = (ctx: Ctx, i: number): { group: Entry[]; next: number; closed: boolean } => {
  const first = ctx.entries[i]!
  const group: Entry[] = [first]
  let j = i + 1
  if (first.segment !== null) {
    const seg = first.segment.id
    for (; j < ctx.entries.length; j++) {
      const e = ctx.entries[j]!
      if (!isChainable(e)) continue
      if (!startable(e) || e.segment?.id !== seg) break
      group.push(e)
    }
    return { group, next: j, closed: true }
  }
  const cfg = ctx.config
  if (!cfg.batch || first.noBatch) return { group, next: j, closed: true }
  const max = Math.max(1, cfg.batchingMinSize)
  let closed = false
  for (; j < ctx.entries.length && group.length < max; j++) {
    const e = ctx.entries[j]!
    if (!isChainable(e)) continue
    if (!startable(e) || e.noBatch || e.segment !== null) {
      closed = true
      break
    }
    group.push(e)
  }
  // the group is also closed when a chainable entry follows it
  if (!closed) {
    for (let k = j; k < ctx.entries.length; k++) {
      if (isChainable(ctx.entries[k]!)) {
        closed = true
        break
      }
    }
  }
  return { group, next: j, closed: closed || group.length >= max }
}

/** The first entry of the chain waits for a run. */
const headStartable = (ctx: Ctx): boolean => {
  for (const e of ctx.entries) if (isChainable(e)) return startable(e)
  return false
}

/** Start runs along the chain. Returns true when an entry failed without a run (skip-redundant), which needs
 * another reconcile round. */
export const createRunsSingle = (ctx: Ctx): boolean => {
  if (!runsAllowed(ctx)) return false
  const cfg = ctx.config
  // without bisection slots of its own, bisection shares the main slots
  const shared = cfg.bisectionConcurrency <= 0
  // runs that passed and wait to merge count too: speculation stays `concurrency` deep whatever state the head is
  // in (a head that cannot merge holds its slot); but the head itself may always start when nothing is testing, so
  // passed runs behind it never keep it waiting
  const testing = countActive(ctx, "main") + (shared ? countActive(ctx, "bisection") : 0)
  let mainSlots = cfg.concurrency - testing - countPassed(ctx)
  if (mainSlots <= 0 && testing === 0 && headStartable(ctx)) mainSlots = 1
  let bisSlots = shared ? mainSlots : cfg.bisectionConcurrency - countActive(ctx, "bisection")
  // bisection segments waiting for a run lie near the head; past the last one only main slots matter
  let lastSegment = -1
  for (let k = ctx.entries.length - 1; k >= 0; k--) {
    const x = ctx.entries[k]!
    if (x.segment !== null && x.state === "pending") {
      lastSegment = k
      break
    }
  }
  const prefix: Entry[] = []
  // once an undecided entry is ahead, no main run starts (it would most likely contain a bad PR)
  let suspect = false
  let i = 0
  while (i < ctx.entries.length) {
    if ((mainSlots <= 0 || suspect) && i > lastSegment) break
    const e = ctx.entries[i]!
    if (!isChainable(e)) {
      i++
      continue
    }
    if (!startable(e)) {
      prefix.push(e)
      if (isSuspect(e)) suspect = true
      i++
      continue
    }
    if (mainSlots <= 0 && bisSlots <= 0) break
    const { group, next, closed } = collectGroup(ctx, i)
    if (e.segment !== null) {
      if (e.segment.blocked && suspect) {
        prefix.push(...group)
        i = next
        continue
      }
      const skipped = skipRedundantSegment(ctx, e, group, prefix)
      if (skipped === "failed") return true
      if (skipped === "split") continue // re-read the group at i
      if (bisSlots <= 0) {
        prefix.push(...group)
        suspect = true
        i = next
        continue
      }
      if (e.segment.blocked) {
        const seg = { ...e.segment, blocked: false }
        for (const g of group) {
          const k = entryIndex(ctx, g.id)
          ctx.entries[k] = { ...ctx.entries[k]!, segment: seg }
        }
      }
      createRun(ctx, bisectionRunId(ctx, e.segment.root), "bisection", e.segment.root, prefix, group, false)
      bisSlots--
      if (shared) mainSlots--
    } else {
      if (mainSlots <= 0 || suspect) {
        prefix.push(...group)
        i = next
        continue
      }
      if (!closed) {
        let oldest = Number.MAX_SAFE_INTEGER
        for (const g of group) oldest = Math.min(oldest, g.eligibleAt ?? g.submittedAt)
        const due = oldest + cfg.batchingMaxWaitTimeMinutes * 60_000
        if (ctx.now < due) {
          wakeAt(ctx, due)
          break
        }
      }
      createRun(ctx, takeId(ctx), "main", null, prefix, group, false)
      mainSlots--
      if (shared) bisSlots--
    }
    for (const g of group) prefix.push(ctx.entries[entryIndex(ctx, g.id)]!)
    if (e.segment !== null) suspect = true
    i = next
  }
  return false
}

/** The next merge in single mode, if any. */
export const planMergeSingle = (ctx: Ctx): MergePlan | null => {
  if (ctx.config.canOptimisticallyMerge) return optimisticMergeSingle(ctx)
  // strictly in order: the head of the chain
  let head: Entry | undefined
  for (const e of ctx.entries) {
    if (isChainable(e)) {
      head = e
      break
    }
  }
  if (head === undefined || head.state !== "tests_passed") return null
  const run = getRun(ctx, head.runId)
  if (run === undefined || run.status !== "succeeded") return null
  const items = unmergedItems(run)
  if (items.length !== run.testedEntryIds.length) return null // something ahead is not merged yet
  let plan = planOf(run, items, {})
  if (plan === null) return null
  // The entries right behind whose own runs passed too land in the same compare-and-swap: the deepest such run's
  // chain holds exactly them, each PR still its own commit, each verified by its own run.
  const verifiedBy: Record<string, string> = {}
  for (const id of plan.entryIds) verifiedBy[id] = run.id
  const start = ctx.entries.indexOf(head)
  for (let i = start + 1; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (!isChainable(e)) continue
    if (e.state !== "tests_passed" || e.merging) break
    const r = getRun(ctx, e.runId)
    if (r === undefined || r.status !== "succeeded") break
    const chain = unmergedItems(r)
    const ids = chain.map((it) => it.entryId)
    const expected = [...plan.entryIds, ...r.testedEntryIds]
    if (ids.length !== expected.length || ids.some((id, k) => id !== expected[k])) break
    for (const id of r.testedEntryIds) verifiedBy[id] = r.id
    const next = planOf(r, chain, verifiedBy)
    if (next === null) break
    plan = next
    i = Math.max(i, ...r.testedEntryIds.map((id) => entryIndex(ctx, id)))
  }
  return plan
}

const planOf = (
  run: Run,
  items: ReadonlyArray<RunItem>,
  verifiedBy: Readonly<Record<string, string>>
): MergePlan | null => {
  const last = items[items.length - 1]
  if (last === undefined) return null
  const k = run.items.findIndex((it) => it.entryId === last.entryId)
  const sha = run.commits[k]
  if (sha === undefined) return null
  const entryIds = items.map((it) => it.entryId)
  const own = entryIds.every((id) => (verifiedBy[id] ?? run.id) === run.id)
  return { runId: run.id, entryIds, newSha: sha, rebaseOnto: false, ...(own ? {} : { verifiedBy: { ...verifiedBy } }) }
}
