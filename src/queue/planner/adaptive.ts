/**
 * Adaptive mode (issue #18): the queue chooses its speculation depth, batch size and bisection split from what it
 * observes, within the configured settings (which become upper bounds). Pure and deterministic: the choice is a
 * function of the configured bounds, the observation windows kept in the state (`QueueState.stats`, with the
 * previous choice) and the backlog.
 *
 * - Observations: every finished run (succeeded or failed, not cancelled) with its testing time, its outcome and the
 *   number of PRs it tested and whether it was a bisection run; every PR that ended merged or failed. Sliding windows of the last `RUN_WINDOW` runs
 *   and `PR_WINDOW` PRs, each with a prior worth `PRIOR_WEIGHT` observations, so that a new queue starts sensibly.
 * - A change detector (`regimeStart`) finds where the current failure regime of the PR window begins: a stable
 *   queue uses its whole long window (a precise rate, few wrong switches), a queue whose failure rate jumps uses
 *   the PRs since the jump (it forgets the old rate after a few PRs instead of a window's length).
 * - Failure rate of PRs q (failed / ended since the change), flaky rate f (run failures that q does not explain:
 *   a run of k PRs fails with 1 - (1 - p)^k (1 - f)), and the run failure rate are estimated from the windows.
 * - The choice (simulator-tuned, docs/simulator.md): batching pays while failures are rare (a failed batch is
 *   bisected, and no main run starts behind an undecided one): below BATCH_START (above BATCH_STOP it stops). The
 *   batch size is a power of two by the failure rate (`BATCH_SIZES`: 8, 4, then 2), at most the configured batch and
 *   small enough that the backlog makes at least MIN_BATCHES batches; up to the configured depth of them at once;
 *   bisection shares the same slots (slots set aside for it lose at every rate in the simulator). Without batching
 *   every slot goes to speculation depth.
 * - Two faster signals: the last main runs of batches failing far more often than q explains stop batching at once
 *   (`batchFailureRate`: a failed batch's PRs end only after its bisection, so the PR window learns late); and
 *   batches regrow by doubling, from 2, each step once the last batches mostly passed (a wrong restart costs little).
 * - It only changes what new runs look like: a run that is already started stays valid (the validity check does
 *   not depend on depth or batch size), so no still-useful run is cancelled by a change of the choice.
 */
import type {
  AdaptiveChoice,
  Entry,
  Observed,
  PlannerConfig,
  PlannerMemo,
  QueueState,
  QueueStats,
  RunRecord,
  Transition
} from "./types.ts"

/** Finished runs kept in the window. */
export const RUN_WINDOW = 48
/** Ended PRs kept in the window (the failure rate is taken over the part since the last change, see `regimeStart`). */
export const PR_WINDOW = 240
/** A change of the PR failure rate is detected when splitting the window there gains this much log-likelihood. */
export const CHANGE_THRESHOLD = 4
/** The part after a detected change holds at least this many PRs. */
export const MIN_SEGMENT = 6
/** The prior counts as this many observations. */
export const PRIOR_WEIGHT = 6
/** Prior PR failure rate and flaky rate of a new queue. */
export const PRIOR_FAILURE_RATE = 0.03
export const PRIOR_FLAKY_RATE = 0.02
/** Prior CI duration of a new queue (minutes). */
export const PRIOR_CI_MINUTES = 30

/**
 * Failure rate of PRs above which batching stops paying (tuned with `bench:queue`), with a hysteresis: a queue that
 * batches stops above BATCH_STOP, one that does not starts below BATCH_START (the window's noise would flap it).
 * In the simulator (depth 8, bisection sharing the slots), batches of 2 still merge about 12 % more than no batches
 * at q = 0.05 and about 15 % less at q = 0.1.
 */
export const BATCH_START = 0.06
export const BATCH_STOP = 0.08
/**
 * Batch size by the observed failure rate q: Dorfman's k ≈ 1/√q (the size that needs the fewest runs per PR) while
 * failures are rare, smaller sooner than Dorfman as q rises (a failed batch also holds back the runs behind it), and
 * always a power of two: a batch of 2, 4 or 8 is bisected in even halves, one of 3, 5 or 6 needs an uneven split
 * and often one more round (in the simulator batches of 4 merge 10–20 % more than batches of 3 or 5 at q = 0.02–0.03).
 * Tuned with `bench:queue` (docs/simulator.md): [q below which, batch size].
 */
