/**
 * Extension (#31): estimates under a freeze. The planner's estimate (planner/estimate.ts) simulates the queue as it
 * runs; a freeze in force holds its merges (`merge`) or its starts too (`all`) until the freeze ends, which the
 * simulation does not model. The estimate is made as if nothing were frozen, then moved: in a `merge` freeze no PR
 * merges before the end (testing goes on: the times are otherwise kept, the merges happen in order at the end); in
 * an `all` freeze what has not started yet starts that much later. A freeze with no end gives no merge time.
 */
import {
  type EntryEstimate,
  estimateQueue,
  type QueueEstimate,
  type QueueState,
  type QueueStats,
  type TimeRange
} from "./planner/index.ts"

export const estimateWithFreeze = (state: QueueState, now: number, prior?: QueueStats): QueueEstimate => {
  const freeze = state.freeze ?? null
  if (freeze === null) return estimateQueue(state, now, prior)
  const { freeze: _held, ...open } = state
  const estimate = estimateQueue(open, now, prior)
  const until = freeze.until
  const byEntry = new Map<string, EntryEstimate>()
  for (const [id, e] of estimate.byEntry) {
    if (e.mergeAt === null) {
      byEntry.set(id, e)
      continue
    }
    if (until === null) {
      byEntry.set(id, { ...e, mergeAt: null, mergeRange: null })
      continue
    }
    const delay = Math.max(0, until - now)
    const notStarted = e.testingStartAt !== null && e.testingStartAt > now
    const shifted = freeze.mode === "all" && notStarted
    const move = (t: number) => (shifted ? t + delay : t)
    const range = (r: TimeRange | null, floor: number) =>
      r === null ? null : { earliest: Math.max(move(r.earliest), floor), latest: Math.max(move(r.latest), floor) }
    byEntry.set(id, {
      ...e,
      testingStartAt: e.testingStartAt === null ? null : move(e.testingStartAt),
      testingStartRange: range(e.testingStartRange, Number.NEGATIVE_INFINITY),
      mergeAt: Math.max(move(e.mergeAt), until),
      mergeRange: range(e.mergeRange, until)
    })
  }
  return { ...estimate, byEntry }
}
