/**
 * Queue scenarios of queueScenarios.ts on the GitHub provider, against the simulated GitHub (REST + webhooks, CI
 * posting commit statuses to GitHub), and what is GitHub's own: `/trunk` comment commands, reconciliation when
 * webhooks are lost. Every scenario ends with the one-promise check, and every request Greenline sends and every
 * answer and webhook of the simulator must match GitHub's OpenAPI description. engine.test.ts runs all the queue
 * scenarios on the local Git provider.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import {
  type GitHubTestServer,
  openGitHubScenario,
  SCENARIO_AUTHOR,
  startGitHubTestServer
} from "../support/github/scenarioGitHub.ts"
import type { ScenarioOptions } from "../support/scenario.ts"
import {
  allPass,
  cancelInMiddle,
  failureInMiddle,
  forcePush,
  mergeConflict,
  mergedOutside,
  outsidePush,
  play,
  priority,
  type QueueScenario,
  reasons,
  resubmitMerged
} from "./queueScenarios.ts"

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
const scenario = async (options: Omit<ScenarioOptions, "name">, body: QueueScenario["body"]) => {
  const name = `s${++counter}`
  const s = await openGitHubScenario(gh, { ...options, name })
  await play(s, body, async () => {
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
  })
}

/** The queue scenarios whose provider part is GitHub's: building test branches, merging, pushes and closed PRs. */
const onGitHub = [
  allPass,
  failureInMiddle,
  mergeConflict,
  priority,
  cancelInMiddle,
  outsidePush,
  forcePush,
  resubmitMerged,
  mergedOutside
]

describe("merge queue scenarios on the simulated GitHub", () => {
  for (const { name, options, body } of onGitHub) test(name, () => scenario(options, body), TIMEOUT)
})

describe("comment commands on the simulated GitHub", () => {
  test(
    "a /trunk cancel comment takes the PR out of the queue (USER_REQUESTED) and gets a reaction",
    async () => {
      await scenario({ concurrency: 1 }, async (s) => {
        const pr1 = { owner: s.key.repo.owner, name: s.key.repo.name, number: 1 }
        s.createPr(1)
        await s.submit(1)
        await s.waitRun(1)
        await gh.sim.comment(SCENARIO_AUTHOR, pr1, "/trunk cancel")
        await s.waitState(1, "cancelled")
        // the state is written at once, the timeline once the runner stepped the cancel
        const last = await s.until("the cancel in the timeline", async () => {
          const reason = (await reasons(s, 1)).at(-1)
          return reason?.startsWith("cancelled:") ? reason : undefined
        })
        expect(last).toBe("cancelled:USER_REQUESTED")
        await s.until(
          "a reaction to the command",
          async () =>
            (gh.sim.comments(pr1).find((c) => c.body === "/trunk cancel")?.reactions.length ?? 0) > 0 || undefined
        )
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
