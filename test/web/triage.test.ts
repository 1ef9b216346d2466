/**
 * Failure triage in a real browser (issue #33): from the queue page to a failed PR's page, which names its failing
 * required status (with its link), its failed tests with their marks (new, known flaky) and the PR whose failure
 * restarted it; the timeline's Run column links the PR's own runs, checked against the API; the queue's failures page
 * groups the failures. Chromium through playwright-core, the real server on both databases, CI played by the test.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import type { BrowserContext, Page } from "playwright-core"
import { sharedBrowser } from "../support/browser.ts"
import { openScenario } from "../support/scenario.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const SLUG = "acme-org"
const TIMEOUT = 120_000

const browser = sharedBrowser()
const browserOnce = browser.get
afterAll(browser.close)

type Case = readonly [name: string, status: "passed" | "failed", message?: string]
const junit = (cases: ReadonlyArray<Case>) =>
  `<?xml version="1.0"?><testsuite name="suite" tests="${cases.length}">${cases
    .map(
      ([name, status, message]) =>
        `<testcase classname="app.cart" name="${name}" file="tests/cart_test.py" time="0.1">${
          status === "failed" ? `<failure message="${message}">${message}</failure>` : ""
        }</testcase>`
    )
    .join("")}</testsuite>`

interface Pr {
  readonly state: string
  readonly verifiedByTestRun: string | null
  readonly timeline?: ReadonlyArray<{ state: string }>
  readonly failure?: { readonly testRunId: string | null }
}

for (const db of databases) {
  describe(`failure triage in a browser (${db})`, () => {
    let server: TestServer
    let root: string
    let context: BrowserContext
    let page: Page

    beforeAll(async () => {
      root = tempDir("greenline-web-triage-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100 })
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

    const upload = async (repoName: string, sha: string, branch: string, cases: ReadonlyArray<Case>) => {
      const form = new FormData()
      form.append(
        "metadata",
        JSON.stringify({ repo: { host: "local", owner: "acme", name: repoName }, org_url_slug: SLUG, sha, branch })
      )
      form.append("junit", new File([new TextEncoder().encode(junit(cases))], "r.xml", { type: "application/xml" }))
      const res = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": server.token },
        body: form
      })
      if (res.status !== 200) throw new Error(`upload answered ${res.status}: ${await res.text()}`)
    }

    test(
      "from the queue page to the failing status, the failed tests with their marks, and the PR that caused a restart",
      async () => {
        const name = `web-triage-${db}`
        const s = await openScenario(server, root, { name, concurrency: 2 })
        const flaky = async (op: string, body: object) => {
          const r = await server.post(`flaky-tests/${op}`, { repo: s.key.repo, org_url_slug: SLUG, ...body })
          if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
          return r.body
        }
        try {
          await upload(name, s.initialSha, "main", [
            ["test_total", "passed"],
            ["test_coupon", "passed"]
          ])
          // #2 is tested on top of #1; #1 fails, #2 is tested again alone and fails; #3 merges
          for (const n of [1, 2, 3]) s.createPr(n)
          await s.submit(1)
          await s.submit(2)
          await s.waitState(2, "testing")
          await s.ciFail(1)
          await s.waitState(1, "failed")
          const run2 = await s.waitRun(2)
          const link = "https://ci.example/builds/2"
          const r = await server.post("reportStatus", {
            repo: s.key.repo,
            sha: run2.sha,
            context: "ci",
            state: "failure",
            targetUrl: link
          })
          expect(r.status).toBe(200)
          await s.waitState(2, "failed")
          await upload(name, run2.sha, run2.details.testBranch, [
            ["test_total", "failed", "AssertionError: 3 != 4"],
            ["test_coupon", "failed", "TimeoutError: coupon service"]
          ])
          // test_coupon is known flaky: quarantined
          await flaky("update-settings", { quarantining_enabled: true })
          const list = (await flaky("list-failing-tests", {
            start_time: new Date(Date.now() - 86_400_000).toISOString(),
            end_time: new Date(Date.now() + 3_600_000).toISOString(),
            page_query: { page_size: 100, page_token: "" }
          })) as { tests: ReadonlyArray<{ id: string; name: string }> }
          const coupon = list.tests.find((t) => t.name === "test_coupon")?.id
          await flaky("set-quarantine-override", { test_case_id: coupon, override: "always_quarantine" })
          await s.submit(3)
          await s.ciPass(3)
          await s.waitState(3, "merged")

          const queueUrl = `${server.url}/repos/local/acme/${name}/queues/main`
          await page.goto(queueUrl)
          await page.click('#recent tr[data-pr="2"] a >> text=#2')
          await page.waitForSelector("h1 >> text=#2")
          // the failing status, with its link
          const status = page.locator("#failed-statuses a >> text=ci")
          await status.waitFor()
          expect(await status.getAttribute("href")).toBe(link)
          // the failed tests with their marks
          await page.waitForSelector('#failed-tests tr[data-test="test_total"] >> text=new')
          expect(await page.textContent('#failed-tests tr[data-test="test_coupon"]')).toContain(
            "known flaky, 50% of runs, quarantined"
          )
          // the PR whose failure restarted it, and its run, as the API names them
          const api = await s.ok<Pr & { timeBreakdown: { restarts: ReadonlyArray<{ causedByTestRunId: string }> } }>(
            "getSubmittedPullRequest",
            { pr: { number: 2 }, includeTimeline: true }
          )
          const causeRun = api.timeBreakdown.restarts[0]!.causedByTestRunId
          const cause = page.locator("#restarts a >> text=#1")
          await cause.waitFor()
          expect(await page.getAttribute(`#restarts a[href*="${causeRun}"]`, "href")).toContain(`/runs/${causeRun}`)

          // the timeline's runs are #2's own: each linked run tested #2, and the failed row is the failing run
          const rows = page.locator("#timeline-h ~ table tbody tr")
          const linked: Array<{ state: string; run: string }> = []
          for (let i = 0; i < (await rows.count()); i++) {
            const row = rows.nth(i)
            const anchor = row.locator("td:nth-child(4) a")
            const href = (await anchor.count()) === 0 ? null : await anchor.getAttribute("href")
            if (href === null) continue
            const state = (await row.locator("td:nth-child(2)").textContent()) ?? ""
            linked.push({ state, run: /\/runs\/([^/?]+)/.exec(href)![1]! })
          }
          expect(linked.map((l) => l.state)).toEqual(["testing", "testing", "failed"])
          expect(linked.at(-1)!.run).toBe(api.failure!.testRunId!)
          for (const l of linked) {
            const d = await s.details(l.run)
            expect(d.testedPullRequests.map((p) => p.prNumber)).toContain(2)
          }

          // the causing PR's page, from the link
          await cause.click()
          await page.waitForSelector("h1 >> text=#1")

          // a merged PR's timeline links the run that verified it
          await page.goto(`${server.url}/repos/local/acme/${name}/pull/3`)
          const three = await s.ok<Pr>("getSubmittedPullRequest", { pr: { number: 3 } })
          const merged = page.locator("#timeline-h ~ table tbody tr:has(.badge-merged) td:nth-child(4) a")
          await merged.waitFor()
          expect(await merged.getAttribute("href")).toContain(`/runs/${three.verifiedByTestRun}`)

          // the failures page, from the queue page
          await page.goto(queueUrl)
          await page.click("a >> text=Failures")
          await page.waitForSelector("#by-reason >> text=TEST_RUN_REQUIRED_STATUS_FAILED")
          await page.waitForSelector('#all-failures tr[data-pr="2"]')
          expect(await page.textContent("#by-test")).toContain("TimeoutError: coupon service")
        } finally {
          await s.close()
        }
      },
      TIMEOUT
    )
  })
}