export const BATCH_SIZES: ReadonlyArray<readonly [number, number]> = [
  [0.025, 8],
  [0.035, 4]
]

/** A queue batches its backlog in at least this many batches (a short one gets smaller batches). */
export const MIN_BATCHES = 4

/** The largest power of two ≤ x (at least 1). */
export const pow2Floor = (x: number): number => (x < 2 ? 1 : 2 ** Math.floor(Math.log2(x)))

export const emptyStats: QueueStats = { runs: [], prs: [], finishedRuns: 0 }

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))

const quantileOf = (xs: readonly number[], q: number): number => {
  const s = xs.slice().sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * (s.length - 1)))]!
}

/** Log-likelihood of k failures in m Bernoulli trials at their own rate k / m. */
const ll = (k: number, m: number): number =>
  k === 0 || k === m ? 0 : k * Math.log(k / m) + (m - k) * Math.log(1 - k / m)

/**
 * Where the current regime of the PR failure rate begins in `prs` (0: the whole window is one regime). Binary
 * segmentation with the generalized likelihood ratio: the split of the window into two Bernoulli segments that
 * gains the most log-likelihood over one segment is a change when the gain exceeds CHANGE_THRESHOLD; the part after
 * it is searched again (a later change), until no split does. A stable queue keeps its long window (a precise
 * rate), a queue whose failure rate jumps forgets the old rate after a few PRs.
 */
export const regimeStart = (prs: ReadonlyArray<0 | 1>): number => {
  const n = prs.length
  const pre = new Array<number>(n + 1)
  pre[0] = 0
  for (let i = 0; i < n; i++) pre[i + 1] = pre[i]! + prs[i]!
  let start = 0
  for (;;) {
    const m = n - start
    if (m < MIN_SEGMENT + 1) return start
    const k = pre[n]! - pre[start]!
    const whole = ll(k, m)
    let best = CHANGE_THRESHOLD
    let at = -1
    for (let s = start + 1; s <= n - MIN_SEGMENT; s++) {
      const a = pre[s]! - pre[start]!
      const g = ll(a, s - start) + ll(k - a, n - s) - whole
      if (g > best) {
        best = g
        at = s
      }
    }
    if (at < 0) return start
    start = at
  }
}

/** What the windows say, each blended with its prior (with a memo, computed once per stats object: a step that
 * observes nothing new keeps the object). */
export const observe = (stats: QueueStats, memo?: PlannerMemo): Observed => {
  const hit = memo?.observed.get(stats)
  if (hit !== undefined) return hit
  const o = observeUncached(stats)
  memo?.observed.set(stats, o)
  return o
}

const observeUncached = (stats: QueueStats): Observed => {
  const prs = stats.prs
  let failed = 0
  const from = regimeStart(prs)
  for (let i = from; i < prs.length; i++) failed += prs[i]!
  const q = (failed + PRIOR_WEIGHT * PRIOR_FAILURE_RATE) / (prs.length - from + PRIOR_WEIGHT)
  let runFailed = 0
  let passExpected = 0
  const durations: number[] = []
  for (const [ms, fail, size] of stats.runs) {
    runFailed += fail
    passExpected += (1 - q) ** size
    durations.push(ms)
  }
  const n = stats.runs.length
  const runFailureRate = (runFailed + PRIOR_WEIGHT * (1 - (1 - q) * (1 - PRIOR_FLAKY_RATE))) / (n + PRIOR_WEIGHT)
  // 1 - f = observed pass rate / pass rate explained by q
  const passObserved = n - runFailed + PRIOR_WEIGHT * (1 - q) * (1 - PRIOR_FLAKY_RATE)
  const passModel = passExpected + PRIOR_WEIGHT * (1 - q)
  const flakyRate = clamp(1 - passObserved / Math.max(1e-9, passModel), 0, 0.5)
  const prior = PRIOR_CI_MINUTES * 60_000
  // fewer than 3 runs: the prior duration, else the window's
  const ciMedianMs = durations.length < 3 ? prior : quantileOf(durations, 0.5)
  const ciP90Ms = durations.length < 3 ? prior * 1.3 : quantileOf(durations, 0.9)
  return {
    failureRate: q,
    regimePrs: prs.length - from,
    runFailureRate,
    flakyRate,
    batchFailureRate: batchFailureRate(stats.runs, flakyRate),
    ciMedianMs,
    ciP90Ms
  }
}

