/**
 * The estimate and adaptive-mode fields of the queue views (issue #18): the planner's estimate (planner/estimate.ts)
 * cached per queue and runtime version, so that reads of an unchanged queue do not simulate it again.
 */
import { estimateWithFreeze } from "./freezeEstimate.ts"
import type { QueueEstimate, QueueState, QueueStats, TimeRange } from "./planner/index.ts"
import type { AdaptiveChoiceView } from "./schemas.ts"

type AdaptiveChoice = typeof AdaptiveChoiceView.Type

const CACHE_SIZE = 256
interface Cached {
  /** the runtime's version, with the writes pending on it (queueView.ts `pendingState`) when there are any */
  readonly version: number | string
  readonly estimate: QueueEstimate
  /** the state's speculation depth (concurrency), for entries the planner has not placed yet */
  readonly depth: number
}
const cache = new Map<string, Cached>()

/** The estimate cached for this runtime version of the queue, if any: a read needs neither the state nor a prior. */
export const cachedEstimate = (queueId: string, version: number | string): Cached | undefined => {
  const hit = cache.get(queueId)
  return hit !== undefined && hit.version === version ? hit : undefined
}

/**
 * The estimate of a queue's state; `version` (the runtime row's, with the writes pending on it) keys the cache, null:
 * not cached. `prior`: the
 * observations of another queue of the repository, used while this one has fewer than 3 finished runs.
 */
export const estimateOf = (
  queueId: string,
  version: number | string | null,
  state: QueueState,
  now: number,
  prior?: QueueStats
): QueueEstimate => {
  const hit = cache.get(queueId)
  if (version !== null && hit !== undefined && hit.version === version) return hit.estimate
  const estimate = estimateWithFreeze(state, now, prior)
  if (version !== null) {
    cache.delete(queueId)
    cache.set(queueId, { version, estimate, depth: state.config.concurrency })
    if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!)
  }
  return estimate
}

const isoOrNull = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
const rangeOrNull = (r: TimeRange | null) =>
  r === null ? null : { earliest: new Date(r.earliest).toISOString(), latest: new Date(r.latest).toISOString() }

/**
 * An entry's estimate fields. An entry the planner has not placed yet (submitted since its last round) goes behind
 * the placed ones: `fresh` is its place among such entries (1, 2, ...), each one a CI duration divided by the
 * speculation depth after the last estimated merge; its range the last ranges' ends moved by as much, the latest
 * by half as much again (issue #35).
 */
export const estimateFields = (
  estimate: QueueEstimate,
  entryId: string,
  fresh?: { readonly place: number; readonly depth: number; readonly now: number }
) => {
  const e = estimate.byEntry.get(entryId)
  if (e === undefined) {
    if (fresh === undefined || estimate.unavailableReason !== null) {
      return {
        estimatedTestingStartAt: null,
        estimatedMergeAt: null,
        estimatedTestingStartRange: null,
        estimatedMergeRange: null,
        estimateUnavailableReason: estimate.unavailableReason ?? "NOT_READY"
      }
    }
    let last = fresh.now
    let earliest = fresh.now
    let latest = fresh.now
    for (const x of estimate.byEntry.values()) {
      if (x.mergeAt !== null && x.mergeAt > last) last = x.mergeAt
      if (x.mergeRange !== null && x.mergeRange.earliest > earliest) earliest = x.mergeRange.earliest
      if (x.mergeRange !== null && x.mergeRange.latest > latest) latest = x.mergeRange.latest
    }
    const step = (fresh.place * estimate.ciMedianMs) / Math.max(1, fresh.depth)
    const merge = last + step
    const range = { earliest: earliest + step, latest: Math.max(merge, latest + 1.5 * step) }
    const startOf = (t: number) => Math.max(fresh.now, t - estimate.ciMedianMs)
    return {
      estimatedTestingStartAt: isoOrNull(startOf(merge)),
      estimatedMergeAt: isoOrNull(merge),
      estimatedTestingStartRange: rangeOrNull({ earliest: startOf(range.earliest), latest: startOf(range.latest) }),
      estimatedMergeRange: rangeOrNull(range),
      estimateUnavailableReason: null
    }
  }
  return {
    estimatedTestingStartAt: isoOrNull(e.testingStartAt),
    estimatedMergeAt: isoOrNull(e.mergeAt),
    estimatedTestingStartRange: rangeOrNull(e.testingStartRange),
    estimatedMergeRange: rangeOrNull(e.mergeRange),
    estimateUnavailableReason: e.unavailableReason
  }
}

/** Adaptive mode's current choice, null when it is off (or has not planned yet). */
export const adaptiveChoiceOf = (state: QueueState): AdaptiveChoice | null => {
  if (state.config.adaptive !== true) return null
  const c = state.stats?.choice
  return c === undefined || c === null ? null : { ...c }
}

/** Whether a queue's estimate needs another queue's observations (fewer than 3 finished runs of its own). */
export const needsPrior = (state: QueueState): boolean => (state.stats?.finishedRuns ?? 0) < 3
