/**
 * Liveness of the runner (#15): settings at the bounds of contract.md, the status window of a run across restarts,
 * test branches of ended runs, speculation depth. The real server over real bare repositories, CI played by the test.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { RunnerProbeShape } from "../../src/queue/runner/probe.ts"
import { openScenario, type Scenario, type ScenarioOptions } from "../support/scenario.ts"
import { eventually, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 60_000
const MAX_U32 = 4294967295
let server: TestServer
let root: string
let counter = 0

beforeAll(async () => {
  root = tempDir("greenline-scenario-liveness-git-")
  server = await startTestServer({ db: "pglite", gitRoot: root, gitPollMs: 100 })
}, 60_000)

afterAll(async () => {
  await server.close()
  fs.rmSync(root, { recursive: true, force: true })
})

const scenario = async (options: Omit<ScenarioOptions, "name">, body: (s: Scenario) => Promise<void>) => {
  const s = await openScenario(server, root, { ...options, name: `l${++counter}` })
  try {
    await body(s)
    await s.checkOnePromise()
  } finally {
    await s.close()
  }
}

test(
  "concurrency and bisectionConcurrency at 4294967295: the queue still tests, bisects and merges",
  () =>
    scenario({ config: { concurrency: MAX_U32, bisectionConcurrency: MAX_U32 } }, async (s) => {
      for (const n of [1, 2, 3]) s.createPr(n)
      for (const n of [1, 2, 3]) await s.submit(n)
      await s.ciPass(1)
      await s.waitState(1, "merged")
      await s.ciFail(2)
      await s.waitState(2, "failed")
      await s.ciPass(3)
      await s.waitState(3, "merged")
      expect((await s.ok<{ concurrency: number }>("getQueue")).concurrency).toBe(MAX_U32)
    }),
  TIMEOUT
)

/** Runs SQL on the test server's database. */
const sqlOn = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  server.run(Effect.flatMap(SqlClient.SqlClient, f))

const readyz = async () =>
  (await (await fetch(`${server.url}/readyz`)).json()) as {
    status: string
    runners: { failing: ReadonlyArray<{ queueId: string; message: string; since: string; failures: number }> }
  }

test(
  "a runner that keeps failing backs off, shows in /readyz and the metrics, and recovers when it can run again",
  () =>
    scenario({}, async (s) => {
      s.createPr(1)
      await s.submit(1)
      const run = await s.waitRun(1)
      const where = (sql: SqlClient.SqlClient) =>
        sql`queue_id = (select q.id from queues q join repositories r on r.id = q.repo_id where r.name = ${s.key.repo.name})`
      const [saved] = await sqlOn(
        (sql) => sql<{ outbox: string }>`select outbox::text as outbox from queue_runtime where ${where(sql)}`
      )
      // an outbox the runner cannot read (as a bug would leave it), under a new fencing token so that the runner
      // loses its lease and its successor loads it: every round of this queue throws
      await sqlOn(
        (sql) =>
          sql`update queue_runtime set outbox = '5', fencing = fencing + 1
              where ${where(sql)}`
      )
      await s.report(run.sha, "success")
      // every round of this queue throws: none settles, so there is nothing to tick; its failures come with the lease
      // loop and the supervisor's backoff (the server's clock): polled
      const failing = await eventually(
        async () => (await readyz()).runners.failing[0],
        15_000,
        "the runner listed as failing"
      )
      expect(failing.message).toContain("TypeError")
      const queue = await s.ok<{ runnerError: { message: string; since: string } | null }>("getQueue")
      expect(queue.runnerError?.message).toBe(failing.message)
      const metrics = await (await fetch(`${server.url}/metrics`)).text()
      expect(metrics).toContain(`greenline_queue_runner_failures{queue_id="${failing.queueId}"}`)
      // restarts back off: a handful in these seconds, not one per wake-up
      const restarts = Number(/greenline_queue_runner_restarts_total (\d+)/.exec(metrics)?.[1] ?? "0")
      expect(restarts).toBeLessThan(10)
      // the state is readable again: the next restart runs a round, and the run that passed merges
      await sqlOn((sql) => sql`update queue_runtime set outbox = ${saved!.outbox}::jsonb where ${where(sql)}`)
      await s.waitState(1, "merged")
      expect((await readyz()).runners.failing.map((f) => f.queueId)).not.toContain(failing.queueId)
      expect((await s.ok<{ runnerError: unknown }>("getQueue")).runnerError).toBeNull()
    }),
  TIMEOUT
)

