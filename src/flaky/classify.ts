/**
 * The flaky-test classifier of semantics §8 (revised), a pure function over one test's recent history: no I/O, the
 * time is passed in.
 *
 * Only results that are not skipped and not from infrastructure-failure uploads count. A *run* is one upload's
 * results of the test (its first attempt and its retries); a run *failed* when every attempt in it failed.
 *
 * Signals:
 * - flaky by pass-on-retry: failed and passed on the same commit in the last 7 days. This is proof of flakiness: while
 *   it is in the window the test is `flaky`, never `broken`.
 * - flaky by pattern (for histories without retries): on stable branches over the last 7 days, the failed runs form
 *   at least 2 separate failure episodes (maximal stretches of failed runs), and the sequence of runs is at least 3
 *   times likelier under independent flakes (each run fails with the same unknown probability) than under
 *   regressions (failures start rarely and, once started, last for several runs until a fix). Both are Bayesian
 *   models over the transition counts with Beta priors, compared by their marginal likelihoods (`patternEvidence`).
 *   One contiguous block of failures followed by passes is a regression and its fix, never flaky. The priors are
 *   fitted (#36): flake rates skewed low with a long tail (FlakeFlagger), regressions rare and lasting 3-12 runs.
 * - a break (#36, the third hypothesis): when the last runs failed, flakes until then and failing for good since,
 *   with a prior of 1 in 1,000 a run. A flake pattern whose flake rate explains the trailing failures better than a
 *   break (`breakEvidence` ≥ 0) wins over the broken signals: a test that fails often is flaky, not broken.
 * - broken: consistent failure: the 5 most recent runs on stable branches all failed, or at least 80% of at least 5
 *   runs in the last 6 h failed (any branch) and the most recent one did too.
 *
 * Status:
 * - `flaky` while pass-on-retry evidence is in the window (even when a broken signal is active too);
 * - else `flaky` while the pattern signal is active and explains the trailing failures (#36);
 * - else `broken` while a broken signal is active; a broken test stays broken until its last 5 runs passed (then
 *   `healthy`: a fixed regression goes back to healthy, it does not become flaky);
 * - else `flaky` while the pattern signal is active (a test that is flaky keeps it while the Bayes factor is at least
 *   1: hysteresis), or while the last pass-on-retry (`flakySignalAt`, carried in the status) is less than 7 days
 *   old; the pattern is not carried: it is read again from the window each time, so a pattern that a regression's
 *   start made for a moment goes when the regression shows as one block;
 * - else `healthy`.
 * - `timestamp` is when the value last changed (kept from `previous` when the value stays); the `reason` is the one
 *   recorded at that change and is also kept while the value stays.
 */

export const HOUR = 60 * 60 * 1000
export const DAY = 24 * HOUR

export const PASS_ON_RETRY_WINDOW_MS = 7 * DAY
export const PATTERN_WINDOW_MS = 7 * DAY
export const PATTERN_WINDOW_LABEL = "7 days"
/** the fewest separate failure episodes that can show a pattern (one episode is a regression, or cannot be told) */
export const PATTERN_MIN_EPISODES = 2
/**
 * Regressions start after at most this share of passing runs: a test whose new failures follow more of them (the
 * lower end of the 90% credible interval, over at least 3 episodes) fails too often to be regressions.
 */
export const MAX_REGRESSION_ONSET = 0.2
export const PATTERN_MIN_EPISODES_FOR_ONSETS = 3
/** how many times likelier the runs must be under independent flakes than under regressions */
export const PATTERN_MIN_BAYES_FACTOR = 3
/** a test that is flaky stays flaky by pattern while the runs are at least as likely under flakes (hysteresis) */
export const PATTERN_KEEP_BAYES_FACTOR = 1
/**
 * Prior of the per-run flake probability (independent flakes), fitted to FlakeFlagger's rerun data (Alshammari et
 * al., ICSE 2021): per-test failure rates skewed low (median about 0.7% of runs) with a long tail to 50% and more.
 * Beta(0.4, 10) has its median near 1.5% and about 12% of its mass above 10% (#36; it was Jeffreys' Beta(½, ½)).
 */
