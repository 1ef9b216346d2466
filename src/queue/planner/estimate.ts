/**
 * Estimates (issue #18): when each enqueued PR starts testing and when it merges, found by simulating the queue
 * forward with the planner itself (`step`), over the observed CI durations and PR failure rate (adaptive.ts
 * `observe`). Pure and deterministic: the same state and time give the same estimates, cached per state object.
 *
 * The forward simulation, repeated a few times (more for short queues, ROUND_BUDGET simulated PRs in all) with a
 * pseudo-random generator seeded from the state, so the same state always gives the same estimate:
 * - each run takes a duration drawn from the window's finished runs (a run already testing: what remains of one of
 *   the window's runs that lasted longer than it has run so far, at least a minute); building a test branch takes
 *   BUILD_MS, a merge MERGE_MS; CI slots are not limited beyond the planner's own;
 * - each PR fails with the PR failure rate q: the observed one (adaptive.ts `observe`, over the current regime of
 *   the window), or the rate of the last RECENT_PRS PRs when that is higher (with the observed rate as a prior), so
 *   that a queue that has just started to fail more is not estimated with its old rate until the change detector
 *   notices. A PR already `pending_failure` fails with q when a PR ahead of it in its failed run fails in the same
 *   future (that one explains the failure), else with the share of run failures that failing PRs explain (the rest
 *   are spurious: the run behind it passes and it merges); estimatePoint.ts `drawFailing`. Every run that contains a
 *   failing PR fails. A PR that failed in a round is taken to land with the PR that merges next behind it (the
 *   estimate says when it merges if it passes);
 * - only the first RANGE_HORIZON PRs are simulated; the ones behind get the simulated throughput, measured from the
 *   first merge to the last;
 * - issue #35: each estimate also gets a range, the RANGE_LOW and RANGE_HIGH quantiles over the rounds (at least
 *   RANGE_ROUNDS of them) widened by `rangeAround`, calibrated in the simulator (docs/simulator.md);
 * - each estimate is the median over the rounds, moving to their mean as the failure rate rises (RESTART_FROM);
 * - adaptive mode: the simulation keeps the current choice (the settings the next runs start with); it does not
 *   adapt further or record observations, so each simulated step costs what a fixed queue's does.
 */

import { applyChoice, observe, statsOf } from "./adaptive.ts"
import { isTerminal } from "./context.ts"
import { drawFailing, recentFailureRate, remainingDraw } from "./estimatePoint.ts"
import { makePlannerMemo, step } from "./step.ts"
import { TimedQueue } from "./timedQueue.ts"
import type { Command, Entry, PlannerEvent, PlannerMemo, QueueState, QueueStats, RunItem } from "./types.ts"

export const BUILD_MS = 30_000
export const MERGE_MS = 12_000
/** PRs simulated with the planner; the ones behind are extrapolated with the simulated throughput. */
export const HORIZON = 40
/** Fewer finished runs than this (and no prior given): no estimate. */
export const MIN_FINISHED_RUNS = 3
const MAX_STEPS = 20_000
/** Forward simulations per estimate: about ROUND_BUDGET simulated PRs in all, between RANGE_ROUNDS and MAX_ROUNDS. */
const ROUND_BUDGET = 80
/**
 * Each estimate is the median over the rounds while PRs rarely fail; as the failure rate q rises from RESTART_FROM
 * to RESTART_FROM + RESTART_SPAN it moves to the mean, which counts the restarts a failing PR ahead causes (the
 * median of a queue where a third of the rounds restart is the round without restart: too optimistic).
 */
export const RESTART_FROM = 0.05
export const RESTART_SPAN = 0.1
const MAX_ROUNDS = 24
/** At least this many forward simulations, so that the range's quantiles have samples (issue #35). */
export const RANGE_ROUNDS = 10
/**
 * With RANGE_ROUNDS rounds, PRs simulated with the planner (the rest extrapolated): RANGE_BUDGET simulated PRs in
 * all, so that a long queue's estimate costs about 3 times (measured at the median) what the point estimate's 2 rounds
 * of HORIZON did.
 */
