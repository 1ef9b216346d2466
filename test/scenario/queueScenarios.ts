/**
 * The merge-queue scenarios, written once over the provider-neutral scenario driver (test/support/scenario.ts):
 * engine.test.ts runs every one of them on local Git, github.test.ts the ones it names on the simulated GitHub. A body
 * returns the commits main got from outside the queue, for the one-promise check its file runs afterwards.
 */
import { expect } from "bun:test"
import type { RunView, Scenario, ScenarioOptions } from "../support/scenario.ts"

export interface QueueScenario {
  readonly name: string
  readonly options: Omit<ScenarioOptions, "name">
  readonly body: (s: Scenario) => Promise<ScenarioEnd | undefined>
}

/** Commits on main that no run tested (pushed from outside, merged directly), or `checked` when the body checked. */
export interface ScenarioEnd {
  readonly outside?: ReadonlyArray<string>
  readonly direct?: ReadonlyArray<string>
  readonly checked?: boolean
}

const define = (name: string, options: QueueScenario["options"], body: QueueScenario["body"]): QueueScenario => ({
  name,
  options,
  body
})

/**
 * Plays `body` on the fresh queue of `s`, then checks the one promise (unless the body did) and what `after` checks.
 * The queue is deleted at the end (`close`).
 */
export const play = async (s: Scenario, body: QueueScenario["body"], after?: () => Promise<void>) => {
  try {
    const end = await body(s)
    if (end?.checked !== true) await s.checkOnePromise(end ?? {})
    await after?.()
  } finally {
    await s.close()
  }
}

/** Opens PRs `prs` (each adding pr-<n>.txt) and submits them, in this order. */
const submitAll = async (s: Scenario, prs: ReadonlyArray<number>) => {
  for (const n of prs) s.createPr(n)
  for (const n of prs) await s.submit(n)
}

/** The id of each PR's first run, once built. */
const firstRuns = async (s: Scenario, prs: ReadonlyArray<number>) => {
  const first = new Map<number, string>()
  for (const n of prs) first.set(n, (await s.waitRun(n)).runId)
  return first
}

/** The PR's timeline as "state:reason". */
export const reasons = async (s: Scenario, n: number) => (await s.timeline(n)).map((t) => `${t.state}:${t.reason}`)

