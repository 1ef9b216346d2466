/**
 * The dashboard in a real browser (Debian's chromium through playwright-core) against the real server, with real Git
 * repositories and the built-in command CI: sign-in, live updates, the way from a failed PR to its CI output, actions,
 * the flaky test page, tenancy, escaping, and the first render of a 500-entry queue (measured, printed, not asserted).
 * With GREENLINE_SCREENSHOTS=1 it also writes the screenshots of docs/screens/.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import type { BrowserContext, Page } from "playwright-core"
import { VERSION } from "../../src/kernel/version.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { sharedBrowser } from "../support/browser.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const SCREENSHOTS = process.env.GREENLINE_SCREENSHOTS === "1"
const SCREENS = path.join(import.meta.dir, "../../docs/screens")
const XSS_TITLE = `<img src=x onerror="window.__xss=1">Fix <b>bold</b> & "quotes"`

const browser = sharedBrowser()
const browserOnce = browser.get
afterAll(browser.close)

const junit = (name: string, failed: boolean) => `<?xml version="1.0"?>
<testsuite name="suite" tests="2">
  <testcase classname="app.checkout" name="${name}" file="tests/checkout_test.py" time="0.2">${
    failed
      ? `<failure message="timed out waiting for the payment mock">TimeoutError: payment mock did not answer</failure>`
      : ""
  }</testcase>
  <testcase classname="app.checkout" name="test_total" file="tests/checkout_test.py" time="0.1"/>
</testsuite>`

/** PRs 1..count, one commit each on main, written by one `git fast-import` (500 separate commits take minutes). */
const bulkPrs = (r: TestRepo, count: number) => {
  const base = r.branchSha("main")
  const parts: string[] = []
  for (let n = 1; n <= count; n++) {
    parts.push(
      `commit refs/pull/${n}/head\nauthor Dev ${n % 7} <dev@example.com> 1700000000 +0000\n` +
        `committer Dev <dev@example.com> 1700000000 +0000\ndata <<EOT\nChange number ${n}\nEOT\nfrom ${base}\n` +
        `M 100644 inline f${n}.txt\ndata <<EOT\n${n}\nEOT\n\n`
    )
  }
  const result = Bun.spawnSync(["git", "fast-import", "--quiet"], {
    cwd: r.gitDir,
    stdin: new TextEncoder().encode(parts.join("")),
    stderr: "pipe"
  })
  if (result.exitCode !== 0) throw new Error(`git fast-import failed: ${result.stderr.toString()}`)
}

