/**
 * The estimate and adaptive-mode fields of the queue views (issue #18): the planner's estimate (planner/estimate.ts)
 * cached per queue and runtime version, so that reads of an unchanged queue do not simulate it again.
 */
import { estimateQueue, type QueueEstimate, type QueueState } from "./planner/index.ts"
import type { AdaptiveChoiceView } from "./schemas.ts"

type AdaptiveChoice = typeof AdaptiveChoiceView.Type

const CACHE_SIZE = 256
const cache = new Map<string, { readonly version: number; readonly estimate: QueueEstimate }>()

/** The estimate of a queue's state; `version` (the runtime row's) keys the cache, null: not cached. */
export const estimateOf = (queueId: string, version: number | null, state: QueueState, now: number): QueueEstimate => {
  const hit = cache.get(queueId)
  if (version !== null && hit !== undefined && hit.version === version) return hit.estimate
  const estimate = estimateQueue(state, now)
  if (version !== null) {
    cache.delete(queueId)
    cache.set(queueId, { version, estimate })
    if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!)
  }
  return estimate
}

const isoOrNull = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** An entry's estimate fields; an entry the planner has not placed yet has none (NOT_READY). */
export const estimateFields = (estimate: QueueEstimate, entryId: string) => {
  const e = estimate.byEntry.get(entryId)
  if (e === undefined) {
    return { estimatedTestingStartAt: null, estimatedMergeAt: null, estimateUnavailableReason: "NOT_READY" }
  }
  return {
    estimatedTestingStartAt: isoOrNull(e.testingStartAt),
    estimatedMergeAt: isoOrNull(e.mergeAt),
    estimateUnavailableReason: e.unavailableReason
  }
}

/** Adaptive mode's current choice, null when it is off (or has not planned yet). */
export const adaptiveChoiceOf = (state: QueueState): AdaptiveChoice | null => {
  if (state.config.adaptive !== true) return null
  const c = state.stats?.choice
  return c === undefined || c === null ? null : { ...c }
}
