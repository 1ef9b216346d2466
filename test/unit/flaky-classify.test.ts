import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import {
  BROKEN_STREAK,
  type Classification,
  type ClassifyInput,
  classify,
  DAY,
  type HistoryResult,
  HOUR,
  isInfraFailureUpload,
  isStableBranch,
  PATTERN_MIN_BAYES_FACTOR,
  PATTERN_MIN_EPISODES,
  type PreviousStatus,
  type ResultStatus
} from "../../src/flaky/classify.ts"

const NOW = Date.UTC(2026, 0, 15, 12)
const STABLE = new Set(["main"])
let seq = 0

const run = (
  hoursAgo: number,
  status: ResultStatus,
  o: { sha?: string; branch?: string; infra?: boolean; uploadId?: string } = {}
): HistoryResult => {
  seq++
  return {
    at: NOW - hoursAgo * HOUR,
    sha: o.sha ?? `c0ffee${String(seq).padStart(4, "0")}`,
    branch: o.branch ?? "main",
    status,
    uploadId: o.uploadId ?? `upload-${seq}`,
    infra: o.infra ?? false
  }
}

/** n runs on main spread over the last `spanHours`, the first `failed` of them failing */
const series = (n: number, failed: number, spanHours: number, startHoursAgo = 0, branch = "main"): HistoryResult[] =>
  Array.from({ length: n }, (_, i) =>
    run(startHoursAgo + (spanHours * (n - i)) / (n + 1), i < failed ? "failed" : "passed", { branch })
  )

const go = (results: HistoryResult[], previous: PreviousStatus | null = null, now = NOW): Classification =>
  classify({ now, results, previous, stableBranches: STABLE })

const prev = (value: PreviousStatus["value"], reason: string, sinceDaysAgo: number, flakySignalDaysAgo?: number) => ({
  value,
  reason,
  since: NOW - sinceDaysAgo * DAY,
  ...(flakySignalDaysAgo === undefined ? {} : { flakySignalAt: NOW - flakySignalDaysAgo * DAY })
})