export const allPass = define(
  "all pass: the chain lands in order, one commit per PR",
  { concurrency: 3 },
  async (s) => {
    for (const n of [1, 2, 3]) s.createPr(n, { title: `Add ${n}` })
    for (const n of [1, 2, 3]) await s.submit(n)
    const runs = new Map<number, RunView>()
    for (const n of [1, 2, 3]) runs.set(n, await s.waitRun(n))
    // the chain: the k-th run contains every entry ahead of it
    expect(s.files(runs.get(1)!.sha)).toEqual(["README.md", "pr-1.txt"])
    expect(s.files(runs.get(3)!.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt"])
    expect(runs.get(3)!.details.testedPullRequests.map((p) => p.prNumber)).toEqual([3])
    expect(runs.get(3)!.details.requiredStatusesSource).toBe("merge_instance")
    // passing out of order: nothing merges before the head passes
    await s.ciPass(3)
    await s.ciPass(2)
    await s.waitState(3, "tests_passed")
    await s.waitState(2, "tests_passed")
    await s.holds("main untouched before #1 passes", async () => s.mainSha() === s.initialSha)
    await s.ciPass(1)
    for (const n of [1, 2, 3]) await s.waitState(n, "merged")
    expect(s.history()).toEqual(["Add 1 (#1)", "Add 2 (#2)", "Add 3 (#3)"])
    s.expectMainAt(runs.get(3)!.sha)
    for (const n of [1, 2, 3]) {
      expect((await s.pr(n)).verifiedByTestRun).toBe(runs.get(n)!.runId)
      expect(await reasons(s, n)).toEqual([
        "pending:SUBMITTED",
        "testing:TEST_RUN_STARTED",
        "tests_passed:TEST_RUN_PASSED",
        "merged:MERGED"
      ])
    }
    return undefined
  }
)

export const failureAtHead = define(
  "failure at the head: it fails, the runs behind are rebuilt without it",
  { concurrency: 3 },
  async (s) => {
    await submitAll(s, [1, 2, 3])
    const first = await firstRuns(s, [1, 2, 3])
    await s.ciFail(1)
    await s.waitState(1, "failed")
    const r2 = await s.ciPass(2, [first.get(2)!])
    const r3 = await s.ciPass(3, [first.get(3)!])
    expect(s.files(r3.sha)).toEqual(["README.md", "pr-2.txt", "pr-3.txt"])
    expect(s.files(r2.sha)).toEqual(["README.md", "pr-2.txt"])
    await s.waitState(2, "merged")
    await s.waitState(3, "merged")
    // nothing is ahead of it: pending_failure resolves at once (same step)
    expect(await reasons(s, 1)).toEqual([
      "pending:SUBMITTED",
      "testing:TEST_RUN_STARTED",
      "pending_failure:TEST_RUN_REQUIRED_STATUS_FAILED",
      "failed:TEST_RUN_REQUIRED_STATUS_FAILED"
    ])
    expect(await reasons(s, 2)).toContain("pending:PREREQUISITE_MERGE_ITEM_FAILED")
    // the time breakdown names the PR whose failure restarted #2 and #3
    for (const n of [2, 3]) {
      const restarts = (await s.pr(n)).timeBreakdown?.restarts ?? []
      expect(restarts.map((r) => [r.reason, r.causedByPr])).toEqual([["PREREQUISITE_MERGE_ITEM_FAILED", 1]])
    }
    expect([await s.testingCount(1), await s.testingCount(2), await s.testingCount(3)]).toEqual([1, 2, 2])
    expect(s.history()).toEqual(["PR #2 (#2)", "PR #3 (#3)"])
    return undefined
  }
)

export const failureInMiddle = define(
  "failure in the middle: only the runs containing it are rebuilt",
  { concurrency: 5 },
  async (s) => {
    const prs = [1, 2, 3, 4, 5]
    await submitAll(s, prs)
    const first = await firstRuns(s, prs)
    await s.ciFail(3)
    await s.waitState(3, "pending_failure")
    // 4 and 5 are rebuilt without 3; 1 and 2 keep their runs
    const r4 = await s.waitRun(4, [first.get(4)!])
    const r5 = await s.waitRun(5, [first.get(5)!])
    expect(s.files(r5.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-4.txt", "pr-5.txt"])
    expect(r4.details.testedPullRequests.map((p) => p.prNumber)).toEqual([4])
    expect((await s.pr(1)).testRunId).toBe(first.get(1)!)
    expect((await s.pr(2)).testRunId).toBe(first.get(2)!)
    await s.ciPass(1)
    await s.ciPass(2)
    await s.waitState(3, "failed")
    await s.ciPass(4)
    await s.ciPass(5)
    for (const n of [1, 2, 4, 5]) await s.waitState(n, "merged")
    const counts = []
    for (const n of prs) counts.push(await s.testingCount(n))
    expect(counts).toEqual([1, 1, 1, 2, 2])
    expect(s.runsSeen().size).toBe(7)
    expect(await reasons(s, 3)).toEqual([
      "pending:SUBMITTED",
      "testing:TEST_RUN_STARTED",
      "pending_failure:TEST_RUN_REQUIRED_STATUS_FAILED",
      "failed:TEST_RUN_REQUIRED_STATUS_FAILED"
    ])
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)", "PR #4 (#4)", "PR #5 (#5)"])
    return undefined
  }
)

export const twoFailures = define("two failures: each is taken out, the rest lands", { concurrency: 4 }, async (s) => {
  const prs = [1, 2, 3, 4]
  await submitAll(s, prs)
  const first = await firstRuns(s, prs)
  await s.ciFail(2)
  await s.waitState(2, "pending_failure")
  // 3 is rebuilt without 2 and fails too
  const r3 = await s.ciFail(3, [first.get(3)!])
  expect(s.files(r3.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
  await s.waitState(3, "pending_failure")
  const r4 = await s.waitRun(4, [first.get(4)!])
  // the run of 4 that contained 3 (but not 2) is replaced too
  const final4 = r4.details.testedPullRequests.length === 1 && s.files(r4.sha).includes("pr-3.txt") ? null : r4
  await s.ciPass(1)
  await s.waitState(2, "failed")
  await s.waitState(3, "failed")
  const last4 = final4 ?? (await s.waitRun(4, [first.get(4)!, r4.runId]))
  expect(s.files(last4.sha)).toEqual(["README.md", "pr-1.txt", "pr-4.txt"])
  await s.ciPass(
    4,
    [first.get(4)!, r4.runId].filter((id) => id !== last4.runId)
  )
  await s.waitState(4, "merged")
  expect(await s.testingCount(1)).toBe(1)
  expect(await s.testingCount(2)).toBe(1)
  expect(await s.testingCount(3)).toBe(2)
  expect(await s.testingCount(4)).toBe(3)
  expect(s.history()).toEqual(["PR #1 (#1)", "PR #4 (#4)"])
  return undefined
})

export const mergeConflict = define(
  "merge conflict: the conflicting PR fails with START_TEST_RUN_MERGE_CONFLICT",
  { concurrency: 2 },
  async (s) => {
    s.createPr(1, { files: { "README.md": "one\n", "pr-1.txt": "1\n" } })
    s.createPr(2, { files: { "README.md": "two\n", "pr-2.txt": "2\n" } })
    s.createPr(3)
    for (const n of [1, 2, 3]) await s.submit(n)
    await s.waitRun(1)
    const r3 = await s.waitRun(3)
    expect(s.files(r3.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
    expect((await s.pr(2)).state).toBe("pending_failure")
    await s.ciPass(1)
    await s.ciPass(3)
    await s.waitState(2, "failed")
    await s.waitState(3, "merged")
    const t2 = await reasons(s, 2)
    expect(t2).toContain("pending_failure:START_TEST_RUN_MERGE_CONFLICT")
    expect(t2.at(-1)).toBe("failed:START_TEST_RUN_MERGE_CONFLICT")
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)"])
    return undefined
  }
)

export const priority = define(
  "priority: high goes ahead of pending entries; getQueue order and position",
  { concurrency: 1 },
  async (s) => {
    for (const n of [1, 2, 3, 4]) s.createPr(n)
    await s.submit(1)
    await s.waitRun(1)
    await s.submit(2)
    await s.submit(3)
    await s.submit(4, { priority: "high" })
    const order = async () => {
      const q = await s.ok<{ enqueuedPullRequests: Array<{ prNumber: number; position: number }> }>("getQueue")
      return q.enqueuedPullRequests.map((e) => [e.prNumber, e.position])
    }
    const expected = [
      [1, 1],
      [4, 2],
      [2, 3],
      [3, 4]
    ]
    await s.until("getQueue order", async () => JSON.stringify(await order()) === JSON.stringify(expected) || undefined)
    // the runner places #4 a moment later if it has not yet (until then it may be shown behind placed entries)
    await s.until("#4 at position 2", async () => (await s.pr(4)).position === 2 || undefined)
    expect((await s.pr(4)).priorityValue).toBe(10)
    expect((await s.pr(2)).state).toBe("pending")
    await s.ciPass(1)
    await s.waitState(1, "merged")
    await s.waitRun(4)
    expect((await s.pr(2)).state).toBe("pending")
    expect((await s.pr(2)).testRunId).toBeNull()
    for (const n of [4, 2, 3]) {
      await s.ciPass(n)
      await s.waitState(n, "merged")
    }
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #4 (#4)", "PR #2 (#2)", "PR #3 (#3)"])
    // a high submission never interrupted the run of #1
    expect(await s.testingCount(1)).toBe(1)
    return undefined
  }
)

export const resubmitAndDeletedRef = define(
  "resubmitting an active PR updates its priority; a deleted PR ref cancels it",
  { concurrency: 1 },
  async (s) => {
    await submitAll(s, [1, 2, 3, 4])
    await s.waitRun(1)
    await s.submit(3, { priority: "high" })
    await s.until("#3 moved up", async () => (await s.pr(3)).position === 2 || undefined)
    expect((await s.pr(2)).position).toBe(3)
    s.repo.deletePr(4)
    await s.waitState(4, "cancelled")
    expect((await reasons(s, 4)).at(-1)).toBe("cancelled:PR_CLOSED")
    for (const n of [1, 3, 2]) {
      await s.ciPass(n)
      await s.waitState(n, "merged")
    }
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)", "PR #2 (#2)"])
    return undefined
  }
)

export const forcePush = define(
  "a force-push to a queued PR cancels it (PR_PUSHED_TO); the run behind is rebuilt without it",
  { concurrency: 2 },
  async (s) => {
    await submitAll(s, [1, 2])
    await s.waitRun(1)
    const a2 = await s.waitRun(2)
    s.repo.forcePushPr(1, { files: { "pr-1.txt": "changed\n" } })
    await s.waitState(1, "cancelled")
    expect((await reasons(s, 1)).at(-1)).toBe("cancelled:PR_PUSHED_TO")
    const r2 = await s.waitRun(2, [a2.runId])
    expect(s.files(r2.sha)).toEqual(["README.md", "pr-2.txt"])
    await s.ciPass(2)
    await s.waitState(2, "merged")
    expect(s.history()).toEqual(["PR #2 (#2)"])
    return undefined
  }
)

export const passedRunWaiting = define(
  "a passed run waiting to merge: a force-push cancels its PR, an outside push makes it run again",
  { concurrency: 2 },
  async (s) => {
    await submitAll(s, [1, 2])
    const a1 = await s.waitRun(1)
    await s.ciPass(2)
    await s.waitState(2, "tests_passed")
    s.repo.forcePushPr(2, { files: { "pr-2.txt": "again\n" } })
    await s.waitState(2, "cancelled")
    // #1 passes while the queue is paused; then main moves under it
    await s.updateQueue({ state: "paused" })
    await s.ciPass(1)
    await s.waitState(1, "tests_passed")
    const outside = s.repo.pushToMain({ "outside.txt": "x\n" })
    await s.updateQueue({ state: "running" })
    const r1 = await s.waitRun(1, [a1.runId])
    expect(s.files(r1.sha)).toEqual(["README.md", "outside.txt", "pr-1.txt"])
    expect(await reasons(s, 1)).toContain("pending:MANUAL_PUSH_TO_TARGET_BRANCH")
    await s.ciPass(1)
    await s.waitState(1, "merged")
    expect(s.history()).toEqual(["Outside change", "PR #1 (#1)"])
    return { outside: [outside] }
  }
)

export const urgent = define(
  "urgent takes the head and restarts the runs it displaced (SKIP_THE_LINE_INTERRUPTED)",
  { concurrency: 2 },
  async (s) => {
    for (const n of [1, 2, 5]) s.createPr(n)
    await s.submit(1)
    await s.submit(2)
    const a1 = await s.waitRun(1)
    const a2 = await s.waitRun(2)
    await s.submit(5, { priority: "urgent" })
    const r5 = await s.waitRun(5)
    expect(s.files(r5.sha)).toEqual(["README.md", "pr-5.txt"])
    const r1 = await s.waitRun(1, [a1.runId])
    expect(s.files(r1.sha)).toEqual(["README.md", "pr-1.txt", "pr-5.txt"])
    expect(await reasons(s, 1)).toContain("pending:SKIP_THE_LINE_INTERRUPTED")
    expect(await reasons(s, 2)).toContain("pending:SKIP_THE_LINE_INTERRUPTED")
    expect((await s.pr(5)).skipTheLine).toBe(true)
    await s.ciPass(5)
    await s.ciPass(1)
    await s.ciPass(2, [a2.runId])
    for (const n of [5, 1, 2]) await s.waitState(n, "merged")
    expect(s.history()).toEqual(["PR #5 (#5)", "PR #1 (#1)", "PR #2 (#2)"])
    return undefined
  }
)

export const cancelInMiddle = define(
  "cancel in the middle: the runs behind are rebuilt without it; errors of cancel",
  { concurrency: 3 },
  async (s) => {
    await submitAll(s, [1, 2, 3])
    const first = await firstRuns(s, [1, 2, 3])
    await s.ok("cancelPullRequest", { pr: { number: 2 } })
    await s.waitState(2, "cancelled")
    const r3 = await s.waitRun(3, [first.get(3)!])
    expect(s.files(r3.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
    expect((await s.pr(1)).testRunId).toBe(first.get(1)!)
    expect((await reasons(s, 2)).at(-1)).toBe("cancelled:API_REQUESTED")
    await s.ciPass(1)
    await s.ciPass(3)
    await s.waitState(3, "merged")
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)"])
    await s.fails("cancelPullRequest", { pr: { number: 1 } }, 409, "PR_NOT_ACTIVE")
    await s.fails("cancelPullRequest", { pr: { number: 2 } }, 409, "PR_NOT_ACTIVE")
    await s.fails("cancelPullRequest", { pr: { number: 77 } }, 404, "PR_NOT_FOUND")
    await s.fails("getSubmittedPullRequest", { pr: { number: 77 } }, 404, "PR_NOT_FOUND")
    await s.fails("submitPullRequest", { pr: { number: 77 } }, 404, "PR_NOT_FOUND")
    return undefined
  }
)

export const restart = define(
  "restart: a new run for that PR only; 409 before any run and after merge",
  { concurrency: 3 },
  async (s) => {
    await submitAll(s, [1, 2, 3, 4])
    const first = await firstRuns(s, [1, 2, 3])
    expect((await s.pr(4)).state).toBe("pending")
    await s.fails("restartTestsOnPullRequest", { pr: { number: 4 } }, 409, "PR_TESTS_NOT_RESTARTABLE")
    await s.ok("restartTestsOnPullRequest", { pr: { number: 2 } })
    const r2 = await s.waitRun(2, [first.get(2)!])
    expect(r2.runId).not.toBe(first.get(2)!)
    expect(s.files(r2.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt"])
    await s.holds(
      "runs of #1 and #3 untouched",
      async () => (await s.pr(1)).testRunId === first.get(1)! && (await s.pr(3)).testRunId === first.get(3)!
    )
    for (const n of [1, 2, 3]) await s.ciPass(n)
    await s.ciPass(4)
    for (const n of [1, 2, 3, 4]) await s.waitState(n, "merged")
    expect([await s.testingCount(1), await s.testingCount(2), await s.testingCount(3)]).toEqual([1, 2, 1])
    expect(await reasons(s, 2)).toContain("pending:RESTART_REQUESTED")
    await s.fails("restartTestsOnPullRequest", { pr: { number: 1 } }, 409, "PR_NOT_ACTIVE")
    return undefined
  }
)

export const restartAfterFailure = define(
  "restart right after a failure: the new run waits for a new status",
  { concurrency: 1 },
  async (s) => {
    s.createPr(1)
    await s.submit(1)
    const a = await s.ciFail(1)
    await s.waitState(1, "failed")
    // a failed PR is not active: resubmit, then the failure of the old run must not count for the new one
    await s.submit(1)
    const b = await s.waitRun(1, [a.runId])
    await s.holds("the new run is not failed by the old status", async () => (await s.pr(1)).state === "testing")
    await s.ciPass(1, [a.runId])
    await s.waitState(1, "merged")
    expect(b.runId).not.toBe(a.runId)
    return undefined
  }
)

export const restartOfFailedRun = define(
  "restart of a PR whose run just failed: the rebuilt run (same sha) ignores the old status",
  { concurrency: 2 },
  async (s) => {
    await submitAll(s, [1, 2])
    await s.waitRun(1)
    const a = await s.ciFail(2)
    await s.waitState(2, "pending_failure")
    await s.ok("restartTestsOnPullRequest", { pr: { number: 2 } })
    const b = await s.waitRun(2, [a.runId])
    // the same content on the same base builds the same commit
    expect(b.sha).toBe(a.sha)
    await s.holds("the old failure does not count", async () => (await s.pr(2)).state === "testing")
    await s.ciPass(2)
    await s.ciPass(1)
    await s.waitState(1, "merged")
    await s.waitState(2, "merged")
    expect(await reasons(s, 2)).toContain("pending:RESTART_REQUESTED")
    return undefined
  }
)

export const pausedThenResumed = define(
  "paused, then resumed: nothing starts or merges while paused",
  { concurrency: 2, config: { state: "paused" } },
  async (s) => {
    await submitAll(s, [1, 2])
    await s.holds(
      "nothing starts while paused",
      async () => (await s.pr(1)).state === "pending" && (await s.pr(2)).testRunId === null
    )
    await s.updateQueue({ state: "running" })
    await s.waitRun(1)
    await s.waitRun(2)
    await s.updateQueue({ state: "paused" })
    expect((await s.ok<{ state: string }>("getQueue")).state).toBe("paused")
    await s.ciPass(1)
    await s.ciPass(2)
    await s.waitState(1, "tests_passed")
    await s.waitState(2, "tests_passed")
    await s.holds("nothing merges while paused", async () => s.mainSha() === s.initialSha)
    await s.updateQueue({ state: "running" })
    await s.waitState(1, "merged")
    await s.waitState(2, "merged")
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
    return undefined
  }
)

export const draining = define(
  "draining: passing runs still merge, new submissions wait",
  { concurrency: 1 },
  async (s) => {
    for (const n of [1, 2]) s.createPr(n)
    await s.submit(1)
    await s.waitRun(1)
    await s.updateQueue({ state: "draining" })
    await s.submit(2)
    await s.ciPass(1)
    await s.waitState(1, "merged")
    await s.holds("#2 waits while draining", async () => (await s.pr(2)).state === "pending")
    expect((await s.ok<{ state: string }>("getQueue")).state).toBe("draining")
    await s.updateQueue({ state: "running" })
    await s.ciPass(2)
    await s.waitState(2, "merged")
    expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
    return undefined
  }
)

export const directMerge = define(
  "direct merge: an up-to-date PR whose own status passed merges without a test run",
  { concurrency: 2, config: { directMergeMode: "always" } },
  async (s) => {
    const direct = s.createPr(1, { title: "Direct" })
    const behind = s.createPr(2)
    await s.report(direct, "success")
    await s.submit(1)
    const merged = await s.waitState(1, "merged")
    expect(merged.verifiedByTestRun).toBeNull()
    s.expectMainAt(direct)
    expect((await reasons(s, 1)).at(-1)).toBe("merged:MERGE_GRAPH_DIRECT_MERGE")
    expect(await s.testingCount(1)).toBe(0)
    // #2 does not contain the new tip: it is tested as usual
    await s.report(behind, "success")
    await s.submit(2)
    await s.ciPass(2)
    await s.waitState(2, "merged")
    expect(await s.testingCount(2)).toBe(1)
    expect(s.history()).toEqual(["Direct", "PR #2 (#2)"])
    return { direct: [direct] }
  }
)

export const mergeCommit = define(
  "merge method merge_commit: merge commits with two parents, the target's tip and the PR's head",
  { concurrency: 2, config: { mergeMethod: "merge_commit" } },
  async (s) => {
    const h1 = s.createPr(1, { title: "One" })
    const h2 = s.createPr(2, { title: "Two" })
    await s.submit(1)
    await s.submit(2)
    await s.ciPass(1)
    await s.ciPass(2)
    await s.waitState(2, "merged")
    const commits = s.repo.git("rev-list", "--first-parent", "--reverse", `${s.initialSha}..main`).split("\n")
    expect(commits.length).toBe(2)
    const parents = commits.map((c) => s.repo.git("rev-list", "--parents", "-n", "1", c).split(" ").slice(1))
    expect(parents).toEqual([
      [s.initialSha, h1],
      [commits[0]!, h2]
    ])
    expect(s.history()).toEqual(["Merge pull request #1: One", "Merge pull request #2: Two"])
    return undefined
  }
)

export const squash = define(
  'merge method squash: one commit "<title> (#N)" per PR, even for a PR of several commits',
  { concurrency: 2, config: { mergeMethod: "squash" } },
  async (s) => {
    s.createPr(1, {
      title: "Squashed one",
      commits: [{ files: { "pr-1.txt": "a\n" } }, { files: { "pr-1b.txt": "b\n" } }]
    })
    s.createPr(2, { title: "Squashed two" })
    await s.submit(1)
    await s.submit(2)
    await s.ciPass(1)
    await s.ciPass(2)
    await s.waitState(2, "merged")
    expect(s.history()).toEqual(["Squashed one (#1)", "Squashed two (#2)"])
    expect(s.repo.git("rev-list", "--count", "--merges", `${s.initialSha}..main`)).toBe("0")
    expect(s.files("main")).toEqual(["README.md", "pr-1.txt", "pr-1b.txt", "pr-2.txt"])
    return undefined
  }
)

export const rebase = define(
  "merge method rebase: the PR's commits replayed, one by one",
  { concurrency: 2, config: { mergeMethod: "rebase" } },
  async (s) => {
    s.createPr(1, {
      title: "First part two",
      commits: [{ files: { "pr-1.txt": "a\n" }, message: "First part one" }, { files: { "pr-1b.txt": "b\n" } }]
    })
    s.createPr(2, { title: "Second" })
    await s.submit(1)
    await s.submit(2)
    await s.ciPass(1)
    await s.ciPass(2)
    await s.waitState(2, "merged")
    expect(s.history()).toEqual(["First part one", "First part two", "Second"])
    expect(s.repo.git("rev-list", "--count", "--merges", `${s.initialSha}..main`)).toBe("0")
    expect(s.files("main")).toEqual(["README.md", "pr-1.txt", "pr-1b.txt", "pr-2.txt"])
    return undefined
  }
)

export const outsidePush = define(
  "an outside push to main restarts the runs built on the old tip; they land on top of it",
  { concurrency: 2 },
  async (s) => {
    await submitAll(s, [1, 2])
    const a1 = await s.waitRun(1)
    const a2 = await s.waitRun(2)
    const outside = s.repo.pushToMain({ "outside.txt": "x\n" }, { message: "Outside change" })
    const r1 = await s.waitRun(1, [a1.runId])
    const r2 = await s.waitRun(2, [a2.runId])
    expect(s.files(r1.sha)).toEqual(["README.md", "outside.txt", "pr-1.txt"])
    expect(s.files(r2.sha)).toEqual(["README.md", "outside.txt", "pr-1.txt", "pr-2.txt"])
    expect(await reasons(s, 1)).toContain("pending:MANUAL_PUSH_TO_TARGET_BRANCH")
    // statuses of the stale runs do not count
    await s.report(a1.sha, "success")
    await s.ciPass(1)
    await s.ciPass(2)
    await s.waitState(1, "merged")
    await s.waitState(2, "merged")
    expect(s.history()).toEqual(["Outside change", "PR #1 (#1)", "PR #2 (#2)"])
    return { outside: [outside] }
  }
)

export const trunkConfig = define(
  ".trunk/trunk.yaml names the required statuses (trunk_config)",
  {
    concurrency: 1,
    requiredStatuses: null,
    files: {
      "README.md": "hello\n",
      ".trunk/trunk.yaml": "version: 0.1\nmerge:\n  required_statuses:\n    - build\n    - lint\n"
    }
  },
  async (s) => {
    s.createPr(1)
    await s.submit(1)
    const run = await s.waitRun(1)
    expect(run.details.requiredStatuses).toEqual(["build", "lint"])
    expect(run.details.requiredStatusesSource).toBe("trunk_config")
    await s.report(run.sha, "success", "build")
    await s.holds("lint still missing", async () => (await s.pr(1)).state === "testing")
    await s.report(run.sha, "success", "lint")
    await s.waitState(1, "merged")
    const d = await s.details(run.runId)
    expect(d.statusChecks.map((c) => [c.context, c.state])).toEqual([
      ["build", "SUCCESS"],
      ["lint", "SUCCESS"]
    ])
    return undefined
  }
)

export const noRequiredStatuses = define(
  "no required statuses at all: the run fails with START_TEST_RUN_NO_REQUIRED_STATUSES",
  { concurrency: 1, requiredStatuses: null },
  async (s) => {
    s.createPr(1)
    await s.submit(1)
    await s.waitState(1, "failed")
    expect((await reasons(s, 1)).at(-1)).toBe("failed:START_TEST_RUN_NO_REQUIRED_STATUSES")
    return undefined
  }
)

export const manySubmissions = define(
  "many submissions at once (written together): each answered on its own, every PR in the queue once",
  { concurrency: 1, config: { state: "paused" } },
  async (s) => {
    const prs = Array.from({ length: 30 }, (_, i) => i + 1)
    for (const n of prs) s.createPr(n)
    const [again, missing] = await Promise.all([
      s.post("submitPullRequest", { pr: { number: 5 }, priority: "high" }),
      s.post("submitPullRequest", { pr: { number: 99 } }),
      ...prs.map((n) => s.submit(n))
    ])
    expect([again.status, missing.status]).toEqual([200, 404])
    expect((missing.body as { error: { code: string } }).error.code).toBe("PR_NOT_FOUND")
    const queue = await s.ok<{ enqueuedPullRequests: ReadonlyArray<{ prNumber: number; position: number }> }>(
      "getQueue"
    )
    expect(queue.enqueuedPullRequests.map((e) => e.prNumber).sort((a, b) => a - b)).toEqual(prs)
    expect(queue.enqueuedPullRequests.map((e) => e.position)).toEqual(prs)
    // placed by the runner or not yet, every active PR has a position
    const places = await Promise.all(prs.map(async (n) => (await s.pr(n)).position))
    expect(places.every((p) => p !== null && p >= 1 && p <= prs.length)).toBe(true)
    for (const n of prs) {
      expect((await reasons(s, n)).filter((r) => r.endsWith(":SUBMITTED")).length).toBeLessThanOrEqual(1)
      expect((await s.pr(n)).state).toBe("pending")
    }
    // #5 was raised to high by its second submission (or came in high first): it goes first
    expect(queue.enqueuedPullRequests[0]?.prNumber).toBe(5)
    // the others in the order their submissions arrived (sent at once, they may arrive in any order): the second in
    // the queue is tested next
    const second = queue.enqueuedPullRequests[1]?.prNumber ?? 0
    await s.updateQueue({ state: "running" })
    await s.ciPass(5)
    await s.ciPass(second)
    await s.waitState(second, "merged")
    const merged = new Set([5, second])
    await Promise.all(prs.filter((n) => !merged.has(n)).map((n) => s.ok("cancelPullRequest", { pr: { number: n } })))
    for (const n of prs) await s.waitState(n, merged.has(n) ? "merged" : "cancelled")
    return undefined
  }
)

export const deleteQueueNotEmpty = define(
  "deleteQueue with active entries answers 409 QUEUE_NOT_EMPTY",
  { concurrency: 1 },
  async (s) => {
    s.createPr(1)
    await s.submit(1)
    await s.fails("deleteQueue", {}, 409, "QUEUE_NOT_EMPTY")
    await s.ciPass(1)
    await s.waitState(1, "merged")
    await s.checkOnePromise()
    await s.ok("deleteQueue")
    await s.fails("getQueue", {}, 404, "QUEUE_NOT_FOUND")
    return { checked: true }
  }
)

export const resubmitMerged = define(
  "a merged PR submitted again is refused with 409 PR_ALREADY_MERGED: it lands once",
  { concurrency: 1 },
  async (s) => {
    s.createPr(1, { title: "Change one" })
    await s.submit(1)
    await s.ciPass(1)
    await s.waitState(1, "merged")
    // squash: the head is not in main, the queue knows it merged this head (GitHub: the PR is merged there)
    await s.fails("submitPullRequest", { pr: { number: 1 } }, 409, "PR_ALREADY_MERGED")
    await s.fails("submitPullRequest", { pr: { number: 1 }, priority: "urgent" }, 409, "PR_ALREADY_MERGED")
    const after = await s.pr(1)
    expect([after.state, after.isCurrentlySubmittedToQueue]).toEqual(["merged", false])
    expect(await reasons(s, 1)).toEqual([
      "pending:SUBMITTED",
      "testing:TEST_RUN_STARTED",
      "tests_passed:TEST_RUN_PASSED",
      "merged:MERGED"
    ])
    expect(s.history()).toEqual(["Change one (#1)"])
    return undefined
  }
)

export const mergedOutside = define(
  "a PR merged outside the queue while it waits leaves the queue as merged (MANUAL_MERGE), not merged again",
  { concurrency: 1 },
  async (s) => {
    s.createPr(1)
    const head2 = s.createPr(2)
    await s.submit(1)
    await s.submit(2)
    const a1 = await s.waitRun(1)
    expect((await s.pr(2)).state).toBe("pending")
    // #2 lands by hand while it waits: main moves to its head
    s.repo.pushSha(head2)
    const merged = await s.waitState(2, "merged")
    expect(merged.verifiedByTestRun).toBeNull()
    expect((await reasons(s, 2)).at(-1)).toBe("merged:MANUAL_MERGE")
    // #1 is tested again on the new tip and lands on top of it; #2 is never merged again
    const r1 = await s.waitRun(1, [a1.runId])
    expect(s.files(r1.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt"])
    await s.ciPass(1, [a1.runId])
    await s.waitState(1, "merged")
    expect(s.history()).toEqual(["PR #2", "PR #1 (#1)"])
    // its head is in main: a resubmission is refused
    await s.fails("submitPullRequest", { pr: { number: 2 } }, 409, "PR_ALREADY_MERGED")
    expect(await s.testingCount(2)).toBe(0)
    return { outside: [head2] }
  }
)

/** Every scenario, in the order engine.test.ts runs them. */
export const queueScenarios: ReadonlyArray<QueueScenario> = [
  allPass,
  failureAtHead,
  failureInMiddle,
  twoFailures,
  mergeConflict,
  priority,
  resubmitAndDeletedRef,
  forcePush,
  passedRunWaiting,
  urgent,
  cancelInMiddle,
  restart,
  restartAfterFailure,
  restartOfFailedRun,
  pausedThenResumed,
  draining,
  directMerge,
  mergeCommit,
  squash,
  rebase,
  outsidePush,
  trunkConfig,
  noRequiredStatuses,
  manySubmissions,
  deleteQueueNotEmpty,
  resubmitMerged,
  mergedOutside
]
