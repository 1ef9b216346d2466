/**
 * End-to-end scenarios of the merge-queue engine on the local Git provider: the real server (HTTP, runner, storage)
 * over real bare repositories, CI played by the test through POST /v1/reportStatus. One server per database; one
 * repository and one queue per scenario. After every scenario the one promise (semantics.md §1) is checked on the
 * repository. The scenarios are those of queueScenarios.ts (github.test.ts runs some of them on GitHub too), and
 * here the ones that need local Git or the server's database.
 *
 * The testing timeout (`testingTimeoutMinutes`, at least 1 minute) is covered by the planner's unit tests
 * (test/unit/planner.test.ts, "timeout fails the run with TEST_RUN_TIMEOUT"), not here.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { openScenario, type ScenarioOptions } from "../support/scenario.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"
import { allPass, play, type QueueScenario, queueScenarios } from "./queueScenarios.ts"

const TIMEOUT = 60_000
const servers = new Map<string, { server: TestServer; root: string }>()
let counter = 0

const serverFor = async (db: "pglite" | "postgres") => {
  let s = servers.get(db)
  if (s === undefined) {
    const root = tempDir("greenline-scenario-git-")
    s = { server: await startTestServer({ db, gitRoot: root, gitPollMs: 100 }), root }
    servers.set(db, s)
  }
  return s
}

beforeAll(async () => {
  await serverFor("pglite")
})

afterAll(async () => {
  for (const { server, root } of servers.values()) {
    await server.close()
    fs.rmSync(root, { recursive: true, force: true })
  }
})

/** Plays `body` on a fresh repository and queue of the database's server. */
const scenario = async (
  options: Omit<ScenarioOptions, "name"> & { db?: "pglite" | "postgres" },
  body: QueueScenario["body"]
) => {
  const { server, root } = await serverFor(options.db ?? "pglite")
  await play(await openScenario(server, root, { ...options, name: `s${++counter}` }), body)
}

describe("merge queue scenarios", () => {
  for (const db of databases)
    test(`${allPass.name} (${db})`, () => scenario({ ...allPass.options, db }, allPass.body), TIMEOUT)
  for (const { name, options, body } of queueScenarios.filter((q) => q !== allPass))
    test(name, () => scenario(options, body), TIMEOUT)
})

describe("merge queue scenarios that need local Git or the server's database", () => {
  test(
    "a merge that fails unexpectedly (the target's ref locked) is tried again and lands once the lock is gone",
    async () => {
      await scenario({ concurrency: 1 }, async (s) => {
        s.createPr(1)
        await s.submit(1)
        await s.waitRun(1)
        // a stale lock on main: git update-ref fails, and the Merge command with it
        const lock = path.join(s.repo.gitDir, "refs", "heads", "main.lock")
        fs.writeFileSync(lock, "")
        try {
          await s.ciPass(1)
          await s.waitState(1, "tests_passed")
          // each round tries the merge again (the failed command stays in the outbox): a few rounds, main untouched
          for (let round = 0; round < 3; round++) {
            await s.holds("main untouched while its ref is locked", async () => s.mainSha() === s.initialSha)
          }
          expect((await s.pr(1)).state).toBe("tests_passed")
        } finally {
          fs.rmSync(lock, { force: true })
        }
        await s.waitState(1, "merged")
        expect(s.history()).toEqual(["PR #1 (#1)"])
        return undefined
      })
    },
    TIMEOUT
  )

  test(
    "a queue deleted by another instance, then made anew: submissions reach the new queue, never a deleted one",
    async () => {
      await scenario({ concurrency: 1, config: { state: "paused" } }, async (s) => {
        for (const n of [1, 2, 3]) s.createPr(n)
        await s.submit(1)
        await s.ok("cancelPullRequest", { pr: { number: 1 } })
        await s.waitState(1, "cancelled")
        // as another instance would: this server still remembers the queue it just wrote to
        const dropQueue = () =>
          s.server.run(
            Effect.flatMap(
              SqlClient.SqlClient,
              (sql) => sql`delete from queues q using repositories r
                           where r.id = q.repo_id and r.owner = ${s.key.repo.owner} and r.name = ${s.key.repo.name}`
            )
          )
        await dropQueue()
        await s.ok("createQueue")
        await s.updateQueue({ requiredStatuses: ["ci"], state: "paused" })
        await s.submit(2)
        const queue = await s.ok<{ enqueuedPullRequests: ReadonlyArray<{ prNumber: number }> }>("getQueue")
        expect(queue.enqueuedPullRequests.map((e) => e.prNumber)).toEqual([2])
        await s.ok("cancelPullRequest", { pr: { number: 2 } })
        await s.waitState(2, "cancelled")
        await dropQueue()
        await s.fails("submitPullRequest", { pr: { number: 3 } }, 404, "QUEUE_NOT_FOUND")
        return { checked: true }
      })
    },
    TIMEOUT
  )
})
