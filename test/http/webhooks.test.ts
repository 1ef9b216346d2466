/**
 * Outgoing events (issue #17): a real receiver on loopback gets every event type, signed (checked with the
 * `standardwebhooks` package), with Trunk's payload keys; retries keep the webhook-id; 410 disables; the API is
 * tenant-scoped and validated; the live stream resumes after Last-Event-ID. Retry timing is stepped with a clock
 * handed to the delivery worker's pass (the worker's own loop is off in those servers), not slept through.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Clock, type Duration, Effect } from "effect"
import { Webhook } from "standardwebhooks"
import { WebhookVerificationError as SvixVerificationError, Webhook as SvixWebhook } from "svix"
import { Delivery } from "../../src/events/Delivery.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { startReceiver } from "../support/receiver.ts"
import { openScenario } from "../support/scenario.ts"
import { databases, eventually, startTestServer, type TestServer, tempDir } from "../support/server.ts"
import { PR_KEYS, sorted } from "../support/trunkPayloads.ts"

const TIMEOUT = 90_000

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

/** One delivery pass at real time + `offsetMs`; the number of messages sent. */
const deliverAt = (server: TestServer, offsetMs = 0) =>
  server.run(Effect.flatMap(Delivery, (d) => d.deliverDue).pipe(Effect.withClock(clockAhead(offsetMs))))