export const FLAKE_PRIOR = { a: 0.4, b: 10 } as const
/**
 * Prior of the probability that a regression starts after a passing run: regressions are rare for any one test (a
 * tenth of the tests regressing once in 100 runs is 0.1% a run); Beta(½, 50), mean 1%, is generous (#36; it was
 * Beta(½, ½), which let "regressions" start after half the passing runs and explain a test that fails often).
 */
export const ONSET_PRIOR = { a: 0.5, b: 50 } as const
/**
 * Prior of the probability that a failing run is followed by a passing one under regressions: a regression lasts
 * until its fix, 3-12 runs: mean 1/7 (#36; it was Beta(1, 4), mean 1/5).
 */
export const FIX_PRIOR = { a: 1, b: 6 } as const
/**
 * The third hypothesis, a break: when the last runs failed, the test may have flaked until the first of them and
 * fail for good since then. Its prior probability at any one run: 1 in 1,000 (a tenth of the tests breaking once in
 * 100 runs). The trailing failures are read as flakes only when they are at least that likely under the test's own
 * flake rate (#36).
 */
export const BREAK_PRIOR = 0.001
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

/**
 * Walks the runs (an upload's results of the test; failed when every attempt failed), newest first, of the results
 * that `keep` accepts. `visit` returns false to stop.
 */
const eachRunNewestFirst = (
  runs: readonly HistoryResult[],
  keep: (r: HistoryResult) => boolean,
  visit: (failed: boolean, last: HistoryResult) => boolean
): void => {
  let upload: string | undefined
  let failed = true
  let last: HistoryResult | undefined
  for (let i = runs.length - 1; i >= 0; i--) {
    const r = runs[i] as HistoryResult
    if (!keep(r)) continue
    if (r.uploadId !== upload) {
      if (last !== undefined && !visit(failed, last)) return
      upload = r.uploadId
      failed = true
      last = r
    }
    if (r.status !== "failed") failed = false
  }
  if (last !== undefined) visit(failed, last)
}

/** the 5 most recent runs on stable branches all failed (every attempt) */
const brokenStreak = (runs: readonly HistoryResult[], isStable: (branch: string) => boolean): Signal | undefined => {
  let n = 0
  let at = 0
  let branch = ""
  let oneBranch = true
  let passed = false
  eachRunNewestFirst(
    runs,
    (r) => isStable(r.branch),
    (failed, r) => {
      if (!failed) {
        passed = true
        return false
      }
      if (n === 0) {
        at = r.at
        branch = r.branch
      } else if (r.branch !== branch) oneBranch = false
      n++
      return n < BROKEN_STREAK
    }
  )
  if (passed || n < BROKEN_STREAK) return undefined
  return { reason: `failed the last ${BROKEN_STREAK} runs on ${oneBranch ? branch : "stable branches"}`, at }
}

/** at least 80% of at least 5 runs in the last 6 h failed, the most recent one too */
const brokenRate = (runs: readonly HistoryResult[], now: number): Signal | undefined => {
  const since = now - BROKEN_RATE_WINDOW_MS
  let total = 0
  let failedRuns = 0
  let latestFailed = false
  let latestAt = 0
  eachRunNewestFirst(
    runs,
    (r) => r.at >= since,
    (failed, r) => {
      if (total === 0) {
        latestFailed = failed
        latestAt = r.at
      }
      total++
      if (failed) failedRuns++
      return true
    }
  )
  if (total < BROKEN_RATE_MIN_RUNS || !latestFailed || failedRuns / total < BROKEN_RATE) return undefined
  return { reason: `failure rate ${percent(failedRuns / total)} over ${BROKEN_RATE_WINDOW_LABEL}`, at: latestAt }
}

/** the last 5 runs (any branch) all passed */
const recoveredFromBroken = (runs: readonly HistoryResult[]): boolean => {
  let n = 0
  let ok = true
  eachRunNewestFirst(
    runs,
    () => true,
    (failed) => {
      if (failed) {
        ok = false
        return false
      }
      n++
      return n < BROKEN_RECOVERY_PASSES
    }
  )
  return ok && n >= BROKEN_RECOVERY_PASSES
}

// ---- the pattern model

/** ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9: ~15 digits) */
const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
  12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7
] as const
export const lnGamma = (x: number): number => {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x)
  const z = x - 1
  let a = LANCZOS[0]
  const t = z + 7.5
  for (let i = 1; i < 9; i++) a += (LANCZOS[i] as number) / (z + i)
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a)
}
const lnBeta = (a: number, b: number): number => lnGamma(a) + lnGamma(b) - lnGamma(a + b)
/** ln of the marginal likelihood of `k` successes in `n` Bernoulli trials (in a given order) under a Beta(a, b) prior */
const lnBetaBernoulli = (k: number, n: number, prior: { readonly a: number; readonly b: number }): number =>
  lnBeta(prior.a + k, prior.b + n - k) - lnBeta(prior.a, prior.b)

/** Transition counts of a sequence of runs (oldest first): `pf` = a failed run right after a passed one, and so on. */
export interface RunPattern {
  readonly runs: number
  readonly failed: number
  /** maximal stretches of failed runs */
  readonly episodes: number
  /** episodes of one failed run followed by a passed one */
  readonly isolated: number
  readonly pp: number
  readonly pf: number
  readonly fp: number
  readonly ff: number
  /** time of the most recent failed run */
  readonly lastFailureAt: number
  /** the failed runs in a row at the end (0 when the last run passed) */
  readonly trailing: number
}

/**
 * ln of the Bayes factor of independent flakes over regressions for a sequence of runs, both conditioned on its
 * first run:
 * - flakes: every run fails with the same probability p, p ~ Beta(½, ½);
 * - regressions: a two-state chain; after a passed run a failure starts with probability r ~ Beta(½, ½), after a
 *   failed run the test passes again with probability s ~ Beta(1, 4) (a regression lasts until a fix, ~5 runs).
 * Isolated failures are likely under flakes and unlikely under regressions (each would need a fix right away); one
 * long stretch is the other way round. Models with fewer parameters win when both fit (Occam's factor).
 */
export const patternEvidence = (p: RunPattern): number => {
  const later = p.pp + p.pf + p.fp + p.ff
  const laterFailed = p.pf + p.ff
  const flakes = lnBetaBernoulli(laterFailed, later, FLAKE_PRIOR)
  const regressions = lnBetaBernoulli(p.pf, p.pp + p.pf, ONSET_PRIOR) + lnBetaBernoulli(p.fp, p.fp + p.ff, FIX_PRIOR)
  return flakes - regressions
}

/**
 * ln of the Bayes factor of independent flakes over a break (flakes until the trailing failed runs began, then
 * failing for good): the trailing failures' probability under the flake rate of the runs before them, over the
 * break's prior probability at that run. +∞ when the last run passed (no break can explain a pass).
 */
export const breakEvidence = (p: RunPattern): number => {
  if (p.trailing === 0) return Number.POSITIVE_INFINITY
  const later = p.pp + p.pf + p.fp + p.ff
  const laterFailed = p.pf + p.ff
  const block = Math.min(p.trailing, later)
  const predictive =
    lnBetaBernoulli(laterFailed, later, FLAKE_PRIOR) - lnBetaBernoulli(laterFailed - block, later - block, FLAKE_PRIOR)
  return predictive - Math.log(BREAK_PRIOR)
}

/** the regularised incomplete Beta function's inverse by bisection over its density (only for the human reason) */
const betaQuantile = (a: number, b: number, q: number): number => {
  // integrate the density on a grid in log space around the mass
  const n = 4000
  const c = -lnBeta(a, b)
  let total = 0
  const xs = new Float64Array(n)
  const cdf = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    const x = (i + 0.5) / n
    const d = Math.exp(c + (a - 1) * Math.log(x) + (b - 1) * Math.log1p(-x)) / n
    total += d
    xs[i] = x
    cdf[i] = total
  }
  for (let i = 0; i < n; i++) if ((cdf[i] as number) / total >= q) return xs[i] as number
  return 1
}

const pct = (x: number): string => {
  const v = x * 100
  return v >= 10 ? `${Math.round(v)}%` : `${v.toFixed(1)}%`
}