for (const db of databases) {
  describe(`dashboard in a browser (${db})`, () => {
    let server: TestServer
    let root: string
    let repo: TestRepo
    let context: BrowserContext
    let page: Page
    const key = { repo: { host: "local", owner: "acme", name: "app" }, targetBranch: "main" }
    const queueUrl = () => `${server.url}/repos/local/acme/app/queues/main`

    const ok = async <A = unknown>(op: string, body: unknown): Promise<A> => {
      const r = await server.post(op, body)
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }
    const prState = async (n: number, k = key) =>
      (await ok<{ state: string; testRunId: string | null }>("getSubmittedPullRequest", { ...k, pr: { number: n } }))
        .state
    /** Waits for the server to report a state (the runner works on its own; this waits on the API, not on time). */
    const until = async (n: number, state: string, k = key) => {
      for (let i = 0; i < 600; i++) {
        if ((await prState(n, k)) === state) return
        await Bun.sleep(50)
      }
      throw new Error(`PR ${n} never reached ${state} (now ${await prState(n, k)})`)
    }
    const shot = async (name: string) => {
      if (!SCREENSHOTS) return
      await page.screenshot({ path: path.join(SCREENS, `${name}.png`) })
    }
    const signIn = async (p: Page, token: string) => {
      await p.goto(`${server.url}/login`)
      await p.fill("#token", token)
      await Promise.all([p.waitForURL(`${server.url}/`), p.click("button[type=submit]")])
    }

    beforeAll(async () => {
      root = tempDir("greenline-web-git-")
      repo = createTestRepo({ root, repo: key.repo })
      server = await startTestServer({
        db,
        gitRoot: root,
        gitPollMs: 100,
        ciCommand: "echo running the tests; test ! -f fail.txt"
      })
      await ok("createQueue", key)
      // the built-in CI reports the `ci` status
      await ok("updateQueue", { ...key, requiredStatuses: ["ci"] })
      context = await (await browserOnce()).newContext({ viewport: { width: 1100, height: 760 }, colorScheme: "light" })
      page = await context.newPage()
    })
    afterAll(async () => {
      await context?.close()
      await server?.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test("sign-in: the form, a wrong token, a session cookie (HttpOnly, SameSite=Lax), the security headers", async () => {
      const anonymous = await fetch(`${server.url}/repos/local/acme/app/queues/main`, { redirect: "manual" })
      expect(anonymous.status).toBe(303)
      expect(anonymous.headers.get("location")).toBe("/login?next=%2Frepos%2Flocal%2Facme%2Fapp%2Fqueues%2Fmain")

      const login = await page.goto(`${server.url}/login`)
      expect(login?.headers()["content-security-policy"]).toContain("script-src 'self'")
      expect(login?.headers()["x-frame-options"]).toBe("DENY")
      await shot("login")
      await page.fill("#token", "not-a-token-of-anyone-at-all")
      await page.click("button[type=submit]")
      await page.waitForSelector("text=That API token is unknown or revoked.")

      await signIn(page, server.token)
      const cookie = (await context.cookies()).find((c) => c.name === "greenline_session")
      expect(cookie?.httpOnly).toBe(true)
      expect(cookie?.sameSite).toBe("Lax")
      await page.waitForSelector("#queues >> text=acme/app")
      // the footer shows the server's version (issue 38)
      expect(await page.textContent("footer.foot")).toBe(`Greenline ${VERSION}`)

      // the session reads the API; a write without the anti-CSRF header is refused
      const sessionCookie = `greenline_session=${cookie?.value}`
      const read = await fetch(`${server.url}/v1/listQueues`, {
        method: "POST",
        headers: { cookie: sessionCookie, "content-type": "application/json", "x-csrf-token": "wrong" },
        body: "{}"
      })
      expect(read.status).toBe(403)
      const forged = await fetch(`${server.url}/v1/updateQueue`, {
        method: "POST",
        headers: { cookie: sessionCookie, "content-type": "application/json" },
        body: JSON.stringify({ ...key, state: "paused" })
      })
      expect(forged.status).toBe(403)
      expect((await ok<{ state: string }>("getQueue", key)).state).toBe("running")
    }, 60_000)

    test("the queue page follows two PRs to merged without a reload", async () => {
      await page.goto(queueUrl())
      await page.waitForSelector("h1 >> text=acme/app")
      await page.evaluate("window.__sameDocument = true")
      repo.createPr(1, { files: { "one.txt": "1\n" }, title: "Add one" })
      repo.createPr(2, { files: { "two.txt": "2\n" }, title: "Add two" })
      await ok("submitPullRequest", { ...key, pr: { number: 1 } })
      await ok("submitPullRequest", { ...key, pr: { number: 2 } })
      await page.waitForSelector('#recent tr[data-pr="1"] .badge-merged')
      await page.waitForSelector('#recent tr[data-pr="2"] .badge-merged')
      expect((await page.evaluate("window.__sameDocument")) as unknown).toBe(true)
    }, 60_000)

    test("a failed PR leads to the failing run's CI output in two clicks", async () => {
      repo.createPr(3, { files: { "fail.txt": "no\n" }, title: "Break the build" })
      await ok("submitPullRequest", { ...key, pr: { number: 3 } })
      await until(3, "failed")
      const failed = await ok<{ testRunId: string | null }>("getSubmittedPullRequest", { ...key, pr: { number: 3 } })
      expect(failed.testRunId).not.toBeNull()
      // the prUrl the API hands out (local provider) opens the PR's page
      const details = await ok<{ testedPullRequests: ReadonlyArray<{ prNumber: number; prUrl: string }> }>(
        "getMergeQueueTestingDetails",
        { ...key, testRunId: failed.testRunId }
      )
      const prUrl = details.testedPullRequests.find((p) => p.prNumber === 3)?.prUrl ?? ""
      await page.goto(prUrl.replace(/^https?:\/\/[^/]+/, server.url))
      await page.waitForSelector("h1 >> text=#3")
      await page.waitForSelector(".page-head .badge-failed")

      await page.goto(queueUrl())
      await page.click('#recent tr[data-pr="3"] a >> text=#3')
      await page.click("text=CI output of the failing run")
      const output = await page.textContent("#failing-output pre")
      expect(output).toContain("running the tests")
      await page.waitForSelector("#failing-output >> text=exit code 1")
      await shot("pull-request-failed")
      await page.click(`#failed-h ~ p a >> text=run`)
      await page.waitForSelector("#output-h")
      await page.waitForSelector("#output >> text=running the tests")
      await shot("test-run")
    }, 60_000)

    test("pause the queue from its page; cancel a PR from its page", async () => {
      await page.goto(queueUrl())
      await page.click("button >> text=Pause")
      await page.waitForSelector(".facts .badge-paused")
      expect((await ok<{ state: string }>("getQueue", key)).state).toBe("paused")

      repo.createPr(4, { files: { "four.txt": "4\n" }, title: "Add four" })
      await ok("submitPullRequest", { ...key, pr: { number: 4 } })
      await page.waitForSelector('#waiting tr[data-pr="4"] >> text=waiting: the queue is paused')
      await shot("queue-paused")
      await page.click('#waiting tr[data-pr="4"] a >> text=#4')
      await page.click("button >> text=Cancel")
      await page.waitForSelector(".page-head .badge-cancelled")
      expect(await prState(4)).toBe("cancelled")

      await page.goto(queueUrl())
      await page.click("button >> text=Resume")
      await page.waitForSelector(".facts .badge-running")
    }, 60_000)

    test("the queue and PR pages show the ETA: relative, with the absolute time on hover", async () => {
      // three runs have finished on this queue (PRs 1, 2 and 3): the estimate has what it needs; "e2e" is never
      // reported, so the runs stay in flight while the page is read
      await ok("updateQueue", { ...key, requiredStatuses: ["ci", "e2e"] })
      repo.createPr(6, { files: { "six.txt": "6\n" }, title: "Add six" })
      repo.createPr(7, { files: { "seven.txt": "7\n" }, title: "Add seven" })
      await ok("submitPullRequest", { ...key, pr: { number: 6 } })
      await ok("submitPullRequest", { ...key, pr: { number: 7 } })
      try {
        await until(6, "testing")
        const api = await ok<{ estimatedMergeAt: string | null; estimateUnavailableReason: string | null }>(
          "getSubmittedPullRequest",
          { ...key, pr: { number: 7 } }
        )
        expect(api.estimateUnavailableReason).toBeNull()
        expect(api.estimatedMergeAt).not.toBeNull()
        await page.goto(queueUrl())
        const eta = page.locator('#waiting tr[data-pr="7"] time.eta')
        await eta.waitFor()
        expect(await eta.textContent()).toMatch(/^(in \d+[smhd]|in <1m|any moment)/)
        expect(await eta.getAttribute("title")).toContain("expected to merge")
        expect(Date.parse((await eta.getAttribute("datetime")) ?? "")).not.toBeNaN()
        // issue #35: the range it merges in 8 times in 10, beside the ETA and on hover
        expect(await eta.locator(".eta-range").textContent()).toMatch(/^ ?\(.+–.+\)$/)
        expect(await eta.getAttribute("title")).toContain("between")
        await page.click('#waiting tr[data-pr="7"] a >> text=#7')
        await page.waitForSelector(".pr-eta time.eta")
        // a paused queue has no estimate, and the cell says why on hover
        await ok("updateQueue", { ...key, state: "paused" })
        await page.goto(queueUrl())
        await page.waitForSelector('#waiting tr[data-pr="7"] .eta[title="no estimate while the queue is paused"]')
      } finally {
        await ok("cancelPullRequest", { ...key, pr: { number: 6 } })
        await ok("cancelPullRequest", { ...key, pr: { number: 7 } })
        await ok("updateQueue", { ...key, state: "running", requiredStatuses: ["ci"] })
      }
    }, 60_000)

    test("a not-ready PR shows what it waits for, and joins the queue when its impacted targets come", async () => {
      const par = { repo: { host: "local", owner: "acme", name: "lanes" }, targetBranch: "main" }
      const parRepo = createTestRepo({ root, repo: par.repo })
      await ok("createQueue", par)
      await ok("updateQueue", { ...par, mode: "parallel", state: "paused" })
      const head = parRepo.createPr(1, { files: { "a.txt": "a\n" }, title: "Touch the API" })
      await ok("submitPullRequest", { ...par, pr: { number: 1 } })
      await page.goto(`${server.url}/repos/local/acme/lanes/queues/main`)
      const item = page.locator("#notready-h ~ ul .checklist .check-open")
      await item.waitFor()
      expect(await item.textContent()).toContain(`impacted targets uploaded for the head ${head.slice(0, 8)}`)
      await page.click("#notready-h ~ ul a >> text=#1")
      await page.waitForSelector("#readiness >> text=☐ impacted targets uploaded")
      await page.goBack()
      await page.waitForSelector("#notready-h ~ ul .checklist")
      await ok("setImpactedTargets", { ...par, pr: { number: 1, sha: head }, impactedTargets: ["api"] })
      // without a reload
      await page.waitForSelector('#waiting tr[data-pr="1"]')
      await page.waitForSelector("#notready-h >> text=Not ready (0)")
      await ok("cancelPullRequest", { ...par, pr: { number: 1 } })
    }, 60_000)

    test("the queue page draws the runs in flight as a chain, with the waiting list and its reasons", async () => {
      const graph = { repo: { host: "local", owner: "acme", name: "graph" }, targetBranch: "main" }
      const graphRepo = createTestRepo({ root, repo: graph.repo })
      await ok("createQueue", { ...graph, concurrency: 3 })
      // "e2e" is never reported: the runs stay in flight
      await ok("updateQueue", { ...graph, requiredStatuses: ["ci", "e2e"] })
      const titles = ["Add the checkout page", "Retry payment webhooks", "Bump the HTTP client", "Translate the footer"]
      for (const [i, title] of titles.entries()) {
        graphRepo.createPr(i + 1, { files: { [`g${i + 1}.txt`]: `${i}\n` }, title })
        await ok("submitPullRequest", { ...graph, pr: { number: i + 1 } })
      }
      try {
        await page.goto(`${server.url}/repos/local/acme/graph/queues/main`)
        await page.locator(".graph .run").nth(2).waitFor()
        expect(await page.locator(".graph .run").count()).toBe(3)
        // each run after the first is built on the one before it (single mode: a chain)
        expect(await page.textContent(".graph .run:nth-child(3) .run-base")).toContain("built on run")
        await page.waitForSelector('#waiting tr[data-pr="4"] >> text=waiting for a CI slot')
        await shot("queue")
        await page.emulateMedia({ colorScheme: "dark" })
        await shot("queue-dark")
        await page.emulateMedia({ colorScheme: "light" })
      } finally {
        // the runs in flight end, whatever the page showed
        for (let n = 1; n <= 4; n++) await ok("cancelPullRequest", { ...graph, pr: { number: n } })
      }
    }, 60_000)

    test("PR titles are escaped everywhere (no element, no script from a title)", async () => {
      repo.createPr(5, { files: { "five.txt": "5\n" }, title: XSS_TITLE })
      await ok("updateQueue", { ...key, state: "paused" })
      await ok("submitPullRequest", { ...key, pr: { number: 5 } })
      await page.goto(queueUrl())
      await page.waitForSelector('#waiting tr[data-pr="5"]')
      expect(await page.textContent('#waiting tr[data-pr="5"]')).toContain(XSS_TITLE)
      await page.goto(`${server.url}/repos/local/acme/app/pull/5`)
      await page.waitForSelector("h1 >> text=#5")
      expect(await page.textContent("h1")).toContain(XSS_TITLE)
      expect((await page.evaluate(`document.querySelectorAll('img[src="x"], main b').length`)) as unknown).toBe(0)
      expect(await page.evaluate("window.__xss")).toBeUndefined()
      await ok("cancelPullRequest", { ...key, pr: { number: 5 } })
      await ok("updateQueue", { ...key, state: "running" })
    }, 60_000)

    test("a flaky test's page shows its failure rate per day as a chart", async () => {
      const DAY = 86_400_000
      const upload = async (failed: boolean, daysAgo: number, sha: string) => {
        const form = new FormData()
        form.append(
          "metadata",
          JSON.stringify({
            repo: key.repo,
            org_url_slug: "acme-org",
            sha,
            branch: "main",
            run_at: new Date(Date.now() - daysAgo * DAY).toISOString()
          })
        )
        form.append("junit", new File([junit("test_pay_with_card", failed)], "junit.xml", { type: "application/xml" }))
        const r = await fetch(`${server.url}/v1/flaky-tests/upload`, {
          method: "POST",
          headers: { "x-api-token": server.token },
          body: form
        })
        expect(r.status).toBe(200)
      }
      // the same commit both passes and fails, on several days: flaky
      for (const [i, daysAgo] of [5, 4, 3, 2, 1, 0].entries()) {
        const sha = `${String(i).repeat(40)}`
        await upload(true, daysAgo, sha)
        await upload(false, daysAgo, sha)
        if (i % 2 === 0) await upload(false, daysAgo, sha)
      }
      const listed = await ok<{
        tests: ReadonlyArray<{ id: string; name: string; html_url: string; repository: { html_url: string } }>
      }>("flaky-tests/list-failing-tests", {
        repo: key.repo,
        org_url_slug: "acme-org",
        start_time: new Date(Date.now() - 6.5 * DAY).toISOString(),
        end_time: new Date(Date.now() + 3_600_000).toISOString(),
        page_query: { page_size: 10, page_token: "" }
      })
      const t = listed.tests.find((x) => x.name === "test_pay_with_card")
      expect(t).toBeDefined()
      // the html_url the API hands out opens the test page
      await page.goto(t!.html_url.replace(/^https?:\/\/[^/]+/, server.url))
      try {
        await page.waitForSelector(".chart canvas")
      } catch (e) {
        console.log(`the test page shows: ${await page.textContent("main")}`)
        throw e
      }
      await page.waitForSelector("text=timed out waiting for the payment mock")
      // its status history: it became flaky; a quarantine override from the page is recorded there too
      await page.waitForSelector('#status-history tr[data-kind="status"] .badge-flaky')
      await page.click("button >> text=Never quarantine")
      // it asks first (#33)
      await page.click("dialog[open] button >> text=Yes, never quarantine")
      await page.waitForSelector('#status-history tr[data-kind="override"] >> text=never quarantine')
      await shot("flaky-test")
      // a recent result links to its upload: the commit, the counts, and this test among the failed ones
      await page.click('section[aria-labelledby="results-h"] tbody tr:has-text("failed") a[href*="/uploads/"]')
      await page.waitForSelector("#upload-counts >> text=1 failed")
      await page.waitForSelector("#upload-failures a >> text=test_pay_with_card")
      await page.goto(`${server.url}/repos/local/acme/app/tests`)
      await page.waitForSelector("#tests a >> text=test_pay_with_card")
      await shot("flaky-tests")
      // so does the repository's html_url: the repository's queues and its flaky tests
      await page.goto(t!.repository.html_url.replace(/^https?:\/\/[^/]+/, server.url))
      await page.waitForSelector("h1 >> text=acme/app")
      await page.waitForSelector("#queues >> text=main")

      // quarantined from its page; the quarantined list sorts by the same impact figures as the others
      await ok("flaky-tests/update-settings", { repo: key.repo, org_url_slug: "acme-org", quarantining_enabled: true })
      await page.goto(t!.html_url.replace(/^https?:\/\/[^/]+/, server.url))
      await page.click("button >> text=Always quarantine")
      await page.click("dialog[open] button >> text=Yes, always quarantine")
      await page.waitForSelector('#status-history tr[data-kind="quarantine"] .badge-quarantined')
      await page.goto(`${server.url}/repos/local/acme/app/tests`)
      await page.check("input[type=radio] >> nth=2")
      const row = page.locator('#tests tr:has-text("test_pay_with_card")')
      await page.waitForSelector('#tests tr:has-text("test_pay_with_card") .badge-quarantined')
      expect(await row.locator("td").nth(3).textContent()).not.toBe("0.0%")
      await ok("flaky-tests/update-settings", { repo: key.repo, org_url_slug: "acme-org", quarantining_enabled: false })
    }, 60_000)

    test("another organization's pages and data are 404", async () => {
      await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          yield* tenancy.createOrg("other-org")
          yield* tenancy.addRepo("other-org", { host: "local", owner: "other", name: "secret" })
        })
      )
      const response = await page.goto(`${server.url}/repos/local/other/secret/queues/main`)
      expect(response?.status()).toBe(404)
      await page.waitForSelector("h1 >> text=Not found")
      const pr = await page.goto(`${server.url}/repos/local/other/secret/pull/1`)
      expect(pr?.status()).toBe(404)
    }, 60_000)

    test("home, settings and API tokens pages", async () => {
      await page.goto(`${server.url}/`)
      await page.waitForSelector("#queues >> text=acme/app")
      await shot("home")
      await page.goto(`${server.url}/repos/local/acme/app/health?branch=main`)
      await page.locator(".chart canvas").nth(5).waitFor()
      await page.waitForSelector("summary >> text=PRs")
      await shot("health")
      await page.goto(`${server.url}/repos/local/acme/app/settings?branch=main`)
      await page.fill("#concurrency", "0")
      await page.click("button >> text=Save queue settings")
      await page.waitForSelector("#concurrency-error >> text=must be an integer from 1")
      await page.fill("#concurrency", "2")
      await page.click("button >> text=Save queue settings")
      await page.waitForSelector("text=Saved.")
      expect((await ok<{ concurrency: number }>("getQueue", key)).concurrency).toBe(2)
      await shot("settings")
      await page.goto(`${server.url}/settings`)
      await page.fill("#token-name", "ci")
      await page.click("button >> text=Create token")
      const token = await page.textContent("code.secret")
      expect(token).toMatch(/^glt_/)
      await shot("api-tokens")
    }, 60_000)

    test("a 500-entry queue: first render measured with the Performance API (printed, not asserted)", async () => {
      const big = { repo: { host: "local", owner: "acme", name: "big" }, targetBranch: "main" }
      const bigRepo = createTestRepo({ root, repo: big.repo })
      await ok("createQueue", big)
      await ok("updateQueue", { ...big, state: "paused" })
      bulkPrs(bigRepo, 500)
      for (let n = 1; n <= 500; n += 50) {
        await Promise.all(
          Array.from({ length: 50 }, (_, i) => ok("submitPullRequest", { ...big, pr: { number: n + i } }))
        )
      }
      await page.goto(`${server.url}/repos/local/acme/big/queues/main`)
      await page.locator("#waiting tbody tr").nth(499).waitFor()
      expect(await page.locator("#waiting tbody tr").count()).toBe(500)
      const timing = (await page.evaluate(`(() => {
        const nav = performance.getEntriesByType("navigation")[0]
        const mark = performance.getEntriesByName("greenline:queue-rendered")[0]
        const api = performance.getEntriesByType("resource").filter((r) => r.name.includes("/v1/get"))
        return {
          rendered: mark ? mark.startTime : -1,
          domContentLoaded: nav ? nav.domContentLoadedEventEnd : -1,
          api: api.map((r) => r.name.split("/v1/")[1] + " " + r.duration.toFixed(0) + " ms").join(", ")
        }
      })()`)) as { rendered: number; domContentLoaded: number; api: string }
      console.log(
        `500-entry queue (${db}): first render with data ${timing.rendered.toFixed(0)} ms after navigation start ` +
          `(DOMContentLoaded ${timing.domContentLoaded.toFixed(0)} ms; ${timing.api})`
      )
      expect(timing.rendered).toBeGreaterThan(0)
    }, 300_000)
  })
}
