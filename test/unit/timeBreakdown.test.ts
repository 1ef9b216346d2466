import { describe, expect, test } from "bun:test"
import { breakdownOf } from "../../src/queue/timeBreakdown.ts"

const MIN = 60_000
const row = (minute: number, state: string, reason = "") => ({ at: minute * MIN, state, reason })

describe("time breakdown", () => {
  test("waiting, testing and each restart, from the timeline", () => {
    const rows = [
      row(0, "pending", "SUBMITTED"),
      row(10, "testing", "TEST_RUN_STARTED"),
      row(40, "pending", "PREREQUISITE_MERGE_ITEM_FAILED"),
      row(45, "testing", "TEST_RUN_STARTED"),
      row(75, "tests_passed", "TEST_RUN_PASSED"),
      row(76, "merged", "MERGED")
    ]
    const b = breakdownOf(rows, 200 * MIN, { batch: false, maxWaitMs: 5 * MIN })
    expect(b.waitingForSlotMs).toBe(15 * MIN)
    expect(b.waitingForBatchMs).toBe(0)
    expect(b.testingMs).toBe(61 * MIN)
    expect(b.restarts).toEqual([{ at: 40 * MIN, reason: "PREREQUISITE_MERGE_ITEM_FAILED" }])
  })

  test("with batching, the first batchingMaxWaitTimeMinutes of a wait are the batch filling; an active PR counts to now", () => {
    const rows = [row(0, "pending", "SUBMITTED"), row(12, "testing", "TEST_RUN_STARTED")]
    const b = breakdownOf(rows, 20 * MIN, { batch: true, maxWaitMs: 5 * MIN })
    expect(b.waitingForBatchMs).toBe(5 * MIN)
    expect(b.waitingForSlotMs).toBe(7 * MIN)
    expect(b.testingMs).toBe(8 * MIN)
    expect(b.restarts).toEqual([])
  })

  test("a pending_failure that goes back to pending is a restart", () => {
    const rows = [
      row(0, "pending"),
      row(1, "testing"),
      row(30, "pending_failure", "TEST_RUN_REQUIRED_STATUS_FAILED"),
      row(50, "pending", "PREREQUISITE_MERGE_ITEM_FAILED")
    ]
    expect(breakdownOf(rows, 60 * MIN, { batch: false, maxWaitMs: 0 }).restarts).toHaveLength(1)
  })
})