export const RANGE_BUDGET = 160
export const RANGE_HORIZON = Math.min(HORIZON, Math.floor(RANGE_BUDGET / RANGE_ROUNDS))
/** The quantiles of the sampled futures the range is built from (issue #35). */
export const RANGE_LOW = 0.1
export const RANGE_HIGH = 0.9
/** How far the range reaches beyond the sampled quantiles, below and above the central value (rangeAround). */
export const RANGE_WIDEN_LOW = 1.4
export const RANGE_WIDEN_HIGH = 1.4
/** The range spans at least this share of the time left on each side of the central value. */
export const RANGE_MIN_SHARE = 0.15
/**
 * Below the central value the range reaches at least RANGE_MIN_SHARE of the time left plus this share per hour
 * left, up to RANGE_MAX_SHARE_BELOW: long estimates freeze adaptive mode's current choice, which a long queue
 * outgrows by batching more (measured pessimistic: actual / estimated 0.55 at the median for ≥ 3 h at 12 PRs/h).
 */
export const RANGE_SHARE_PER_HOUR = 0.1
export const RANGE_MAX_SHARE_BELOW = 0.6
/** The failure rate drawn from is at least that of the last RECENT_PRS PRs, with the observed rate as a prior worth
 * RECENT_PRIOR PRs (estimatePoint.ts `recentFailureRate`). */
export const RECENT_PRS = 20
export const RECENT_PRIOR = 20
/** A pending_failure PR fails in at least this share of the sampled futures. */
export const PENDING_FAILS_MIN = 0.5
/** What remains of a run that has tested longer than the window's runs, at least. */
export const MIN_REMAINING_MS = 60_000

export type UnavailableReason = "FEWER_THAN_3_FINISHED_RUNS" | "QUEUE_PAUSED" | "NOT_READY"

/** A range of times (ms since the epoch): the RANGE_LOW and RANGE_HIGH quantiles of the sampled futures (issue #35). */
export interface TimeRange {
  readonly earliest: number
  readonly latest: number
}

export interface EntryEstimate {
  readonly testingStartAt: number | null
  readonly mergeAt: number | null
  /** null when `mergeAt` is */
  readonly mergeRange: TimeRange | null
  readonly testingStartRange: TimeRange | null
  readonly unavailableReason: UnavailableReason | null
}

export interface QueueEstimate {
  /** set when no entry of the queue gets an estimate */
  readonly unavailableReason: UnavailableReason | null
  readonly byEntry: ReadonlyMap<string, EntryEstimate>
  /** the observations the estimate used */
  readonly ciMedianMs: number
  readonly failureRate: number
}

interface Timed {
  readonly at: number
  readonly seq: number
  readonly ev: PlannerEvent
}

/**
 * Estimates for the entries of `state` at time `now`. `prior`: observations to use when the queue has fewer than
 * three finished runs of its own (the repository's other queues); without one such a queue gets no estimate.
 */
export const estimateQueue = (
  state: QueueState,
  now: number,
  prior?: QueueStats,
  options?: EstimateOptions
): QueueEstimate => compute(state, now, prior, makePlannerMemo(), options)

/** Options of the simulator's bounds (test/bench/queue-sim.ts); the service passes none. */
export interface EstimateOptions {
  /** an oracle: the PR numbers that will fail, instead of drawing them with the failure rate */
  readonly failingPrs?: ReadonlySet<number>
}

const none = (reason: UnavailableReason, state: QueueState, ciMedianMs: number, failureRate: number) => {
  const byEntry = new Map<string, EntryEstimate>()
  for (const e of state.entries) {
    if (isTerminal(e)) continue
    byEntry.set(e.id, {
      testingStartAt: null,
      mergeAt: null,
      mergeRange: null,
      testingStartRange: null,
      unavailableReason: e.state === "not_ready" ? "NOT_READY" : reason
    })
  }
  return { unavailableReason: reason, byEntry, ciMedianMs, failureRate }
}