/** The runs on stable branches in the pattern window, as transition counts (no allocation). */
export const runPattern = (
  runs: readonly HistoryResult[],
  now: number,
  isStable: (branch: string) => boolean
): RunPattern => {
  const since = now - PATTERN_WINDOW_MS
  let n = 0
  let failed = 0
  let episodes = 0
  let isolated = 0
  let pp = 0
  let pf = 0
  let fp = 0
  let ff = 0
  let lastFailureAt = Number.NEGATIVE_INFINITY
  // the previous run's outcome, and the length of the current failure episode
  let prev: boolean | undefined
  let streak = 0
  let upload: string | undefined
  let runFailed = true
  let runAt = 0
  const close = () => {
    if (upload === undefined) return
    n++
    if (runFailed) {
      failed++
      lastFailureAt = Math.max(lastFailureAt, runAt)
      if (prev !== true) episodes++
      streak++
      if (prev === true) ff++
      else if (prev === false) pf++
    } else {
      if (prev === true) {
        fp++
        if (streak === 1) isolated++
      } else if (prev === false) pp++
      streak = 0
    }
    prev = runFailed
  }
  for (let i = 0; i < runs.length; i++) {
    const r = runs[i] as HistoryResult
    if (r.at < since || !isStable(r.branch)) continue
    if (r.uploadId !== upload) {
      close()
      upload = r.uploadId
      runFailed = true
      runAt = r.at
    }
    if (r.status !== "failed") runFailed = false
  }
  close()
  return { runs: n, failed, episodes, isolated, pp, pf, fp, ff, lastFailureAt, trailing: prev === true ? streak : 0 }
}

const PATTERN_MIN_LN_BF = Math.log(PATTERN_MIN_BAYES_FACTOR)
const PATTERN_KEEP_LN_BF = Math.log(PATTERN_KEEP_BAYES_FACTOR)

/** the onset probability's posterior under regressions, Beta(½ + failures started, ½ + passes kept) */
const onsetPosterior = (p: RunPattern) => ({ a: ONSET_PRIOR.a + p.pf, b: ONSET_PRIOR.b + p.pp })

/** The pattern signal, with its reason made only when asked for (a status change). */
const patternSignal = (
  runs: readonly HistoryResult[],
  now: number,
  isStable: (branch: string) => boolean,
  wasFlaky: boolean
): { readonly at: number; readonly reason: () => string; readonly explainsStreak: boolean } | undefined => {
  const p = runPattern(runs, now, isStable)
  if (p.episodes < PATTERN_MIN_EPISODES) return undefined
  const lnBf = patternEvidence(p)
  // flakes beat regressions; when they beat a break too, they explain the failures in a row at the end (if any)
  if (lnBf >= (wasFlaky ? PATTERN_KEEP_LN_BF : PATTERN_MIN_LN_BF))
    return { at: p.lastFailureAt, reason: () => patternReason(p, lnBf), explainsStreak: breakEvidence(p) >= 0 }
  // a test that fails often fits a chain of regressions that start after most passing runs as well as it fits
  // flakes: regressions do not start that often
  if (p.episodes < PATTERN_MIN_EPISODES_FOR_ONSETS) return undefined
  const onset = onsetPosterior(p)
  if (onset.a / (onset.a + onset.b) < MAX_REGRESSION_ONSET) return undefined
  if (betaQuantile(onset.a, onset.b, 0.05) < MAX_REGRESSION_ONSET) return undefined
  return { at: p.lastFailureAt, reason: () => onsetReason(p), explainsStreak: false }
}

const flakeRate = (p: RunPattern): string => {
  const a = FLAKE_PRIOR.a + p.failed
  const b = FLAKE_PRIOR.b + p.runs - p.failed
  return `flake rate ${pct(a / (a + b))}, 90% credible interval ${pct(betaQuantile(a, b, 0.05))}–${pct(
    betaQuantile(a, b, 0.95)
  )}`
}

const episodesHead = (p: RunPattern): string =>
  p.isolated === p.episodes
    ? `failed alone ${p.episodes} times in ${PATTERN_WINDOW_LABEL} on stable branches, each time passing on the next run`
    : `failed in ${p.episodes} separate episodes in ${PATTERN_WINDOW_LABEL} on stable branches, ${p.isolated} of them a single run`

/**
 * "failed alone 3 times in 7 days on stable branches, each time passing on the next run (3 of 300 runs; flake rate
 * 1.2%, 90% credible interval 0.4%–2.3%; 34× likelier flaky than regressions)"
 */
export const patternReason = (p: RunPattern, lnBf: number = patternEvidence(p)): string => {
  const bf = Math.exp(lnBf)
  return `${episodesHead(p)} (${p.failed} of ${p.runs} runs; ${flakeRate(p)}; ${
    bf >= 1000 ? ">1000" : Math.round(bf)
  }× likelier flaky than regressions)`
}

