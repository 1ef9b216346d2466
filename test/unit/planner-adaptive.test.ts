import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import {
  applyChoice,
  BATCH_START,
  BATCH_STOP,
  CHANGE_THRESHOLD,
  choose,
  emptyStats,
  MIN_BATCHES,
  MIN_SEGMENT,
  observe,
  PR_WINDOW,
  pow2Floor,
  RAMP_BATCHES,
  RECENT_BATCHES,
  RECENT_BATCHES_FAILED,
  RUN_WINDOW,
  record,
  regimeStart
} from "../../src/queue/planner/adaptive.ts"
import { estimateQueue } from "../../src/queue/planner/estimate.ts"
import {
  makePlannerMemo,
  type PlannerConfig,
  type QueueState,
  type QueueStats,
  type Transition
} from "../../src/queue/planner/index.ts"
import { defaultConfig, makeKit, passOneByOne, submitted } from "../support/plannerKit.ts"

const MIN = 60_000

const boundsArb: fc.Arbitrary<PlannerConfig> = fc
  .record({
    concurrency: fc.integer({ min: 1, max: 16 }),
    bisectionConcurrency: fc.integer({ min: 1, max: 16 }),
    batch: fc.boolean(),
    batchingMinSize: fc.integer({ min: 1, max: 16 })
  })
  .map((b) => ({ ...defaultConfig, ...b, adaptive: true }))

const statsArb: fc.Arbitrary<QueueStats> = fc.record({
  runs: fc.array(
    fc.tuple(
      fc.integer({ min: MIN, max: 120 * MIN }),
      fc.constantFrom(0 as const, 1 as const),
      fc.integer({ min: 1, max: 8 })
    ),
    { maxLength: RUN_WINDOW }
  ),
  prs: fc.array(fc.constantFrom(0 as const, 1 as const), { maxLength: PR_WINDOW }),
  finishedRuns: fc.nat({ max: 1000 })
})

/** `k` of `n` spread evenly: whether the i-th is one of them. */
const spread = (i: number, k: number, n: number): 0 | 1 =>
  Math.floor(((i + 1) * k) / n) > Math.floor((i * k) / n) ? 1 : 0

/** Stats where `failed` of `n` PRs failed, spread evenly (one regime), and runs failed in the same proportion. */
const statsWith = (failed: number, n: number): QueueStats => ({
  runs: Array.from({ length: 40 }, (_, i) => [30 * MIN, spread(i, Math.round((40 * failed) / n), 40), 4] as const),
  prs: Array.from({ length: n }, (_, i) => spread(i, failed, n)),
  finishedRuns: 40
})

