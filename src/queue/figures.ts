/**
 * One definition of each queue figure (issue #33), shared by the home page (`listQueues`), the health page
 * (`getQueueHealth`) and what they are compared with: the median time in the queue, what a restart is, and a count
 * over time (depth, slots in use) as its maximum and mean over a bucket instead of a sample at its end. Pure.
 */

/** The `q`-quantile of sorted values, nearest rank (a value that occurred, not an interpolation); null when none. */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number | null =>
  sorted.length === 0
    ? null
    : (sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? null)

/** The median time in the queue of merged PRs: from submission to merge, seconds, nearest rank. */
export const medianSeconds = (durations: ReadonlyArray<number>): number | null =>
  quantile(
    [...durations].sort((a, b) => a - b),
    0.5
  )

/** A restart: an entry back to `pending` from testing, tests passed or pending failure (automatic or requested). */
export const RESTARTED_FROM: ReadonlyArray<string> = ["testing", "tests_passed", "pending_failure"]
export const isRestart = (previous: string | null | undefined, state: string) =>
  state === "pending" && previous != null && RESTARTED_FROM.includes(previous)

/** Something counted while it lasts: from `from` to `to` (null: still). */
export interface Interval {
  readonly from: number
  readonly to: number | null
}

/**
 * How many intervals were open at once over [start, stop): the most at any instant, and the mean weighted by time.
 * An empty window (stop <= start) counts the instant `start`.
 */
export const overTime = (
  intervals: ReadonlyArray<Interval>,
  start: number,
  stop: number
): { readonly max: number; readonly mean: number } => {
  let open = 0
  const moves: Array<readonly [number, number]> = []
  for (const i of intervals) {
    const to = i.to ?? Number.POSITIVE_INFINITY
    if (i.from > stop || to <= start || (i.from === stop && stop > start)) continue
    if (i.from <= start) open++
    else moves.push([i.from, 1])
    if (to < stop) moves.push([to, -1])
  }
  if (stop <= start) return { max: open, mean: open }
  // ends before starts at one instant: an entry that ends as another starts is not counted twice
  moves.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let max = open
  let area = 0
  let at = start
  for (const [t, d] of moves) {
    area += open * (t - at)
    at = t
    open += d
    max = Math.max(max, open)
  }
  area += open * (stop - at)
  return { max, mean: area / (stop - start) }
}
