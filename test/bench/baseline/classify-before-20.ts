// The flaky classifier as it was before issue #20 (commit 5ae9e54), kept as the baseline of bench:flaky-quality.
/**
 * The flaky-test classifier of semantics §8, a pure function over one test's recent history.
 *
 * Signals (only results that are not skipped and not from infrastructure-failure uploads count):
 * - broken by rate: ≥ 80% failures over the last 6 h with ≥ 5 runs (any branch, as the spec words it);
 * - broken by streak: the 5 most recent runs on stable branches all failed;
 * - flaky by pass-on-retry: failed and passed on the same commit in the last 7 days;
 * - flaky by rate: on stable branches, ≥ 20% failures over the last 72 h with ≥ 10 runs; a test that already is
 *   flaky keeps this signal down to 10% (hysteresis), below 10% the signal is gone.
 *
 * Status, the most severe wins: `broken` > `flaky` > `healthy`.
 * - `broken` while a broken signal is active; a broken test stays broken until its last 5 runs all passed.
 * - `flaky` while a flaky signal is active or the last flaky signal (`flakySignalAt`, carried in the status) is less
 *   than 7 days old; then it leaves `flaky`.
 * - `timestamp` is when the value last changed (kept from `previous` when the value stays); the `reason` is the one
 *   recorded at that change and is also kept while the value stays.
 */

export const HOUR = 60 * 60 * 1000
export const DAY = 24 * HOUR

export const PASS_ON_RETRY_WINDOW_MS = 7 * DAY
export const FLAKY_RATE_WINDOW_MS = 72 * HOUR
export const FLAKY_RATE_WINDOW_LABEL = "72 h"
export const FLAKY_RATE_MIN_RUNS = 10
export const FLAKY_RATE_ENTER = 0.2
export const FLAKY_RATE_EXIT = 0.1
export const FLAKY_QUIET_PERIOD_MS = 7 * DAY
export const BROKEN_RATE_WINDOW_MS = 6 * HOUR
export const BROKEN_RATE_WINDOW_LABEL = "6 h"
export const BROKEN_RATE_MIN_RUNS = 5
export const BROKEN_RATE = 0.8
export const BROKEN_STREAK = 5
export const BROKEN_RECOVERY_PASSES = 5
/** an upload is an infrastructure failure when at least this share of its tests failed (the caller marks them) */
export const INFRA_FAILURE_SHARE = 0.8
/** smallest upload (non-skipped tests) that can be an infrastructure failure; the spec sets no minimum */
export const INFRA_MIN_TESTS = 1

/**
 * Whether an upload is an infrastructure failure: failed ≥ 80% of its non-skipped tests (primary results, retries not
 * counted). Its results are stored but marked `infra` and not used for detection.
 */
export const isInfraFailureUpload = (counts: { readonly passed: number; readonly failed: number }): boolean => {
  const total = counts.passed + counts.failed
  return total >= INFRA_MIN_TESTS && total > 0 && counts.failed / total >= INFRA_FAILURE_SHARE
}

export type TestStatusValue = "healthy" | "flaky" | "broken"
export type ResultStatus = "passed" | "failed" | "skipped"

export interface HistoryResult {
  /** epoch ms */
  readonly at: number
  readonly sha: string
  readonly branch: string
  readonly status: ResultStatus
  readonly uploadId: string
  /** the result comes from an upload where ≥ 80% of the tests failed */
  readonly infra: boolean
}

export interface PreviousStatus {
  readonly value: TestStatusValue
  readonly reason: string
  /** when the value last changed */
  readonly since: number
  /** time of the last flaky signal seen */
  readonly flakySignalAt?: number
}

export interface ClassifyInput {
  readonly now: number
  readonly results: readonly HistoryResult[]
  readonly previous: PreviousStatus | null
  readonly stableBranches: ReadonlySet<string> | ((branch: string) => boolean)
}

export interface Classification {
  readonly value: TestStatusValue
  readonly reason: string
  /** when the value last changed */
  readonly timestamp: number
  /** the last flaky signal (to be stored and passed back as `previous.flakySignalAt`) */
  readonly flakySignalAt?: number
}