describe("classifier: flaky", () => {
  test("pass-on-retry on one commit (feature branch counts too)", () => {
    const results = [
      run(50, "failed", { sha: "abc1234def5678", branch: "feature/x", uploadId: "u1" }),
      run(49, "passed", { sha: "abc1234def5678", branch: "feature/x", uploadId: "u2" }),
      run(20, "passed")
    ]
    const c = go(results)
    expect(c).toEqual({
      value: "flaky",
      reason: "failed and passed on commit abc1234",
      timestamp: NOW,
      flakySignalAt: NOW - 49 * HOUR
    })
  })

  test("pass-on-retry older than 7 days is no signal", () => {
    const results = [run(8 * 24, "failed", { sha: "aaa" }), run(8 * 24 - 1, "passed", { sha: "aaa" })]
    expect(go(results).value).toBe("healthy")
  })

  /** `n` runs on main over the last 6.5 days (one upload each), failing at the given indexes (oldest = 0) */
  const runs = (n: number, failing: Iterable<number>, branch = "main"): HistoryResult[] => {
    const f = new Set(failing)
    return Array.from({ length: n }, (_, i) => run((156 * (n - i)) / n, f.has(i) ? "failed" : "passed", { branch }))
  }
  const block = (start: number, length: number) => Array.from({ length }, (_, i) => start + i)

  test("without retries: 3 failures in 300 runs in 3 separate episodes are flaky, with a human reason", () => {
    const c = go(runs(300, [50, 150, 250]))
    expect(c.value).toBe("flaky")
    expect(c.reason).toStartWith(
      "failed alone 3 times in 7 days on stable branches, each time passing on the next run (3 of 300 runs; flake rate"
    )
    expect(c.reason).toContain("90% credible interval")
    // the pattern is read again each time: nothing to carry
    expect(c.flakySignalAt).toBeUndefined()
    expect(PATTERN_MIN_EPISODES).toBe(2)
    expect(PATTERN_MIN_BAYES_FACTOR).toBe(3)
  })

  test("without retries: 10 failures in a row once, then passes, are a fixed regression: not flaky", () => {
    expect(go(runs(300, block(100, 10)))).toEqual({ value: "healthy", reason: "", timestamp: NOW })
    // nor two separate regressions of 3 runs, nor a failure alone and a regression of 3 runs
    expect(go(runs(300, [...block(50, 3), ...block(200, 3)])).value).toBe("healthy")
    expect(go(runs(300, [50, ...block(200, 3)])).value).toBe("healthy")
    // a single failure cannot be told from a regression fixed at once
    expect(go(runs(300, [150])).value).toBe("healthy")
  })

  test("without retries: frequent failures interleaved with passes are flaky (too many onsets for regressions)", () => {
    const failing = Array.from({ length: 100 }, (_, i) => i).filter((i) => i % 3 !== 0 && i % 7 !== 0)
    const c = go(runs(100, failing))
    expect(c.value).toBe("flaky")
    // with the fitted priors (#36) regressions are rare for a test: the Bayes factor alone tells
    expect(c.reason).toContain("likelier flaky than regressions")
  })

  /** a deterministic ~40% failure pattern over runs [0, n) (episodes of 1-3 runs) */
  const often = (n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => (i * 7 + (i >> 2)) % 10 < 4)

  test("#36: a test that fails often is flaky, not broken, when its flake rate explains the failures in a row", () => {
    // run 94 passed: 5 failures in a row, about 1 in 130 at its flake rate (a break is 1 in 1,000)
    const failing = [...often(94), ...block(95, 5)]
    const c = go(runs(100, failing))
    expect(c.value).toBe("flaky")
    expect(c.reason).toContain("likelier flaky than regressions")
    // and a test that the streak made broken becomes flaky
    const fromBroken = go(runs(100, failing), prev("broken", `failed the last ${BROKEN_STREAK} runs on main`, 1))
    expect(fromBroken.value).toBe("flaky")
    // the old rule (before #36) called it broken: 5 failures in a row on main
    expect(go(runs(100, [...block(40, 5), ...block(95, 5)])).value).toBe("broken")
  })

  test("#36: a flaky test that breaks is broken: failures in a row its flake rate does not explain (a break)", () => {
    // rare flakes, then failing for good
    expect(go(runs(100, [20, 60, ...block(92, 8)])).value).toBe("broken")
    // frequent flakes, then failing for good
    const c = go(runs(100, [...often(80), ...block(80, 20)]))
    expect(c.value).toBe("broken")
    expect(c.reason).toBe(`failed the last ${BROKEN_STREAK} runs on main`)
  })

  test("the pattern counts only stable branches in the last 7 days", () => {
    expect(go(runs(300, [50, 150, 250], "feature/y")).value).toBe("healthy")
    // two of the three older than 7 days
    const older = runs(300, [10, 20, 250]).map((r) => ({ ...r, at: r.at - 2 * DAY }))
    expect(go(older).value).toBe("healthy")
    expect(go(runs(300, [10, 20, 250])).value).toBe("flaky")
  })

  test("below 10% the rate signal is gone; the test leaves flaky 7 days after the last signal", () => {
    const results = series(20, 1, 70) // 5%
    const stillRecent = go(results, prev("flaky", "failure rate 25% over 72 h", 20, 6))
    expect(stillRecent.value).toBe("flaky")
    const recovered = go(results, prev("flaky", "failure rate 25% over 72 h", 20, 7.5))
    expect(recovered).toEqual({
      value: "healthy",
      reason: "no flaky signal for 7 days",
      timestamp: NOW,
      flakySignalAt: NOW - 7.5 * DAY
    })
  })

  test("recovery after 7 days without a flaky signal (pass-on-retry ages out)", () => {
    const results = [
      run(6 * 24, "failed", { sha: "bbb", branch: "pr" }),
      run(6 * 24, "passed", { sha: "bbb", branch: "pr" }),
      run(10, "passed")
    ]
    const first = go(results, null, NOW)
    expect(first.value).toBe("flaky")
    const later = NOW + 2 * DAY
    const next = classify({
      now: later,
      results,
      previous: {
        value: first.value,
        reason: first.reason,
        since: first.timestamp,
        flakySignalAt: first.flakySignalAt
      },
      stableBranches: STABLE
    })
    expect(next.value).toBe("healthy")
    expect(next.timestamp).toBe(later)
    // one day earlier it still was flaky
    const before = classify({
      now: NOW + 0.5 * DAY,
      results,
      previous: {
        value: first.value,
        reason: first.reason,
        since: first.timestamp,
        flakySignalAt: first.flakySignalAt
      },
      stableBranches: STABLE
    })
    expect(before).toMatchObject({ value: "flaky", timestamp: NOW, reason: first.reason })
  })

  test("only pass-on-retry is carried: a flaky status without flakySignalAt and no signal left is healthy", () => {
    expect(go([run(1, "passed")], prev("flaky", "x", 3, 2)).value).toBe("flaky")
    expect(go([run(1, "passed")], prev("flaky", "x", 3)).value).toBe("healthy")
  })

  test("a pattern that a regression's start made goes when the regression shows as one block", () => {
    const failing = [50, 250, 251, 252]
    const start = runs(300, failing).slice(0, 251)
    const atStart = go(start)
    expect(atStart.value).toBe("flaky")
    const p = { value: atStart.value, reason: atStart.reason, since: atStart.timestamp }
    // two more failed runs, then passes: a failure alone and a regression of 3 runs
    expect(go(runs(300, failing), p)).toMatchObject({ value: "healthy", reason: "no flaky signal for 7 days" })
  })
})

