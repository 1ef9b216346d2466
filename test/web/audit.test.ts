/**
 * The audit log page in a real browser (Debian's chromium through playwright-core) against the real server (issue
 * #30): an admin sees allowed and refused changes with their actor, role, target and address, filters them, and
 * follows a change made while the page is open; a `write` session gets no link to it and a refusal on the page. With
 * GREENLINE_SCREENSHOTS=1 it also writes docs/screens/audit.png.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as path from "node:path"
import { Effect } from "effect"
import type { BrowserContext, Page } from "playwright-core"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { sharedBrowser } from "../support/browser.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const SCREENSHOTS = process.env.GREENLINE_SCREENSHOTS === "1"
const SCREENS = path.join(import.meta.dir, "../../docs/screens")

const browser = sharedBrowser()
const browserOnce = browser.get
afterAll(browser.close)

for (const db of databases) {
  describe(`the audit log page in a browser (${db})`, () => {
    let server: TestServer
    let context: BrowserContext
    let page: Page
    let ci: { id: string; token: string }
    const key = { repo: { host: "local", owner: "acme", name: "audit-web" }, targetBranch: "main" }

    const signIn = async (p: Page, token: string) => {
      await p.goto(`${server.url}/login`)
      await p.fill("#token", token)
      await Promise.all([p.waitForURL(`${server.url}/`), p.click("button[type=submit]")])
    }
    /** The table's rows, each its cells' text (read in the page: the test has no DOM types). */
    const rows = async (p: Page): Promise<Array<Array<string>>> =>
      (await p.evaluate(
        `Array.from(document.querySelectorAll("#audit tbody tr")).map((tr) =>
           Array.from(tr.querySelectorAll("td")).map((td) => (td.textContent || "").trim()))`
      )) as Array<Array<string>>

    /** Waits until the table's rows satisfy `ok` (the page's CSP forbids a string predicate in the page). */
    const rowsUntil = async (p: Page, ok: (rows: Array<Array<string>>) => boolean) => {
      for (let i = 0; i < 200; i++) {
        const now = await rows(p)
        if (ok(now)) return now
        await Bun.sleep(50)
      }
      throw new Error(`the rows never matched: ${JSON.stringify(await rows(p))}`)
    }

    beforeAll(async () => {
      server = await startTestServer({ db })
      ci = await server.run(Effect.flatMap(Tenancy, (t) => t.createToken("acme-org", "ci", "write")))
      // an allowed change by the admin token, a refused one by the CI token
      expect((await server.post("createQueue", key)).status).toBe(200)
      const refused = await server.post("updateQueue", { ...key, state: "paused" }, { "x-api-token": ci.token })
      expect(refused.status).toBe(403)
      context = await (await browserOnce()).newContext({ viewport: { width: 1280, height: 800 } })
      page = await context.newPage()
    })
    afterAll(async () => {
      await context?.close()
      await server?.close()
    })

    test("an admin sees allowed and refused changes with their actor, and filters them", async () => {
      await signIn(page, server.token)
      await expect(page.locator("nav[aria-label=Main] a", { hasText: "Audit log" }).count()).resolves.toBe(1)
      await page.click("text=Audit log")
      await page.waitForURL(`${server.url}/audit`)
      await page.waitForSelector("#audit tbody tr")
      const shown = await rows(page)
      // When, Who, Role, Action, Target, Outcome, From
      expect(shown.map((r) => r.slice(1, 6))).toEqual([
        ["ci", "write", "updateQueue", "local/acme/audit-web@main (state)", "refused"],
        ["bootstrap", "admin", "createQueue", "local/acme/audit-web@main", "allowed"]
      ])
      expect(shown.every((r) => r[6] === "127.0.0.1")).toBe(true)

      await page.check("input[name=outcome][value=refused]")
      await rowsUntil(page, (r) => r.length === 1)
      expect((await rows(page)).map((r) => r[1])).toEqual(["ci"])
      await page.check("input[name=outcome][value='']")
      await rowsUntil(page, (r) => r.length === 2)
      await page.fill("#audit-actor", "bootstrap")
      await page.press("#audit-actor", "Enter")
      await rowsUntil(page, (r) => r.length > 0 && r.every((cells) => cells[1] === "bootstrap"))
      await page.fill("#audit-actor", "")
      await page.press("#audit-actor", "Enter")

      // a change made in the dashboard itself (a new token) shows up with the session's actor
      await page.click("text=API tokens")
      await page.fill("#token-name", "grafana")
      await page.selectOption("#token-role", "read")
      await page.click("text=Create token")
      await page.waitForSelector("text=New read token")
      await page.click("text=Audit log")
      await rowsUntil(page, (r) => r.some((cells) => cells[3] === "createApiToken"))
      const first = (await rows(page))[0]
      expect(first?.slice(1, 6)).toEqual([
        "bootstrap",
        "admin",
        "createApiToken",
        'name "grafana" role read',
        "allowed"
      ])
      if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENS, "audit.png") })
    })

    test("a write session has no link to it, and the page answers that its role does not allow it", async () => {
      const p = await context.newPage()
      await context.clearCookies()
      await signIn(p, ci.token)
      expect(await p.locator("nav[aria-label=Main] a", { hasText: "Audit log" }).count()).toBe(0)
      expect(await p.locator("nav[aria-label=Main] a", { hasText: "API tokens" }).count()).toBe(0)
      await expect(p.locator("header .who .role").textContent()).resolves.toBe("write")
      await p.goto(`${server.url}/audit`)
      await p.waitForSelector("[role=alert]")
      expect(await p.textContent("[role=alert]")).toContain("PERMISSION_DENIED")
      await p.close()
    })
  })
}