describe("adaptive mode: the choice", () => {
  test("stays within the configured bounds, for any history and backlog", () => {
    fc.assert(
      fc.property(boundsArb, statsArb, fc.nat({ max: 600 }), (bounds, stats, backlog) => {
        const c = choose(bounds, stats, backlog)
        expect(c.depth).toBeGreaterThanOrEqual(1)
        expect(c.depth).toBeLessThanOrEqual(bounds.concurrency)
        expect(c.batchSize).toBeGreaterThanOrEqual(1)
        expect(c.batchSize).toBeLessThanOrEqual(bounds.batch ? bounds.batchingMinSize : 1)
        expect(c.bisection).toBeLessThanOrEqual(bounds.bisectionConcurrency)
        expect(c.observedFailureRate).toBeGreaterThanOrEqual(0)
        expect(c.observedFailureRate).toBeLessThanOrEqual(1)
        expect(c.reason.length).toBeGreaterThan(0)
        const applied = applyChoice(bounds, c)
        expect(applied.concurrency).toBe(c.depth)
        expect(applied.batch).toBe(c.batchSize > 1)
      })
    )
  })

  test("is deterministic: the same history gives the same choice", () => {
    fc.assert(
      fc.property(boundsArb, statsArb, fc.nat({ max: 600 }), (bounds, stats, backlog) => {
        const copy = JSON.parse(JSON.stringify(stats)) as QueueStats
        expect(choose(bounds, copy, backlog)).toEqual(choose(bounds, stats, backlog))
      })
    )
  })

  test("batches shrink (never grow) as the observed failure rate rises", () => {
    const bounds: PlannerConfig = {
      ...defaultConfig,
      concurrency: 8,
      bisectionConcurrency: 8,
      batch: true,
      batchingMinSize: 8,
      adaptive: true
    }
    fc.assert(
      fc.property(fc.nat({ max: 50 }), fc.nat({ max: 50 }), (a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a]
        const calm = choose(bounds, statsWith(lo, 50), 100)
        const bad = choose(bounds, statsWith(hi, 50), 100)
        expect(bad.batchSize).toBeLessThanOrEqual(calm.batchSize)
      })
    )
    expect(choose(bounds, statsWith(1, 50), 100).batchSize).toBeGreaterThan(1)
    expect(choose(bounds, statsWith(10, 50), 100)).toMatchObject({ batchSize: 1, depth: 8 })
  })

  test("a new queue starts from the prior, and a short queue gets small batches", () => {
    const bounds: PlannerConfig = { ...defaultConfig, concurrency: 8, batch: true, batchingMinSize: 8, adaptive: true }
    const fresh = choose(bounds, emptyStats, 100)
    expect(fresh.observedFailureRate).toBeGreaterThan(0)
    // rare failures: batches of 8 on every slot; a short queue gets smaller batches (at least MIN_BATCHES of them)
    expect(choose(bounds, statsWith(0, 50), 7)).toMatchObject({ batchSize: 2, depth: 8 })
    expect(choose(bounds, statsWith(0, 50), 16)).toMatchObject({ batchSize: 4, depth: 8 })
    expect(choose(bounds, statsWith(0, 50), 40)).toMatchObject({ batchSize: 8, depth: 8 })
  })

  test("batch sizes are powers of two, at most a quarter of the backlog (at least 2), on every slot", () => {
    fc.assert(
      fc.property(boundsArb, statsArb, fc.nat({ max: 600 }), (bounds, stats, backlog) => {
        const c = choose(bounds, stats, backlog)
        expect(c.batchSize).toBe(pow2Floor(c.batchSize))
        if (c.batchSize > 1) {
          expect(c.bisection).toBe(0)
          expect(c.depth).toBe(bounds.concurrency)
          expect(c.batchSize === 2 || c.batchSize * MIN_BATCHES <= backlog).toBe(true)
        }
      })
    )
    expect([1, 2, 3, 4, 5, 7, 8, 9].map(pow2Floor)).toEqual([1, 2, 2, 4, 4, 4, 8, 8])
  })

  test("batches that fail far more often than the PR window explains stop batching at once, until single PRs are tested", () => {
    const bounds: PlannerConfig = { ...defaultConfig, concurrency: 8, batch: true, batchingMinSize: 8, adaptive: true }
    const calm = statsWith(1, 100)
    expect(choose(bounds, calm, 100).batchSize).toBeGreaterThan(1)
    const batch = (fail: 0 | 1) => [30 * MIN, fail, 4, 0] as const
    const failing = (n: number) => Array.from({ length: RECENT_BATCHES }, (_, i) => batch(i < n ? 1 : 0))
    // RECENT_BATCHES_FAILED of the last RECENT_BATCHES batches failed: no batches, whatever the PR window says
    const jumped: QueueStats = { ...calm, runs: [...calm.runs, ...failing(RECENT_BATCHES_FAILED)] }
    expect(observe(jumped).batchFailureRate).toBeGreaterThan(0.1)
    expect(choose(bounds, jumped, 100).batchSize).toBe(1)
    // one fewer: the PR window decides
    const fewer: QueueStats = { ...calm, runs: [...calm.runs, ...failing(RECENT_BATCHES_FAILED - 1)] }
    expect(observe(fewer).batchFailureRate).toBeNull()
    // bisection runs do not count; a main run of a single PR since ends the signal (the PR window decides again)
    const bisections: QueueStats = {
      ...calm,
      runs: [...calm.runs, ...failing(RECENT_BATCHES_FAILED).map(([ms, f, k]) => [ms, f, k, 1] as const)]
    }
    expect(observe(bisections).batchFailureRate).toBeNull()
    const since: QueueStats = { ...jumped, runs: [...jumped.runs, [30 * MIN, 0, 1, 0]] }
    expect(observe(since).batchFailureRate).toBeNull()
    expect(choose(bounds, since, 100).batchSize).toBeGreaterThan(1)
  })

  test("batches grow by doubling, once the last RAMP_BATCHES batches of the current size mostly passed", () => {
    const bounds: PlannerConfig = { ...defaultConfig, concurrency: 8, batch: true, batchingMinSize: 8, adaptive: true }
    const calm = statsWith(0, 100)
    const target = choose(bounds, calm, 400).batchSize
    expect(target).toBe(8)
    const was = (batchSize: number) => ({ ...choose(bounds, calm, 400), batchSize })
    const batches = (failed: number) =>
      Array.from({ length: RAMP_BATCHES }, (_, i) => [30 * MIN, i < failed ? 1 : 0, 2, 0] as const)
    // from no batches: batches of 2 first
    expect(choose(bounds, { ...calm, choice: was(1) }, 400).batchSize).toBe(2)
    // batches of 2 that passed: 4; that failed more than once: still 2
    expect(choose(bounds, { ...calm, runs: [...calm.runs, ...batches(1)], choice: was(2) }, 400).batchSize).toBe(4)
    expect(choose(bounds, { ...calm, runs: [...calm.runs, ...batches(2)], choice: was(2) }, 400).batchSize).toBe(2)
    // only batches of the current size count: batches of 2 that passed do not grow batches of 4
    expect(choose(bounds, { ...calm, runs: [...calm.runs, ...batches(0)], choice: was(4) }, 400).batchSize).toBe(4)
    // never beyond what the failure rate asks for, and shrinking is immediate
    expect(choose(bounds, { ...calm, runs: [...calm.runs, ...batches(0)], choice: was(8) }, 400).batchSize).toBe(8)
    expect(choose(bounds, { ...statsWith(2, 50), choice: was(8) }, 400).batchSize).toBeLessThan(8)
  })

  test("record keeps the windows bounded and returns the same object when nothing happened", () => {
    const same = record(emptyStats, [], [], null)
    expect(same).toBe(emptyStats)
    let s = emptyStats
    for (let i = 0; i < PR_WINDOW + 80; i++) {
      s = record(
        s,
        [],
        [
          {
            entryId: `e${i}`,
            prNumber: i,
            from: "testing",
            to: "merged",
            reason: "",
            at: i,
            runId: null,
            verifiedByTestRun: null
          }
        ],
        null
      )
    }
    expect(s.prs.length).toBe(PR_WINDOW)
  })
})

