import { describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { createTestRepo } from "../support/git.ts"
import { spawnServer } from "../support/process.ts"
import { eventually, freshPostgres, pgUrl, TEST_TOKEN, tempDir } from "../support/server.ts"

/**
 * Crash and takeover: the engine persists every planner round with its outbox before acting, so a SIGKILL loses
 * nothing and repeats only idempotent commands; with PostgreSQL a queue is leased to one instance at a time.
 */

const stateOf = async (post: (op: string, body: unknown) => Promise<{ body: unknown }>, key: object, n: number) =>
  ((await post("getSubmittedPullRequest", { ...key, pr: { number: n } })).body as { state?: string }).state

/** Every PR's file landed in exactly one commit of main, and main only moved forward. */
const checkHistory = (git: (...a: Array<string>) => string, prs: number) => {
  const log = git("log", "--first-parent", "--format=%H %s", "main").split("\n")
  for (let n = 1; n <= prs; n++) {
    const touching = git("log", "--format=%H", "main", "--", `pr-${n}.txt`)
      .split("\n")
      .filter((l) => l !== "")
    expect(touching.length).toBe(1)
  }
  expect(log.length).toBe(prs + 1)
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
    const key = { repo: repo.repo, targetBranch: "main" }
    try {
      let server = await spawnServer(env, TEST_TOKEN)
      await server.post("createQueue", { ...key, concurrency: 4 })
      await server.post("updateQueue", { ...key, requiredStatuses: ["ci"] })
      for (let n = 1; n <= 20; n++) repo.createPr(n, { files: { [`pr-${n}.txt`]: `${n}\n` } })
      for (let n = 1; n <= 20; n++)
        expect((await server.post("submitPullRequest", { ...key, pr: { number: n } })).status).toBe(200)
      await eventually(
        async () => ((await stateOf(server.post, key, 5)) === "merged" ? true : undefined),
        60_000,
        "#5 merged"
      ).catch(async (e) => {
        const states = await Promise.all(Array.from({ length: 20 }, (_, k) => stateOf(server.post, key, k + 1)))
        throw new Error(`${e}\nstates: ${states.join(" ")}\n--- server stderr ---\n${server.stderr()}`)
      })
      await server.kill("SIGKILL")
      server = await spawnServer(env, TEST_TOKEN)
      try {
        for (let n = 1; n <= 20; n++) {
          const restarted = server
          await eventually(
            async () => ((await stateOf(restarted.post, key, n)) === "merged" ? true : undefined),
            90_000,
            `#${n} merged`
          ).catch(async (e) => {
            // what each PR shows and what the restarted server said, for a runner that stopped progressing
            const states = await Promise.all(Array.from({ length: 20 }, (_, k) => stateOf(restarted.post, key, k + 1)))
            throw new Error(
              `${e} (after the restart)\nstates: ${states.join(" ")}\n--- server stderr ---\n${restarted.stderr()}`
            )
          })
        }
        checkHistory(repo.git, 20)
      } finally {
        await server.kill("SIGTERM")
      }
    } finally {
      await pg.drop()
      repo.cleanup()
    }
  }, 240_000)

  test("two instances share one database: one runs each queue, the other takes over within 30 s", async () => {
    const repo = createTestRepo({ repo: { host: "local", owner: "acme", name: "pair" } })
    const pg = await freshPostgres()
    const env = { DATABASE_URL: pg.url, GIT_ROOT: repo.root, CI_COMMAND: "true", GIT_POLL_MS: "300" }
    const key = { repo: repo.repo, targetBranch: "main" }
    const db = new SQL(pg.url)
    try {
      const a = await spawnServer({ ...env, DATA_DIR: tempDir() }, TEST_TOKEN)
      const b = await spawnServer({ ...env, DATA_DIR: tempDir() }, TEST_TOKEN)
      try {
        await a.post("createQueue", { ...key, concurrency: 2 })
        await b.post("updateQueue", { ...key, requiredStatuses: ["ci"] })
        repo.createPr(1, { files: { "pr-1.txt": "1\n" } })
        repo.createPr(2, { files: { "pr-2.txt": "2\n" } })
        // both accept requests; whichever owns the queue runs it
        expect((await a.post("submitPullRequest", { ...key, pr: { number: 1 } })).status).toBe(200)
        expect((await b.post("submitPullRequest", { ...key, pr: { number: 2 } })).status).toBe(200)
        for (const n of [1, 2]) {
          await eventually(
            async () => ((await stateOf(b.post, key, n)) === "merged" ? true : undefined),
            60_000,
            `#${n} merged`
          )
        }
        const owners = await db`select owner from queue_runtime`
        expect(owners.length).toBe(1)
        const owner = String(owners[0].owner)
        const [ownerProcess, other] = owner.includes(`-${a.pid}-`) ? [a, b] : [b, a]
        expect(owner).toContain(`-${ownerProcess.pid}-`)
        await ownerProcess.kill("SIGKILL")
        repo.createPr(3, { files: { "pr-3.txt": "3\n" } })
        expect((await other.post("submitPullRequest", { ...key, pr: { number: 3 } })).status).toBe(200)
        await eventually(
          async () => ((await stateOf(other.post, key, 3)) === "merged" ? true : undefined),
          60_000,
          "#3 merged"
        )
        const after = await db`select owner from queue_runtime`
        expect(String(after[0].owner)).toContain(`-${other.pid}-`)
        checkHistory(repo.git, 3)
      } finally {
        await a.kill("SIGTERM").catch(() => undefined)
        await b.kill("SIGTERM").catch(() => undefined)
      }
    } finally {
      await db.close()
      await pg.drop()
      repo.cleanup()
    }
  }, 240_000)
})
