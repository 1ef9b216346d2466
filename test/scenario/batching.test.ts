/**
 * End-to-end scenarios of batching, bisection and optimistic merging (semantics.md §4–5): the real server over real
 * bare repositories, CI played by the test. One PGlite server for the file; one repository and one queue per scenario;
 * every scenario ends with the one promise (semantics.md §1) checked on the repository.
 *
 * A batch smaller than `batchingMinSize` starts once its oldest entry waited `batchingMaxWaitTimeMinutes` (at least
 * one minute, on the real clock): covered by the planner's unit tests (test/unit/planner-batch.test.ts, "a smaller
 * batch waits for batchingMaxWaitTimeMinutes"), not here.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { openScenario, type RunView, type Scenario, type ScenarioOptions } from "../support/scenario.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 60_000
let server: TestServer
let root: string
let counter = 0

beforeAll(async () => {
  root = tempDir("greenline-batching-git-")
  server = await startTestServer({ db: "pglite", gitRoot: root, gitPollMs: 100 })
})

afterAll(async () => {
  await server.close()
  fs.rmSync(root, { recursive: true, force: true })
})

const scenario = async (options: Omit<ScenarioOptions, "name">, body: (s: Scenario) => Promise<void>) => {
  const s = await openScenario(server, root, { ...options, name: `b${++counter}` })
  try {
    await body(s)
    await s.checkOnePromise()
  } finally {
    await s.close()
  }
}

const reasons = async (s: Scenario, n: number) => (await s.timeline(n)).map((t) => `${t.state}:${t.reason}`)
const tested = (run: RunView) => run.details.testedPullRequests.map((p) => p.prNumber)
/** CI verdict: a run fails when its test branch contains a bad PR's file */
const failsWith =
  (...bad: number[]) =>
  (_run: RunView, files: ReadonlyArray<string>) =>
    bad.some((n) => files.includes(`pr-${n}.txt`)) ? ("failure" as const) : ("success" as const)

