/**
 * Where a PR's time in the queue went (issue #18), from its timeline: waiting for a CI slot, waiting for a batch to
 * fill, testing, and each restart with the PR whose failure caused it.
 *
 * - testing: time in `testing` (and `tests_passed` until the merge);
 * - waiting: time in `pending`. With batching on, the first `batchingMaxWaitTimeMinutes` of each wait count as
 *   waiting for a batch to fill (a batch starts at the latest then), the rest as waiting for a CI slot;
 * - a restart: a move from `testing`/`tests_passed`/`pending_failure` back to `pending`; its cause is the PR of the
 *   same queue that failed or went `pending_failure` at that instant (the planner steps them together), if any.
 */
export interface TimelineRow {
  readonly at: number
  readonly state: string
  readonly reason: string
}

export interface Restart {
  readonly at: number
  readonly reason: string
}

export interface Breakdown {
  readonly waitingForSlotMs: number
  readonly waitingForBatchMs: number
  readonly testingMs: number
  readonly restarts: ReadonlyArray<Restart>
}

export const breakdownOf = (
  rows: ReadonlyArray<TimelineRow>,
  now: number,
  batching: { readonly batch: boolean; readonly maxWaitMs: number }
): Breakdown => {
  let slot = 0
  let batch = 0
  let testing = 0
  const restarts: Restart[] = []
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!
    const end = rows[i + 1]?.at ?? (isEnd(r.state) ? r.at : now)
    const d = Math.max(0, end - r.at)
    if (r.state === "pending") {
      const b = batching.batch ? Math.min(d, batching.maxWaitMs) : 0
      batch += b
      slot += d - b
    } else if (r.state === "testing" || r.state === "tests_passed") testing += d
    const prev = rows[i - 1]
    if (
      r.state === "pending" &&
      prev !== undefined &&
      (prev.state === "testing" || prev.state === "tests_passed" || prev.state === "pending_failure")
    ) {
      restarts.push({ at: r.at, reason: r.reason })
    }
  }
  return { waitingForSlotMs: slot, waitingForBatchMs: batch, testingMs: testing, restarts }
}

const isEnd = (state: string) => state === "merged" || state === "failed" || state === "cancelled"