/** Batches grow once the last RAMP_BATCHES main runs, all batches of the current size, had at most one failure. */
export const RAMP_BATCHES = 4

const recentBatchesPassed = (runs: QueueStats["runs"], size: number): boolean => {
  let seen = 0
  let failed = 0
  for (let i = runs.length - 1; i >= 0 && seen < RAMP_BATCHES; i--) {
    const [, fail, k, bisection] = runs[i]!
    if (bisection === 1) continue
    // batches of the current size (smaller ones are from before, or the backlog's tail)
    if (k < size) return false
    seen++
    failed += fail
  }
  return seen === RAMP_BATCHES && failed <= 1
}

/** The last main runs of batches looked at, and how many of them must have failed to say the rate jumped. */
export const RECENT_BATCHES = 12
export const RECENT_BATCHES_FAILED = 9

/**
 * The fast signal: of the last RECENT_BATCHES main runs that tested a batch (2 PRs or more), at least
 * RECENT_BATCHES_FAILED failed. A batch of k fails with 1 - (1 - q)^k (1 - f); at the rates batching is chosen for
 * (q ≤ 0.08, k ≤ 8, f ≤ 0.05) even counting the runs behind a failed batch that fail with it, 6 of 8 happens about
 * once in several hundred runs; after a jump to q = 0.2 most batches of 4 or more fail. The PR rate it implies:
 * q = 1 - ((1 - failed share) / (1 - f))^(1/k), with k the mean size of those batches. Only batches since the last
 * main run of a single PR count: once batching stopped, the PR window alone decides when it starts again.
 */
const batchFailureRate = (runs: QueueStats["runs"], f: number): number | null => {
  let seen = 0
  let failed = 0
  let size = 0
  for (let i = runs.length - 1; i >= 0 && seen < RECENT_BATCHES; i--) {
    const [, fail, k, bisection] = runs[i]!
    if (bisection === 1) continue
    // main runs of single PRs since: batching stopped, the PR window decides again
    if (k < 2) break
    seen++
    failed += fail
    size += k
  }
  if (seen < RECENT_BATCHES || failed < RECENT_BATCHES_FAILED) return null
  const pass = Math.max(1e-3, (seen - failed) / seen / (1 - Math.min(f, 0.5)))
  return clamp(1 - pass ** (seen / size), 0, 1)
}

const round3 = (x: number) => Math.round(x * 1000) / 1000

/**
 * The choice for the configured bounds, the observations and the PRs in the chain (`backlog`: not merged yet, tested
 * or not).
 */
export const choose = (
  bounds: PlannerConfig,
  stats: QueueStats,
  backlog: number,
  memo?: PlannerMemo
): AdaptiveChoice => {
  const o = observe(stats, memo)
  // a jump the batches show before the PR window does counts at once
  const q = Math.max(o.failureRate, o.batchFailureRate ?? 0)
  const maxDepth = Math.max(1, bounds.concurrency)
  const maxBatch = bounds.batch ? Math.max(1, bounds.batchingMinSize) : 1
  const rate = `${(100 * q).toFixed(1)}% of PRs fail`
  const flaky = `${(100 * o.flakyRate).toFixed(1)}% flaky runs`
  let batchSize = 1
  const batching = (stats.choice?.batchSize ?? 2) > 1
  const limit = batching ? BATCH_STOP : BATCH_START
  if (maxBatch > 1 && q < limit) {
    const size = BATCH_SIZES.find(([below]) => q < below)?.[1] ?? 2
    batchSize = Math.max(2, Math.min(size, pow2Floor(maxBatch)))
    // batches grow by doubling, each step once the last batches at the current size mostly passed: a queue that
    // (re)starts batching after a bad stretch tries batches of 2 first (a wrong start costs little)
    const current = stats.choice === undefined || stats.choice === null ? batchSize : stats.choice.batchSize
    if (batchSize > current)
      batchSize = current <= 1 ? 2 : recentBatchesPassed(stats.runs, current) ? current * 2 : current
  }
  if (batchSize > 1) {
    // batching: every slot tests batches speculatively, and a failed batch is bisected on the same slots (the runs
    // behind an undecided batch would most likely contain its bad PR, so they wait and leave their slots to it):
    // sharing beats slots set aside for bisection at every failure rate in the simulator.
    // A short queue gets smaller batches: at least MIN_BATCHES of them, so that one failed batch does not hold back
    // the whole queue and a batch does not wait for PRs that are not there.
    const size = Math.min(batchSize, Math.max(2, pow2Floor(backlog / MIN_BATCHES)))
    // every slot may test a batch: with a backlog of fewer than depth × size PRs the last batches are not there
    // yet (a saturated backlog of 40 in batches of 8 tests 5 at once), PRs that arrive fill a slot at once
    const depth = maxDepth
    return {
      depth,
      batchSize: size,
      bisection: 0,
      observedFailureRate: round3(q),
      observedFlakyRate: round3(o.flakyRate),
      reason: `${rate} and ${flaky}: batches of ${size}, up to ${depth} at once, bisection on the same slots`
    }
  }
  return {
    depth: maxDepth,
    batchSize: 1,
    bisection: 0,
    observedFailureRate: round3(q),
    observedFlakyRate: round3(o.flakyRate),
    reason:
      maxBatch > 1
        ? `${rate} (batching pays below ${(100 * limit).toFixed(1)}%): no batches, all ${maxDepth} slots speculate`
        : `${rate}: batching is off, all ${maxDepth} slots speculate`
  }
}

