/**
 * Webhook delivery without head-of-line waits, its records and its operational events (issue #34), on both
 * databases. Time is a clock handed to the delivery worker's pass (the worker's own loop is off), stepped by the
 * test, never slept through:
 * - an 8 s outage: the endpoint is probed one message at a time while it fails, every 5 s; when it answers again its
 *   whole backlog is delivered at once, in order per key, within 10 s (of the clock) of its recovery;
 * - a message that fails while the endpoint answers others waits on its own schedule and holds back only its key;
 * - a message that runs out of retries, and an endpoint disabled by a 410 or through the API, are told to the
 *   organization's other endpoints (`webhook_endpoint.retries_exhausted`, `webhook_endpoint.disabled`) and counted in
 *   GET /metrics;
 * - attempts keep the request's headers and at most 4 KiB of the answer; the failed messages since a time are sent
 *   again alone; `queue.created` and `queue.deleted` are told.
 * And a stop during an attempt (SIGTERM): the attempt is recorded, its message due at once for the next start.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Clock, type Duration, Effect } from "effect"
import { Delivery, RETRY_SCHEDULE_MS } from "../../src/events/Delivery.ts"
import { EventLog, type NewEvent } from "../../src/kernel/EventLog.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { type Received, startReceiver } from "../support/receiver.ts"
import { databases, freshPostgres, startTestServer, type TestServer } from "../support/server.ts"

/** What an attempt keeps of the answer's body (bytes), and the retry schedule's whole span. */
const RESPONSE_BODY_CAP = 4096
const RETRY_SPAN_MS = RETRY_SCHEDULE_MS.reduce((a: number, b: number) => a + b, 0)

/** A clock `offsetMs` ahead of the real one: what the delivery pass sees as now. */
const clockAhead = (offsetMs: number): Clock.Clock => {
  const real = Clock.make()
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => real.unsafeCurrentTimeMillis() + offsetMs,
    unsafeCurrentTimeNanos: () => real.unsafeCurrentTimeNanos() + BigInt(offsetMs) * 1_000_000n,
    currentTimeMillis: Effect.sync(() => real.unsafeCurrentTimeMillis() + offsetMs),
    currentTimeNanos: Effect.sync(() => real.unsafeCurrentTimeNanos() + BigInt(offsetMs) * 1_000_000n),
    sleep: (d: Duration.Duration) => real.sleep(d)
  }
}

/** One delivery pass at real time + `offsetMs`; the number of attempts made. */
const deliverAt = (server: TestServer, offsetMs = 0) =>
  server.run(Effect.flatMap(Delivery, (d) => d.deliverDue).pipe(Effect.withClock(clockAhead(offsetMs))))

/** Passes at one time until nothing more is sent (a backlog drains in a few). */
const drainAt = async (server: TestServer, offsetMs: number) => {
  let total = 0
  for (let i = 0; i < 20; i++) {
    const n = await deliverAt(server, offsetMs)
    total += n
    if (n === 0) break
  }
  return total
}

