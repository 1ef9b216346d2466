/**
 * Webhook deliveries survive a SIGKILL (they are rows, leased while sent), and two instances on one PostgreSQL
 * send each message once. Servers run in their own processes (test/support/process.ts); the receiver is real.
 */
import { describe, expect, test } from "bun:test"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { spawnServer } from "../support/process.ts"
import { type Received, startReceiver } from "../support/receiver.ts"
import { databases, eventually, freshPostgres, pgUrl, TEST_TOKEN, tempDir } from "../support/server.ts"

const TIMEOUT = 120_000

for (const db of databases) {
  describe(`webhook durability (${db})`, () => {
    test(
      "SIGKILL with deliveries pending: after the restart each arrives, with the same webhook-id",
      async () => {
        const receiver = startReceiver()
        const pg = db === "postgres" ? await freshPostgres() : undefined
        const env: Record<string, string> = {
          DATA_DIR: pg === undefined ? await seededDataDir() : tempDir(),
          GIT_ROOT: tempDir("greenline-git-"),
          WEBHOOK_ALLOW_PRIVATE: "true",
          ...(pg === undefined ? {} : { DATABASE_URL: pg.url })
        }
        // five queues: five messages of different orderings, each tried at once (one queue's wait in line)
        const keys = [1, 2, 3, 4, 5].map((i) => ({
          repo: { host: "local", owner: "acme", name: `durable-${i}` },
          targetBranch: "main"
        }))
        let server = await spawnServer(env, TEST_TOKEN)
        try {
          receiver.respond = () => new Response("down", { status: 500 })
          const made = await server.post("createWebhookEndpoint", { url: receiver.url, eventTypes: ["queue.updated"] })
          expect(made.status).toBe(200)
          const endpointId = (made.body as { id: string }).id
          for (const key of keys) {
            expect((await server.post("createQueue", key)).status).toBe(200)
            expect((await server.post("updateQueue", { ...key, concurrency: 2 })).status).toBe(200)
          }
          // the endpoint failed: the five messages wait (it is probed one message at a time), at least one attempted
          const failed = await receiver.waitCount((r) => r.status === 500, 1, "a failed first attempt")
          const live = server
          // the delivery worker records its attempts in batches after the receiver answered, in a server of its own
          // process (no tick), and no streamed event marks the record: polled
          const pending = await eventually(async () => {
            const r = await live.post("listWebhookDeliveries", { endpointId })
            const list = (r.body as { messages: Array<{ id: string; status: string; attempts: Array<unknown> }> })
              .messages
            // (and the server recorded the attempts made: a message killed in flight would wait for its lease, 60 s)
            return list.length === 5 &&
              list.every((m) => m.status === "pending") &&
              list.some((m) => m.attempts.length > 0)
              ? list
              : undefined
          })
          const ids = new Set(pending.map((m) => m.id))
          await server.kill("SIGKILL")
          receiver.respond = () => new Response("ok")
          server = await spawnServer(env, TEST_TOKEN)
          // a probe in flight when the process was killed holds its message for the attempt's lease (60 s) before
          // another instance, or the restarted one, may send it again: the wait covers that lease
          const delivered = await receiver.waitCount(
            (r: Received) => r.status === 200 && ids.has(r.id),
            5,
            "the five messages after the restart",
            90_000
          )
          expect(new Set(delivered.map((r) => r.id))).toEqual(ids)
          // the same message: the same body and id as before the crash
          for (const f of failed) expect(delivered.find((r) => r.id === f.id)?.body).toBe(f.body)
        } finally {
          await server.kill("SIGKILL")
          await receiver.stop()
          await pg?.drop()
        }
      },
      TIMEOUT
    )
  })
}

describe.if(pgUrl !== undefined)("two instances on one PostgreSQL", () => {
  test(
    "each message is delivered once, not once per instance",
    async () => {
      const receiver = startReceiver()
      // a slow receiver: both instances are busy sending at once
      receiver.respond = async () => {
        await Bun.sleep(30)
        return new Response("ok")
      }
      const pg = await freshPostgres()
      const env = {
        DATABASE_URL: pg.url,
        GIT_ROOT: tempDir("greenline-git-"),
        DATA_DIR: tempDir(),
        WEBHOOK_ALLOW_PRIVATE: "true"
      }
      const a = await spawnServer(env, TEST_TOKEN)
      const b = await spawnServer(env, TEST_TOKEN)
      try {
        const created = await a.post("createWebhookEndpoint", { url: receiver.url, eventTypes: ["queue.updated"] })
        const endpointId = (created.body as { id: string }).id
        const key = { repo: { host: "local", owner: "acme", name: "twice" }, targetBranch: "main" }
        expect((await a.post("createQueue", key)).status).toBe(200)
        const count = 40
        for (let c = 1; c <= count; c++) {
          const via = c % 2 === 0 ? a : b
          expect((await via.post("updateQueue", { ...key, concurrency: c })).status).toBe(200)
        }
        await receiver.waitCount(() => true, count, `${count} messages`)
        // every message delivered, each with exactly one attempt (whichever instance made it); polled, as above: the
        // attempts are recorded a moment after the receiver answered, with no event that marks it
        const messages = await eventually(async () => {
          const r = await a.post("listWebhookDeliveries", {
            endpointId,
            page_query: { page_size: 100, page_token: "" }
          })
          const list = (r.body as { messages: Array<{ id: string; status: string; attempts: Array<unknown> }> })
            .messages
          return list.length === count && list.every((m) => m.status === "delivered") ? list : undefined
        })
        expect(messages.every((m) => m.attempts.length === 1)).toBe(true)
        const perId = new Map<string, number>()
        for (const r of receiver.received) perId.set(r.id, (perId.get(r.id) ?? 0) + 1)
        expect(perId.size).toBe(count)
        expect([...perId.values()].every((n) => n === 1)).toBe(true)
      } finally {
        await a.kill("SIGKILL")
        await b.kill("SIGKILL")
        await receiver.stop()
        await pg.drop()
      }
    },
    TIMEOUT
  )
})