/** `memo`: the simulation's own, for its many steps of one queue. */
const compute = (
  state: QueueState,
  now: number,
  prior: QueueStats | undefined,
  memo: PlannerMemo,
  options?: EstimateOptions
): QueueEstimate => {
  const own = statsOf(state)
  const stats = own.finishedRuns >= MIN_FINISHED_RUNS || prior === undefined ? own : prior
  const o = observe(stats, memo)
  const ci = o.ciMedianMs
  // the PR failure rate drawn from: the current regime's, or the last PRs' when they fail more often
  const q = recentFailureRate(stats.prs, o.failureRate, RECENT_PRS, RECENT_PRIOR)
  if (stats.finishedRuns < MIN_FINISHED_RUNS) return none("FEWER_THAN_3_FINISHED_RUNS", state, ci, q)
  if (state.config.state === "paused" || state.targetSha === null) return none("QUEUE_PAUSED", state, ci, q)

  // the simulated part of the queue: the first HORIZON chainable entries, and every entry a run holds
  const kept: Entry[] = []
  const behind: Entry[] = []
  let chain = 0
  for (const e of state.entries) {
    if (isTerminal(e)) continue
    const inChain = e.state !== "not_ready"
    if (inChain && chain >= RANGE_HORIZON && e.runId === null && e.state === "pending") {
      behind.push(e)
      continue
    }
    if (inChain) chain++
    kept.push(e)
  }
  const durations = (stats.runs.length >= MIN_FINISHED_RUNS ? stats.runs.map((r) => r[0]) : [ci]).sort((a, b) => a - b)
  // a PR already pending_failure fails unless the run behind it passes: the share of run failures its own failure
  // explains (the rest are spurious)
  const pendingFails = Math.min(1, Math.max(PENDING_FAILS_MIN, q / Math.max(1e-9, q + o.flakyRate * (1 - q))))
  // spurious failures are not drawn on their own: the run failure rate they are estimated from also counts the runs
  // behind a failing PR, and what flaky runs do to PRs (a failure, a restart) is in the PR failure rate already
  const f = 0
  // a seed of the state's own: the same state gives the same estimate
  const rng = mulberry32(state.nextSeq * 7919 + state.entries.length * 31 + state.runs.length)
  const rounds = Math.min(MAX_ROUNDS, Math.max(RANGE_ROUNDS, Math.floor(ROUND_BUDGET / Math.max(1, chain))))
  const mergeSum = new Map<string, number[]>()
  const startSum = new Map<string, number[]>()
  // per round: the last simulated merge and the simulated throughput, for the PRs behind the simulated part
  const lastMerges: number[] = []
  const perMss: number[] = []
  const add = (m: Map<string, number[]>, id: string, v: number) => {
    const x = m.get(id)
    if (x === undefined) m.set(id, [v])
    else x.push(v)
  }
  const order = kept.filter((e) => e.state !== "not_ready")
  for (let round = 0; round < rounds; round++) {
    const once = simulateOnce(state, kept, now, q, f, pendingFails, durations, rng, memo, options?.failingPrs)
    // a PR that failed in this round lands with the next one that merges behind it
    let nextMerge: number | null = null
    for (let i = order.length - 1; i >= 0; i--) {
      const e = order[i]!
      const m = once.merged.get(e.id)
      if (m !== undefined) nextMerge = m
      const v = m ?? nextMerge
      if (v !== null) add(mergeSum, e.id, v)
      const st = once.started.get(e.id)
      if (st !== undefined) add(startSum, e.id, st)
    }
    // throughput of the simulated part, for the PRs behind it
    const times = [...once.merged.values()].sort((a, b) => a - b)
    const first = times[0]
    const last = times[times.length - 1] ?? once.end
    lastMerges.push(last)
    perMss.push(times.length >= 2 && first !== undefined && last > first ? (times.length - 1) / (last - first) : 0)
  }
  // the median over the rounds, towards the mean as q rises
  const restartWeight = Math.min(1, Math.max(0, (q - RESTART_FROM) / RESTART_SPAN))
  const summary = (x: number[] | undefined): { central: number; range: TimeRange } | null => {
    if (x === undefined || x.length === 0) return null
    x.sort((a, b) => a - b)
    const med = x[Math.floor((x.length - 1) / 2)]!
    const avg = x.reduce((a, b) => a + b, 0) / x.length
    const central = med + restartWeight * (avg - med)
    return { central, range: rangeAround(central, quantileSorted(x, RANGE_LOW), quantileSorted(x, RANGE_HIGH), now) }
  }
  const byEntry = new Map<string, EntryEstimate>()
  for (const e of kept) {
    if (e.state === "not_ready") {
      byEntry.set(e.id, {
        testingStartAt: null,
        mergeAt: null,
        mergeRange: null,
        testingStartRange: null,
        unavailableReason: "NOT_READY"
      })
      continue
    }
    const m = summary(mergeSum.get(e.id))
    const st = summary(startSum.get(e.id))
    byEntry.set(e.id, startAndMerge(st, m, now, ci))
  }
  const perMs = perMss.reduce((a, b) => a + b, 0) / rounds
  const lastMerge = lastMerges.reduce((a, b) => a + b, 0) / rounds
  behind.forEach((e, k) => {
    if (perMs <= 0) {
      byEntry.set(e.id, startAndMerge(null, null, now, ci))
      return
    }
    // the point estimate from the mean throughput; the range from each round's own
    const central = lastMerge + (k + 1) / perMs
    const xs: number[] = []
    for (let r = 0; r < rounds; r++) xs.push(lastMerges[r]! + (perMss[r]! > 0 ? (k + 1) / perMss[r]! : (k + 1) / perMs))
    xs.sort((a, b) => a - b)
    const range = rangeAround(central, quantileSorted(xs, RANGE_LOW), quantileSorted(xs, RANGE_HIGH), now)
    byEntry.set(e.id, startAndMerge(null, { central, range }, now, ci))
  })
  return { unavailableReason: null, byEntry, ciMedianMs: ci, failureRate: q }
}

