/**
 * The merge-time estimate (issue #18, src/queue/planner/estimate.ts and estimatePoint.ts): what its sampled futures
 * are drawn from, and estimates of queues whose answer is known.
 */
import { describe, expect, test } from "bun:test"
import {
  BUILD_MS,
  estimateQueue,
  MERGE_MS,
  MIN_REMAINING_MS,
  quantileSorted,
  RANGE_MIN_SHARE,
  RANGE_WIDEN_HIGH,
  rangeAround
} from "../../src/queue/planner/estimate.ts"
import { drawFailing, recentFailureRate, remainingDraw } from "../../src/queue/planner/estimatePoint.ts"
import type { Entry, EntryState } from "../../src/queue/planner/index.ts"
import { makeKit, pass, passOneByOne, runOf, submitted } from "../support/plannerKit.ts"

const MIN = 60_000

/** A generator returning `xs` in turn. */
const seq = (...xs: number[]) => {
  let i = 0
  return () => xs[i++ % xs.length]!
}

describe("remainingDraw: what remains of a run in flight", () => {
  const window = [20, 25, 30, 35, 40].map((m) => m * MIN)

  test("drawn among the window's durations longer than the run has lasted, minus its age", () => {
    // 27 minutes in: 30, 35 or 40 minutes long, so 3, 8 or 13 minutes left
    expect(remainingDraw(window, 27 * MIN, MIN_REMAINING_MS, 0)).toBe(3 * MIN)
    expect(remainingDraw(window, 27 * MIN, MIN_REMAINING_MS, 0.5)).toBe(8 * MIN)
    expect(remainingDraw(window, 27 * MIN, MIN_REMAINING_MS, 0.99)).toBe(13 * MIN)
    // just started: any duration of the window
    expect(remainingDraw(window, 0, MIN_REMAINING_MS, 0)).toBe(20 * MIN)
  })

  test("a run older than every duration of the window: the minimum", () => {
    expect(remainingDraw(window, 45 * MIN, MIN_REMAINING_MS, 0.5)).toBe(MIN_REMAINING_MS)
    expect(remainingDraw(window, 40 * MIN, MIN_REMAINING_MS, 0.5)).toBe(MIN_REMAINING_MS)
  })
})

describe("recentFailureRate", () => {
  const calm = Array.from({ length: 100 }, () => 0 as const)

  test("the last PRs failing more often than the observed rate raise it, with the observed rate as a prior", () => {
    const worse = [...calm, ...Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? 1 : 0) as 0 | 1)]
    // 10 failures of the last 20, and a prior of 20 PRs at 5 %
    expect(recentFailureRate(worse, 0.05, 20, 20)).toBeCloseTo((10 + 20 * 0.05) / 40, 10)
  })

  test("never below the observed rate", () => {
    expect(recentFailureRate(calm, 0.05, 20, 20)).toBe(0.05)
    expect(recentFailureRate([], 0.03, 20, 20)).toBe(0.03)
  })
})

describe("drawFailing: which PRs fail in a sampled future", () => {
  const entry = (id: string, state: EntryState, waitingOn?: string[]): Entry =>
    ({
      id,
      state,
      failure: waitingOn === undefined ? null : { reason: "x", runId: null, waitingOn, holdRunIds: [] }
    }) as unknown as Entry

  test("a pending_failure PR behind one that fails is explained by it: it fails with q only", () => {
    const entries = [entry("a", "pending_failure", []), entry("b", "pending_failure", ["a"]), entry("c", "pending")]
    // q = 0: only a PR whose failure nothing ahead explains fails
    expect([...drawFailing(entries, 0, 1, seq(0.5))]).toEqual(["a"])
  })

  test("one whose PR ahead passes in this future failed by itself (or spuriously)", () => {
    const entries = [entry("a", "pending_failure", []), entry("b", "pending_failure", ["a"])]
    // a passes (0.7 ≥ 0.6), so nothing explains b's failure: it fails with pendingFails (0.3 < 0.6)
    expect([...drawFailing(entries, 0, 0.6, seq(0.7, 0.3))]).toEqual(["b"])
    // a PR ahead that already left the queue explains nothing either
    expect([...drawFailing([entry("b", "pending_failure", ["gone"])], 0, 0.6, seq(0.3))]).toEqual(["b"])
  })

  test("other PRs fail with q, not-ready ones never", () => {
    const entries = [entry("a", "pending"), entry("b", "testing"), entry("c", "not_ready"), entry("d", "pending")]
    expect([...drawFailing(entries, 0.2, 1, seq(0.1, 0.3, 0.1))]).toEqual(["a", "d"])
  })
})