for (const db of databases) {
  describe(`webhook delivery without head-of-line waits (${db})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer({ db, config: { webhookAllowPrivate: true, webhookWorker: false } })
    })
    afterAll(async () => {
      await server.close()
    })

    // each test's endpoints go with it: their messages still pending must not be due in a later test's clock steps
    const made: Array<{ id: string; token: string }> = []
    afterEach(async () => {
      for (const e of made.splice(0))
        await server.post("deleteWebhookEndpoint", { id: e.id }, { "x-api-token": e.token })
    })

    let orgs = 0
    /** An organization of its own (only the test's endpoints get its events), with a client for its token. */
    const newOrg = async () => {
      const slug = `delivery-${db}-${++orgs}-${Math.random().toString(36).slice(2, 8)}`
      const { org, token } = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          const org = yield* tenancy.createOrg(slug, true)
          return { org, token: (yield* tenancy.createToken(slug, "delivery", "maintain")).token }
        })
      )
      const post = async (op: string, body: unknown) => {
        const r = await server.post(op, body, { "x-api-token": token })
        if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
        return r.body as Record<string, unknown>
      }
      const endpoint = async (url: string, extra: Record<string, unknown> = {}) => {
        const e = (await post("createWebhookEndpoint", { url, ...extra })) as unknown as { id: string; secret: string }
        made.push({ id: e.id, token })
        return e
      }
      let n = 0
      /** Appends one event per key (in the order given), each its own message. */
      const append = (keys: ReadonlyArray<string>) =>
        server.run(
          Effect.flatMap(EventLog, (log) =>
            log.append(
              keys.map(
                (key): NewEvent => ({
                  orgId: org.id,
                  type: "queue.updated",
                  at: Date.now(),
                  data: { key, n: ++n },
                  repoId: null,
                  branch: null,
                  orderingKey: key
                })
              )
            )
          )
        )
      return { org, token, slug, post, endpoint, append }
    }
    const keyOf = (r: Received) => r.message.data.key as string
    const nOf = (r: Received) => r.message.data.n as number

    test("after an 8 s outage the backlog is delivered within 10 s of the recovery, in order per key", async () => {
      const o = await newOrg()
      const receiver = startReceiver()
      let up = false
      receiver.respond = () => (up ? new Response("ok") : new Response("down", { status: 503 }))
      try {
        const e = await o.endpoint(receiver.url)
        const keys = ["pr:1", "pr:2", "pr:3", "pr:4", "pr:5"]
        await o.append(keys)
        await o.append(keys)
        // the clock from its start: the outage's first 8 s, events keep coming, then the receiver is back
        let recovered = 0
        const probesWhileDown: Array<number> = []
        for (let t = 0; t <= 30_000; t += 1000) {
          if (t === 3000 || t === 6000) await o.append(keys)
          if (t === 8000) {
            up = true
            // the clock the worker sees: real time and the offset
            recovered = Date.now() + t
          }
          const offset = t
          const before = receiver.received.length
          await drainAt(server, offset)
          if (!up) probesWhileDown.push(receiver.received.length - before)
        }
        // while down: the first pass tried each key's head once; after that one probe at a time, every 5 s
        expect(probesWhileDown[0]).toBe(keys.length)
        expect(probesWhileDown.slice(1).every((n) => n <= 1)).toBe(true)
        expect(probesWhileDown.slice(1).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(2)
        const delivered = receiver.received.filter((r) => r.status === 200)
        // everything, once, in the order appended per key
        expect(delivered.length).toBe(20)
        expect(new Set(delivered.map((r) => r.id)).size).toBe(20)
        for (const key of keys) {
          const ns = delivered.filter((r) => keyOf(r) === key).map(nOf)
          expect({ key, ns }).toEqual({ key, ns: [...ns].sort((a, b) => a - b) })
        }
        // within 10 s of the recovery, by the clock the worker was given (webhook-timestamp: its seconds)
        const last = Math.max(...delivered.map((r) => Number(r.headers["webhook-timestamp"]) * 1000))
        expect(last - recovered).toBeLessThanOrEqual(10_000)
        const health = (
          (await o.post("listWebhookEndpoints", {})).endpoints as Array<{ id: string; health: unknown }>
        ).find((x) => x.id === e.id)?.health
        expect(health).toMatchObject({ state: "healthy", failingSince: null, pending: 0, failed: 0 })
      } finally {
        await receiver.stop()
      }
    })

    test("a message failing while the endpoint answers others waits alone: its key, not the endpoint", async () => {
      const o = await newOrg()
      const receiver = startReceiver()
      receiver.respond = (r) => (keyOf(r) === "pr:bad" ? new Response("no", { status: 500 }) : new Response("ok"))
      try {
        const e = await o.endpoint(receiver.url)
        await o.append(["pr:bad", "pr:good", "pr:good", "pr:bad"])
        await drainAt(server, 0)
        const endpoint = async () =>
          (
            (await o.post("listWebhookEndpoints", {})).endpoints as Array<{ id: string; health: { state: string } }>
          ).find((x) => x.id === e.id)
        // the endpoint answered: healthy; the bad key's head waits on its own schedule, its second message behind it
        expect((await endpoint())?.health.state).toBe("healthy")
        expect(receiver.received.filter((r) => keyOf(r) === "pr:good" && r.status === 200).length).toBe(2)
        expect(receiver.received.filter((r) => keyOf(r) === "pr:bad").map(nOf)).toEqual([1])
        // a new message of another key goes at once, while the bad one's next attempt is still ahead
        await o.append(["pr:good"])
        expect(await drainAt(server, 1000)).toBe(1)
        expect(receiver.received.filter((r) => keyOf(r) === "pr:bad").length).toBe(1)
        const pending = (
          (await o.post("listWebhookDeliveries", { endpointId: e.id, status: "pending" })).messages as Array<{
            nextAttemptAt: string
          }>
        ).map((m) => Date.parse(m.nextAttemptAt) - Date.now())
        expect(pending.length).toBe(2)
        expect(Math.max(...pending)).toBeGreaterThan(3000)
      } finally {
        await receiver.stop()
      }
    })

    test("retries exhausted and endpoints disabled are told to the other endpoints and counted in /metrics", async () => {
      const o = await newOrg()
      const failing = startReceiver()
      const other = startReceiver()
      failing.respond = () => new Response("down", { status: 500 })
      try {
        const bad = await o.endpoint(failing.url, { description: "flaky receiver" })
        const good = await o.endpoint(other.url)
        await o.append(["pr:1"])
        await drainAt(server, 0)
        // the failing endpoint is probed every 5 s: 8 attempts within a minute, the 9th after the schedule's span
        for (let t = 6_000; t <= 42_000; t += 6_000) {
          const before = failing.received.length
          await deliverAt(server, t)
          expect(failing.received.length - before).toBe(1)
        }
        const late = Math.ceil(RETRY_SPAN_MS * 0.9) + 60_000
        await drainAt(server, late)
        const exhausted = await other.waitFor(
          (r) => r.message.type === "webhook_endpoint.retries_exhausted",
          "webhook_endpoint.retries_exhausted"
        )
        expect(exhausted.message.data).toMatchObject({
          type: "webhook_endpoint.retries_exhausted",
          endpoint: { id: bad.id, url: failing.url, description: "flaky receiver" },
          message: { event_type: "queue.updated" },
          attempts: 9,
          last_attempt: { status: 500 }
        })
        expect((exhausted.message.data.message as { id: string }).id).toBe(failing.received[0]?.id as string)
        expect(failing.received.every((r) => r.message.type === "queue.updated")).toBe(true)
        const failed = (await o.post("listWebhookDeliveries", { endpointId: bad.id, status: "failed" }))
          .messages as Array<{
          attempts: Array<unknown>
        }>
        expect(failed.length).toBe(1)
        expect(failed[0]?.attempts.length).toBe(9)

        // 410 disables it: told to the other endpoint; an API disable too
        // (failing for a day: probed every 5 minutes)
        failing.respond = () => new Response("gone", { status: 410 })
        await o.append(["pr:2"])
        const later = late + 5 * 60_000 + 1000
        await drainAt(server, later)
        await drainAt(server, later)
        const disabled = await other.waitFor((r) => r.message.type === "webhook_endpoint.disabled", "disabled")
        expect(disabled.message.data).toMatchObject({
          endpoint: { id: bad.id },
          reason: "the receiver answered 410 Gone",
          disabled_by: "greenline"
        })
        const third = await o.endpoint("https://hooks.example.com/third")
        await o.post("updateWebhookEndpoint", { id: third.id, disabled: true })
        await drainAt(server, later)
        const byApi = await other.waitFor(
          (r) =>
            r.message.type === "webhook_endpoint.disabled" &&
            (r.message.data.endpoint as { id: string }).id === third.id,
          "disabled through the API"
        )
        expect(byApi.message.data).toMatchObject({ disabled_by: "api", reason: "disabled through the API" })
        expect(
          other.received.some((r) => (r.message.data.endpoint as { id?: string } | undefined)?.id === good.id)
        ).toBe(false)
        const metrics = await (await fetch(`${server.url}/metrics`)).text()
        expect(metrics).toContain(`greenline_webhook_retries_exhausted_total{endpoint="${bad.id}"} 1`)
        expect(metrics).toMatch(/greenline_webhook_endpoints_disabled_total\{reason="gone"\} [1-9]/)
        expect(metrics).toMatch(/greenline_webhook_endpoints_failing \d+/)
      } finally {
        await failing.stop()
        await other.stop()
      }
    })

    test("attempts keep the request headers and 4 KiB of the answer; resend the failed since a time", async () => {
      const o = await newOrg()
      const receiver = startReceiver()
      receiver.respond = (r) =>
        nOf(r) === 2 ? new Response("x".repeat(10_000), { status: 410 }) : new Response("thanks", { status: 202 })
      try {
        const e = await o.endpoint(receiver.url)
        const since = new Date(Date.now() - 1000).toISOString()
        await o.append(["pr:a", "pr:b"])
        await drainAt(server, 0)
        type Message = {
          id: string
          status: string
          attempts: Array<{
            status: number | null
            durationMs: number
            requestHeaders: Record<string, string> | null
            responseBody: string | null
            interrupted: boolean
          }>
        }
        const list = async (status?: string) =>
          (await o.post("listWebhookDeliveries", { endpointId: e.id, ...(status ? { status } : {}) }))
            .messages as Array<Message>
        const all = await list()
        const delivered = all.find((m) => m.status === "delivered")
        const gone = all.find((m) => m.status === "failed")
        const attempt = delivered?.attempts[0]
        expect(attempt?.status).toBe(202)
        expect(attempt?.responseBody).toBe("thanks")
        expect(attempt?.interrupted).toBe(false)
        expect(attempt?.durationMs).toBeGreaterThanOrEqual(0)
        expect(attempt?.requestHeaders).toMatchObject({
          "webhook-id": delivered?.id,
          "content-type": "application/json",
          "user-agent": "Greenline-Webhooks/1.0"
        })
        expect(attempt?.requestHeaders?.["webhook-signature"]).toMatch(/^v1,/)
        // the secret itself is never recorded
        expect(JSON.stringify(all)).not.toContain(e.secret.slice(6))
        expect(gone?.attempts[0]?.responseBody?.length).toBe(RESPONSE_BODY_CAP)
        // enabled again: only the failed message is sent again
        await o.post("updateWebhookEndpoint", { id: e.id, disabled: false })
        const replayed = await o.post("replayWebhookMessages", { endpointId: e.id, since, onlyFailed: true })
        expect(replayed).toEqual({ replayed: 1 })
        receiver.respond = () => new Response("ok")
        expect(await drainAt(server, 1000)).toBe(1)
        expect(receiver.received.map(nOf).sort()).toEqual([1, 2, 2])
        expect((await list("failed")).length).toBe(0)
      } finally {
        await receiver.stop()
      }
    })

    test("queue.created and queue.deleted are told", async () => {
      const o = await newOrg()
      const receiver = startReceiver()
      try {
        await o.endpoint(receiver.url, { eventTypes: ["queue.created", "queue.deleted"] })
        const key = { repo: { host: "local", owner: o.slug, name: "lifecycle" }, targetBranch: "main" }
        await o.post("createQueue", { ...key, concurrency: 3 })
        await o.post("deleteQueue", key)
        await drainAt(server, 0)
        expect(receiver.received.map((r) => r.message.type)).toEqual(["queue.created", "queue.deleted"])
        expect(receiver.received[0]?.message.data).toMatchObject({
          type: "queue.created",
          repository: key.repo,
          target_branch: "main",
          queue: { concurrency: 3, state: "running" }
        })
        expect(receiver.received[1]?.message.data).toMatchObject({
          type: "queue.deleted",
          repository: key.repo,
          target_branch: "main"
        })
        expect(receiver.received[1]?.message.data.queue).toBeUndefined()
      } finally {
        await receiver.stop()
      }
    })
  })

  // issue #34, defect 7: a stop (SIGTERM) while an attempt is in flight
  test(`a stop during an attempt records it, and the message is due at once for the next start (${db})`, async () => {
    const pg = db === "postgres" ? await freshPostgres() : undefined
    const dataDir = db === "pglite" ? await seededDataDir() : undefined
    const options = { db, ...(pg ? { databaseUrl: pg.url } : {}), ...(dataDir ? { dataDir } : {}) } as const
    const receiver = startReceiver()
    let arrived: () => void = () => {}
    const reached = new Promise<void>((resolve) => {
      arrived = resolve
    })
    let release: () => void = () => {}
    const hanging = new Promise<Response>((resolve) => {
      release = () => resolve(new Response("late"))
    })
    let calls = 0
    receiver.respond = () => {
      calls++
      arrived()
      return hanging
    }
    let second: TestServer | undefined
    try {
      const first = await startTestServer({ ...options, config: { webhookAllowPrivate: true } })
      const made = await first.post("createWebhookEndpoint", { url: receiver.url, eventTypes: ["queue.updated"] })
      const endpointId = (made.body as { id: string }).id
      const key = { repo: { host: "local", owner: "acme", name: `stop-${db}` }, targetBranch: "main" }
      await first.post("createQueue", key)
      await first.post("updateQueue", { ...key, concurrency: 2 })
      await reached
      const stoppedAt = Date.now()
      await first.stop()
      // the next start: its worker off, the record read through the API, the delivery stepped
      second = await startTestServer({ ...options, config: { webhookAllowPrivate: true, webhookWorker: false } })
      const listed = (await second.post("listWebhookDeliveries", { endpointId })).body as {
        messages: Array<{
          id: string
          status: string
          nextAttemptAt: string | null
          attempts: Array<{ status: number | null; error: string | null; interrupted: boolean }>
        }>
      }
      const [message] = listed.messages
      expect(message?.status).toBe("pending")
      expect(message?.attempts).toEqual([
        expect.objectContaining({ status: null, interrupted: true, error: "the server stopped during the attempt" })
      ])
      // due at once, not after a lease
      expect(Date.parse(message?.nextAttemptAt ?? "")).toBeLessThanOrEqual(Date.now())
      expect(Date.parse(message?.nextAttemptAt ?? "")).toBeGreaterThanOrEqual(stoppedAt - 5_000)
      receiver.respond = () => {
        calls++
        return new Response("ok")
      }
      expect(await deliverAt(second, 0)).toBe(1)
      const after = (await second.post("listWebhookDeliveries", { endpointId })).body as typeof listed
      expect(after.messages[0]?.status).toBe("delivered")
      expect(after.messages[0]?.attempts.map((a) => a.status)).toEqual([null, 200])
      // the receiver saw two requests of the one message: the log shows both
      expect(calls).toBe(2)
      expect(receiver.received.map((r) => r.id)).toEqual([message?.id as string])
    } finally {
      release()
      await second?.stop()
      await receiver.stop()
      await pg?.drop()
      if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }, 120_000)
}
