/**
 * End-to-end scenarios of parallel mode (semantics.md §6): the real server over real bare repositories, CI played by
 * the test. One PGlite server for the file; one repository and one queue per scenario. Every scenario ends with the
 * one promise for lanes (semantics.md §1): main moves to a lane's tested change combined with the changes other lanes
 * landed, so `checkLanePromise` checks each landed commit's change and the run that verified it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { openScenario, type RunView, type Scenario, type ScenarioOptions } from "../support/scenario.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 60_000
let server: TestServer
let root: string
let counter = 0

beforeAll(async () => {
  root = tempDir("greenline-parallel-git-")
  server = await startTestServer({ db: "pglite", gitRoot: root, gitPollMs: 100 })
})

afterAll(async () => {
  await server.close()
  fs.rmSync(root, { recursive: true, force: true })
})

const scenario = async (options: Omit<ScenarioOptions, "name">, body: (s: Scenario) => Promise<void>) => {
  const s = await openScenario(server, root, {
    ...options,
    config: { mode: "parallel", ...(options.config ?? {}) },
    name: `p${++counter}`
  })
  try {
    await body(s)
    await s.checkLanePromise()
  } finally {
    await s.close()
  }
}

interface Readiness {
  readonly hasImpactedTargets: boolean
  readonly requiresImpactedTargets: boolean
}
interface ParallelDetails {
  readonly impactedTargets: ReadonlyArray<string>
  readonly impactedTargetsForTestedPrs: ReadonlyArray<string>
  readonly dependentPrs: ReadonlyArray<number>
}

const reasons = async (s: Scenario, n: number) => (await s.timeline(n)).map((t) => `${t.state}:${t.reason}`)
const readiness = async (s: Scenario, n: number) =>
  (await s.ok<{ readiness: Readiness }>("getSubmittedPullRequest", { pr: { number: n } })).readiness
const enqueued = async (s: Scenario) =>
  (await s.ok<{ enqueuedPullRequests: Array<{ prNumber: number }> }>("getQueue")).enqueuedPullRequests.map(
    (e) => e.prNumber
  )
const parallelDetails = (s: Scenario, runId: string) =>
  s.ok<ParallelDetails>("getMergeQueueTestingDetails", { testRunId: runId })
const sorted = (xs: ReadonlyArray<string>) => [...xs].sort()

/** A[frontend], B[backend], C[frontend, backend], D[docs], submitted in that order; targets uploaded first. */
const workedExample = async (s: Scenario) => {
  const targets: Record<number, string[]> = { 1: ["frontend"], 2: ["backend"], 3: ["frontend", "backend"], 4: ["docs"] }
  for (const n of [1, 2, 3, 4]) s.createPr(n, { title: `PR ${"ABCD"[n - 1]}` })
  for (const n of [1, 2, 3, 4]) await s.setTargets(n, targets[n]!)
  for (const n of [1, 2, 3, 4]) await s.submit(n)
  const runs = new Map<number, RunView>()
  for (const n of [1, 2, 3, 4]) runs.set(n, await s.waitRun(n))
  // A, B and D at the same time, each alone on the tip
  for (const n of [1, 2, 4]) {
    const r = runs.get(n)!
    expect(s.files(r.sha)).toEqual(["README.md", `pr-${n}.txt`])
    expect(r.details.dependentPrs).toEqual([])
    expect(r.details.testedPullRequests.map((p) => p.prNumber)).toEqual([n])
    expect((await s.pr(n)).state).toBe("testing")
  }
  // C on top of A and B
  const c = runs.get(3)!
  expect(s.files(c.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt"])
  expect([...c.details.dependentPrs].sort()).toEqual([1, 2])
  expect(c.details.testedPullRequests.map((p) => p.prNumber)).toEqual([3])
  const d = await parallelDetails(s, c.runId)
  expect(sorted(d.impactedTargets)).toEqual(["backend", "frontend"])
  expect(sorted(d.impactedTargetsForTestedPrs)).toEqual(["backend", "frontend"])
  expect((await parallelDetails(s, runs.get(4)!.runId)).impactedTargets).toEqual(["docs"])
  return runs
}

describe("parallel mode", () => {
  test(
    "the worked example: A, B and D test at once, C on top of A and B; all four land",
    async () => {
      await scenario({ concurrency: 4 }, async (s) => {
        const runs = await workedExample(s)
        // D's lane lands first, on its own; then A (combined with D by the Git host), B, C
        await s.ciPass(4)
        await s.waitState(4, "merged")
        await s.ciPass(3)
        await s.waitState(3, "tests_passed")
        await s.ciPass(1)
        await s.ciPass(2)
        for (const n of [1, 2, 3]) await s.waitState(n, "merged")
        expect(s.history()).toEqual(["PR D (#4)", "PR A (#1)", "PR B (#2)", "PR C (#3)"])
        expect(s.files(s.mainSha())).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt", "pr-4.txt"])
        for (const n of [1, 2, 3, 4]) {
          expect((await s.pr(n)).verifiedByTestRun).toBe(runs.get(n)!.runId)
          expect(await s.testingCount(n)).toBe(1)
        }
      })
    },
    TIMEOUT
  )

  test(
    "lists of 150,000 targets: lanes from the one shared name, the planner state keeps no list",
    async () => {
      await scenario({ concurrency: 3 }, async (s) => {
        const many = (pkg: string) => Array.from({ length: 150_000 }, (_, i) => `//${pkg}/module${i % 101}:t${i}`)
        const a = many("a")
        const b = many("b")
        // C shares a single name with A, at the end of its list
        const c = [...many("c"), a[a.length - 1]!]
        for (const n of [1, 2, 3]) s.createPr(n, { title: `PR ${n}` })
        await s.setTargets(1, a)
        await s.setTargets(2, b)
        await s.setTargets(3, c)
        for (const n of [1, 2, 3]) await s.submit(n)
        const r1 = await s.waitRun(1)
        const r2 = await s.waitRun(2)
        const r3 = await s.waitRun(3)
        expect(r1.details.dependentPrs).toEqual([])
        expect(r2.details.dependentPrs).toEqual([])
        expect(r3.details.dependentPrs).toEqual([1])
        expect(s.files(r3.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
        const d3 = await parallelDetails(s, r3.runId)
        expect(d3.impactedTargetsForTestedPrs).toHaveLength(150_001)
        expect(d3.impactedTargets).toHaveLength(300_000)
        const [row] = await s.server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql<{ bytes: number }>`select length(state::text) as bytes from queue_runtime`
          )
        )
        expect(Number(row!.bytes)).toBeLessThan(20_000)
        for (const n of [1, 2, 3]) await s.ciPass(n)
        for (const n of [1, 2, 3]) await s.waitState(n, "merged")
      })
    },
    TIMEOUT
  )

  test(
    "the worked example, B fails: C is rebuilt on A alone; A, C and D land",
    async () => {
      await scenario({ concurrency: 4 }, async (s) => {
        const runs = await workedExample(s)
        await s.ciFail(2)
        const c2 = await s.waitRun(3, [runs.get(3)!.runId])
        expect(s.files(c2.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
        expect(c2.details.dependentPrs).toEqual([1])
        await s.waitState(2, "failed")
        // A's and D's runs were not touched
        expect((await s.pr(1)).testRunId).toBe(runs.get(1)!.runId)
        expect((await s.pr(4)).testRunId).toBe(runs.get(4)!.runId)
        await s.ciPass(3)
        await s.ciPass(1)
        await s.ciPass(4)
        for (const n of [1, 3, 4]) await s.waitState(n, "merged")
        expect((await s.pr(3)).verifiedByTestRun).toBe(c2.runId)
        expect((await reasons(s, 2)).at(-1)).toBe("failed:TEST_RUN_REQUIRED_STATUS_FAILED")
        expect(await reasons(s, 3)).toContain("pending:PREREQUISITE_MERGE_ITEM_FAILED")
        expect(s.files(s.mainSha())).toEqual(["README.md", "pr-1.txt", "pr-3.txt", "pr-4.txt"])
      })
    },
    TIMEOUT
  )

  test(
    '"ALL" (and "IMPACTS_ALL", any case): depends on everything ahead, everything after depends on it',
    async () => {
      await scenario({ concurrency: 4 }, async (s) => {
        for (const n of [1, 2, 3, 4, 5]) s.createPr(n)
        await s.setTargets(1, ["x"])
        await s.setTargets(2, "impacts_all")
        await s.setTargets(3, ["y"])
        await s.setTargets(4, ["z"])
        await s.setTargets(5, "All")
        for (const n of [1, 2, 3, 4, 5]) await s.submit(n)
        const runs = new Map<number, RunView>()
        for (const n of [1, 2, 3, 4]) runs.set(n, await s.waitRun(n))
        expect(runs.get(1)!.details.dependentPrs).toEqual([])
        expect(runs.get(2)!.details.dependentPrs).toEqual([1])
        expect([...runs.get(3)!.details.dependentPrs].sort()).toEqual([1, 2])
        expect([...runs.get(4)!.details.dependentPrs].sort()).toEqual([1, 2])
        expect(s.files(runs.get(3)!.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt"])
        const d2 = await parallelDetails(s, runs.get(2)!.runId)
        expect(d2.impactedTargetsForTestedPrs).toEqual(["ALL"])
        expect(sorted(d2.impactedTargets)).toEqual(["ALL", "x"])
        // concurrency 4: #5 waits for a slot
        expect((await s.pr(5)).state).toBe("pending")
        await s.ciPass(1)
        await s.waitState(1, "merged")
        const r5 = await s.waitRun(5)
        // built on the tip with #1, or on the old tip while #1 was merging (then #1 is in it too)
        expect([...r5.details.dependentPrs].sort().filter((n) => n !== 1)).toEqual([2, 3, 4])
        expect(s.files(r5.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt", "pr-4.txt", "pr-5.txt"])
        for (const n of [2, 3, 4]) await s.ciPass(n)
        await s.ciPass(5)
        for (const n of [2, 3, 4, 5]) await s.waitState(n, "merged")
        // "ALL" is any case: a bad spelling is rejected
        const bad = await s.post("setImpactedTargets", {
          pr: { number: 1, sha: s.initialSha },
          impactedTargets: "everything"
        })
        expect(bad.status).toBe(400)
      })
    },
    TIMEOUT
  )

  test(
    "targets before and after submission: readiness fields; getQueue leaves not-ready entries out",
    async () => {
      await scenario({ concurrency: 2 }, async (s) => {
        for (const n of [1, 2]) s.createPr(n)
        await s.setTargets(1, ["a"])
        await s.submit(1)
        await s.submit(2)
        expect(await readiness(s, 1)).toMatchObject({ hasImpactedTargets: true, requiresImpactedTargets: true })
        expect(await readiness(s, 2)).toMatchObject({ hasImpactedTargets: false, requiresImpactedTargets: true })
        const r1 = await s.waitRun(1)
        expect((await s.pr(2)).state).toBe("not_ready")
        expect((await s.pr(2)).position).toBeNull()
        expect(await enqueued(s)).toEqual([1])
        await s.holds("#2 waits for its targets", async () => (await s.pr(2)).state === "not_ready")
        await s.setTargets(2, ["b"])
        expect(await readiness(s, 2)).toMatchObject({ hasImpactedTargets: true, requiresImpactedTargets: true })
        const r2 = await s.waitRun(2)
        expect(await enqueued(s)).toEqual([1, 2])
        expect(r2.details.dependentPrs).toEqual([])
        expect(s.files(r2.sha)).toEqual(["README.md", "pr-2.txt"])
        await s.ciPass(2)
        await s.ciPass(1)
        for (const n of [1, 2]) await s.waitState(n, "merged")
        expect(s.files(s.mainSha())).toEqual(["README.md", "pr-1.txt", "pr-2.txt"])
        expect((await s.pr(1)).verifiedByTestRun).toBe(r1.runId)
        // single mode does not ask for targets
        await s.updateQueue({ mode: "single" })
        expect(await readiness(s, 1)).toMatchObject({ requiresImpactedTargets: false })
      })
    },
    TIMEOUT
  )

  test(
    "force-push: targets of the old head do not count, targets of the new head do",
    async () => {
      await scenario({ concurrency: 2 }, async (s) => {
        const old1 = s.createPr(1)
        await s.setTargets(1, ["a"])
        const new1 = s.repo.forcePushPr(1, { files: { "pr-1.txt": "again\n" } })
        await s.submit(1)
        expect((await s.pr(1)).prSha).toBe(new1)
        expect(await readiness(s, 1)).toMatchObject({ hasImpactedTargets: false })
        await s.setTargets(1, ["a"], old1)
        await s.holds("old-head targets do not count", async () => (await s.pr(1)).state === "not_ready")
        await s.setTargets(1, ["a"], new1)
        await s.ciPass(1)
        await s.waitState(1, "merged")
        // in the queue: a push cancels the entry; resubmitted, it waits for targets of its new head
        const old2 = s.createPr(2)
        await s.setTargets(2, ["b"])
        await s.submit(2)
        const a2 = await s.waitRun(2)
        const new2 = s.repo.forcePushPr(2, { files: { "pr-2.txt": "again\n" } })
        await s.waitState(2, "cancelled")
        expect((await reasons(s, 2)).at(-1)).toBe("cancelled:PR_PUSHED_TO")
        await s.submit(2)
        expect((await s.pr(2)).state).toBe("not_ready")
        await s.setTargets(2, ["b"], old2)
        await s.holds("old-head targets do not count", async () => (await s.pr(2)).state === "not_ready")
        await s.setTargets(2, ["b"], new2)
        const b2 = await s.waitRun(2, [a2.runId])
        expect(s.repo.git("show", `${b2.sha}:pr-2.txt`)).toBe("again")
        await s.ciPass(2)
        await s.waitState(2, "merged")
      })
    },
    TIMEOUT
  )

  test(
    "a mode switch with a run in flight passes through switching_modes",
    async () => {
      await scenario({ concurrency: 2, config: { mode: "single" } }, async (s) => {
        for (const n of [1, 2]) s.createPr(n)
        await s.submit(1)
        const r1 = await s.waitRun(1)
        expect((await s.updateQueue({ mode: "parallel" })).state).toBe("switching_modes")
        const queue = () => s.ok<{ state: string; mode: string }>("getQueue")
        expect((await queue()).state).toBe("switching_modes")
        // no new run starts while switching
        await s.setTargets(2, ["b"])
        await s.submit(2)
        await s.holds(
          "nothing starts while switching",
          async () => (await s.pr(2)).state === "pending" && (await queue()).state === "switching_modes"
        )
        await s.reportRun(r1.runId, "success")
        await s.waitState(1, "merged")
        const running = await s.until("the queue running again", async () => {
          const q = await queue()
          return q.state === "running" ? q : undefined
        })
        expect(running).toMatchObject({ state: "running", mode: "parallel" })
        const r2 = await s.waitRun(2)
        expect(r2.details.dependentPrs).toEqual([])
        await s.ciPass(2)
        await s.waitState(2, "merged")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
      })
    },
    TIMEOUT
  )
})