export const DEFAULT_STABLE_BRANCHES = ["main", "master"] as const
export const MERGE_QUEUE_BRANCH_PREFIX = "trunk-merge/"

/** main, master, the queues' target branches and the merge queue's `trunk-merge/...` test branches */
export const isStableBranch = (branch: string, queueBranches: Iterable<string> = []): boolean => {
  if (branch === "main" || branch === "master" || branch.startsWith(MERGE_QUEUE_BRANCH_PREFIX)) return true
  for (const b of queueBranches) if (b === branch) return true
  return false
}

const shortSha = (sha: string): string => sha.slice(0, 7)
const percent = (rate: number): string => `${Math.round(rate * 100)}%`

interface Signal {
  readonly reason: string
  readonly at: number
}

const counts = (r: HistoryResult): boolean => !r.infra && r.status !== "skipped"

/**
 * The runs that count, oldest first (a stable sort: input order for equal times): the input itself when it holds
 * only such runs, in order, as the stored histories do. Classification runs for every test an upload touched that
 * may not be healthy, and most of those have a short history: it allocates only what it reports.
 */
const countedRuns = (results: readonly HistoryResult[]): readonly HistoryResult[] => {
  let previous = Number.NEGATIVE_INFINITY
  for (let i = 0; i < results.length; i++) {
    const r = results[i] as HistoryResult
    if (!counts(r) || r.at < previous) return results.filter(counts).sort((a, b) => a.at - b.at)
    previous = r.at
  }
  return results
}

/** pass-on-retry: the most recent commit with both a failure and a pass in the window */
const passOnRetry = (runs: readonly HistoryResult[], now: number): Signal | undefined => {
  const since = now - PASS_ON_RETRY_WINDOW_MS
  let anyFailed = false
  let anyPassed = false
  for (let i = 0; i < runs.length; i++) {
    const r = runs[i] as HistoryResult
    if (r.at < since) continue
    if (r.status === "failed") anyFailed = true
    else if (r.status === "passed") anyPassed = true
  }
  // no commit can have both
  if (!(anyFailed && anyPassed)) return undefined
  const bySha = new Map<string, { failed: boolean; passed: boolean; last: number }>()
  for (const r of runs) {
    if (r.at < since) continue
    const e = bySha.get(r.sha) ?? { failed: false, passed: false, last: r.at }
    if (r.status === "failed") e.failed = true
    else if (r.status === "passed") e.passed = true
    e.last = Math.max(e.last, r.at)
    bySha.set(r.sha, e)
  }
  let best: Signal | undefined
  for (const [sha, e] of bySha) {
    if (!(e.failed && e.passed)) continue
    if (best === undefined || e.last > best.at)
      best = { reason: `failed and passed on commit ${shortSha(sha)}`, at: e.last }
  }
  return best
}

/** the 5 most recent counted runs on stable branches all failed */
const brokenStreak = (runs: readonly HistoryResult[], isStable: (branch: string) => boolean): Signal | undefined => {
  let n = 0
  let at = 0
  let branch = ""
  let oneBranch = true
  for (let i = runs.length - 1; i >= 0 && n < BROKEN_STREAK; i--) {
    const r = runs[i] as HistoryResult
    if (!isStable(r.branch)) continue
    if (r.status !== "failed") return undefined
    if (n === 0) {
      at = r.at
      branch = r.branch
    } else if (r.branch !== branch) oneBranch = false
    n++
  }
  if (n < BROKEN_STREAK) return undefined
  return { reason: `failed the last ${BROKEN_STREAK} runs on ${oneBranch ? branch : "stable branches"}`, at }
}