for (const db of databases) {
  describe(`webhooks (${db})`, () => {
    let server: TestServer
    let root: string
    beforeAll(async () => {
      root = tempDir("greenline-events-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100, config: { webhookAllowPrivate: true } })
    })
    afterAll(async () => {
      await server.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test(
      "every event type arrives signed, with Trunk's payload keys",
      async () => {
        const receiver = startReceiver()
        try {
          const created = await server.post("createWebhookEndpoint", { url: receiver.url, description: "all" })
          expect(created.status).toBe(200)
          const endpoint = created.body as { id: string; secret: string; eventTypes: unknown }
          expect(endpoint.secret).toMatch(/^whsec_/)
          expect(endpoint.eventTypes).toBeNull()
          const verifier = new Webhook(endpoint.secret)

          const s = await openScenario(server, root, { name: `all-${db}`, concurrency: 2 })
          try {
            await s.updateQueue({ state: "paused" })
            await s.updateQueue({ state: "running", pendingFailureDepth: 1 })
            // merged
            s.createPr(1)
            await s.submit(1)
            await s.ciPass(1)
            await s.waitState(1, "merged")
            // failed
            s.createPr(2)
            await s.submit(2)
            await s.ciFail(2)
            await s.waitState(2, "failed")
            // canceled
            s.createPr(3)
            await s.submit(3)
            await s.waitState(3, "testing")
            await s.ok("cancelPullRequest", { pr: { number: 3 } })
            await s.waitState(3, "cancelled")
            // pending_failure: #5, behind #4, fails while #4 is still testing
            s.createPr(4)
            s.createPr(5)
            await s.submit(4)
            await s.submit(5)
            await s.waitState(5, "testing")
            await s.ciFail(5)
            await s.waitState(5, "pending_failure")
            await s.ciPass(4)
            await s.waitState(4, "merged")
          } finally {
            await s.close()
          }
          // a batch: two PRs tested together, merged together
          const b = await openScenario(server, root, {
            name: `batch-${db}`,
            config: { batch: true, batchingMinSize: 2, batchingMaxWaitTimeMinutes: 1 }
          })
          try {
            b.createPr(6)
            b.createPr(7)
            await b.submit(6)
            await b.submit(7)
            await b.ciPass(6)
            await b.waitState(7, "merged")
          } finally {
            await b.close()
          }

          // flaky tests: a pass on retry makes a test flaky; then it is quarantined by hand
          const flakyRepo = { host: "local", owner: "acme", name: `flaky-${db}` }
          const form = new FormData()
          form.append(
            "metadata",
            JSON.stringify({ repo: flakyRepo, org_url_slug: "acme-org", sha: "a".repeat(40), branch: "feature" })
          )
          const junit = `<?xml version="1.0"?><testsuites><testsuite name="s">
            <testcase name="flappy" classname="pkg.C" file="a.test.ts"><failure message="boom">x</failure></testcase>
            <testcase name="flappy" classname="pkg.C" file="a.test.ts"/><testcase name="ok" classname="pkg.C"/>
            </testsuite></testsuites>`
          form.append("junit", new File([junit], "a.xml", { type: "application/xml" }))
          const uploaded = await fetch(`${server.url}/v1/flaky-tests/upload`, {
            method: "POST",
            headers: { "x-api-token": server.token },
            body: form
          })
          expect(uploaded.status).toBe(200)
          const statusEvent = await receiver.waitFor(
            (r) => r.message.type === "test_case.status_changed",
            "test_case.status_changed"
          )
          const testCase = statusEvent.message.data.test_case as { id: string; name: string }
          expect(testCase.name).toBe("flappy")
          expect(statusEvent.message.data.status_change).toMatchObject({
            previous_status: "healthy",
            current_status: { value: "flaky" }
          })
          const override = await server.post("flaky-tests/set-quarantine-override", {
            repo: flakyRepo,
            org_url_slug: "acme-org",
            test_case_id: testCase.id,
            override: "always_quarantine",
            reason: "flaky on the payment mock"
          })
          expect(override.status).toBe(200)

          const wanted = [
            "test_case.status_changed",
            "test_case.quarantining_setting_changed",
            ...Object.keys(PR_KEYS).map((a) => `pull_request.${a}`),
            "pull_request_batch.testing",
            "pull_request_batch.merged",
            "queue.updated",
            "queue.state_changed",
            "test_run.started",
            "test_run.completed"
          ]
          for (const type of wanted) await receiver.waitFor((r) => r.message.type === type, type)
          for (const r of receiver.received) {
            // the signature, checked by the Standard Webhooks library; the same under the svix-* names
            expect(verifier.verify(r.body, r.headers)).toEqual(r.message as unknown as Record<string, unknown>)
            expect(r.headers["svix-id"]).toBe(r.id)
            expect(r.headers["svix-signature"]).toBe(r.headers["webhook-signature"])
            expect(r.id).toMatch(/^msg_[0-9a-f]{32}$/)
            expect(sorted(Object.keys(r.message))).toEqual(["data", "timestamp", "type"])
            expect(r.message.data.type).toBe(r.message.type)
            const [family, action] = r.message.type.split(".") as [string, string]
            if (family === "pull_request") {
              expect({ type: r.message.type, keys: sorted(Object.keys(r.message.data)) }).toEqual({
                type: r.message.type,
                keys: sorted(PR_KEYS[action] ?? [])
              })
              expect(r.message.data.action).toBe(action)
              expect(r.message.data.status).toBe(action)
              expect(r.message.data.repository).toEqual({ host: "local", owner: "acme", name: expect.any(String) })
            }
            if (family === "test_case") {
              const detail = action === "status_changed" ? "status_change" : "quarantine_setting_changed"
              expect(sorted(Object.keys(r.message.data))).toEqual(sorted(["type", "test_case", detail]))
            }
            if (r.message.type === "test_case.quarantining_setting_changed") {
              expect(sorted(Object.keys(r.message.data.quarantine_setting_changed as object))).toEqual(
                sorted([
                  "actor",
                  "reason",
                  "timestamp",
                  "previous_quarantining_setting",
                  "updated_quarantining_setting"
                ])
              )
              // issue #34, defect 5: the reason given with the override
              expect(r.message.data.quarantine_setting_changed).toMatchObject({
                previous_quarantining_setting: "UNSPECIFIED",
                updated_quarantining_setting: "ALWAYS_QUARANTINE",
                reason: "flaky on the payment mock"
              })
            }
            if (family === "pull_request_batch") {
              expect(r.message.data.pr_numbers).toEqual([6, 7])
              expect(r.message.data.pr_numbers_in_batch).toEqual([6, 7])
            }
          }
          const reasonOf = (type: string, pr: number, field: string) =>
            receiver.received.find((r) => r.message.type === type && r.message.data.pr_number === pr)?.message.data[
              field
            ]
          expect(reasonOf("pull_request.submitted", 1, "submitted_reason")).toBe("API_REQUESTED")
          expect(reasonOf("pull_request.merged", 1, "merged_reason")).toBe("MERGE_GRAPH_MERGE")
          expect(reasonOf("pull_request.failed", 2, "failure_reason")).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
          // issue #34, defect 4: one of Trunk's values (an API cancel is the timeline's API_REQUESTED)
          expect(reasonOf("pull_request.canceled", 3, "cancellation_reason")).toBe("USER_REQUESTED")
          const changed = receiver.received.find((r) => r.message.type === "queue.state_changed")
          expect(changed?.message.data).toMatchObject({ previous_state: "running", state: "paused" })
          // per pull request, in the order it happened
          const order = receiver.received
            .filter((r) => r.message.type.startsWith("pull_request.") && r.message.data.pr_number === 1)
            .map((r) => r.message.type)
          expect(order).toEqual([
            "pull_request.submitted",
            "pull_request.queued",
            "pull_request.testing",
            "pull_request.merged"
          ])
          // the API shows the messages with their attempts
          // (the worker records finished attempts in batches, a moment after the receiver answered: no round nor
          // event marks the record, so it is polled)
          const messages = await eventually(async () => {
            const listed = await server.post("listWebhookDeliveries", { endpointId: endpoint.id })
            expect(listed.status).toBe(200)
            const list = (listed.body as { messages: Array<{ status: string; attempts: Array<{ status: number }> }> })
              .messages
            return list.length > 0 && list.every((m) => m.status === "delivered") ? list : undefined
          })
          expect(messages.every((m) => m.attempts.length === 1 && m.attempts[0]?.status === 200)).toBe(true)
          await server.post("deleteWebhookEndpoint", { id: endpoint.id })
        } finally {
          await receiver.stop()
        }
      },
      TIMEOUT
    )
  })

  describe(`webhook retries, stepped by a clock (${db})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer({ db, config: { webhookAllowPrivate: true, webhookWorker: false } })
    })
    afterAll(async () => {
      await server.close()
    })

    // each test's endpoint goes with it: its messages still pending must not be due in a later test's clock steps
    const made: Array<string> = []
    afterEach(async () => {
      for (const id of made.splice(0)) await server.post("deleteWebhookEndpoint", { id })
    })

    let n = 0
    /** A queue of its own (its updates are the events), an endpoint for the receiver, and one queue.updated. */
    const setup = async (url: string, extra: Record<string, unknown> = {}) => {
      const key = { repo: { host: "local", owner: "acme", name: `retry-${db}-${++n}` }, targetBranch: "main" }
      expect((await server.post("createQueue", key)).status).toBe(200)
      // only this queue's repository: the other tests' endpoints and queues stay out of this one's counts
      const created = (
        await server.post("createWebhookEndpoint", { url, eventTypes: ["queue.updated"], repo: key.repo, ...extra })
      ).body as { id: string; secret: string }
      made.push(created.id)
      const update = async (concurrency: number) =>
        expect((await server.post("updateQueue", { ...key, concurrency })).status).toBe(200)
      return { endpoint: created, update }
    }
    const deliveriesOf = async (endpointId: string) =>
      (
        (await server.post("listWebhookDeliveries", { endpointId })).body as {
          messages: Array<{
            id: string
            status: string
            nextAttemptAt: string | null
            attempts: Array<{ at: string; status: number | null }>
          }>
        }
      ).messages

    test("500, then 200 at the next attempt 5 s later: the same webhook-id again", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        await update(2)
        receiver.respond = () => new Response("down", { status: 500 })
        expect(await deliverAt(server)).toBe(1)
        expect(receiver.received.map((r) => r.status)).toEqual([500])
        // not due yet: nothing is sent
        expect(await deliverAt(server, 1_000)).toBe(0)
        receiver.respond = () => new Response("ok")
        expect(await deliverAt(server, 6_000)).toBe(1)
        const [first, second] = receiver.received
        expect(second?.status).toBe(200)
        expect(second?.id).toBe(first?.id as string)
        expect(second?.body).toBe(first?.body as string)
        const [message] = await deliveriesOf(endpoint.id)
        expect(message?.status).toBe("delivered")
        expect(message?.attempts.map((a) => a.status)).toEqual([500, 200])
        expect(message?.id).toBe(first?.id as string)
      } finally {
        await receiver.stop()
      }
    })

    test("429 with Retry-After: the next attempt waits that long", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        await update(3)
        receiver.respond = () => new Response("slow down", { status: 429, headers: { "retry-after": "120" } })
        expect(await deliverAt(server)).toBe(1)
        const [message] = await deliveriesOf(endpoint.id)
        const attempt = Date.parse(message?.attempts[0]?.at ?? "")
        const next = Date.parse(message?.nextAttemptAt ?? "")
        expect(next - attempt).toBe(120_000)
        expect(await deliverAt(server, 60_000)).toBe(0)
        expect(await deliverAt(server, 121_000)).toBe(1)
      } finally {
        await receiver.stop()
      }
    })

    test("an endpoint deleted while its message is sent: the other endpoints' deliveries are still recorded", async () => {
      const gone = startReceiver()
      const other = startReceiver()
      try {
        const { endpoint, update } = await setup(gone.url)
        const second = (
          await server.post("createWebhookEndpoint", {
            url: other.url,
            eventTypes: ["queue.updated"],
            repo: { host: "local", owner: "acme", name: `retry-${db}-${n}` }
          })
        ).body as { id: string }
        made.push(second.id)
        // the first receiver's owner deletes the endpoint before it answers
        gone.respond = async () => {
          expect((await server.post("deleteWebhookEndpoint", { id: endpoint.id })).status).toBe(200)
          return new Response("ok")
        }
        await update(2)
        expect(await deliverAt(server)).toBe(2)
        // the pass recorded the other endpoint's delivery (the deleted one's attempt went with its endpoint)
        const [message] = await deliveriesOf(second.id)
        expect(message?.status).toBe("delivered")
        expect(message?.attempts.map((a) => a.status)).toEqual([200])
      } finally {
        await gone.stop()
        await other.stop()
      }
    })

    test("410 Gone disables the endpoint", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        receiver.respond = () => new Response("gone", { status: 410 })
        await update(2)
        expect(await deliverAt(server)).toBe(1)
        const listed = (await server.post("listWebhookEndpoints", {})).body as {
          endpoints: Array<{ id: string; disabled: boolean; disabledReason: string | null }>
        }
        const mine = listed.endpoints.find((e) => e.id === endpoint.id)
        expect(mine?.disabled).toBe(true)
        expect(mine?.disabledReason).toContain("410")
        // a disabled endpoint gets no new messages
        await update(3)
        expect(await deliverAt(server, 10_000)).toBe(0)
        expect(receiver.received.length).toBe(1)
      } finally {
        await receiver.stop()
      }
    })

    test("an endpoint failing for 5 days is disabled; every schedule step keeps the id", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        receiver.respond = () => new Response("down", { status: 503 })
        await update(2)
        // the schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (±10%): each step taken at its latest
        let offset = 0
        expect(await deliverAt(server, offset)).toBe(1)
        for (const step of [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000]) {
          offset += step * 1.1 + 1000
          expect(await deliverAt(server, offset)).toBe(1)
        }
        expect(new Set(receiver.received.map((r) => r.id)).size).toBe(1)
        let listed = (await server.post("listWebhookEndpoints", {})).body as {
          endpoints: Array<{ id: string; disabled: boolean }>
        }
        expect(listed.endpoints.find((e) => e.id === endpoint.id)?.disabled).toBe(false)
        // a new message 5 days after the first failure fails too: the endpoint is disabled
        await update(3)
        expect(await deliverAt(server, 5 * 24 * 3_600_000 + 60_000)).toBeGreaterThanOrEqual(1)
        listed = (await server.post("listWebhookEndpoints", {})).body as {
          endpoints: Array<{ id: string; disabled: boolean }>
        }
        expect(listed.endpoints.find((e) => e.id === endpoint.id)?.disabled).toBe(true)
      } finally {
        await receiver.stop()
      }
    })

    test("a rotated secret: both signatures are sent, each verifies", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        const rotated = (await server.post("rotateWebhookSecret", { id: endpoint.id })).body as { secret: string }
        expect(rotated.secret).not.toBe(endpoint.secret)
        await update(2)
        expect(await deliverAt(server)).toBe(1)
        const [r] = receiver.received
        expect(r?.headers["webhook-signature"]?.split(" ").length).toBe(2)
        for (const secret of [endpoint.secret, rotated.secret]) {
          expect(new Webhook(secret).verify(r?.body ?? "", r?.headers ?? {})).toMatchObject({ type: "queue.updated" })
        }
      } finally {
        await receiver.stop()
      }
    })

    test("svix's own verifier accepts our signature under the svix-* names, and refuses a tampered message", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        await update(3)
        expect(await deliverAt(server)).toBe(1)
        const [r] = receiver.received
        const body = r?.body ?? ""
        const headers = r?.headers ?? {}
        // only the svix-* headers: what a receiver written for Svix reads
        const svixHeaders = {
          "svix-id": headers["svix-id"] ?? "",
          "svix-timestamp": headers["svix-timestamp"] ?? "",
          "svix-signature": headers["svix-signature"] ?? ""
        }
        const verifier = new SvixWebhook(endpoint.secret)
        // (svix 2.x's verify returns nothing; it throws when the message does not verify)
        expect(() => verifier.verify(body, svixHeaders)).not.toThrow()
        expect(() => verifier.verify(body, headers)).not.toThrow()
        expect(JSON.parse(body)).toMatchObject({ type: "queue.updated", data: { type: "queue.updated" } })
        // a changed body, id or timestamp, or another secret, fails
        const tampered = body.replace('"concurrency":3', '"concurrency":4')
        expect(tampered).not.toBe(body)
        expect(() => verifier.verify(tampered, svixHeaders)).toThrow(SvixVerificationError)
        expect(() => verifier.verify(body, { ...svixHeaders, "svix-id": `${svixHeaders["svix-id"]}x` })).toThrow(
          SvixVerificationError
        )
        const earlier = String(Number(svixHeaders["svix-timestamp"]) - 1)
        expect(() => verifier.verify(body, { ...svixHeaders, "svix-timestamp": earlier })).toThrow(
          SvixVerificationError
        )
        const other = (await server.post("rotateWebhookSecret", { id: endpoint.id })).body as { secret: string }
        expect(() => new SvixWebhook(other.secret).verify(body, svixHeaders)).toThrow(SvixVerificationError)
      } finally {
        await receiver.stop()
      }
    })

    test("replay sends delivered messages again with their ids", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        await update(2)
        expect(await deliverAt(server)).toBe(1)
        const first = receiver.received[0]
        const replayed = await server.post("replayWebhookMessages", {
          endpointId: endpoint.id,
          messageIds: [first?.id]
        })
        expect(replayed.body).toEqual({ replayed: 1 })
        expect(await deliverAt(server)).toBe(1)
        expect(receiver.received.map((r) => r.id)).toEqual([first?.id as string, first?.id as string])
        const since = await server.post("replayWebhookMessages", {
          endpointId: endpoint.id,
          since: new Date(Date.now() - 60_000).toISOString()
        })
        expect(since.body).toEqual({ replayed: 1 })
      } finally {
        await receiver.stop()
      }
    })

    test("a redirect is a failed attempt, not followed", async () => {
      const receiver = startReceiver()
      try {
        const { endpoint, update } = await setup(receiver.url)
        receiver.respond = () => new Response(null, { status: 307, headers: { location: `${receiver.url}/elsewhere` } })
        await update(2)
        expect(await deliverAt(server)).toBe(1)
        expect(receiver.received.length).toBe(1)
        const [message] = await deliveriesOf(endpoint.id)
        expect(message?.status).toBe("pending")
        expect(message?.attempts[0]?.status).toBe(307)
      } finally {
        await receiver.stop()
      }
    })
  })

  describe(`webhook API: tenancy and validation (${db})`, () => {
    let server: TestServer
    let otherToken: string
    beforeAll(async () => {
      server = await startTestServer({ db, config: { webhookWorker: false } })
      otherToken = (
        await server.run(
          Effect.gen(function* () {
            const tenancy = yield* Tenancy
            yield* tenancy.createOrg("other-org")
            return yield* tenancy.createToken("other-org", "test", "admin")
          })
        )
      ).token
    })
    afterAll(async () => {
      await server.close()
    })

    const errorOf = (r: { status: number; body: unknown }) => ({
      status: r.status,
      code: (r.body as { error?: { code?: string } }).error?.code,
      paths: ((r.body as { error?: { details?: Array<{ path: string }> } }).error?.details ?? []).map((d) => d.path)
    })

    test("another organization's endpoint is 404 everywhere and not listed", async () => {
      const mine = (await server.post("createWebhookEndpoint", { url: "https://hooks.example.com/a" })).body as {
        id: string
      }
      const asOther = (op: string, body: unknown) => server.post(op, body, { "x-api-token": otherToken })
      for (const [op, body] of [
        ["updateWebhookEndpoint", { id: mine.id, disabled: true }],
        ["deleteWebhookEndpoint", { id: mine.id }],
        ["rotateWebhookSecret", { id: mine.id }],
        ["listWebhookDeliveries", { endpointId: mine.id }],
        ["replayWebhookMessages", { endpointId: mine.id, since: "2026-01-01T00:00:00Z" }]
      ] as const) {
        expect({ op, ...errorOf(await asOther(op, body)) }).toEqual({ op, status: 404, code: "NOT_FOUND", paths: [] })
      }
      expect((await asOther("listWebhookEndpoints", {})).body).toEqual({ endpoints: [] })
      const still = (await server.post("listWebhookEndpoints", {})).body as { endpoints: Array<{ id: string }> }
      expect(still.endpoints.map((e) => e.id)).toContain(mine.id)
    })

    test("bad input is INVALID_REQUEST with a path, and changes nothing", async () => {
      const before = (await server.post("listWebhookEndpoints", {})).body
      const cases: Array<[string, unknown, string]> = [
        ["createWebhookEndpoint", { url: "not a url" }, "url"],
        ["createWebhookEndpoint", { url: "ftp://example.com/x" }, "url"],
        ["createWebhookEndpoint", { url: "http://127.0.0.1:9/x" }, "url"],
        ["createWebhookEndpoint", { url: "http://localhost/x" }, "url"],
        [
          "createWebhookEndpoint",
          { url: "https://example.com", eventTypes: ["pull_request.exploded"] },
          "eventTypes.0"
        ],
        ["createWebhookEndpoint", { url: "https://example.com", eventTypes: [] }, "eventTypes"],
        ["createWebhookEndpoint", {}, "url"],
        ["updateWebhookEndpoint", { id: "nope" }, "id"],
        ["listWebhookDeliveries", { endpointId: "00000000-0000-0000-0000-00000000000x" }, "endpointId"],
        [
          "replayWebhookMessages",
          { endpointId: "00000000-0000-0000-0000-000000000000", messageIds: ["x"] },
          "messageIds.0"
        ]
      ]
      for (const [op, body, path] of cases) {
        const e = errorOf(await server.post(op, body))
        expect({ op, body, status: e.status, code: e.code, path: e.paths.includes(path) }).toEqual({
          op,
          body,
          status: 400,
          code: "INVALID_REQUEST",
          path: true
        })
      }
      expect((await server.post("listWebhookEndpoints", {})).body).toEqual(before)
    })

    // issue #34, defect 8: names and addresses that reach this machine or its network in another spelling
    test("private addresses in every spelling are refused at creation", async () => {
      for (const url of [
        "http://LOCALHOST./x",
        "http://localhost../x",
        "http://app.localhost./x",
        "http://[64:ff9b::7f00:1]/x",
        "http://[64:ff9b::a00:1]/x",
        "http://[64:ff9b:1::808:808]/x",
        "http://[::7f00:1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[2002:7f00:1::]/x",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x",
        "http://0x7f.1/x",
        "http://2130706433/x"
      ]) {
        const e = errorOf(await server.post("createWebhookEndpoint", { url }))
        expect({ url, ...e }).toEqual({ url, status: 400, code: "INVALID_REQUEST", paths: ["url"] })
      }
      // a public address behind NAT64's well-known prefix is a public address
      const nat64 = await server.post("createWebhookEndpoint", { url: "http://[64:ff9b::808:808]/x" })
      expect(nat64.status).toBe(200)
      await server.post("deleteWebhookEndpoint", { id: (nat64.body as { id: string }).id })
    })

    // issue #34, defect 9
    test("a bad page token is INVALID_PAGE_TOKEN; details name only what is wrong; eventTypes null is every type", async () => {
      const made = await server.post("createWebhookEndpoint", { url: "https://hooks.example.com/p", eventTypes: null })
      expect(made.status).toBe(200)
      const endpoint = made.body as { id: string; eventTypes: unknown }
      expect(endpoint.eventTypes).toBeNull()
      const listed = (await server.post("listWebhookEndpoints", {})).body as {
        endpoints: Array<{ id: string; eventTypes: unknown }>
      }
      expect(listed.endpoints.find((e) => e.id === endpoint.id)?.eventTypes).toBeNull()
      // what list answers, update and create accept
      const updated = await server.post("updateWebhookEndpoint", { id: endpoint.id, eventTypes: null })
      expect(updated.status).toBe(200)
      const token = await server.post("listWebhookDeliveries", {
        endpointId: endpoint.id,
        page_query: { page_size: 10, page_token: "bm90LWEtdG9rZW4" }
      })
      expect(errorOf(token)).toEqual({ status: 400, code: "INVALID_PAGE_TOKEN", paths: [] })
      const bodyOf = (r: { body: unknown }) =>
        (r.body as { error: { details: Array<{ path: string; message: string }> } }).error.details
      for (const [op, body, path] of [
        [
          "createWebhookEndpoint",
          { url: "https://example.com", eventTypes: ["pull_request.exploded"] },
          "eventTypes.0"
        ],
        ["updateWebhookEndpoint", { id: endpoint.id, eventTypes: ["nope"] }, "eventTypes.0"],
        [
          "listWebhookDeliveries",
          { endpointId: endpoint.id, page_query: { page_size: 500, page_token: "" } },
          "page_query.page_size"
        ]
      ] as const) {
        const details = bodyOf(await server.post(op, body))
        expect({ op, details: details.map((d) => d.path) }).toEqual({ op, details: [path] })
        expect(
          details.some((d) => d.message.startsWith("Expected undefined") || d.message.startsWith("Expected null"))
        ).toBe(false)
      }
      await server.post("deleteWebhookEndpoint", { id: endpoint.id })
    })

    test("event types are accepted in any letter case and stored as named", async () => {
      const r = await server.post("createWebhookEndpoint", {
        url: "https://hooks.example.com/b",
        eventTypes: ["PULL_REQUEST.MERGED", "pull_request.failed"]
      })
      expect(r.status).toBe(200)
      expect((r.body as { eventTypes: unknown }).eventTypes).toEqual(["pull_request.merged", "pull_request.failed"])
    })

    test("the stream needs a token", async () => {
      const r = await fetch(`${server.url}/v1/events/stream`)
      expect(r.status).toBe(401)
    })
  })
}