describe("adaptive mode: the failure rate and its changes", () => {
  const ended = (i: number, failed: boolean): Transition => ({
    entryId: `e${i}`,
    prNumber: i,
    from: "testing",
    to: failed ? "failed" : "merged",
    reason: "",
    at: i,
    runId: null,
    verifiedByTestRun: null
  })
  const bounds: PlannerConfig = {
    ...defaultConfig,
    concurrency: 8,
    bisectionConcurrency: 8,
    batch: true,
    batchingMinSize: 8,
    adaptive: true
  }
  /** Feed PR outcomes through `record` with the choice of each step, as the planner does. */
  const feed = (stats: QueueStats, outcomes: readonly boolean[]): { stats: QueueStats; batching: boolean[] } => {
    let s = stats
    const batching: boolean[] = []
    outcomes.forEach((failed, i) => {
      const choice = choose(bounds, s, 40)
      s = record(s, [], [ended(i, failed)], choice)
      batching.push(choose(bounds, s, 40).batchSize > 1)
    })
    return { stats: s, batching }
  }
  const every = (k: number, n: number) => Array.from({ length: n }, (_, i) => i % k === k - 1)

  test("a window of one regime is kept whole; the start of a new one is found", () => {
    // one regime (failures spread evenly): the whole window, for any rate
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 60, max: PR_WINDOW }), (k, n) => {
        // all but one failed: the one pass comes first, which is a change (below), not one regime
        fc.pre(k < n - 1)
        const prs = Array.from({ length: n }, (_, i) => spread(i, k, n))
        expect(regimeStart(prs)).toBe(0)
      })
    )
    // one PR passed, then 60 failed: by the likelihood ratio (a gain of 5.1 over one segment) the failing regime
    // starts after it
    expect(regimeStart(Array.from({ length: 61 }, (_, i) => spread(i, 60, 61)))).toBe(1)
    // 80 merged PRs, then 1 in 2 fails: the new regime starts at the first failures
    const jump = [...Array<0 | 1>(80).fill(0), ...Array.from({ length: 12 }, (_, i) => (i % 2) as 0 | 1)]
    const at = regimeStart(jump)
    expect(at).toBeGreaterThanOrEqual(76)
    expect(at).toBeLessThanOrEqual(81)
    // and back: 40 PRs at 1 in 3, then 40 merged
    const drop = [...Array.from({ length: 40 }, (_, i) => (i % 3 === 2 ? 1 : 0) as 0 | 1), ...Array<0 | 1>(40).fill(0)]
    expect(regimeStart(drop)).toBeGreaterThanOrEqual(36)
  })

  test("the start of the regime is within the window and leaves at least MIN_SEGMENT PRs, for any window", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(0 as const, 1 as const), { maxLength: PR_WINDOW }), (prs) => {
        const at = regimeStart(prs)
        expect(at).toBeGreaterThanOrEqual(0)
        if (at > 0) expect(prs.length - at).toBeGreaterThanOrEqual(MIN_SEGMENT)
        expect(regimeStart([...prs])).toBe(at)
      })
    )
    expect(CHANGE_THRESHOLD).toBeGreaterThan(0)
  })

  test("a jump of the failure rate stops batching within a few PRs, and a drop starts it again", () => {
    // a long calm stretch (1 PR in 50 fails) batches
    const calm = feed(emptyStats, every(50, PR_WINDOW))
    expect(calm.batching[calm.batching.length - 1]).toBe(true)
    // then 1 PR in 3 fails: batching stops within 12 PRs (a window of 120 alone would take about 15)
    const bad = feed(calm.stats, every(3, 30))
    const stopped = bad.batching.indexOf(false)
    expect(stopped).toBeGreaterThanOrEqual(0)
    expect(stopped).toBeLessThan(12)
    // the failure rate the choice reports is the new regime's, not the window's average
    expect(observe(bad.stats).failureRate).toBeGreaterThan(0.2)
    // then every PR merges: batching comes back within 40 PRs
    const good = feed(bad.stats, Array<boolean>(40).fill(false))
    expect(good.batching.indexOf(true)).toBeGreaterThanOrEqual(0)
    expect(good.batching.indexOf(true)).toBeLessThan(40)
  })

  test("hysteresis: a queue that batches keeps batching between BATCH_START and BATCH_STOP, one that does not keeps not", () => {
    expect(BATCH_START).toBeLessThan(BATCH_STOP)
    const mid = (BATCH_START + BATCH_STOP) / 2
    const n = PR_WINDOW
    const stats = statsWith(Math.round(mid * n), n)
    const q = observe(stats).failureRate
    expect(q).toBeGreaterThan(BATCH_START)
    expect(q).toBeLessThan(BATCH_STOP)
    const batchingChoice = choose(bounds, statsWith(0, 50), 40)
    expect(choose(bounds, { ...stats, choice: batchingChoice }, 40).batchSize).toBeGreaterThan(1)
    const plainChoice = choose(bounds, statsWith(25, 50), 40)
    expect(plainChoice.batchSize).toBe(1)
    expect(choose(bounds, { ...stats, choice: plainChoice }, 40).batchSize).toBe(1)
  })

  test("observe is computed once per stats object in a memo, and equals a fresh computation", () => {
    const stats = statsWith(3, 50)
    const memo = makePlannerMemo()
    expect(observe(stats, memo)).toBe(observe(stats, memo))
    expect(observe(JSON.parse(JSON.stringify(stats)) as QueueStats)).toEqual(observe(stats, memo))
    // without a memo the planner remembers nothing: the same result, computed again
    expect(observe(stats)).not.toBe(observe(stats))
    expect(observe(stats)).toEqual(observe(stats, memo))
  })
})

