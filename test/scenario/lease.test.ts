import { describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { createTestRepo } from "../support/git.ts"
import {
  eventually,
  freshPostgres,
  pgUrl,
  startTestServer,
  type TestServer,
  type TestServerOptions
} from "../support/server.ts"

/**
 * The lease of a queue (src/queue/EngineLive.ts): when an instance finds its queue under a new fencing token (another
 * instance held it in between), it replaces its runner, and the runner it replaced must not take the new one's
 * token with it when it ends: without it wake-ups went to the lease loop, which replaced the runner again at each
 * one, killing its CI jobs every time (a runner that never made progress).
 */

const stateOf = async (post: (op: string, body: unknown) => Promise<{ body: unknown }>, key: object, n: number) =>
  ((await post("getSubmittedPullRequest", { ...key, pr: { number: n } })).body as { state?: string }).state

/** A server on a fresh PostgreSQL database and repository, `db` a connection of the test's own to that database. */
const withServer = async (
  name: string,
  options: Partial<TestServerOptions>,
  body: (s: {
    server: TestServer
    db: SQL
    repo: ReturnType<typeof createTestRepo>
    key: { repo: { host: string; owner: string; name: string }; targetBranch: string }
  }) => Promise<void>
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
    ...options
  })
  try {
    await body({ server, db, repo, key: { repo: repo.repo, targetBranch: "main" } })
  } finally {
    await server.close()
    await db.close()
    await pg.drop()
    repo.cleanup()
  }
}

describe.if(pgUrl !== undefined)("queue lease (PostgreSQL)", () => {
  test("a runner replaced under a new fencing token keeps making progress", async () => {
    await withServer("lease", { ciCommand: "sleep 0.5" }, async ({ server, db, repo, key }) => {
      await server.post("createQueue", { ...key, concurrency: 2 })
      await server.post("updateQueue", { ...key, requiredStatuses: ["ci"] })
      repo.createPr(1, { files: { "pr-1.txt": "1\n" } })
      expect((await server.post("submitPullRequest", { ...key, pr: { number: 1 } })).status).toBe(200)
      await eventually(async () => ((await stateOf(server.post, key, 1)) === "merged" ? true : undefined), 30_000)
      // another instance held the queue between two rounds of this one's lease loop (5 s apart)
      await db`update queue_runtime set fencing = fencing + 1`
      await Bun.sleep(6_000)
      repo.createPr(2, { files: { "pr-2.txt": "2\n" } })
      expect((await server.post("submitPullRequest", { ...key, pr: { number: 2 } })).status).toBe(200)
      await eventually(
        async () => ((await stateOf(server.post, key, 2)) === "merged" ? true : undefined),
        30_000,
        "#2 merged"
      )
      // its CI ran once: the runner was not replaced again (which kills the CI jobs it started)
      const outputs = await db`select run_id from ci_outputs`
      expect(outputs.length).toBe(2)
    })
  }, 90_000)

  test("a runner that finds its lease gone stops without counting a failure, and the queue goes on", async () => {
    await withServer("lease-lost", { metricsToken: "lease-metrics-token" }, async ({ server, db, repo, key }) => {
      const restarts = async () => {
        const r = await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer lease-metrics-token" } })
        return /^greenline_queue_runner_restarts_total (\d+)/m.exec(await r.text())?.[1] ?? "0"
      }
      await server.post("createQueue", key)
      await server.post("updateQueue", { ...key, state: "paused" })
      // once this instance runs the queue, another one takes it: the runner's next round is refused (fenced) and the
      // runner stops
      await eventually(
        async () =>
          (await db`select owner from queue_runtime where owner is not null`).length === 1 ? true : undefined,
        10_000,
        "the queue leased"
      )
      await Bun.sleep(200)
      await db`update queue_runtime set fencing = fencing + 1`
      repo.createPr(1, { files: { "pr-1.txt": "1\n" } })
      expect((await server.post("submitPullRequest", { ...key, pr: { number: 1 } })).status).toBe(200)
      // the lease loop (every 5 s) takes the queue back under the new token and a new runner places the PR
      await eventually(
        async () => {
          const body = (await server.post("getQueue", key)).body as { enqueuedPullRequests?: ReadonlyArray<unknown> }
          const placed = await db`select array_length(positions, 1) as n from queue_runtime`
          return body.enqueuedPullRequests?.length === 1 && placed[0]?.n === 1 ? true : undefined
        },
        30_000,
        "#1 placed by the new runner"
      )
      expect(await restarts()).toBe("0")
    })
  }, 90_000)
})
