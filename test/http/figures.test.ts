/**
 * The queue's figures are right and agree (issue #33): every restart counts (an automatic one too), by cause; depth
 * and testing slots are a bucket's most and mean, not a sample at its end; the home page's median time in queue is the
 * health page's, and its depth is /v1/getMergeQueueMetrics' `mq_depth_current`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { openScenario } from "../support/scenario.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 90_000

interface Point {
  readonly merged: number
  readonly timeInQueueP50: number | null
  readonly restartsPerMerge: number | null
  readonly restartsByCause?: Record<string, number>
  readonly depth: number
  readonly depthMean?: number
  readonly slotsUsed: number
  readonly slotsMean?: number
}

for (const db of databases) {
  describe(`queue figures (${db})`, () => {
    let server: TestServer
    let root: string
    beforeAll(async () => {
      root = tempDir("greenline-figures-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100 })
    })
    afterAll(async () => {
      await server.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test(
      "restarts by cause, depth and slots as most and mean, one median on the home and health pages",
      async () => {
        const name = `figures-${db}`
        const s = await openScenario(server, root, { name, concurrency: 2 })
        try {
          // #2 is tested on top of #1; #1 fails, so #2 is restarted (automatically) and merges; #3 merges
          for (const n of [1, 2, 3]) s.createPr(n)
          await s.submit(1)
          await s.submit(2)
          await s.waitState(2, "testing")
          await s.ciFail(1)
          await s.waitState(1, "failed")
          await s.ciPass(2)
          await s.waitState(2, "merged")
          await s.submit(3)
          await s.ciPass(3)
          await s.waitState(3, "merged")

          const health = await s.ok<{ points: ReadonlyArray<Point> }>("getQueueHealth", { days: 1, bucket: "hour" })
          const busy = health.points.filter((p) => p.merged > 0)
          const merged = busy.reduce((n, p) => n + p.merged, 0)
          expect(merged).toBe(2)
          // the automatic restart of #2 counts, with its cause
          const restarts = busy.reduce((n, p) => n + (p.restartsPerMerge ?? 0) * p.merged, 0)
          expect(restarts).toBe(1)
          const causes: Record<string, number> = {}
          for (const p of busy)
            for (const [c, n] of Object.entries(p.restartsByCause ?? {})) causes[c] = (causes[c] ?? 0) + n
          expect(causes).toEqual({ PREREQUISITE_MERGE_ITEM_FAILED: 1 })
          // the queue is empty now, but two PRs were in it at once, tested in two slots at once
          const last = health.points.at(-1)!
          expect(Math.max(...health.points.map((p) => p.depth))).toBeGreaterThanOrEqual(2)
          expect(Math.max(...health.points.map((p) => p.slotsUsed))).toBe(2)
          expect(last.depthMean).toBeGreaterThan(0)
          expect(last.slotsMean).toBeGreaterThan(0)

          // the home page's median is the health page's (one bucket; across two, between theirs)
          const home = await s.ok<{
            queues: ReadonlyArray<{
              repo: { name: string }
              p50TimeInQueueSeconds: number | null
              waiting: number
              testing: number
            }>
          }>("listQueues", {})
          const mine = home.queues.find((q) => q.repo.name === name)!
          const medians = busy.map((p) => Math.round(p.timeInQueueP50!))
          expect(mine.p50TimeInQueueSeconds).toBeGreaterThanOrEqual(Math.min(...medians))
          expect(mine.p50TimeInQueueSeconds).toBeLessThanOrEqual(Math.max(...medians))
          if (busy.length === 1) expect(mine.p50TimeInQueueSeconds).toBe(medians[0]!)

          // depth: the home page's waiting + testing is /metrics' mq_depth_current (paused: two waiting)
          await s.updateQueue({ state: "paused" })
          for (const n of [4, 5]) {
            s.createPr(n)
            await s.submit(n)
          }
          const again = await s.ok<typeof home>("listQueues", {})
          const q = again.queues.find((x) => x.repo.name === name)!
          const scrape = await fetch(`${server.url}/v1/getMergeQueueMetrics`, {
            headers: { authorization: `Bearer ${server.token}` }
          })
          const text = await scrape.text()
          const line = text
            .split("\n")
            .find((l) => l.startsWith("mq_depth_current{") && l.includes(`repo="acme/${name}"`))
          expect(Number(line?.split(" ").at(-1))).toBe(q.waiting + q.testing)
          expect(q.waiting + q.testing).toBe(2)
        } finally {
          await s.close()
        }
      },
      TIMEOUT
    )
  })
}
