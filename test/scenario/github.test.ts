/**
 * The engine's scenarios on the GitHub provider, against the simulated GitHub (REST + webhooks, CI posting commit
 * statuses to GitHub), and what is GitHub's own: reconciliation when webhooks are lost. Every scenario ends with the
 * one-promise check, and every request Greenline sends and every answer and webhook of the simulator must match
 * GitHub's OpenAPI description. The same scenarios on the local Git provider, with more checks, are in
 * engine.test.ts; they are not run here a second time.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import {
  type GitHubTestServer,
  openGitHubScenario,
  SCENARIO_AUTHOR,
  startGitHubTestServer
} from "../support/github/scenarioGitHub.ts"
import type { Scenario, ScenarioOptions } from "../support/scenario.ts"

const TIMEOUT = 180_000
let gh: GitHubTestServer
let counter = 0

beforeAll(async () => {
  gh = await startGitHubTestServer("pglite", { reconcileMs: 500 })
}, 120_000)

afterAll(async () => {
  await gh?.close()
})

/** Runs `body` on a fresh repository and queue, then checks the one promise and GitHub's description. */
const scenario = async (
  options: Omit<ScenarioOptions, "name">,
  body: (s: Scenario) => Promise<{ outside?: string[] } | undefined>
) => {
  const name = `s${++counter}`
  const s = await openGitHubScenario(gh, { ...options, name })
  try {
    const exempt = await body(s)
    await s.checkOnePromise(exempt ?? {})
    await gh.sim.settled()
    if (process.env.SIM_DEBUG) {
      // what Greenline asked GitHub for, and what GitHub sent it
      const counts = new Map<string, number>()
      for (const r of gh.sim.requests())
        counts.set(`${r.route} ${r.status}`, (counts.get(`${r.route} ${r.status}`) ?? 0) + 1)
      console.log([...counts].sort((a, b) => b[1] - a[1]))
      console.log(gh.sim.deliveries().map((d) => `${d.event}.${d.action ?? ""} ${d.outcome}`))
    }
    expect(gh.sim.violations()).toEqual([])
  } finally {
    s.close()
  }
}

const reasons = async (s: Scenario, n: number) => (await s.timeline(n)).map((t) => `${t.state}:${t.reason}`)
const lsTree = (s: Scenario, sha: string) => s.repo.git("ls-tree", "--name-only", "-r", sha).split("\n")

