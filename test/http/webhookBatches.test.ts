/**
 * Batch events (contract.md §8, issue #17): every `pull_request_batch.*` type reaches a real receiver on loopback
 * from a real server, signed, with the pull request events' keys plus `pr_numbers` / `pr_numbers_in_batch`.
 * A batch is told `submitted`, `queued` and `testing` when its run starts; `pending_failure`, `failed`, `canceled`
 * and `merged` when its last pull request reaches the state (batchEvents.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Webhook } from "standardwebhooks"
import { type Received, startReceiver } from "../support/receiver.ts"
import { openScenario } from "../support/scenario.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"
import { BATCH_KEYS, sorted } from "../support/trunkPayloads.ts"

const TIMEOUT = 120_000

for (const db of databases) {
  describe(`batch webhooks (${db})`, () => {
    let server: TestServer
    let root: string
    beforeAll(async () => {
      root = tempDir("greenline-batch-events-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100, config: { webhookAllowPrivate: true } })
    })
    afterAll(async () => {
      await server.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test(
      "every pull_request_batch type arrives signed, with the batch's pull requests, once per batch",
      async () => {
        const receiver = startReceiver()
        try {
          const created = await server.post("createWebhookEndpoint", {
            url: receiver.url,
            eventTypes: Object.keys(BATCH_KEYS).map((a) => `pull_request_batch.${a}`)
          })
          expect(created.status).toBe(200)
          const verifier = new Webhook((created.body as { secret: string }).secret)
          const s = await openScenario(server, root, {
            name: `batches-${db}`,
            config: { batch: true, batchingMinSize: 2, batchingMaxWaitTimeMinutes: 1 }
          })
          const of = (action: string, prs: ReadonlyArray<number>): Received =>
            receiver.received.find(
              (r) =>
                r.message.type === `pull_request_batch.${action}` &&
                JSON.stringify(r.message.data.pr_numbers) === JSON.stringify(prs)
            ) as Received
          const wait = (action: string, prs: ReadonlyArray<number>) =>
            receiver.waitFor(
              (r) =>
                r.message.type === `pull_request_batch.${action}` &&
                JSON.stringify(r.message.data.pr_numbers) === JSON.stringify(prs),
              `pull_request_batch.${action} of ${prs.join(",")}`
            )
          /** submits two pull requests while the queue is paused, so that they start as one batch */
          const batchOf = async (a: number, b: number) => {
            await s.updateQueue({ state: "paused", batch: true })
            s.createPr(a)
            s.createPr(b)
            await s.submit(a)
            await s.submit(b)
            await s.updateQueue({ state: "running" })
            await s.waitState(b, "testing")
            expect((await s.pr(a)).testRunId).toBe((await s.pr(b)).testRunId)
          }
          try {
            // merged: the batch passes
            await batchOf(1, 2)
            await s.ciPass(1)
            await s.waitState(2, "merged")
            // failed (and pending_failure first): the batch fails, is bisected, and each half fails
            await batchOf(3, 4)
            await s.ciFail(3)
            await s.ciFail(3)
            await s.waitState(3, "failed")
            // #4 is tested again alone: batching off, so that it does not wait a minute for company
            await s.updateQueue({ batch: false })
            await s.ciFail(4)
            await s.waitState(4, "failed")
            // canceled: both pull requests of the batch are canceled
            await batchOf(5, 6)
            await s.ok("cancelPullRequest", { pr: { number: 5 } })
            await s.waitState(5, "cancelled")
            await s.ok("cancelPullRequest", { pr: { number: 6 } })
            await s.waitState(6, "cancelled")
            // every batch event arrives before the queue is deleted (close)
            for (const prs of [
              [1, 2],
              [3, 4],
              [5, 6]
            ])
              for (const action of ["submitted", "queued", "testing"]) await wait(action, prs)
            await wait("merged", [1, 2])
            await wait("pending_failure", [3, 4])
            await wait("failed", [3, 4])
            await wait("canceled", [5, 6])
          } finally {
            await s.close()
          }

          for (const r of receiver.received) {
            expect(verifier.verify(r.body, r.headers)).toEqual(r.message as unknown as Record<string, unknown>)
            const action = r.message.type.split(".")[1] as string
            expect({ type: r.message.type, keys: sorted(Object.keys(r.message.data)) }).toEqual({
              type: r.message.type,
              keys: sorted(BATCH_KEYS[action] ?? [])
            })
            expect(r.message.data.action).toBe(action)
            expect(r.message.data.pr_numbers_in_batch).toEqual(r.message.data.pr_numbers)
            expect(r.message.data.pr_number).toBe((r.message.data.pr_numbers as Array<number>)[0])
          }
          // each batch event once: a fact told once
          const told = receiver.received.map((r) => `${r.message.type}:${JSON.stringify(r.message.data.pr_numbers)}`)
          expect(told.length).toBe(new Set(told).size)
          // no batch reached a state its pull requests did not all reach
          expect(of("merged", [3, 4])).toBeUndefined()
          expect(of("failed", [1, 2])).toBeUndefined()
          expect(of("canceled", [3, 4])).toBeUndefined()

          expect(of("submitted", [1, 2]).message.data.submitted_reason).toBe("API_REQUESTED")
          expect(of("queued", [1, 2]).message.data.queued_reason).toBe("MERGE_ITEM_NOW_READY")
          expect(of("testing", [1, 2]).message.data).toMatchObject({ batched: true, is_bisection: false })
          expect(of("merged", [1, 2]).message.data.merged_reason).toBe("MERGE_GRAPH_MERGE")
          expect(of("pending_failure", [3, 4]).message.data.failure_reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
          expect(of("failed", [3, 4]).message.data).toMatchObject({
            failure_reason: "TEST_RUN_REQUIRED_STATUS_FAILED",
            batched: true
          })
          expect(of("canceled", [5, 6]).message.data.cancellation_reason).toBe("USER_REQUESTED")
          // a batch's events in the order they happened
          const order = receiver.received
            .filter((r) => JSON.stringify(r.message.data.pr_numbers) === "[3,4]")
            .map((r) => r.message.data.action)
          expect(order).toEqual(["submitted", "queued", "testing", "pending_failure", "failed"])
        } finally {
          await receiver.stop()
        }
      },
      TIMEOUT
    )
  })
}