describe("adaptive mode in the planner", () => {
  const submit = (kit: ReturnType<typeof makeKit>, pr: number) => kit.send(submitted(pr))

  test("a change of the choice never cancels a run that is still useful", () => {
    const kit = makeKit({ concurrency: 4, bisectionConcurrency: 4, batch: true, batchingMinSize: 8, adaptive: true })
    for (let pr = 1; pr <= 40; pr++) submit(kit, pr)
    const before = kit.state.runs.map((r) => r.id)
    expect(before.length).toBeGreaterThan(0)
    expect(kit.state.stats?.choice?.batchSize).toBeGreaterThan(1)
    // the queue suddenly sees a high failure rate: the choice changes ...
    kit.state = { ...kit.state, stats: statsWith(20, 50) }
    kit.now += MIN
    kit.send({ _tag: "Tick" })
    expect(kit.state.stats?.choice).toMatchObject({ batchSize: 1 })
    // ... and every run started before is still there
    for (const id of before) expect(kit.state.runs.some((r) => r.id === id)).toBe(true)
  })

  test("the configured settings stay the bounds in the state; getQueue's choice is in the stats", () => {
    const kit = makeKit({ concurrency: 6, bisectionConcurrency: 2, batch: true, batchingMinSize: 4, adaptive: true })
    for (let pr = 1; pr <= 10; pr++) submit(kit, pr)
    expect(kit.state.config).toMatchObject({ concurrency: 6, bisectionConcurrency: 2, batch: true, batchingMinSize: 4 })
    expect(kit.state.stats?.choice?.reason).toContain("%")
  })

  test("off: the planner plans with the configured settings and records no choice", () => {
    const kit = makeKit({ concurrency: 2, batch: true, batchingMinSize: 3 })
    for (let pr = 1; pr <= 10; pr++) submit(kit, pr)
    expect(kit.state.runs.length).toBe(2)
    expect(kit.state.runs[0]!.testedEntryIds.length).toBe(3)
    expect(kit.state.stats?.choice ?? null).toBeNull()
  })
})