describe("batching and bisection", () => {
  test(
    "a batch of 3 passes and lands as 3 commits, in order",
    async () => {
      await scenario({ concurrency: 1, config: { batch: true, batchingMinSize: 3 } }, async (s) => {
        for (const n of [1, 2, 3]) s.createPr(n, { title: `Add ${n}` })
        for (const n of [1, 2, 3]) await s.submit(n)
        const run = await s.waitRun(1)
        expect(tested(run)).toEqual([1, 2, 3])
        for (const n of [2, 3]) expect((await s.pr(n)).testRunId).toBe(run.runId)
        expect(s.files(run.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt"])
        await s.reportRun(run.runId, "success")
        for (const n of [1, 2, 3]) await s.waitState(n, "merged")
        expect(s.history()).toEqual(["Add 1 (#1)", "Add 2 (#2)", "Add 3 (#3)"])
        expect(s.mainSha()).toBe(run.sha)
        for (const n of [1, 2, 3]) expect((await s.pr(n)).verifiedByTestRun).toBe(run.runId)
        expect(s.runsSeen().size).toBe(1)
      })
    },
    TIMEOUT
  )

  test(
    "a batch of 4 with one bad PR is bisected: the good three land, the bad one fails",
    async () => {
      await scenario({ concurrency: 1, config: { batch: true, batchingMinSize: 4 } }, async (s) => {
        for (const n of [1, 2, 3, 4]) s.createPr(n)
        for (const n of [1, 2, 3, 4]) await s.submit(n)
        const runs = await s.autoCi([1, 2, 3, 4], failsWith(2))
        expect(tested(runs[0]!)).toEqual([1, 2, 3, 4])
        expect(runs[0]!.runId).toMatch(/^[0-9a-f-]{36}$/)
        const root = runs[0]!.runId
        const bisections = runs.slice(1)
        expect(bisections.length).toBeGreaterThanOrEqual(2)
        for (const r of bisections) expect(r.runId).toMatch(new RegExp(`^${root}-bisection-\\d+$`))
        // halves [1,2] then [1],[2] (the second containing the first) — then [3,4]
        expect(bisections.map(tested)).toEqual([[1, 2], [1], [2], [3, 4]])
        await s.waitState(2, "failed")
        for (const n of [1, 3, 4]) await s.waitState(n, "merged")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)", "PR #4 (#4)"])
        // the testing details resolve the bisection ids and the parent id
        const parent = await s.details(root)
        expect(parent.status).toBe("failed")
        expect(parent.testedPullRequests.map((p) => p.prNumber)).toEqual([1, 2, 3, 4])
        for (const r of bisections) {
          const d = await s.details(r.runId)
          expect(d.testBranch).toContain(r.runId)
          expect(["succeeded", "failed"]).toContain(d.status)
        }
        expect(await reasons(s, 2)).toContain("pending:BISECTION_REQUIRED")
        expect((await reasons(s, 2)).at(-1)).toBe("failed:TEST_RUN_REQUIRED_STATUS_FAILED")
        expect((await s.pr(4)).verifiedByTestRun).toBe(bisections.at(-1)!.runId)
      })
    },
    TIMEOUT
  )

  test(
    "a noBatch PR runs alone",
    async () => {
      await scenario({ concurrency: 2, config: { batch: true, batchingMinSize: 2 } }, async (s) => {
        for (const n of [1, 2, 3]) s.createPr(n)
        await s.submit(1, { noBatch: true })
        await s.submit(2)
        await s.submit(3)
        const r1 = await s.waitRun(1)
        const r2 = await s.waitRun(2)
        expect(tested(r1)).toEqual([1])
        expect(tested(r2)).toEqual([2, 3])
        expect((await s.ok<{ noBatch: boolean }>("getSubmittedPullRequest", { pr: { number: 1 } })).noBatch).toBe(true)
        // the batch is chained on top of the noBatch PR
        expect(s.files(r2.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt"])
        await s.reportRun(r2.runId, "success")
        await s.reportRun(r1.runId, "success")
        for (const n of [1, 2, 3]) await s.waitState(n, "merged")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)", "PR #3 (#3)"])
      })
    },
    TIMEOUT
  )

  test(
    "optimistic merging with a flaky failure: PR 2's run containing PR 1 passes, both land",
    async () => {
      await scenario(
        { concurrency: 2, config: { canOptimisticallyMerge: true, pendingFailureDepth: 1 } },
        async (s) => {
          for (const n of [1, 2]) s.createPr(n)
          for (const n of [1, 2]) await s.submit(n)
          const r1 = await s.waitRun(1)
          const r2 = await s.waitRun(2)
          expect(s.files(r2.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt"])
          await s.ciFail(1)
          await s.waitState(1, "pending_failure")
          // PR 2's run is held (pendingFailureDepth 1), not rebuilt without PR 1
          await s.holds("the run of #2 keeps running", async () => (await s.pr(2)).testRunId === r2.runId)
          await s.ciPass(2)
          await s.waitState(1, "merged")
          await s.waitState(2, "merged")
          expect((await s.pr(1)).verifiedByTestRun).toBe(r2.runId)
          expect((await s.pr(2)).verifiedByTestRun).toBe(r2.runId)
          expect((await s.details(r1.runId)).status).toBe("failed")
          expect(s.mainSha()).toBe(r2.sha)
          expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
          expect(await s.testingCount(1)).toBe(1)
        }
      )
    },
    TIMEOUT
  )

  test(
    "bisection_skip_redundant_tests saves runs compared with off on the same failure pattern",
    async () => {
      const count = async (optimizationMode: string) => {
        let runs: ReadonlyArray<RunView> = []
        await scenario({ concurrency: 1, config: { batch: true, batchingMinSize: 4, optimizationMode } }, async (s) => {
          for (const n of [1, 2, 3, 4]) s.createPr(n)
          for (const n of [1, 2, 3, 4]) await s.submit(n)
          runs = await s.autoCi([1, 2, 3, 4], failsWith(4))
          await s.waitState(4, "failed")
          for (const n of [1, 2, 3]) await s.waitState(n, "merged")
          expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)", "PR #3 (#3)"])
          expect(new Set(runs.map((r) => r.runId)).size).toBe(s.runsSeen().size)
        })
        return runs
      }
      const off = await count("off")
      const skip = await count("bisection_skip_redundant_tests")
      // off: [1,2,3,4] fails; [1,2] passes; [3,4] fails; [3] passes; [4] fails
      expect(off.map(tested)).toEqual([[1, 2, 3, 4], [1, 2], [3, 4], [3], [4]])
      // skip: [3,4] on the new tip is the failed run's content again, and so is [4]: neither runs
      expect(skip.map(tested)).toEqual([[1, 2, 3, 4], [1, 2], [3]])
      expect(off.length - skip.length).toBe(2)
    },
    TIMEOUT
  )
})
