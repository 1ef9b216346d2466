/**
 * A runner round's webhook events (queue/events.ts), as a pure function (issue #34): a run is told when its test
 * branch is pushed, with the SHA; a run that ended before it started is not told at all; a cancellation's reason is
 * one of Trunk's values; a batch ends once, whatever mix of states its pull requests ended in.
 */
import { describe, expect, test } from "bun:test"
import { cancellationReason, type QueueInfo, roundEvents } from "../../src/queue/events.ts"
import type { EntryState, QueueState, RunRecord, Transition } from "../../src/queue/planner/index.ts"

const q: QueueInfo = { orgId: "o", repoId: "r", host: "local", owner: "acme", name: "app", branch: "main" }

const run = (over: Partial<RunRecord> & Pick<RunRecord, "id" | "testedEntryIds">): RunRecord => ({
  branch: `trunk-merge/pr-1/${over.id}`,
  queueType: "main",
  parentRunId: null,
  baseSha: "b".repeat(40),
  items: over.testedEntryIds.map((entryId, i) => ({ entryId, prNumber: i + 1, headSha: "c".repeat(40) })) as never,
  dependentPrs: [],
  status: "building",
  createdAt: 1000,
  startedAt: null,
  endedAt: null,
  testBranchSha: null,
  commits: [],
  failureReason: null,
  effectiveBase: "b".repeat(40),
  mergedEntryIds: [],
  ...over
})

const tr = (entryId: string, prNumber: number, from: EntryState | null, to: EntryState, at: number, reason = "X") =>
  ({ entryId, prNumber, from, to, reason, at, runId: null, verifiedByTestRun: null }) satisfies Transition

const events = (
  transitions: ReadonlyArray<Transition>,
  runChanges: ReadonlyArray<RunRecord>,
  states: Record<string, EntryState> = {},
  batchesOf: Record<string, ReadonlyArray<RunRecord>> = {}
) =>
  roundEvents(
    q,
    { state: { entries: [], runs: [] } as unknown as QueueState, transitions, runChanges },
    {
      authors: new Map(),
      endedRuns: [],
      entryStates: new Map(Object.entries(states)),
      batchesOf: new Map(Object.entries(batchesOf))
    },
    "http://gl"
  )

describe("a round's events", () => {
  test("testing is told when the run starts, with its test branch SHA; the transition itself is a record", () => {
    const created = events(
      [tr("a", 1, "pending", "testing", 1000, "TEST_RUN_STARTED")],
      [run({ id: "r1", testedEntryIds: ["a"] })]
    )
    expect(created.map((e) => e.type)).toEqual([null])
    expect(created[0]?.transition).toEqual({ entryId: "a", state: "testing", reason: "TEST_RUN_STARTED" })
    const started = events(
      [],
      [run({ id: "r1", testedEntryIds: ["a"], status: "in_progress", startedAt: 2000, testBranchSha: "d".repeat(40) })]
    )
    expect(started.map((e) => e.type)).toEqual(["test_run.started", "pull_request.testing"])
    expect(started[0]?.data.testBranchSha).toBe("d".repeat(40))
    expect(started[1]?.data.test_branch_sha).toBe("d".repeat(40))
    // a later change of a run that started in an earlier round tells nothing again
    const later = events(
      [tr("x", 9, "pending", "not_ready", 5000, "NOT_READY")],
      [run({ id: "r1", testedEntryIds: ["a"], status: "in_progress", startedAt: 2000, testBranchSha: "d".repeat(40) })]
    )
    expect(later.map((e) => e.type)).toEqual([null])
  })

  test("a run cancelled (or failed to build) before it started: no test_run event at all", () => {
    const cancelled = events(
      [tr("a", 1, "testing", "pending", 3000, "PREREQUISITE_MERGE_ITEM_CANCELLED")],
      [run({ id: "r1", testedEntryIds: ["a"], status: "cancelled", endedAt: 3000 })]
    )
    expect(cancelled.filter((e) => e.type?.startsWith("test_run.") === true)).toEqual([])
    expect(cancelled.filter((e) => e.type === "pull_request.testing")).toEqual([])
  })

  test("a run that started and ended in one round: started, testing, then the end of its pull request, completed", () => {
    const r = run({
      id: "r1",
      testedEntryIds: ["a"],
      status: "failed",
      startedAt: 3000,
      endedAt: 3000,
      testBranchSha: "e".repeat(40),
      failureReason: "TEST_RUN_REQUIRED_STATUS_FAILED"
    })
    const out = events(
      [{ ...tr("a", 1, "testing", "failed", 3000, "TEST_RUN_REQUIRED_STATUS_FAILED"), runId: "r1" }],
      [r]
    )
    expect(out.map((e) => e.type)).toEqual([
      "test_run.started",
      "pull_request.testing",
      "pull_request.failed",
      "test_run.completed"
    ])
  })

  test("cancellation reasons are Trunk's values", () => {
    expect(cancellationReason("API_REQUESTED")).toBe("USER_REQUESTED")
    for (const r of [
      "USER_REQUESTED",
      "PR_CLOSED",
      "PR_PUSHED_TO",
      "PR_BASE_BRANCH_CHANGED",
      "PR_CONVERTED_TO_DRAFT"
    ]) {
      expect(cancellationReason(r)).toBe(r)
    }
    const out = events([tr("a", 1, "pending", "cancelled", 1000, "API_REQUESTED")], [])
    expect(out[0]?.data.cancellation_reason).toBe("USER_REQUESTED")
    expect(out[0]?.transition?.reason).toBe("API_REQUESTED")
  })

  test("a batch of merged and failed pull requests ends once, merged, with the merged ones", () => {
    const batch = run({ id: "b1", testedEntryIds: ["a", "b", "c"], status: "failed", startedAt: 1500, endedAt: 2000 })
    const out = events(
      [{ ...tr("c", 3, "tests_passed", "merged", 5000, "MERGED"), verifiedByTestRun: "b1" }],
      [],
      { a: "merged", b: "failed", c: "merged" },
      { c: [batch] }
    )
    const ends = out.filter((e) => e.type?.startsWith("pull_request_batch.") === true)
    expect(ends.map((e) => [e.type, e.data.pr_numbers, e.data.pr_numbers_in_batch])).toEqual([
      ["pull_request_batch.merged", [1, 3], [1, 2, 3]]
    ])
    const allFailed = events(
      [tr("b", 2, "pending_failure", "failed", 5000, "TEST_RUN_REQUIRED_STATUS_FAILED")],
      [],
      { a: "failed", b: "failed", c: "cancelled" },
      { b: [batch] }
    )
    expect(
      allFailed
        .filter((e) => e.type?.startsWith("pull_request_batch.") === true)
        .map((e) => [e.type, e.data.pr_numbers])
    ).toEqual([["pull_request_batch.failed", [1, 2]]])
  })
})
