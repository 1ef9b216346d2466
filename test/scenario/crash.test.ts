import { describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { createTestRepo } from "../support/git.ts"
import { type ServerProcess, spawnServer } from "../support/process.ts"
import { openScenario, type Scenario } from "../support/scenario.ts"
import { freshPostgres, pgUrl, TEST_TOKEN, tempDir } from "../support/server.ts"

/**
 * Crash and takeover: the engine persists every planner round with its outbox before acting, so a SIGKILL loses
 * nothing and repeats only idempotent commands; with PostgreSQL a queue is leased to one instance at a time. The
 * servers run in their own processes (a real SIGKILL); the scenario steps on the events they stream.
 */

/** `s.waitState(n, "merged")` for each PR, with what the server said when one does not get there. */
const allMerged = async (s: Scenario<ServerProcess>, prs: ReadonlyArray<number>, timeoutMs: number) => {
  for (const n of prs) {
    await s.waitState(n, "merged", timeoutMs).catch((e: unknown) => {
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n--- server stderr ---\n${s.server.stderr()}`)
    })
  }
}

describe.if(pgUrl !== undefined)("crash and takeover (PostgreSQL)", () => {
  test("SIGKILL in the middle of 20 PRs at concurrency 4: every PR merges once after the restart", async () => {
    const repo = createTestRepo({ repo: { host: "local", owner: "acme", name: "crash" } })
    const pg = await freshPostgres()
    const env = {
      DATABASE_URL: pg.url,
      GIT_ROOT: repo.root,
      DATA_DIR: tempDir(),
      CI_COMMAND: "sleep 0.2",
      GIT_POLL_MS: "300"
    }
    let server = await spawnServer(env, TEST_TOKEN)
    const s = await openScenario(server, repo.root, { name: "crash", repo, concurrency: 4, waitMs: 90_000 })
    const prs = Array.from({ length: 20 }, (_, k) => k + 1)
    try {
      for (const n of prs) s.createPr(n)
      for (const n of prs) await s.submit(n)
      // killed in the middle: #5 merged, the runs of the next ones built or testing
      await allMerged(s, [5], 60_000)
      expect((await s.pr(20)).state).not.toBe("merged")
      await server.kill("SIGKILL")
      server = await spawnServer(env, TEST_TOKEN)
      s.switchTo(server)
      await allMerged(s, prs, 90_000)
      // each PR landed once, on main only moved forward, each commit tested (the one promise); nothing else landed
      await s.checkOnePromise()
      expect(s.history()).toEqual(prs.map((n) => `PR #${n} (#${n})`))
    } finally {
      await server.kill("SIGTERM")
      await s.close()
      await pg.drop()
    }
  }, 240_000)

  test("two instances share one database: one runs each queue, the other takes over within 30 s", async () => {
    const repo = createTestRepo({ repo: { host: "local", owner: "acme", name: "pair" } })
    const pg = await freshPostgres()
    const env = { DATABASE_URL: pg.url, GIT_ROOT: repo.root, CI_COMMAND: "true", GIT_POLL_MS: "300" }
    const db = new SQL(pg.url)
    const a = await spawnServer({ ...env, DATA_DIR: tempDir() }, TEST_TOKEN)
    const b = await spawnServer({ ...env, DATA_DIR: tempDir() }, TEST_TOKEN)
    const s = await openScenario(a, repo.root, { name: "pair", repo, concurrency: 2, waitMs: 60_000 })
    try {
      s.createPr(1)
      s.createPr(2)
      // both accept requests; whichever owns the queue runs it
      await s.submit(1)
      s.switchTo(b)
      await s.submit(2)
      await allMerged(s, [1, 2], 60_000)
      const owners = await db`select owner from queue_runtime`
      expect(owners.length).toBe(1)
      const owner = String(owners[0].owner)
      const [ownerProcess, other] = owner.includes(`-${a.pid}-`) ? [a, b] : [b, a]
      expect(owner).toContain(`-${ownerProcess.pid}-`)
      await ownerProcess.kill("SIGKILL")
      s.switchTo(other)
      s.createPr(3)
      await s.submit(3)
      await allMerged(s, [3], 60_000)
      const after = await db`select owner from queue_runtime`
      expect(String(after[0].owner)).toContain(`-${other.pid}-`)
      await s.checkOnePromise()
      expect(s.history()).toEqual(["PR #1 (#1)", "PR #2 (#2)", "PR #3 (#3)"])
    } finally {
      await a.kill("SIGTERM").catch(() => undefined)
      await b.kill("SIGTERM").catch(() => undefined)
      await s.close()
      await db.close()
      await pg.drop()
    }
  }, 240_000)
})