/** One forward simulation: which PRs fail (each with probability q), each run's duration (drawn from the window)
 * and spurious failure (probability f) drawn from `rng`. */
const simulateOnce = (
  state: QueueState,
  kept: readonly Entry[],
  now: number,
  q: number,
  f: number,
  pendingFails: number,
  durations: readonly number[],
  rng: () => number,
  memo: PlannerMemo,
  oracle: ReadonlySet<number> | undefined
): { merged: Map<string, number>; started: Map<string, number>; end: number } => {
  const failing =
    oracle === undefined
      ? drawFailing(kept, q, pendingFails, rng)
      : new Set(kept.filter((e) => oracle.has(e.prNumber)).map((e) => e.id))
  const duration = () => durations[Math.floor(rng() * durations.length)]!
  // adaptive mode: the forward simulation keeps the current choice (the settings the next runs start with) and
  // records no observations, so its steps cost what a fixed queue's do
  const choice = state.config.adaptive === true ? (state.stats?.choice ?? null) : null
  const config = choice === null ? state.config : { ...applyChoice(state.config, choice), adaptive: false }
  let sim: QueueState = { ...state, config, entries: kept as Entry[], stats: undefined }
  const heap = new TimedQueue<Timed>()
  let seq = 0
  let idn = 0
  const at = (t: number, ev: PlannerEvent) => heap.push({ at: t, seq: seq++, ev })
  const started = new Map<string, number>()
  const merged = new Map<string, number>()
  const wakes = new Set<number>()
  const fails = (run: readonly RunItem[]) => rng() < f || run.some((it) => failing.has(it.entryId))
  const built = (runId: string, items: readonly RunItem[]): PlannerEvent => ({
    _tag: "RunBuilt",
    runId,
    testBranchSha: `${runId}:tip`,
    commits: items.map((_, k) => `${runId}:${k}`)
  })
  // runs in flight
  for (const r of state.runs) {
    if (r.status === "building") {
      at(now + BUILD_MS, built(r.id, r.items))
      at(now + BUILD_MS + duration(), runDone(r.id, fails(r.items)))
    } else if (r.status === "in_progress") {
      // what remains of a run drawn from the window, given how long it has run
      const elapsed = now - (r.startedAt ?? now)
      at(now + remainingDraw(durations, elapsed, MIN_REMAINING_MS, rng()), runDone(r.id, fails(r.items)))
    }
  }
  // a merge in flight lands
  const m = state.merging
  if (m !== null && m.kind === "run" && m.runId !== null && m.newSha !== null) {
    at(now + MERGE_MS, { _tag: "MergeSucceeded", runId: m.runId, entryIds: m.entryIds, newSha: m.newSha })
  } else if (m !== null && m.kind === "direct" && m.entryIds[0] !== undefined) {
    at(now, { _tag: "DirectMergeResult", entryId: m.entryIds[0], merged: false, newSha: null })
  }
  for (const e of kept) if (e.state === "testing" || e.state === "tests_passed") started.set(e.id, e.stateChangedAt)
  const handle = (c: Command, t: number) => {
    switch (c._tag) {
      case "BuildRun":
        at(t + BUILD_MS, built(c.run.id, c.run.items))
        at(t + BUILD_MS + duration(), runDone(c.run.id, fails(c.run.items)))
        return
      case "Merge":
        at(t + MERGE_MS, { _tag: "MergeSucceeded", runId: c.runId, entryIds: c.entryIds, newSha: c.newSha })
        return
      case "TryDirectMerge":
        at(t, { _tag: "DirectMergeResult", entryId: c.entryId, merged: false, newSha: null })
        return
      case "ScheduleWake":
        if (c.at >= t && !wakes.has(c.at)) {
          wakes.add(c.at)
          at(c.at, { _tag: "Tick" })
        }
        return
      case "Wake":
        at(t + 1, { _tag: "Tick" })
        return
      default:
        return
    }
  }
  const nextId = () => `estimate-${idn++}`
  const apply = (ev: PlannerEvent, t: number) => {
    const r = step(sim, ev, t, nextId, memo)
    sim = r.state
    for (const tr of r.transitions) {
      if (tr.to === "testing" && !started.has(tr.entryId)) started.set(tr.entryId, t)
      if (tr.to === "merged") merged.set(tr.entryId, t)
    }
    for (const c of r.commands) handle(c, t)
  }
  // start from the state as it is (runs that could start now)
  apply({ _tag: "Tick" }, now)
  let steps = 0
  let end = now
  while (heap.size > 0 && steps++ < MAX_STEPS) {
    if (!sim.entries.some((e) => !isTerminal(e) && e.state !== "not_ready")) break
    const x = heap.pop()!
    if (x.ev._tag === "Tick") wakes.delete(x.at)
    end = x.at
    apply(x.ev, x.at)
  }
  return { merged, started, end }
}