describe("merge queue scenarios on the simulated GitHub", () => {
  test(
    "all pass: the chain lands in order, one commit per PR",
    async () => {
      await scenario({ concurrency: 3 }, async (s) => {
        for (const n of [1, 2, 3]) s.createPr(n, { title: `Add ${n}` })
        for (const n of [1, 2, 3]) await s.submit(n)
        const runs = new Map<number, Awaited<ReturnType<Scenario["waitRun"]>>>()
        for (const n of [1, 2, 3]) runs.set(n, await s.waitRun(n))
        expect(lsTree(s, runs.get(1)!.sha)).toEqual(["README.md", "pr-1.txt"])
        expect(lsTree(s, runs.get(3)!.sha)).toEqual(["README.md", "pr-1.txt", "pr-2.txt", "pr-3.txt"])
        await s.ciPass(3)
        await s.ciPass(2)
        await s.waitState(3, "tests_passed")
        await s.stays(async () => s.mainSha() === s.initialSha, 300, "main untouched before #1 passes")
        await s.ciPass(1)
        for (const n of [1, 2, 3]) await s.waitState(n, "merged")
        expect(s.history()).toEqual(["Add 1 (#1)", "Add 2 (#2)", "Add 3 (#3)"])
        for (const n of [1, 2, 3])
          expect(await reasons(s, n)).toEqual([
            "pending:SUBMITTED",
            "testing:TEST_RUN_STARTED",
            "tests_passed:TEST_RUN_PASSED",
            "merged:MERGED"
          ])
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "failure in the middle: only the runs containing it are rebuilt",
    async () => {
      await scenario({ concurrency: 4 }, async (s) => {
        const prs = [1, 2, 3, 4]
        for (const n of prs) s.createPr(n)
        for (const n of prs) await s.submit(n)
        const first = new Map<number, string>()
        for (const n of prs) first.set(n, (await s.waitRun(n)).runId)
        await s.ciFail(2)
        await s.waitState(2, "pending_failure")
        const r3 = await s.waitRun(3, [first.get(3)!])
        const r4 = await s.waitRun(4, [first.get(4)!])
        expect(lsTree(s, r4.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt", "pr-4.txt"])
        expect((await s.pr(1)).testRunId).toBe(first.get(1)!)
        await s.ciPass(1)
        await s.waitState(2, "failed")
        await s.ciPass(
          3,
          [r3.runId].filter((id) => id !== r3.runId)
        )
        await s.ciPass(4)
        for (const n of [1, 3, 4]) await s.waitState(n, "merged")
        expect((await reasons(s, 2)).at(-1)).toBe("failed:TEST_RUN_REQUIRED_STATUS_FAILED")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)", "PR #4 (#4)"])
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "merge conflict: the conflicting PR fails with START_TEST_RUN_MERGE_CONFLICT",
    async () => {
      await scenario({ concurrency: 2 }, async (s) => {
        s.createPr(1, { files: { "README.md": "one\n", "pr-1.txt": "1\n" } })
        s.createPr(2, { files: { "README.md": "two\n", "pr-2.txt": "2\n" } })
        s.createPr(3)
        for (const n of [1, 2, 3]) await s.submit(n)
        await s.waitRun(1)
        const r3 = await s.waitRun(3)
        expect(lsTree(s, r3.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
        await s.ciPass(1)
        await s.ciPass(3)
        await s.waitState(2, "failed")
        await s.waitState(3, "merged")
        expect((await reasons(s, 2)).at(-1)).toBe("failed:START_TEST_RUN_MERGE_CONFLICT")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)"])
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "priority: high goes ahead of pending entries",
    async () => {
      await scenario({ concurrency: 1 }, async (s) => {
        for (const n of [1, 2, 3]) s.createPr(n)
        await s.submit(1)
        await s.waitRun(1)
        await s.submit(2)
        await s.submit(3, { priority: "high" })
        await s.until("#3 ahead of #2", async () => (await s.pr(3)).position === 2 || undefined)
        for (const n of [1, 3, 2]) {
          await s.ciPass(n)
          await s.waitState(n, "merged")
        }
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)", "PR #2 (#2)"])
        expect(await s.testingCount(1)).toBe(1)
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "cancel in the middle (a /trunk cancel comment): the runs behind are rebuilt without it",
    async () => {
      await scenario({ concurrency: 3 }, async (s) => {
        for (const n of [1, 2, 3]) s.createPr(n)
        for (const n of [1, 2, 3]) await s.submit(n)
        const first3 = (await s.waitRun(3)).runId
        await s.waitRun(2)
        await gh.sim.comment(
          SCENARIO_AUTHOR,
          { owner: s.key.repo.owner, name: s.key.repo.name, number: 2 },
          "/trunk cancel"
        )
        await s.waitState(2, "cancelled")
        const r3 = await s.waitRun(3, [first3])
        expect(lsTree(s, r3.sha)).toEqual(["README.md", "pr-1.txt", "pr-3.txt"])
        await s.ciPass(1)
        await s.ciPass(3)
        await s.waitState(3, "merged")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #3 (#3)"])
        const comments = gh.sim.comments({ owner: s.key.repo.owner, name: s.key.repo.name, number: 2 })
        const command = comments.find((c) => c.body === "/trunk cancel")
        expect(command?.reactions.length ?? 0).toBeGreaterThan(0)
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "an outside push to main restarts the runs built on the old tip",
    async () => {
      let outside = ""
      await scenario({ concurrency: 2 }, async (s) => {
        for (const n of [1, 2]) s.createPr(n)
        await s.submit(1)
        await s.submit(2)
        const a1 = await s.waitRun(1)
        const a2 = await s.waitRun(2)
        outside = s.repo.pushToMain({ "outside.txt": "x\n" }, { message: "Outside change" })
        const r1 = await s.waitRun(1, [a1.runId])
        const r2 = await s.waitRun(2, [a2.runId])
        expect(lsTree(s, r2.sha)).toEqual(["README.md", "outside.txt", "pr-1.txt", "pr-2.txt"])
        expect(await reasons(s, 1)).toContain("pending:MANUAL_PUSH_TO_TARGET_BRANCH")
        await s.ciPass(
          1,
          [a1.runId].filter((id) => id !== r1.runId)
        )
        await s.ciPass(2, [a2.runId])
        await s.waitState(1, "merged")
        await s.waitState(2, "merged")
        expect(s.history()).toEqual(["Outside change", "PR #1 (#1)", "PR #2 (#2)"])
        return { outside: [outside] }
      })
    },
    TIMEOUT
  )

  test(
    "a force-push to a queued PR cancels it (PR_PUSHED_TO)",
    async () => {
      await scenario({ concurrency: 2 }, async (s) => {
        for (const n of [1, 2]) s.createPr(n)
        await s.submit(1)
        await s.submit(2)
        await s.waitRun(1)
        const a2 = await s.waitRun(2)
        s.repo.forcePushPr(1, { files: { "pr-1.txt": "changed\n" } })
        await s.waitState(1, "cancelled")
        expect((await reasons(s, 1)).at(-1)).toBe("cancelled:PR_PUSHED_TO")
        const r2 = await s.waitRun(2, [a2.runId])
        expect(lsTree(s, r2.sha)).toEqual(["README.md", "pr-2.txt"])
        await s.ciPass(2)
        await s.waitState(2, "merged")
        expect(s.history()).toEqual(["PR #2 (#2)"])
        return undefined
      })
    },
    TIMEOUT
  )
})

describe("reconciliation on the simulated GitHub", () => {
  test(
    "a dropped webhook delays the queue, never stalls it: CI's status is read back from GitHub",
    async () => {
      await scenario({ concurrency: 2 }, async (s) => {
        for (const n of [1, 2]) s.createPr(n)
        await s.submit(1)
        await s.submit(2)
        const r1 = await s.waitRun(1)
        const r2 = await s.waitRun(2)
        await gh.sim.settled()
        const before = gh.sim.deliveries().length
        // the status webhooks of both runs are lost
        gh.sim.dropNextDeliveries(2)
        await s.report(r1.sha, "success")
        await s.report(r2.sha, "success")
        const dropped = gh.sim.deliveries().slice(before)
        expect(dropped.map((d) => `${d.event} ${d.outcome}`)).toEqual(["status dropped", "status dropped"])
        await s.waitState(1, "merged")
        await s.waitState(2, "merged")
        expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "a dropped synchronize webhook: the force-push is still found",
    async () => {
      await scenario({ concurrency: 2 }, async (s) => {
        for (const n of [1, 2]) s.createPr(n)
        await s.submit(1)
        await s.submit(2)
        await s.waitRun(1)
        const a2 = await s.waitRun(2)
        await gh.sim.settled()
        gh.sim.dropNextDeliveries(2) // the push and the pull_request synchronize
        s.repo.forcePushPr(1, { files: { "pr-1.txt": "changed\n" } })
        await gh.sim.settled()
        await s.waitState(1, "cancelled")
        const r2 = await s.waitRun(2, [a2.runId])
        await s.ciPass(
          2,
          [a2.runId].filter((id) => id !== r2.runId)
        )
        await s.waitState(2, "merged")
        expect(s.history()).toEqual(["PR #2 (#2)"])
        return undefined
      })
    },
    TIMEOUT
  )
})
