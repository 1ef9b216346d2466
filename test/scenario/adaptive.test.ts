/**
 * Adaptive mode and estimates end to end (issue #18): the real server over a real bare repository, CI played by the
 * test. A queue whose failure rate jumps stops batching; estimates are present and sane once it has finished runs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { openScenario, type RunView } from "../support/scenario.ts"
import { pgUrl, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 120_000
/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set */
const DATABASES: Array<"pglite" | "postgres"> = pgUrl ? ["pglite", "postgres"] : ["pglite"]

const tested = (run: RunView) => run.details.testedPullRequests.map((p) => p.prNumber)
const failsWith =
  (...bad: number[]) =>
  (_run: RunView, files: ReadonlyArray<string>) =>
    bad.some((n) => files.includes(`pr-${n}.txt`)) ? ("failure" as const) : ("success" as const)

interface QueueView {
  readonly adaptive: boolean
  readonly adaptiveChoice: { depth: number; batchSize: number; observedFailureRate: number; reason: string } | null
  readonly enqueuedPullRequests: ReadonlyArray<{
    prNumber: number
    estimatedTestingStartAt: string | null
    estimatedMergeAt: string | null
    estimateUnavailableReason: string | null
  }>
}

describe.each(DATABASES)("adaptive mode (%s)", (db) => {
  let server: TestServer
  let root: string

  beforeAll(async () => {
    root = tempDir("greenline-adaptive-git-")
    server = await startTestServer({ db, gitRoot: root, gitPollMs: 100 })
  }, 60_000)

  afterAll(async () => {
    await server.close()
    fs.rmSync(root, { recursive: true, force: true })
  }, 60_000)

  test(
    "a queue whose failure rate jumps shrinks its batches; estimates are present and sane",
    async () => {
      const s = await openScenario(server, root, {
        name: "adaptive1",
        concurrency: 4,
        config: { adaptive: true, batch: true, batchingMinSize: 4, bisectionConcurrency: 4 }
      })
      try {
        const view = () => s.ok<QueueView>("getQueue", s.key)
        expect((await view()).adaptive).toBe(true)

        // calm: six good PRs, tested in batches
        for (let n = 1; n <= 6; n++) s.createPr(n)
        for (let n = 1; n <= 6; n++) await s.submit(n)
        const calm = await s.autoCi([1, 2, 3, 4, 5, 6], () => "success")
        expect(Math.max(...calm.map((r) => tested(r).length))).toBeGreaterThan(1)
        const after = (await view()).adaptiveChoice
        expect(after).not.toBeNull()
        expect(after!.batchSize).toBeGreaterThan(1)

        // estimates: the queue has finished runs now
        for (let n = 7; n <= 12; n++) s.createPr(n)
        for (let n = 7; n <= 12; n++) await s.submit(n)
        const before = Date.now()
        const queued = (await view()).enqueuedPullRequests
        expect(queued.length).toBeGreaterThan(0)
        let previous = 0
        for (const e of queued) {
          expect(e.estimateUnavailableReason).toBeNull()
          const merge = Date.parse(e.estimatedMergeAt!)
          const start = Date.parse(e.estimatedTestingStartAt!)
          // in the near future (this CI answers within seconds), in queue order, testing before merging
          expect(merge).toBeGreaterThan(before - 60_000)
          expect(merge).toBeLessThan(before + 3_600_000)
          expect(start).toBeLessThanOrEqual(merge)
          expect(merge).toBeGreaterThanOrEqual(previous)
          previous = merge
        }
        const one = await s.ok<{ estimatedMergeAt: string | null; timeBreakdown: { testingMs: number } }>(
          "getSubmittedPullRequest",
          { ...s.key, pr: { number: 7 } }
        )
        expect(one.estimatedMergeAt).not.toBeNull()
        expect(one.timeBreakdown.testingMs).toBeGreaterThanOrEqual(0)

        // the failure rate jumps: half of the next PRs are bad
        await s.autoCi([7, 8, 9, 10, 11, 12], failsWith(8, 10, 12))
        for (const n of [8, 10, 12]) expect((await s.pr(n)).state).toBe("failed")
        const jumped = (await view()).adaptiveChoice!
        expect(jumped.batchSize).toBe(1)
        expect(jumped.observedFailureRate).toBeGreaterThan(0.1)
        expect(jumped.reason).toContain("no batches")

        // new PRs are tested one per run
        for (let n = 13; n <= 14; n++) s.createPr(n)
        for (let n = 13; n <= 14; n++) await s.submit(n)
        const single = await s.autoCi([13, 14], () => "success")
        for (const r of single) expect(tested(r)).toHaveLength(1)
        const merged7 = await s.ok<{ timeBreakdown: { testingMs: number; waitingForSlotMs: number } }>(
          "getSubmittedPullRequest",
          { ...s.key, pr: { number: 7 } }
        )
        expect(merged7.timeBreakdown.testingMs).toBeGreaterThan(0)
        await s.checkOnePromise()
      } finally {
        await s.close()
      }
    },
    TIMEOUT
  )
})
