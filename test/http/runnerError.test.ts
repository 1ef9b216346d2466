/**
 * A runner that keeps failing is visible (issue #15, Build 3): getQueue's `runnerError`, `/readyz` details and the
 * `greenline_queue_runner_failures` gauge say so while it fails, and clear once it runs again. The failure is injected
 * with a database trigger that refuses the runner's writes of its state.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, eventually, startTestServer, type TestServer } from "../support/server.ts"

const servers = new Map<string, TestServer>()
const repos: Array<TestRepo> = []

beforeAll(async () => {
  for (const db of databases) servers.set(db, await startTestServer({ db, gitPollMs: 100 }))
}, 120_000)

afterAll(async () => {
  for (const s of servers.values()) await s.close()
  for (const r of repos) r.cleanup()
})

interface RunnerError {
  readonly message: string
  readonly since: string
}

describe("runner errors", () => {
  for (const db of databases) {
    test(`a failing runner shows in getQueue, /readyz and /metrics, and clears when it runs (${db})`, async () => {
      const server = servers.get(db)!
      const repo = createTestRepo({ root: server.gitRoot, repo: { host: "local", owner: "acme", name: `rerr-${db}` } })
      repos.push(repo)
      const key = { repo: repo.repo, targetBranch: "main" }
      expect((await server.post("createQueue", key)).status).toBe(200)
      const runnerError = async () =>
        ((await server.post("getQueue", key)).body as { runnerError?: RunnerError | null }).runnerError
      expect(await runnerError()).toBeNull()
      const sql = (f: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>) =>
        server.run(Effect.flatMap(SqlClient.SqlClient, f))
      const queueId = (await sql(
        (s) => s`select q.id from queues q join repositories r on r.id = q.repo_id where r.name = ${repo.repo.name}`
      )) as ReadonlyArray<{ id: string }>
      const id = queueId[0]!.id
      await sql(
        (s) => s`create or replace function greenline_test_refuse() returns trigger language plpgsql as $$
                 begin raise exception 'injected failure of the runner''s write'; end $$`
      )
      await sql(
        (s) => s`create trigger greenline_test_refuse before update of state on queue_runtime for each row
                 when (new.queue_id = ${s.unsafe(`'${id}'`)}::uuid) execute function greenline_test_refuse()`
      )
      try {
        // a submission makes the runner write its state (it would anyway, every round)
        repo.createPr(1, { files: { "a.txt": "a\n" } })
        expect((await server.post("submitPullRequest", { ...key, pr: { number: 1 } })).status).toBe(200)
        // a failing runner settles no round (each one throws): no tick nor event marks its failures, which come
        // with its supervisor's backoff; polled
        const failing = await eventually(async () => (await runnerError()) ?? undefined, 30_000, "a runner error")
        expect(failing.message).toContain("injected failure")
        expect(Number.isNaN(Date.parse(failing.since))).toBe(false)
        // the submission was accepted and reads back, though no runner has stepped it
        expect(
          ((await server.post("getQueue", key)).body as { enqueuedPullRequests: ReadonlyArray<unknown> })
            .enqueuedPullRequests
        ).toHaveLength(1)
        const ready = (await (await fetch(`${server.url}/readyz`)).json()) as {
          status: string
          runners: { failing: ReadonlyArray<{ queueId: string; message: string }> }
        }
        expect(ready.status).toBe("ready")
        expect(ready.runners.failing.map((e) => e.queueId)).toContain(id)
        const metrics = await (await fetch(`${server.url}/metrics`)).text()
        expect(metrics).toContain(`greenline_queue_runner_failures{queue_id="${id}"}`)
        // a later failure keeps the time the runner started failing (polled, as above)
        const again = await eventually(
          async () => {
            const e = await runnerError()
            return e !== null && e !== undefined && e.since === failing.since ? e : undefined
          },
          30_000,
          "the same failure streak"
        )
        expect(again.since).toBe(failing.since)
      } finally {
        await sql((s) => s`drop trigger greenline_test_refuse on queue_runtime`)
      }
      // the runner is restarted (with its backoff), completes a round, and the error is gone everywhere (polled: the
      // restart comes with the supervisor's backoff, and the stored error is cleared after the round, in its own fiber)
      await eventually(async () => ((await runnerError()) === null ? true : undefined), 30_000, "no runner error")
      const ready = (await (await fetch(`${server.url}/readyz`)).json()) as {
        runners: { failing: ReadonlyArray<{ queueId: string }> }
      }
      expect(ready.runners.failing.map((e) => e.queueId)).not.toContain(id)
      const metrics = await (await fetch(`${server.url}/metrics`)).text()
      expect(metrics).not.toContain(`greenline_queue_runner_failures{queue_id="${id}"}`)
    }, 120_000)
  }
})