describe("classifier: broken", () => {
  test("at least 80% failures over 6 h with at least 5 runs (any branch)", () => {
    const results = [
      ...Array.from({ length: 4 }, (_, i) => run(1 + i, "failed", { branch: "feature/z" })),
      run(5, "passed", { branch: "feature/z" })
    ]
    expect(go(results)).toEqual({ value: "broken", reason: "failure rate 80% over 6 h", timestamp: NOW })
    // 4 runs are not enough, and 75% is not enough
    expect(go(results.slice(0, 4)).value).toBe("healthy")
    expect(go([...results, run(5.5, "passed", { branch: "feature/z" })]).value).not.toBe("broken")
  })

  test("the last 5 runs on a stable branch all failed", () => {
    const results = [run(200, "passed"), ...Array.from({ length: 5 }, (_, i) => run(100 - i * 20, "failed"))]
    expect(go(results)).toEqual({ value: "broken", reason: "failed the last 5 runs on main", timestamp: NOW })
    expect(BROKEN_STREAK).toBe(5)
    // a pass among the last five: not broken by streak
    const four = [...results.slice(0, 5), run(1, "passed")]
    expect(go(four).value).not.toBe("broken")
    // failures on a feature branch do not make a streak
    const feature = results.map((r) => ({ ...r, branch: "feature/q" }))
    expect(go(feature).value).toBe("healthy")
  })

  test("streak over several stable branches names them generically; a predicate works too", () => {
    const results = Array.from({ length: 5 }, (_, i) =>
      run(100 - i * 20, "failed", { branch: i % 2 === 0 ? "main" : "trunk-merge/main/42" })
    )
    const c = classify({ now: NOW, results, previous: null, stableBranches: (b) => isStableBranch(b, []) })
    expect(c.reason).toBe("failed the last 5 runs on stable branches")
  })

  test("pass on retry on the same commit is flaky, never broken, while it is in the window", () => {
    const results = [run(2, "failed", { sha: "s1" }), run(2, "passed", { sha: "s1" }), ...series(5, 5, 4)]
    const c = go(results)
    expect(c).toMatchObject({ value: "flaky", reason: "failed and passed on commit s1" })
    // a broken test that passes on retry becomes flaky
    expect(go(results, prev("broken", "failed the last 5 runs on main", 1)).value).toBe("flaky")
    // without the pass on the same commit: broken
    expect(go(series(5, 5, 4)).value).toBe("broken")
  })

  test("with retries: a run fails only when every attempt failed", () => {
    // 5 runs on main, each a failure and a failed retry in one upload: broken
    const both = Array.from({ length: 5 }, (_, i) => [
      run(10 - i, "failed", { sha: `b${i}`, uploadId: `r${i}` }),
      run(10 - i, "failed", { sha: `b${i}`, uploadId: `r${i}` })
    ]).flat()
    expect(go(both)).toMatchObject({ value: "broken", reason: "failed the last 5 runs on main" })
    // 5 attempts of 3 runs are no streak of 5 runs
    expect(go(both.slice(4)).value).toBe("healthy")
  })

  test("broken stays broken until 5 passes in a row, then healthy", () => {
    const failures = Array.from({ length: 5 }, (_, i) => run(5 * 24 - i, "failed"))
    const broken = prev("broken", "failed the last 5 runs on main", 5)
    const four = [...failures, ...Array.from({ length: 4 }, (_, i) => run(10 - i, "passed"))]
    expect(go(four, broken)).toEqual({ value: "broken", reason: broken.reason, timestamp: broken.since })
    const five = [...four, run(1, "passed")]
    expect(go(five, broken)).toEqual({ value: "healthy", reason: "passed the last 5 runs", timestamp: NOW })
  })

  test("a fixed regression leaves broken for healthy, not flaky, with its failures still in the window", () => {
    const failures = Array.from({ length: 12 }, (_, i) => run(48 - i, "failed"))
    const passes = Array.from({ length: 5 }, (_, i) => run(10 - i, "passed"))
    const c = go([...failures, ...passes], prev("broken", "failed the last 5 runs on main", 2, 1))
    expect(c).toMatchObject({ value: "healthy", reason: "passed the last 5 runs", timestamp: NOW })
  })

  test("the rate rule needs the most recent run to have failed", () => {
    const results = [
      ...Array.from({ length: 8 }, (_, i) => run(5 - i * 0.5, "failed", { branch: "f" })),
      run(0.5, "passed", { branch: "f" })
    ]
    expect(go(results).value).toBe("healthy")
  })
})