const mulberry32 = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The `q` quantile of ascending `xs` (not empty), interpolated between the closest ranks. */
export const quantileSorted = (xs: readonly number[], q: number): number => {
  const at = q * (xs.length - 1)
  const lo = Math.floor(at)
  const hi = Math.min(xs.length - 1, lo + 1)
  return xs[lo]! + (at - lo) * (xs[hi]! - xs[lo]!)
}

/**
 * The range reported around a central estimate from the sampled quantiles `low` and `high`: their distances from
 * the central value widened by RANGE_WIDEN (the sampled futures know the CI durations and failures, not what the
 * model leaves out: calibrated in the simulator, docs/simulator.md), and at least RANGE_MIN_SHARE of the time left
 * on each side; never before `now`.
 */
export const rangeAround = (central: number, low: number, high: number, now: number): TimeRange => {
  const left = Math.max(0, central - now)
  const shareBelow = Math.min(RANGE_MAX_SHARE_BELOW, RANGE_MIN_SHARE + (RANGE_SHARE_PER_HOUR * left) / 3_600_000)
  const below = Math.max(RANGE_WIDEN_LOW * Math.max(0, central - low), shareBelow * left)
  const above = Math.max(RANGE_WIDEN_HIGH * Math.max(0, high - central), RANGE_MIN_SHARE * left)
  return { earliest: Math.max(now, central - below), latest: central + above }
}

/** An entry's estimate from the summaries of its start and merge times (a missing start: a CI run before its merge). */
const startAndMerge = (
  st: { central: number; range: TimeRange } | null,
  m: { central: number; range: TimeRange } | null,
  now: number,
  ci: number
): EntryEstimate => {
  const startOf = (t: number) => Math.max(now, t - ci - BUILD_MS)
  return {
    testingStartAt: st?.central ?? (m === null ? null : startOf(m.central)),
    mergeAt: m?.central ?? null,
    mergeRange: m?.range ?? null,
    testingStartRange:
      st?.range ?? (m === null ? null : { earliest: startOf(m.range.earliest), latest: startOf(m.range.latest) }),
    unavailableReason: null
  }
}

const runDone = (runId: string, failed: boolean): PlannerEvent => ({
  _tag: "RunCompleted",
  runId,
  outcome: failed ? "failed" : "succeeded",
  reason: "TEST_RUN_REQUIRED_STATUS_FAILED"
})