/** "failed in 45 separate episodes … (108 of 200 runs; a new failure after 47% of passing runs, 90% credible …)" */
export const onsetReason = (p: RunPattern): string => {
  const o = onsetPosterior(p)
  return `${episodesHead(p)} (${p.failed} of ${p.runs} runs; ${flakeRate(p)}; a new failure after ${pct(
    o.a / (o.a + o.b)
  )} of passing runs, 90% credible interval ${pct(betaQuantile(o.a, o.b, 0.05))}–${pct(
    betaQuantile(o.a, o.b, 0.95)
  )}: too often for regressions)`
}

/** Classifies one test. Pure: the same input always gives the same output. */
export const classify = (input: ClassifyInput): Classification => {
  const { now, previous } = input
  const stableBranches = input.stableBranches
  const isStable = typeof stableBranches === "function" ? stableBranches : (b: string) => stableBranches.has(b)
  const runs = countedRuns(input.results)

  // ---- signals
  const retry = passOnRetry(runs, now)
  const broken = brokenRate(runs, now) ?? brokenStreak(runs, isStable)
  const wasFlaky = previous?.value === "flaky"
  const pattern = patternSignal(runs, now, isStable, wasFlaky)
  // only pass-on-retry is carried (as `flakySignalAt`): the pattern is read again from the window each time
  const carried = previous?.flakySignalAt
  const flakySignalAt = Math.max(retry?.at ?? Number.NEGATIVE_INFINITY, carried ?? Number.NEGATIVE_INFINITY)
  const hasFlakySignalAt = Number.isFinite(flakySignalAt)

  // ---- decide
  let value: TestStatusValue
  let reason: () => string
  if (retry !== undefined) {
    // proof of flakiness: never broken while it is in the window
    value = "flaky"
    reason = pattern !== undefined && pattern.at > retry.at ? pattern.reason : () => retry.reason
  } else if (pattern?.explainsStreak === true) {
    // the pattern's flake rate explains the failures in a row (#36): a test that fails often is not broken
    value = "flaky"
    reason = pattern.reason
  } else if (broken !== undefined) {
    value = "broken"
    reason = () => broken.reason
  } else if (previous?.value === "broken" && !recoveredFromBroken(runs)) {
    value = "broken"
    reason = () => previous.reason
  } else if (pattern !== undefined) {
    value = "flaky"
    reason = pattern.reason
  } else if (wasFlaky && hasFlakySignalAt && now - flakySignalAt < FLAKY_QUIET_PERIOD_MS) {
    // no active signal, but the last pass-on-retry is less than 7 days old
    value = "flaky"
    reason = () => previous.reason
  } else {
    // a broken test that recovered is healthy, even with an older flaky signal: a fixed regression is not flaky
    value = "healthy"
    reason = () =>
      previous?.value === "broken"
        ? `passed the last ${BROKEN_RECOVERY_PASSES} runs`
        : previous?.value === "flaky"
          ? "no flaky signal for 7 days"
          : ""
  }

  if (previous !== null && previous.value === value) {
    return hasFlakySignalAt
      ? { value, reason: previous.reason, timestamp: previous.since, flakySignalAt }
      : { value, reason: previous.reason, timestamp: previous.since }
  }
  return hasFlakySignalAt
    ? { value, reason: reason(), timestamp: now, flakySignalAt }
    : { value, reason: reason(), timestamp: now }
}

/**
 * The runs in a row, newest first, without a failed attempt (any branch; infrastructure failures and skips do not
 * count): an auto-quarantined test leaves quarantine after enough of them.
 */
export const trailingCleanRuns = (results: readonly HistoryResult[]): number => {
  let n = 0
  // a run is clean when none of its attempts failed
  const runs = countedRuns(results)
  let upload: string | undefined
  let clean = true
  for (let i = runs.length - 1; i >= 0; i--) {
    const r = runs[i] as HistoryResult
    if (r.uploadId !== upload) {
      if (upload !== undefined) {
        if (!clean) return n
        n++
      }
      upload = r.uploadId
      clean = true
    }
    if (r.status === "failed") clean = false
  }
  if (upload !== undefined && clean) n++
  return n
}
