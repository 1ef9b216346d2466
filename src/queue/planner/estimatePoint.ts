import type { Entry } from "./types.ts"

/**
 * What the estimate (estimate.ts) draws its sampled futures from: the remaining time of a run in flight and the PR
 * failure rate. Pure.
 */

/**
 * A draw of what remains of a run that has been testing for `elapsedMs`, from the window's durations (`sorted`,
 * ascending): one of the durations longer than that (uniformly among them, `u` in [0, 1)), minus the elapsed time, at
 * least `minMs`. A run older than every duration of the window gets `minMs`.
 */
export const remainingDraw = (sorted: readonly number[], elapsedMs: number, minMs: number, u: number): number => {
  // the first duration longer than the elapsed time
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (sorted[mid]! > elapsedMs) hi = mid
    else lo = mid + 1
  }
  if (lo >= sorted.length) return minMs
  const d = sorted[lo + Math.floor(u * (sorted.length - lo))]!
  return Math.max(minMs, d - elapsedMs)
}

/**
 * The PR failure rate to draw from: the larger of the observed rate `q` and the rate of the last `recent` PRs that
 * ended (`prs`, oldest first, 1: failed), with `q` as a prior worth `priorWeight` PRs. A queue whose last PRs fail
 * more often than its rate says is estimated with the higher rate before its change detector notices.
 */
export const recentFailureRate = (
  prs: ReadonlyArray<0 | 1>,
  q: number,
  recent: number,
  priorWeight: number
): number => {
  const from = Math.max(0, prs.length - recent)
  let failed = 0
  for (let i = from; i < prs.length; i++) failed += prs[i]!
  return Math.max(q, (failed + priorWeight * q) / (prs.length - from + priorWeight))
}

/**
 * The PRs that fail in one sampled future, drawn with `u` (uniform in [0, 1)), among `entries` in queue order (not
 * ready ones never): each with probability `q`, except a `pending_failure` PR whose failed run held no PR that fails
 * in this future ahead of it (its `waitingOn`): nothing ahead explains its failure, so it fails with `pendingFails`
 * (its own failure rather than a spurious one). One ahead that fails explains it: then it fails with `q` like any PR
 * (the PRs behind a failing one all go pending_failure; counting each as a likely failure is far too pessimistic).
 */
export const drawFailing = (
  entries: readonly Entry[],
  q: number,
  pendingFails: number,
  u: () => number
): Set<string> => {
  const failing = new Set<string>()
  for (const e of entries) {
    if (e.state === "not_ready") continue
    const explained = e.state !== "pending_failure" || (e.failure?.waitingOn.some((id) => failing.has(id)) ?? false)
    if (u() < (explained ? q : pendingFails)) failing.add(e.id)
  }
  return failing
}