describe("classifier: what does not count", () => {
  test("results of infrastructure-failure uploads are ignored", () => {
    const infra = Array.from({ length: 6 }, (_, i) => run(1 + i * 0.5, "failed", { infra: true, uploadId: `bad-${i}` }))
    expect(go(infra).value).toBe("healthy")
    expect(go(infra.map((r) => ({ ...r, infra: false }))).value).toBe("broken")
    // an infra failure does not make a pass-on-retry either
    const retry = [run(3, "failed", { sha: "x1", infra: true }), run(2, "passed", { sha: "x1" })]
    expect(go(retry).value).toBe("healthy")
  })

  test("skipped results never count", () => {
    const skipped = Array.from({ length: 10 }, (_, i) => run(i + 1, "skipped"))
    expect(go(skipped).value).toBe("healthy")
    // skipped results do not break a streak of failures nor a recovery streak of passes
    const results = [...Array.from({ length: 5 }, (_, i) => run(100 - i * 10, "failed")), run(1, "skipped")]
    expect(go(results).value).toBe("broken")
  })

  test("isInfraFailureUpload: 80% or more of the non-skipped tests failed", () => {
    expect(isInfraFailureUpload({ passed: 2, failed: 8 })).toBe(true)
    expect(isInfraFailureUpload({ passed: 3, failed: 7 })).toBe(false)
    expect(isInfraFailureUpload({ passed: 0, failed: 0 })).toBe(false)
  })

  test("isStableBranch", () => {
    expect(isStableBranch("main", [])).toBe(true)
    expect(isStableBranch("master", [])).toBe(true)
    expect(isStableBranch("release/1.x", ["release/1.x"])).toBe(true)
    expect(isStableBranch("trunk-merge/main/17", [])).toBe(true)
    expect(isStableBranch("feature/main", ["develop"])).toBe(false)
    expect(isStableBranch("develop", new Set(["develop"]))).toBe(true)
  })

  test("timestamp and reason are kept while the value does not change", () => {
    const p = prev("healthy", "", 30)
    expect(go([run(1, "passed")], p)).toEqual({ value: "healthy", reason: "", timestamp: p.since })
  })
})