describe("estimateQueue", () => {
  /** `finished` PRs pass through a serial queue first, 30 minutes each; then PR `finished + 1` starts testing. */
  const testing = (finished: number) => {
    const kit = makeKit({ concurrency: 1 })
    passOneByOne(kit, finished)
    kit.send(submitted(finished + 1))
    return kit
  }

  test("a run in flight: what remains of it, given how long it has run", () => {
    const kit = testing(4)
    const id = "e5"
    expect(kit.state.entries.find((e) => e.id === id)?.state).toBe("testing")
    // every run of the window took 30 minutes: 25 minutes in, 5 remain, then the merge
    kit.now += 25 * MIN
    const at25 = estimateQueue(kit.state, kit.now).byEntry.get(id)!.mergeAt!
    expect(at25 - kit.now).toBe(5 * MIN + MERGE_MS)
    // the same run just started: the whole 30 minutes
    const fresh = testing(4)
    const at0 = estimateQueue(fresh.state, fresh.now).byEntry.get(id)!.mergeAt!
    expect(at0 - fresh.now).toBe(30 * MIN + MERGE_MS)
    // older than every run of the window: about to end
    kit.now += 10 * MIN
    expect(estimateQueue(kit.state, kit.now).byEntry.get(id)!.mergeAt! - kit.now).toBe(MIN_REMAINING_MS + MERGE_MS)
  })

  test("the PR behind waits for the one ahead, then its own build and run", () => {
    const kit = testing(4)
    kit.send({
      _tag: "Submitted",
      entryId: "e6",
      prNumber: 6,
      headSha: "h6",
      priority: 100,
      noBatch: false,
      ready: true
    })
    kit.now += 10 * MIN
    const est = estimateQueue(kit.state, kit.now)
    const ahead = est.byEntry.get("e5")!.mergeAt! - kit.now
    const behind = est.byEntry.get("e6")!.mergeAt! - kit.now
    expect(ahead).toBe(20 * MIN + MERGE_MS)
    // serial: PR 6 is built and tested after PR 5 merged (the median of the sampled futures: PR 5 passes in most)
    expect(behind).toBe(ahead + BUILD_MS + 30 * MIN + MERGE_MS)
  })
})

describe("ranges (issue #35)", () => {
  test("quantileSorted interpolates between the closest ranks", () => {
    const xs = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    expect(quantileSorted(xs, 0.1)).toBe(10)
    expect(quantileSorted(xs, 0.9)).toBe(90)
    expect(quantileSorted([0, 10], 0.25)).toBe(2.5)
    expect(quantileSorted([7], 0.9)).toBe(7)
  })

  test("rangeAround widens the sampled quantiles, spans a share of the time left, and never starts before now", () => {
    const now = 1_000 * MIN
    // sampled futures 50..70 minutes around 60: the distance above widened
    const r = rangeAround(now + 60 * MIN, now + 58 * MIN, now + 70 * MIN, now)
    expect(r.latest - now).toBeCloseTo(60 * MIN + RANGE_WIDEN_HIGH * 10 * MIN, 6)
    // the sampled futures barely differ below: at least the minimum share of the 60 minutes left
    expect(now + 60 * MIN - r.earliest).toBeGreaterThanOrEqual(RANGE_MIN_SHARE * 60 * MIN - 1)
    // a spread wider than the time left: clipped at now
    expect(rangeAround(now + 5 * MIN, now - 30 * MIN, now + 6 * MIN, now).earliest).toBe(now)
  })

  test("runs of varied length: every PR's range holds its point estimate, later PRs have later and wider ranges", () => {
    const kit = makeKit({ concurrency: 1 })
    // ten runs of 10 to 55 minutes
    for (let pr = 1; pr <= 10; pr++) {
      kit.send(submitted(pr))
      kit.now += (10 + 5 * (pr - 1)) * MIN
      pass(kit, runOf(kit, pr))
    }
    for (let pr = 11; pr <= 14; pr++) kit.send(submitted(pr))
    const est = estimateQueue(kit.state, kit.now)
    let previous: { earliest: number; latest: number } | null = null
    for (let pr = 11; pr <= 14; pr++) {
      const e = est.byEntry.get(`e${pr}`)!
      const r = e.mergeRange!
      expect(r.earliest).toBeLessThanOrEqual(e.mergeAt!)
      expect(r.latest).toBeGreaterThan(e.mergeAt!)
      expect(r.earliest).toBeGreaterThanOrEqual(kit.now)
      const t = e.testingStartRange!
      expect(t.earliest).toBeLessThanOrEqual(e.testingStartAt!)
      expect(t.latest).toBeGreaterThanOrEqual(e.testingStartAt!)
      if (previous !== null) {
        expect(r.latest).toBeGreaterThan(previous.latest)
        expect(r.latest - r.earliest).toBeGreaterThan(previous.latest - previous.earliest)
      }
      previous = r
    }
    // the same state: the same ranges (seeded from the state)
    expect(estimateQueue(kit.state, kit.now).byEntry.get("e14")!.mergeRange).toEqual(previous)
  })

  test("an oracle told which PRs fail: the PR tested on top of a failing one merges later than when none fails", () => {
    const kit = makeKit({ concurrency: 2 })
    passOneByOne(kit, 4)
    for (let pr = 5; pr <= 7; pr++) kit.send(submitted(pr))
    const none = estimateQueue(kit.state, kit.now, undefined, { failingPrs: new Set() })
    const fails = estimateQueue(kit.state, kit.now, undefined, { failingPrs: new Set([5]) })
    // PRs 5 and 6 test together; 6 passes on top of 5 only when 5 passes, else it is tested again after
    expect(fails.byEntry.get("e6")!.mergeAt! - none.byEntry.get("e6")!.mergeAt!).toBeGreaterThan(20 * MIN)
  })
})
