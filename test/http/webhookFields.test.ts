/**
 * Every field filled and every run and batch told exactly (issue #34, defects 2, 3 and 6), from a real server to a
 * receiver on loopback, on both databases:
 * - `pull_request.testing`, `pull_request_batch.testing` and `test_run.started` come when the run's test branch is
 *   pushed, with its SHA (`test_branch_sha`, `testBranchSha`);
 * - a run that never started (its build hit a merge conflict) sends no `testing`, no `test_run.started` and no
 *   `test_run.completed`;
 * - a batch whose pull requests ended differently (4 and 6 merged, 5 failed) ends once: `merged`, with `pr_numbers`
 *   the merged ones and `pr_numbers_in_batch` all of them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { type Received, startReceiver } from "../support/receiver.ts"
import { openScenario } from "../support/scenario.ts"
import { databases, eventually, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 150_000

for (const db of databases) {
  describe(`webhook fields, runs and batches (${db})`, () => {
    let server: TestServer
    let root: string
    beforeAll(async () => {
      root = tempDir("greenline-fields-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100, config: { webhookAllowPrivate: true } })
    })
    afterAll(async () => {
      await server.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    /** An endpoint for every event of one repository, and a wait until all of its messages were delivered. */
    const listen = async (repo: { host: string; owner: string; name: string }) => {
      const receiver = startReceiver()
      const created = await server.post("createWebhookEndpoint", { url: receiver.url, repo })
      expect(created.status).toBe(200)
      const id = (created.body as { id: string }).id
      const settled = () =>
        eventually(
          async () => {
            const listed = await server.post("listWebhookDeliveries", {
              endpointId: id,
              page_query: { page_size: 100, page_token: "" }
            })
            const messages = (listed.body as { messages: Array<{ status: string }> }).messages
            return messages.length > 0 &&
              messages.every((m) => m.status === "delivered") &&
              receiver.received.length >= messages.length
              ? true
              : undefined
          },
          30_000,
          "every message delivered"
        )
      return { receiver, settled, stop: () => receiver.stop() }
    }
    const ofType = (received: ReadonlyArray<Received>, type: string) => received.filter((r) => r.message.type === type)
    const prOf = (r: Received) => r.message.data.pr_number as number

    test(
      "testing and test_run.started carry the test branch SHA; a run that never started is not told",
      async () => {
        const s = await openScenario(server, root, { name: `fields-${db}`, concurrency: 1 })
        const l = await listen(s.key.repo)
        try {
          s.createPr(1)
          // #2 changes the file #1 adds: once #1 merged, its test branch cannot be built
          s.createPr(2, { files: { "pr-1.txt": "two\n" } })
          await s.submit(1)
          const run = await s.ciPass(1)
          await s.waitState(1, "merged")
          await s.submit(2)
          await s.waitState(2, "failed")
          expect((await s.timeline(2)).map((t) => t.reason)).toContain("START_TEST_RUN_MERGE_CONFLICT")
          await l.receiver.waitFor((r) => r.message.type === "pull_request.failed" && prOf(r) === 2, "#2 failed")
          await l.settled()
          const got = l.receiver.received

          // #1: testing with its run's branch and SHA; the run started once, with the SHA, and completed once
          const testing = ofType(got, "pull_request.testing").filter((r) => prOf(r) === 1)
          expect(testing.length).toBe(1)
          expect(testing[0]?.message.data).toMatchObject({
            test_branch: run.details.testBranch,
            test_branch_sha: run.sha,
            batched: false,
            is_bisection: false
          })
          const started = ofType(got, "test_run.started").filter((r) => r.message.data.test_run_id === run.runId)
          expect(started.length).toBe(1)
          expect(started[0]?.message.data).toMatchObject({ testBranchSha: run.sha, status: "in_progress" })
          const completed = ofType(got, "test_run.completed").filter((r) => r.message.data.test_run_id === run.runId)
          expect(completed.length).toBe(1)
          expect(completed[0]?.message.data).toMatchObject({ testBranchSha: run.sha, status: "succeeded" })
          expect(
            got.filter((r) => r.message.type.startsWith("pull_request.") && prOf(r) === 1).map((r) => r.message.type)
          ).toEqual(["pull_request.submitted", "pull_request.queued", "pull_request.testing", "pull_request.merged"])

          // #2: its run hit the conflict before it started: no testing, no test_run event names it
          const of2 = got.filter((r) => r.message.type.startsWith("pull_request.") && prOf(r) === 2)
          expect(of2.map((r) => r.message.type).filter((t) => t !== "pull_request.pending_failure")).toEqual([
            "pull_request.submitted",
            "pull_request.queued",
            "pull_request.failed"
          ])
          expect(
            got.find((r) => r.message.type === "pull_request.failed" && prOf(r) === 2)?.message.data.failure_reason
          ).toBe("START_TEST_RUN_MERGE_CONFLICT")
          const runsOf2 = got.filter(
            (r) =>
              r.message.type.startsWith("test_run.") &&
              (r.message.data.testedPullRequests as Array<{ prNumber: number }>).some((p) => p.prNumber === 2)
          )
          expect(runsOf2.map((r) => r.message.type)).toEqual([])
          // every test_run.completed follows its test_run.started
          for (const c of ofType(got, "test_run.completed")) {
            expect(
              ofType(got, "test_run.started").some((r) => r.message.data.test_run_id === c.message.data.test_run_id)
            ).toBe(true)
          }
        } finally {
          await s.close()
          await l.stop()
        }
      },
      TIMEOUT
    )

    test(
      "a batch whose pull requests merged and failed ends once: merged, pr_numbers the merged ones",
      async () => {
        const s = await openScenario(server, root, {
          name: `mixed-${db}`,
          concurrency: 2,
          config: { batch: true, batchingMinSize: 3, batchingMaxWaitTimeMinutes: 1 }
        })
        const l = await listen(s.key.repo)
        try {
          await s.updateQueue({ state: "paused" })
          for (const n of [4, 5, 6]) s.createPr(n)
          for (const n of [4, 5, 6]) await s.submit(n)
          await s.updateQueue({ state: "running" })
          await s.waitState(6, "testing")
          expect((await s.pr(4)).testRunId).toBe((await s.pr(6)).testRunId)
          // every run with #5's change fails; the others pass (batching off: the bisected halves do not wait)
          await s.updateQueue({ batchingMinSize: 1 })
          await s.autoCi([4, 5, 6], (_run, files) => (files.includes("pr-5.txt") ? "failure" : "success"), 90_000)
          expect((await s.pr(4)).state).toBe("merged")
          expect((await s.pr(5)).state).toBe("failed")
          expect((await s.pr(6)).state).toBe("merged")
          const whole = (r: Received) => JSON.stringify(r.message.data.pr_numbers_in_batch) === "[4,5,6]"
          await l.receiver.waitFor((r) => r.message.type === "pull_request_batch.merged" && whole(r), "the batch's end")
          await l.settled()
          const batch = l.receiver.received.filter((r) => r.message.type.startsWith("pull_request_batch.") && whole(r))
          expect(batch.map((r) => r.message.type)).toEqual([
            "pull_request_batch.submitted",
            "pull_request_batch.queued",
            "pull_request_batch.testing",
            "pull_request_batch.merged"
          ])
          const [, , testing, merged] = batch
          expect(testing?.message.data.test_branch_sha).toMatch(/^[0-9a-f]{40}$/)
          expect(testing?.message.data.pr_numbers).toEqual([4, 5, 6])
          expect(merged?.message.data).toMatchObject({
            pr_number: 4,
            pr_numbers: [4, 6],
            pr_numbers_in_batch: [4, 5, 6],
            merged_reason: "MERGE_GRAPH_MERGE"
          })
          // every batch ended exactly once
          const ends = l.receiver.received.filter((r) =>
            /^pull_request_batch\.(merged|failed|canceled)$/.test(r.message.type)
          )
          const batches = new Set(
            l.receiver.received
              .filter((r) => r.message.type === "pull_request_batch.submitted")
              .map((r) => JSON.stringify(r.message.data.pr_numbers_in_batch))
          )
          expect(ends.map((r) => JSON.stringify(r.message.data.pr_numbers_in_batch)).sort()).toEqual(
            [...batches].sort()
          )
        } finally {
          await s.close()
          await l.stop()
        }
      },
      TIMEOUT
    )
  })
}