// ---------------------------------------------------------------------------------------------------------------
// properties
// ---------------------------------------------------------------------------------------------------------------

const arbResult: fc.Arbitrary<HistoryResult> = fc.record({
  at: fc.integer({ min: NOW - 10 * DAY, max: NOW }),
  sha: fc.constantFrom("aaaaaaa1", "bbbbbbb2", "ccccccc3", "ddddddd4"),
  branch: fc.constantFrom("main", "feature/a", "trunk-merge/main/1"),
  status: fc.constantFrom<ResultStatus>("passed", "failed", "failed", "skipped"),
  uploadId: fc.constantFrom("u1", "u2", "u3"),
  infra: fc.integer({ min: 0, max: 4 }).map((n) => n === 0)
})

const arbPrevious: fc.Arbitrary<PreviousStatus | null> = fc.option(
  fc
    .record({
      value: fc.constantFrom<PreviousStatus["value"]>("healthy", "flaky", "broken"),
      reason: fc.constantFrom("", "r"),
      since: fc.integer({ min: NOW - 30 * DAY, max: NOW }),
      flakySignalAt: fc.option(fc.integer({ min: NOW - 30 * DAY, max: NOW }), { nil: undefined })
    })
    .map((p) => (p.flakySignalAt === undefined ? { value: p.value, reason: p.reason, since: p.since } : p)),
  { nil: null }
)

const input = (results: HistoryResult[], previous: PreviousStatus | null): ClassifyInput => ({
  now: NOW,
  results,
  previous,
  stableBranches: (b) => isStableBranch(b, [])
})

describe("classifier properties", () => {
  test("never broken with fewer than 5 counted results (unless it already was broken)", () => {
    fc.assert(
      fc.property(fc.array(arbResult, { maxLength: 12 }), arbPrevious, (results, previous) => {
        fc.pre(previous?.value !== "broken")
        const counted = results.filter((r) => !r.infra && r.status !== "skipped").length
        fc.pre(counted < 5)
        return classify(input(results, previous)).value !== "broken"
      }),
      { numRuns: 500 }
    )
  })

  test("adding a skipped or an infra result never changes the status", () => {
    fc.assert(
      fc.property(
        fc.array(arbResult, { maxLength: 30 }),
        arbPrevious,
        arbResult,
        fc.boolean(),
        (results, previous, extra, asInfra) => {
          const added: HistoryResult = asInfra ? { ...extra, infra: true } : { ...extra, status: "skipped" }
          const a = classify(input(results, previous))
          const b = classify(input([...results, added], previous))
          expect(b).toEqual(a)
        }
      ),
      { numRuns: 500 }
    )
  })

  test("the order of the results does not matter", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(arbResult, { maxLength: 30, selector: (r) => r.at }),
        arbPrevious,
        fc.nat(),
        (results, previous, seed) => {
          const shuffled = results
            .map((r, i) => ({ r, k: (i * 2654435761 + seed) % 1000003 }))
            .sort((x, y) => x.k - y.k)
            .map((x) => x.r)
          expect(classify(input(shuffled, previous))).toEqual(classify(input(results, previous)))
        }
      ),
      { numRuns: 300 }
    )
  })

  test("the timestamp is the previous one exactly when the value is unchanged", () => {
    fc.assert(
      fc.property(fc.array(arbResult, { maxLength: 30 }), arbPrevious, (results, previous) => {
        const c = classify(input(results, previous))
        if (previous !== null && previous.value === c.value) return c.timestamp === previous.since
        return c.timestamp === NOW
      }),
      { numRuns: 300 }
    )
  })
})

