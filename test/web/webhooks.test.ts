/**
 * The dashboard's webhook delivery page in a real browser (Debian's chromium through playwright-core), against the
 * real server and a receiver on loopback (issue #34): the endpoints with their health; an endpoint's messages with
 * each attempt's request headers, status, answer and duration; resend one message, resend the failed since a time,
 * disable and enable, rotate the secret (the next message carries both signatures). The delivery worker's loop is
 * off: the test delivers with the worker's pass, so what the page shows follows the test's steps.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as path from "node:path"
import { Effect } from "effect"
import type { BrowserContext, Page } from "playwright-core"
import { Webhook } from "standardwebhooks"
import { Delivery } from "../../src/events/Delivery.ts"
import { sharedBrowser } from "../support/browser.ts"
import { startReceiver } from "../support/receiver.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const SCREENSHOTS = process.env.GREENLINE_SCREENSHOTS === "1"
const SCREENS = path.join(import.meta.dir, "../../docs/screens")

const browser = sharedBrowser()
const browserOnce = browser.get
afterAll(browser.close)

/** One pass of the delivery worker now (the server's own loop is off). */
const deliver = (server: TestServer) => server.run(Effect.flatMap(Delivery, (d) => d.deliverDue))

for (const db of databases) {
  describe(`webhook delivery page in a browser (${db})`, () => {
    let server: TestServer
    let context: BrowserContext
    let page: Page
    const key = { repo: { host: "local", owner: "acme", name: "hooks" }, targetBranch: "main" }
    const ok = async <A = unknown>(op: string, body: unknown): Promise<A> => {
      const r = await server.post(op, body)
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }

    beforeAll(async () => {
      server = await startTestServer({ db, config: { webhookAllowPrivate: true, webhookWorker: false } })
      await ok("createQueue", key)
      context = await (await browserOnce()).newContext({ viewport: { width: 1100, height: 800 }, colorScheme: "light" })
      page = await context.newPage()
      // the page asks before it disables or rotates
      page.on("dialog", (dialog) => void dialog.accept())
      await page.goto(`${server.url}/login`)
      await page.fill("#token", server.token)
      await Promise.all([page.waitForURL(`${server.url}/`), page.click("button[type=submit]")])
    }, 120_000)
    afterAll(async () => {
      await context?.close()
      await server?.close()
    })

    test("endpoints and health; a message's attempts; resend one; resend the failed; disable; rotate", async () => {
      const receiver = startReceiver()
      let answers: Array<() => Response> = [
        () => new Response("receiver says no", { status: 500 }),
        () => new Response("accepted", { status: 202 })
      ]
      receiver.respond = () => (answers.shift() ?? (() => new Response("ok")))()
      try {
        const endpoint = await ok<{ id: string; secret: string }>("createWebhookEndpoint", {
          url: receiver.url,
          description: "deploy hooks",
          eventTypes: ["queue.updated"]
        })
        await ok("updateQueue", { ...key, concurrency: 2 })
        expect(await deliver(server)).toBe(1)

        // the list: the endpoint, failing
        await page.goto(`${server.url}/webhooks`)
        const row = page.locator("#endpoints tr", { hasText: receiver.url })
        await row.waitFor()
        await row.locator(".badge-failing").waitFor()
        expect(await row.textContent()).toContain("deploy hooks")
        if (SCREENSHOTS && db === "pglite") await page.screenshot({ path: path.join(SCREENS, "webhooks.png") })

        // the endpoint's page: the message and its attempt, opened
        await row.locator("a").click()
        await page.waitForSelector(`h1 >> text=${receiver.url}`)
        const message = page.locator("li.message").first()
        await message.locator(".toolbar .badge-pending").waitFor()
        const messageId = (await message.getAttribute("data-message")) ?? ""
        expect(messageId).toMatch(/^msg_[0-9a-f]{32}$/)
        await message.locator("details.attempt summary").first().click()
        const attempt = message.locator("details.attempt").first()
        await attempt.locator("text=receiver says no").waitFor()
        const attemptText = (await attempt.textContent()) ?? ""
        expect(attemptText).toContain("500")
        expect(attemptText).toContain("webhook-id")
        expect(attemptText).toContain(messageId)
        expect(attemptText).toMatch(/\d+ ms/)
        if (SCREENSHOTS && db === "pglite") await page.screenshot({ path: path.join(SCREENS, "webhook-endpoint.png") })

        // resend it: sent again, delivered
        await message.locator("button", { hasText: "Resend" }).click()
        await page.waitForSelector(`[role=status] >> text=Message ${messageId} will be sent again.`)
        // (a failing endpoint is tried at its next probe: 5 s after the failure)
        for (let i = 0; i < 100 && receiver.received.length < 2; i++) {
          await deliver(server)
          await Bun.sleep(100)
        }
        expect(receiver.received.map((r) => r.id)).toEqual([messageId, messageId])
        await page
          .locator(`li.message[data-message="${messageId}"] .toolbar .badge-delivered`)
          .waitFor({ timeout: 20_000 })
        expect(await page.locator(`li.message[data-message="${messageId}"] details.attempt`).count()).toBe(2)

        // a message the receiver refuses for good (410): failed, the endpoint disabled
        answers = [() => new Response("gone", { status: 410 })]
        await ok("updateQueue", { ...key, concurrency: 3 })
        expect(await deliver(server)).toBe(1)
        await page.locator("h1 .badge-disabled").waitFor({ timeout: 20_000 })
        // enable it, and resend every failed message of the last day
        await page.click("button >> text=Enable")
        await page.waitForSelector("[role=status] >> text=Enabled.")
        await page.click("button >> text=Resend failed")
        await page.waitForSelector("[role=status] >> text=1 failed message will be sent again.")
        expect(await deliver(server)).toBe(1)
        expect(receiver.received.map((r) => r.status)).toEqual([500, 202, 410, 200])
        await page.selectOption("#message-filter", "failed")
        await page.waitForSelector("text=No messages.", { timeout: 20_000 })
        await page.selectOption("#message-filter", "")

        // rotate: the new secret once; the next message carries both signatures
        await page.click("button >> text=Rotate secret")
        const secret = (await page.locator("code.secret").textContent()) ?? ""
        expect(secret).toMatch(/^whsec_/)
        expect(secret).not.toBe(endpoint.secret)
        await ok("updateQueue", { ...key, concurrency: 4 })
        expect(await deliver(server)).toBe(1)
        const last = receiver.received[receiver.received.length - 1]
        expect(last?.headers["webhook-signature"]?.split(" ").length).toBe(2)
        for (const s of [secret, endpoint.secret]) {
          expect(new Webhook(s).verify(last?.body ?? "", last?.headers ?? {})).toMatchObject({ type: "queue.updated" })
        }

        // disable it from the page
        await page.click("button >> text=Disable")
        await page.waitForSelector("[role=status] >> text=Disabled.")
        await page.locator("h1 .badge-disabled").waitFor()
        const listed = await ok<{ endpoints: Array<{ id: string; disabled: boolean }> }>("listWebhookEndpoints", {})
        expect(listed.endpoints.find((e) => e.id === endpoint.id)?.disabled).toBe(true)
        await ok("deleteWebhookEndpoint", { id: endpoint.id })
      } finally {
        await receiver.stop()
      }
    }, 120_000)
  })
}
