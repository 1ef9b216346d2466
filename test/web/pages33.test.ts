/**
 * The dashboard's rough edges of issue #33 in a real browser: a title per page, a favicon, every queue setting
 * editable, "Submit again" keeping the priority, a page for an unknown path, the session cookie renewed on use, and
 * an offline banner within 3 s of the server stopping. Chromium through playwright-core, the real server, both
 * databases, the built-in command CI.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import type { BrowserContext, Page } from "playwright-core"
import { sharedBrowser } from "../support/browser.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 90_000

const browser = sharedBrowser()
const browserOnce = browser.get
afterAll(browser.close)

for (const db of databases) {
  describe(`dashboard pages (#33, ${db})`, () => {
    let server: TestServer
    let root: string
    let repo: TestRepo
    let context: BrowserContext
    let page: Page
    const key = { repo: { host: "local", owner: "acme", name: "pages" }, targetBranch: "main" }
    const ok = async <A = unknown>(op: string, body: unknown): Promise<A> => {
      const r = await server.post(op, body)
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }

    beforeAll(async () => {
      root = tempDir("greenline-web-pages-")
      repo = createTestRepo({ root, repo: key.repo })
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100, ciCommand: "test ! -f fail.txt" })
      await ok("createQueue", key)
      await ok("updateQueue", { ...key, requiredStatuses: ["ci"] })
      context = await (await browserOnce()).newContext({ viewport: { width: 1100, height: 760 } })
      page = await context.newPage()
      await page.goto(`${server.url}/login`)
      await page.fill("#token", server.token)
      await Promise.all([page.waitForURL(`${server.url}/`), page.click("button[type=submit]")])
    })
    afterAll(async () => {
      await context?.close()
      await server?.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test(
      "titles, the favicon, a page for an unknown path, the session cookie renewed",
      async () => {
        await page.goto(`${server.url}/repos/local/acme/pages/queues/main`)
        await page.waitForSelector("h1 >> text=acme/pages")
        expect(await page.title()).toBe("Queue main · acme/pages · Greenline")
        await page.goto(`${server.url}/repos/local/acme/pages/health?branch=main`)
        await page.waitForSelector("h1 >> text=Health of main")
        expect(await page.title()).toBe("Health of main · acme/pages · Greenline")
        await page.goto(`${server.url}/`)
        await page.waitForSelector("#queues")
        expect(await page.title()).toBe("Queues · Greenline")
        expect(await page.getAttribute('link[rel="icon"]', "href")).toBe("/favicon.svg")

        const icon = await fetch(`${server.url}/favicon.ico`)
        expect(icon.status).toBe(200)
        expect(icon.headers.get("content-type")).toBe("image/svg+xml")
        expect(await icon.text()).toStartWith("<svg")

        const unknown = await page.goto(`${server.url}/no/such/page`)
        expect(unknown?.status()).toBe(404)
        expect(unknown?.headers()["content-type"]).toContain("text/html")
        await page.waitForSelector("h2 >> text=Not found")
        // the API keeps its envelope
        const api = await fetch(`${server.url}/no/such/page`)
        expect(((await api.json()) as { error: { code: string } }).error.code).toBe("NOT_FOUND")

        // a page load renews the session cookie for another 12 hours
        const shell = await page.goto(`${server.url}/repos/local/acme/pages/queues/main`)
        expect((await shell?.allHeaders())?.["set-cookie"]).toContain("Max-Age=43200")
      },
      TIMEOUT
    )

    test(
      "every queue setting is editable from the settings page, without erasing the others",
      async () => {
        await page.goto(`${server.url}/repos/local/acme/pages/settings?branch=main`)
        await page.waitForSelector("#flakyRetryBudget")
        await page.fill("#flakyRetryBudget", "2")
        await page.check("text=Adaptive mode")
        await page.check("text=A run that failed only in quarantined tests passes")
        await page.fill("#enqueueingLabel", "merge-me")
        await page.fill("#allowedBotSubmitters", "renovate[bot], dependabot[bot]")
        await page.click("button >> text=Save queue settings")
        await page.waitForSelector("text=Saved.")
        const q = await ok<Record<string, unknown>>("getQueue", key)
        expect(q).toMatchObject({
          flakyRetryBudget: 2,
          adaptive: true,
          quarantinedFailuresPass: true,
          enqueueingLabel: "merge-me",
          allowedBotSubmitters: ["renovate[bot]", "dependabot[bot]"],
          requiredStatuses: ["ci"]
        })
        // a bad value: the API's message at the field, nothing saved
        await page.fill("#batchingRules", "not json")
        await page.click("button >> text=Save queue settings")
        await page.waitForSelector("#batchingRules-error >> text=must be a JSON array")
        await page.fill("#enqueueingLabel", "")
        await page.fill("#batchingRules", "[]")
        await page.click("button >> text=Save queue settings")
        await page.waitForSelector("text=Saved.")
        expect((await ok<{ enqueueingLabel: string | null }>("getQueue", key)).enqueueingLabel).toBeNull()
        await ok("updateQueue", { ...key, adaptive: false })
      },
      TIMEOUT
    )

    test(
      '"Submit again" keeps the priority',
      async () => {
        repo.createPr(1, { files: { "fail.txt": "no\n" }, title: "Break it" })
        await ok("submitPullRequest", { ...key, pr: { number: 1 }, priority: "high" })
        await page.goto(`${server.url}/repos/local/acme/pages/pull/1`)
        await page.waitForSelector(".page-head .badge-failed")
        await page.click("button >> text=Submit again")
        await page.waitForSelector("text=Submit: done")
        const pr = await ok<{ priorityValue: number }>("getSubmittedPullRequest", { ...key, pr: { number: 1 } })
        // (it fails again soon, with its priority)
        expect(pr.priorityValue).toBe(10)
      },
      TIMEOUT
    )

    test(
      "an offline banner within 3 s of the server stopping",
      async () => {
        await page.goto(`${server.url}/repos/local/acme/pages/queues/main`)
        await page.waitForSelector("h1 >> text=acme/pages")
        expect(await page.locator("#offline").count()).toBe(0)
        await server.close()
        await page.waitForSelector("#offline", { timeout: 3000 })
        expect(await page.textContent("#offline")).toContain("Offline")
      },
      TIMEOUT
    )
  })
}