describe("classifier properties (semantics §8 revised)", () => {
  test("a fixed regression (one block of failed runs, then passes) never becomes flaky", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 200 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 5, max: 200 }),
        fc.integer({ min: 0, max: 2 }),
        (before, length, after, attempts) => {
          const n = before + length + after
          const results: HistoryResult[] = []
          for (let i = 0; i < n; i++) {
            const failed = i >= before && i < before + length
            for (let a = 0; a <= attempts; a++)
              results.push({
                at: NOW - ((n - i) * 6 * DAY) / n,
                sha: `sha${i}`,
                branch: "main",
                status: failed ? "failed" : "passed",
                uploadId: `u${i}`,
                infra: false
              })
          }
          const c = classify(input(results, null))
          expect(c.value).toBe("healthy")
          // also when it was broken during the regression
          const fromBroken = classify(input(results, { value: "broken", reason: "r", since: NOW - DAY }))
          expect(fromBroken.value).toBe("healthy")
        }
      ),
      { numRuns: 300 }
    )
  })

  test("#36: two regressions of 3-12 runs, each fixed (10+ passes between and after), are never flaky", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 3, max: 12 }),
        fc.integer({ min: 10, max: 100 }),
        fc.integer({ min: 3, max: 12 }),
        fc.integer({ min: 5, max: 100 }),
        (before, first, between, second, after) => {
          const n = before + first + between + second + after
          const failedAt = (i: number) =>
            (i >= before && i < before + first) ||
            (i >= before + first + between && i < before + first + between + second)
          const results: HistoryResult[] = Array.from({ length: n }, (_, i) => ({
            at: NOW - ((n - i) * 6 * DAY) / n,
            sha: `sha${i}`,
            branch: "main",
            status: failedAt(i) ? "failed" : "passed",
            uploadId: `u${i}`,
            infra: false
          }))
          expect(classify(input(results, null)).value).toBe("healthy")
          expect(classify(input(results, { value: "broken", reason: "r", since: NOW - DAY })).value).toBe("healthy")
        }
      ),
      { numRuns: 300 }
    )
  })

  test("#36: a failure and a pass on one commit from two CI runs (queue branch and main, or a re-run) are flaky", () => {
    const sha = "feedbeef00"
    const failedOnQueue = run(30, "failed", { sha, branch: "trunk-merge/main/7", uploadId: "queue" })
    const passedOnMain = run(29, "passed", { sha, branch: "main", uploadId: "main" })
    const c = classify(input([...series(20, 0, 100, 40), failedOnQueue, passedOnMain], null))
    expect(c.value).toBe("flaky")
    expect(c.reason).toBe("failed and passed on commit feedbee")
    expect(c.flakySignalAt).toBe(passedOnMain.at)
    // a re-run on the same branch, the pass first: the order does not matter
    const rerun = classify(
      input([run(10, "passed", { sha: "0123456789" }), run(9, "failed", { sha: "0123456789" })], null)
    )
    expect(rerun.value).toBe("flaky")
    expect(rerun.reason).toBe("failed and passed on commit 0123456")
  })

  test("a failure and a pass on the same commit in the window is never broken", () => {
    fc.assert(
      fc.property(fc.array(arbResult, { maxLength: 30 }), arbPrevious, (results, previous) => {
        const counted = results.filter((r) => !r.infra && r.status !== "skipped" && r.at >= NOW - 7 * DAY)
        const proof = counted.some(
          (f) => f.status === "failed" && counted.some((p) => p.sha === f.sha && p.status === "passed")
        )
        fc.pre(proof)
        expect(classify(input(results, previous)).value).toBe("flaky")
      }),
      { numRuns: 500 }
    )
  })
})