/** The configuration the planner applies with `choice` (the bounds, narrowed). */
export const applyChoice = (bounds: PlannerConfig, choice: AdaptiveChoice): PlannerConfig => ({
  ...bounds,
  concurrency: choice.depth,
  batch: choice.batchSize > 1,
  batchingMinSize: choice.batchSize,
  // 0: bisection shares the main slots (single.ts)
  bisectionConcurrency: choice.bisection
})

/** Puts the configured bounds back after a step planned with `applyChoice` (mode and state may have changed). */
export const restoreBounds = (config: PlannerConfig, bounds: PlannerConfig): PlannerConfig => ({
  ...config,
  concurrency: bounds.concurrency,
  batch: bounds.batch,
  batchingMinSize: bounds.batchingMinSize,
  bisectionConcurrency: bounds.bisectionConcurrency
})

/** PRs in the chain: pending, testing or passed, not merged yet. */
export const backlogOf = (entries: readonly Entry[]): number => {
  let n = 0
  for (const e of entries) if (e.state === "pending" || e.state === "testing" || e.state === "tests_passed") n++
  return n
}

const push = <A>(xs: readonly A[], add: readonly A[], max: number): A[] => {
  const out = xs.concat(add)
  return out.length > max ? out.slice(out.length - max) : out
}

/** The statistics after a step: runs that finished and PRs that ended in it join the windows. */
export const record = (
  stats: QueueStats,
  runChanges: readonly RunRecord[],
  transitions: readonly Transition[],
  choice: AdaptiveChoice | null
): QueueStats => {
  let runs: Array<readonly [number, 0 | 1, number, 0 | 1]> | null = null
  for (const r of runChanges) {
    if ((r.status !== "succeeded" && r.status !== "failed") || r.endedAt === null || r.startedAt === null) continue
    runs ??= []
    runs.push([
      r.endedAt - r.startedAt,
      r.status === "failed" ? 1 : 0,
      r.testedEntryIds.length,
      r.queueType === "bisection" ? 1 : 0
    ])
  }
  let prs: Array<0 | 1> | null = null
  for (const t of transitions) {
    if (t.to !== "merged" && t.to !== "failed") continue
    prs ??= []
    prs.push(t.to === "failed" ? 1 : 0)
  }
  const previous = stats.choice ?? null
  const sameChoice =
    choice === previous ||
    (choice !== null &&
      previous !== null &&
      choice.reason === previous.reason &&
      choice.depth === previous.depth &&
      choice.bisection === previous.bisection)
  if (runs === null && prs === null && sameChoice) return stats
  return {
    runs: runs === null ? stats.runs : push(stats.runs, runs, RUN_WINDOW),
    prs: prs === null ? stats.prs : push(stats.prs, prs, PR_WINDOW),
    finishedRuns: stats.finishedRuns + (runs?.length ?? 0),
    ...(choice !== null ? { choice: sameChoice ? (previous ?? choice) : choice } : {})
  }
}

/** The statistics of a state (states stored before they existed have none). */
export const statsOf = (state: QueueState): QueueStats => state.stats ?? emptyStats