/** Classifies one test. Pure: the same input always gives the same output. */
export const classify = (input: ClassifyInput): Classification => {
  const { now, previous } = input
  const stableBranches = input.stableBranches
  const isStable = typeof stableBranches === "function" ? stableBranches : (b: string) => stableBranches.has(b)
  const runs = countedRuns(input.results)
  const wasFlaky = previous?.value === "flaky"

  // the rate windows: every counted run over the last 6 h, the stable branches' over the last 72 h
  const brokenSince = now - BROKEN_RATE_WINDOW_MS
  const flakySince = now - FLAKY_RATE_WINDOW_MS
  let recentRuns = 0
  let recentFailed = 0
  let recentLast = Number.NEGATIVE_INFINITY
  let stableRuns = 0
  let stableFailed = 0
  let stableLast = Number.NEGATIVE_INFINITY
  for (let i = 0; i < runs.length; i++) {
    const r = runs[i] as HistoryResult
    const failed = r.status === "failed"
    if (r.at >= brokenSince) {
      recentRuns++
      if (failed) recentFailed++
      recentLast = Math.max(recentLast, r.at)
    }
    if (r.at >= flakySince && isStable(r.branch)) {
      stableRuns++
      if (failed) stableFailed++
      stableLast = Math.max(stableLast, r.at)
    }
  }

  // ---- broken signals
  let broken: Signal | undefined
  const recentRate = recentRuns === 0 ? 0 : recentFailed / recentRuns
  if (recentRuns >= BROKEN_RATE_MIN_RUNS && recentRate >= BROKEN_RATE) {
    broken = { reason: `failure rate ${percent(recentRate)} over ${BROKEN_RATE_WINDOW_LABEL}`, at: recentLast }
  }
  broken ??= brokenStreak(runs, isStable)

  // ---- flaky signals: the freshest of pass-on-retry and the stable branches' rate (the first on a tie)
  let freshest = passOnRetry(runs, now)
  const stableRate = stableRuns === 0 ? 0 : stableFailed / stableRuns
  const threshold = wasFlaky ? FLAKY_RATE_EXIT : FLAKY_RATE_ENTER
  if (
    stableRuns >= FLAKY_RATE_MIN_RUNS &&
    stableRate >= threshold &&
    (freshest === undefined || stableLast > freshest.at)
  ) {
    freshest = { reason: `failure rate ${percent(stableRate)} over ${FLAKY_RATE_WINDOW_LABEL}`, at: stableLast }
  }
  const carried = previous?.flakySignalAt ?? (previous?.value === "flaky" ? previous.since : undefined)
  const flakySignalAt = Math.max(freshest?.at ?? Number.NEGATIVE_INFINITY, carried ?? Number.NEGATIVE_INFINITY)
  const hasFlakySignalAt = Number.isFinite(flakySignalAt)

  // ---- decide
  let value: TestStatusValue
  let reason: string
  if (broken !== undefined) {
    value = "broken"
    reason = broken.reason
  } else if (previous?.value === "broken" && !recoveredFromBroken(runs)) {
    value = "broken"
    reason = previous.reason
  } else if (freshest !== undefined) {
    value = "flaky"
    reason = freshest.reason
  } else if (hasFlakySignalAt && now - flakySignalAt < FLAKY_QUIET_PERIOD_MS && previous?.value !== "healthy") {
    // no active signal, but the last one is less than 7 days old
    value = "flaky"
    reason = previous?.value === "flaky" ? previous.reason : "flaky signal in the last 7 days"
  } else {
    value = "healthy"
    reason =
      previous?.value === "broken"
        ? `passed the last ${BROKEN_RECOVERY_PASSES} runs`
        : previous?.value === "flaky"
          ? "no flaky signal for 7 days"
          : ""
  }

  let timestamp = now
  if (previous !== null && previous.value === value) {
    reason = previous.reason
    timestamp = previous.since
  }
  return hasFlakySignalAt ? { value, reason, timestamp, flakySignalAt } : { value, reason, timestamp }
}

/** the last 5 counted runs (any branch) all passed */
const recoveredFromBroken = (runs: readonly HistoryResult[]): boolean => {
  if (runs.length < BROKEN_RECOVERY_PASSES) return false
  for (let i = runs.length - BROKEN_RECOVERY_PASSES; i < runs.length; i++) {
    if (runs[i]?.status !== "passed") return false
  }
  return true
}