describe("estimates", () => {
  const queueOf = (config: Partial<PlannerConfig>, prs: number, finished: number): ReturnType<typeof makeKit> => {
    const kit = makeKit(config)
    // `finished` PRs pass through the queue first, 30 minutes each
    passOneByOne(kit, finished)
    for (let pr = finished + 1; pr <= finished + prs; pr++) kit.send(submitted(pr))
    return kit
  }

  test("unavailable with fewer than 3 finished runs, or while paused", () => {
    const young = queueOf({ concurrency: 2 }, 3, 2)
    const est = estimateQueue(young.state, young.now)
    expect(est.unavailableReason).toBe("FEWER_THAN_3_FINISHED_RUNS")
    for (const e of est.byEntry.values()) expect(e.mergeAt).toBeNull()
    const kit = queueOf({ concurrency: 2 }, 3, 3)
    const paused: QueueState = { ...kit.state, config: { ...kit.state.config, state: "paused" } }
    expect(estimateQueue(paused, kit.now).unavailableReason).toBe("QUEUE_PAUSED")
  })

  test("a young queue uses a prior when one is given (the repository's other queues)", () => {
    const young = queueOf({ concurrency: 2 }, 3, 1)
    const prior = queueOf({ concurrency: 2 }, 0, 4).state.stats!
    const est = estimateQueue(young.state, young.now, prior)
    expect(est.unavailableReason).toBeNull()
    for (const e of est.byEntry.values()) expect(e.mergeAt).not.toBeNull()
  })

  test("present, in the future, in queue order, about one CI duration per PR tested one at a time", () => {
    const kit = queueOf({ concurrency: 1 }, 5, 4)
    const est = estimateQueue(kit.state, kit.now)
    expect(est.unavailableReason).toBeNull()
    const merges = kit.state.entries.map((e) => est.byEntry.get(e.id)!.mergeAt!)
    for (let i = 0; i < merges.length; i++) {
      expect(merges[i]!).toBeGreaterThan(kit.now)
      if (i > 0) expect(merges[i]!).toBeGreaterThanOrEqual(merges[i - 1]!)
    }
    // five PRs one after the other, 30 minutes each (and a failure rate of a few percent): 2.5 to 4 hours
    const last = (merges[4]! - kit.now) / MIN
    expect(last).toBeGreaterThan(150)
    expect(last).toBeLessThan(240)
  })

  test("adaptive: the forward simulation plans with the current choice (the same estimate as the fixed settings)", () => {
    const kit = queueOf({ concurrency: 2 }, 20, 5)
    // bounds of depth 8, current choice: depth 2 without batches
    const bounds: PlannerConfig = {
      ...kit.state.config,
      concurrency: 8,
      batch: true,
      batchingMinSize: 8,
      bisectionConcurrency: 8,
      adaptive: true
    }
    const choice = { ...choose(bounds, statsWith(25, 50), 40), depth: 2 }
    const adaptive: QueueState = { ...kit.state, config: bounds, stats: { ...kit.state.stats!, choice } }
    const fixed: QueueState = { ...adaptive, config: { ...applyChoice(bounds, choice), adaptive: false } }
    const a = estimateQueue(adaptive, kit.now)
    expect(a.unavailableReason).toBeNull()
    expect([...estimateQueue(fixed, kit.now).byEntry]).toEqual([...a.byEntry])
    // the bounds themselves (depth 8) would merge the last PR earlier
    const atBounds: QueueState = { ...adaptive, config: { ...bounds, batch: false, adaptive: false } }
    const last = (s: QueueState) =>
      Math.max(...[...estimateQueue(s, kit.now).byEntry.values()].map((e) => e.mergeAt ?? 0))
    expect(last(atBounds)).toBeLessThan(last(adaptive))
  })

  test("a queue whose PRs fail more often gets later estimates", () => {
    const kit = queueOf({ concurrency: 4 }, 12, 5)
    const own = kit.state.stats!
    const withRate = (failed: number): QueueState => ({
      ...kit.state,
      stats: { ...own, prs: Array.from({ length: 60 }, (_, i) => spread(i, failed, 60)) }
    })
    const lastMerge = (s: QueueState) => {
      const est = estimateQueue(s, kit.now)
      let last = 0
      for (const e of est.byEntry.values()) last = Math.max(last, e.mergeAt ?? 0)
      return last
    }
    expect(lastMerge(withRate(15))).toBeGreaterThan(lastMerge(withRate(0)))
  })

  test("deterministic for a state", () => {
    const kit = queueOf({ concurrency: 3 }, 20, 5)
    const a = estimateQueue(kit.state, kit.now)
    const b = estimateQueue(JSON.parse(JSON.stringify(kit.state)) as QueueState, kit.now)
    expect([...b.byEntry]).toEqual([...a.byEntry])
  })
})
