import { describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { createTestRepo } from "../support/git.ts"
import { openScenario, type Scenario } from "../support/scenario.ts"
import { freshPostgres, pgUrl, startTestServer, type TestServer, type TestServerOptions } from "../support/server.ts"

/**
 * The lease of a queue (src/queue/runner/lease.ts): when an instance finds its queue under a new fencing token (another
 * instance held it in between), it replaces its runner, and the runner it replaced must not take the new one's
 * token with it when it ends: without it wake-ups went to the lease loop, which replaced the runner again at each
 * one, killing its CI jobs every time (a runner that never made progress). The tests run the lease loop's passes
 * themselves (`server.leasePass`, through the runner probe), with its timer off: a pass of its own between a test's
 * steps would replace the runner before the test saw what it checks.
 */

/** A server on a fresh PostgreSQL database and repository, `db` a connection of the test's own to that database. */
const withServer = async (
  name: string,
  options: Partial<TestServerOptions>,
  scenario: { readonly concurrency?: number; readonly requiredStatuses?: ReadonlyArray<string> | null },
  body: (s: { server: TestServer; db: SQL; s: Scenario }) => Promise<void>
) => {
  const repo = createTestRepo({ repo: { host: "local", owner: "acme", name } })
  const pg = await freshPostgres()
  const db = new SQL(pg.url)
  // the runner idles between events (it notices a new token only when it next saves a round)
  const server = await startTestServer({
    db: "postgres",
    databaseUrl: pg.url,
    gitRoot: repo.root,
    gitPollMs: 60_000,
    leaseTimer: false,
    ...options
  })
  const s = await openScenario(server, repo.root, { name, repo, ...scenario })
  try {
    await body({ server, db, s })
  } finally {
    await s.close()
    await server.close()
    await db.close()
    await pg.drop()
    repo.cleanup()
  }
}

describe.if(pgUrl !== undefined)("queue lease (PostgreSQL)", () => {
  test("a runner replaced under a new fencing token keeps making progress", async () => {
    await withServer("lease", { ciCommand: "sleep 0.5" }, { concurrency: 2 }, async ({ server, db, s }) => {
      s.createPr(1)
      await s.submit(1)
      await s.waitState(1, "merged", 30_000)
      // another instance held the queue between two passes of this one's lease loop: the next pass finds the new
      // token and replaces the runner; the passes after it keep that runner (they replaced it again at each one)
      await db`update queue_runtime set fencing = fencing + 1`
      for (let pass = 0; pass < 3; pass++) await server.leasePass()
      s.createPr(2)
      await s.submit(2)
      await s.waitState(2, "merged", 30_000)
      // its CI ran once: the runner was not replaced again (which kills the CI jobs it started)
      const outputs = await db`select run_id from ci_outputs`
      expect(outputs.length).toBe(2)
    })
  }, 90_000)

  test("a runner that finds its lease gone stops without counting a failure, and the queue goes on", async () => {
    await withServer("lease-lost", { metricsToken: "lease-metrics-token" }, {}, async ({ server, db, s }) => {
      const restarts = async () => {
        const r = await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer lease-metrics-token" } })
        return /^greenline_queue_runner_restarts_total (\d+)/m.exec(await r.text())?.[1] ?? "0"
      }
      await s.updateQueue({ state: "paused" })
      // once this instance runs the queue (a pass of its lease loop took it), another one takes it: the runner's next
      // round is refused (fenced) and the runner stops
      await server.leasePass()
      expect((await db`select owner from queue_runtime where owner is not null`).length).toBe(1)
      await db`update queue_runtime set fencing = fencing + 1`
      const lost = server.lostLease()
      s.createPr(1)
      await s.submit(1)
      expect(await lost).toBe((await db`select queue_id from queue_runtime`)[0].queue_id)
      // the lease loop's next pass takes the queue back under the new token and a new runner places the PR
      await server.leasePass()
      await s.until("#1 placed by the new runner", async () => {
        const body = (await s.post("getQueue")).body as { enqueuedPullRequests?: ReadonlyArray<unknown> }
        const placed = await db`select array_length(positions, 1) as n from queue_runtime`
        return body.enqueuedPullRequests?.length === 1 && placed[0]?.n === 1 ? true : undefined
      })
      expect(await restarts()).toBe("0")
    })
  }, 90_000)
})
