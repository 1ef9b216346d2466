/** The queue figures' one definition (issue #33): median, restarts, and counts over a bucket as most and mean. */
import { describe, expect, test } from "bun:test"
import { isRestart, medianSeconds, overTime, quantile } from "../../src/queue/figures.ts"

describe("queue figures", () => {
  test("the median is a time that occurred (nearest rank), the lower of two", () => {
    expect(medianSeconds([])).toBeNull()
    expect(medianSeconds([9, 11])).toBe(9)
    expect(medianSeconds([30, 10, 20])).toBe(20)
    expect(quantile([1, 2, 3, 4], 0.95)).toBe(4)
  })

  test("a restart is any move back to pending from testing, tests passed or pending failure", () => {
    expect(isRestart("testing", "pending")).toBe(true)
    expect(isRestart("tests_passed", "pending")).toBe(true)
    expect(isRestart("pending_failure", "pending")).toBe(true)
    expect(isRestart("not_ready", "pending")).toBe(false)
    expect(isRestart(null, "pending")).toBe(false)
    expect(isRestart("testing", "failed")).toBe(false)
  })

  test("a count over a bucket: the most at once and the time-weighted mean, not the end's sample", () => {
    // two entries overlap in the middle of [0, 100); none is left at the end
    const busy = [
      { from: 10, to: 60 },
      { from: 40, to: 90 }
    ]
    expect(overTime(busy, 0, 100)).toEqual({ max: 2, mean: 1 })
    // one still open from before the bucket, one that ends as another starts (not counted twice)
    const chained = [
      { from: -50, to: 50 },
      { from: 50, to: null }
    ]
    expect(overTime(chained, 0, 100)).toEqual({ max: 1, mean: 1 })
    // outside the bucket
    expect(overTime([{ from: 100, to: 200 }], 0, 100)).toEqual({ max: 0, mean: 0 })
    // an empty window counts its instant
    expect(overTime([{ from: 0, to: null }], 5, 5)).toEqual({ max: 1, mean: 1 })
  })
})