test(
  "an idle queue's rounds save nothing: its stored state's version stays put while it polls, and moves again with work",
  () =>
    scenario({}, async (s) => {
      const version = async () => {
        const [row] = await sqlOn(
          (sql) => sql<{ version: string | number }>`select version from queue_runtime
            where queue_id = (select q.id from queues q join repositories r on r.id = q.repo_id
                              where r.name = ${s.key.repo.name})`
        )
        return Number(row!.version)
      }
      const rounds = async (n: number) => {
        for (let i = 0; i < n; i++) await server.nextRound!(1000)
      }
      s.createPr(1)
      await s.submit(1)
      await s.ciPass(1)
      await s.waitState(1, "merged")
      // what the merge left to do (its test branch's removal) ends within a few rounds; then nothing is saved
      let before = await version()
      for (let tries = 0; tries < 10; tries++) {
        await rounds(5)
        const now = await version()
        if (now === before) break
        before = now
      }
      await rounds(10)
      expect(await version()).toBe(before)
      // the idle runner still polls and plans: a new PR is tested and merges
      s.createPr(2)
      await s.submit(2)
      await s.ciPass(2)
      await s.waitState(2, "merged")
      expect(await version()).toBeGreaterThan(before)
    }),
  TIMEOUT
)

test(
  "a stale ref lock left by a killed git is recovered: the merge goes through",
  () =>
    scenario({}, async (s) => {
      s.createPr(1)
      await s.submit(1)
      const run = await s.waitRun(1)
      // what a git killed while it updated main leaves behind
      const lock = path.join(s.repo.gitDir, "refs", "heads", "main.lock")
      fs.writeFileSync(lock, "")
      const old = new Date(Date.now() - 60_000)
      fs.utimesSync(lock, old, old)
      await s.report(run.sha, "success")
      await s.waitState(1, "merged")
      expect(fs.existsSync(lock)).toBe(false)
    }),
  TIMEOUT
)

test(
  "the owner dies between the push of a test branch and its record, after CI reported on it: the replayed build counts that status",
  async () => {
    const crashRoot = tempDir("greenline-scenario-crash-git-")
    let crashNext = false
    let crashes = 0
    const probe: RunnerProbeShape = {
      afterPush: (_runId, sha) =>
        crashNext
          ? Effect.gen(function* () {
              crashNext = false
              crashes++
              // a fast CI saw the branch and reported before the runner recorded the build
              yield* Effect.promise(() =>
                crashServer.post("reportStatus", {
                  repo: { host: "local", owner: "acme", name: "c1" },
                  sha,
                  context: "ci",
                  state: "success"
                })
              )
              return yield* Effect.die(new Error("killed between the push and the record"))
            })
          : Effect.void,
      roundDone: () => Effect.void
    }
    const crashServer = await startTestServer({ db: "pglite", gitRoot: crashRoot, gitPollMs: 100, probe })
    const s = await openScenario(crashServer, crashRoot, { name: "c1" })
    try {
      s.createPr(1)
      crashNext = true
      await s.submit(1)
      await s.waitState(1, "merged")
      expect(crashes).toBe(1)
      await s.checkOnePromise()
    } finally {
      await s.close()
      await crashServer.close()
      fs.rmSync(crashRoot, { recursive: true, force: true })
    }
  },
  TIMEOUT
)
