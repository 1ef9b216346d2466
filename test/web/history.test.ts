/**
 * The data behind the dashboard's test page and not-ready checklist, over HTTP (no browser): a test case's status
 * history (status, quarantine and override changes, as get-test-history answers them), and what a not-ready PR waits
 * for (getQueueActivity's `readiness`), on the real server with real Git repositories.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

/** `retried`: it failed once and passed on a retry (Surefire's flakyFailure): flaky by pass-on-retry */
const junit = (retried: boolean) => `<?xml version="1.0"?>
<testsuite name="suite" tests="1">
  <testcase classname="app.cart" name="test_add_item" file="tests/cart_test.py" time="0.2">${
    retried ? `<flakyFailure message="stale session">AssertionError: stale session</flakyFailure>` : ""
  }</testcase>
</testsuite>`

interface Change {
  readonly at: string
  readonly kind: string
  readonly previous: string | null
  readonly current: string
  readonly reason: string
  readonly actor: string | null
}

for (const db of databases) {
  describe(`status history and readiness for the dashboard (${db})`, () => {
    let server: TestServer
    let root: string
    let repo: TestRepo
    const repoRef = { host: "local", owner: "acme", name: "shop" }
    const scope = { repo: repoRef, org_url_slug: "acme-org" }

    const ok = async <A = unknown>(op: string, body: unknown): Promise<A> => {
      const r = await server.post(op, body)
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }
    const upload = async (failed: boolean, sha: string, runAt: Date) => {
      const form = new FormData()
      form.append("metadata", JSON.stringify({ ...scope, sha, branch: "main", run_at: runAt.toISOString() }))
      form.append("junit", new File([junit(failed)], "junit.xml", { type: "application/xml" }))
      const r = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": server.token },
        body: form
      })
      expect(r.status).toBe(200)
    }
    const historyOf = async (testId: string) =>
      (
        await ok<{ statusHistory: ReadonlyArray<Change> }>("flaky-tests/get-test-history", {
          repo: repoRef,
          test_id: testId
        })
      ).statusHistory

    beforeAll(async () => {
      root = tempDir("greenline-history-git-")
      repo = createTestRepo({ root, repo: repoRef })
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100 })
    })
    afterAll(async () => {
      await server?.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test("a healthy test has no history; becoming flaky, quarantined, overridden and released is recorded in order", async () => {
      await ok("flaky-tests/update-settings", { ...scope, quarantining_enabled: true, auto_quarantine: true })
      const now = Date.now()
      await upload(false, "a".repeat(40), new Date(now - 3_600_000))
      const listed = await ok<{ tests: ReadonlyArray<{ id: string; name: string }> }>(
        "flaky-tests/list-failing-tests",
        {
          ...scope,
          start_time: new Date(now - 86_400_000).toISOString(),
          end_time: new Date(now + 3_600_000).toISOString(),
          page_query: { page_size: 10, page_token: "" }
        }
      )
      expect(listed.tests).toEqual([])
      // it fails and passes on a retry: flaky, and (auto-quarantine) quarantined
      await upload(true, "b".repeat(40), new Date(now - 1_800_000))
      const failing = await ok<{ tests: ReadonlyArray<{ id: string; name: string; status: { value: string } }> }>(
        "flaky-tests/list-failing-tests",
        {
          ...scope,
          start_time: new Date(now - 86_400_000).toISOString(),
          end_time: new Date(now + 3_600_000).toISOString(),
          page_query: { page_size: 10, page_token: "" }
        }
      )
      const t = failing.tests.find((x) => x.name === "test_add_item")
      expect(t?.status.value).toBe("flaky")
      const id = t!.id

      const first = await historyOf(id)
      expect(first.map((c) => [c.kind, c.previous, c.current])).toEqual([
        ["quarantine", "released", "quarantined"],
        ["status", "healthy", "flaky"]
      ])
      expect(first[1]!.reason).not.toBe("")
      expect(Number.isNaN(Date.parse(first[1]!.at))).toBe(false)

      // a person overrides it: never quarantine (it leaves quarantine), then automatic again (it goes back)
      await ok("flaky-tests/set-quarantine-override", {
        ...scope,
        test_case_id: id,
        override: "never_quarantine",
        owner: "@acme/cart",
        reason: "the failure is in the mock, not the code"
      })
      await ok("flaky-tests/set-quarantine-override", { ...scope, test_case_id: id, override: "unspecified" })
      const after = await historyOf(id)
      expect(after.map((c) => [c.kind, c.previous, c.current])).toEqual([
        ["quarantine", "released", "quarantined"],
        ["override", "never_quarantine", "unspecified"],
        ["quarantine", "quarantined", "released"],
        ["override", "unspecified", "never_quarantine"],
        ["quarantine", "released", "quarantined"],
        ["status", "healthy", "flaky"]
      ])
      const set = after[3]!
      expect(set.actor).toBe("@acme/cart")
      expect(set.reason).toBe("the failure is in the mock, not the code")

      // turning quarantining off releases it, and says so
      await ok("flaky-tests/update-settings", { ...scope, quarantining_enabled: false })
      const off = await historyOf(id)
      expect(off.length).toBe(7)
      expect([off[0]!.kind, off[0]!.current]).toEqual(["quarantine", "released"])
      // another test of the repository has its own (empty) history; a bad id is a 400
      expect(await historyOf("00000000-0000-4000-8000-000000000000")).toEqual([])
      expect((await server.post("flaky-tests/get-test-history", { repo: repoRef, test_id: "nope" })).status).toBe(400)
    }, 60_000)

    test("a not-ready PR in a parallel queue says it waits for the impacted targets of its head, until they come", async () => {
      const key = { repo: repoRef, targetBranch: "main" }
      await ok("createQueue", key)
      await ok("updateQueue", { ...key, mode: "parallel", state: "paused" })
      const head = repo.createPr(1, { files: { "one.txt": "1\n" }, title: "Add one" })
      await ok("submitPullRequest", { ...key, pr: { number: 1 } })

      type Active = ReadonlyArray<{
        prNumber: number
        state: string
        stateChangedAt: string
        readiness?: {
          headSha: string
          impactedTargetsRequired: boolean
          impactedTargetsUploaded: boolean
          cancelsAt: string | null
        }
      }>
      const before = (await ok<{ active: Active }>("getQueueActivity", key)).active
      expect(before.length).toBe(1)
      const e = before[0]!
      expect(e.state).toBe("not_ready")
      expect(e.readiness).toEqual({
        headSha: head,
        impactedTargetsRequired: true,
        impactedTargetsUploaded: false,
        // notReadyTimeoutHours defaults to 24
        cancelsAt: new Date(Date.parse(e.stateChangedAt) + 24 * 3_600_000).toISOString()
      })

      // the targets of another commit do not count; those of the head make it ready (it waits with a place then)
      await ok("setImpactedTargets", { ...key, pr: { number: 1, sha: "c".repeat(40) }, impactedTargets: ["web"] })
      const other = (await ok<{ active: Active }>("getQueueActivity", key)).active[0]!
      expect(other.readiness?.impactedTargetsUploaded).toBe(false)
      await ok("setImpactedTargets", { ...key, pr: { number: 1, sha: head }, impactedTargets: ["web"] })
      const after = (await ok<{ active: Active }>("getQueueActivity", key)).active[0]!
      expect(after.state).toBe("pending")
      expect(after.readiness).toBeUndefined()
      await ok("cancelPullRequest", { ...key, pr: { number: 1 } })
    }, 60_000)

    test("a not-ready PR in a queue whose timeout is at its maximum: never cancelled, and the page still answers", async () => {
      // 4294967295 hours from now is past the last date a JavaScript Date holds: getQueueActivity answered 500
      // (RangeError: Invalid Date) before
      const key = { repo: repoRef, targetBranch: "extreme" }
      repo.git("branch", "extreme", "main")
      await ok("createQueue", key)
      await ok("updateQueue", {
        ...key,
        mode: "parallel",
        state: "paused",
        notReadyTimeoutHours: 4294967295,
        testingTimeoutMinutes: 4294967295,
        batchingMaxWaitTimeMinutes: 4294967295
      })
      repo.createPr(2, { files: { "two.txt": "2\n" }, title: "Add two" })
      await ok("submitPullRequest", { ...key, pr: { number: 2 } })
      const active = (
        await ok<{ active: ReadonlyArray<{ state: string; readiness?: { cancelsAt: string | null } }> }>(
          "getQueueActivity",
          key
        )
      ).active
      expect(active.map((e) => [e.state, e.readiness?.cancelsAt])).toEqual([["not_ready", null]])
      expect((await server.post("getQueue", key)).status).toBe(200)
      expect((await server.post("getSubmittedPullRequest", { ...key, pr: { number: 2 } })).status).toBe(200)
      await ok("cancelPullRequest", { ...key, pr: { number: 2 } })
    }, 60_000)

    test("an upload's page data: its commit, counts and failed tests; an id the repository lacks is a 404", async () => {
      const failing = `<?xml version="1.0"?>
<testsuite name="checkout" tests="3">
  <testcase classname="app.checkout" name="test_pays" time="0.1"/>
  <testcase classname="app.checkout" name="test_refunds" time="0.1"><failure message="expected 2, got 3">AssertionError: expected 2, got 3</failure></testcase>
  <testcase classname="app.checkout" name="test_later" time="0"><skipped/></testcase>
</testsuite>`
      const sha = "c".repeat(40)
      const form = new FormData()
      form.append(
        "metadata",
        JSON.stringify({
          ...scope,
          sha,
          branch: "feature",
          pr_number: 7,
          job_name: "unit",
          run_at: new Date().toISOString()
        })
      )
      form.append("junit", new File([failing], "junit.xml", { type: "application/xml" }))
      const sent = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": server.token },
        body: form
      })
      expect(sent.status).toBe(200)
      const now = Date.now()
      const listed = await ok<{ tests: ReadonlyArray<{ id: string; name: string }> }>(
        "flaky-tests/list-failing-tests",
        {
          ...scope,
          start_time: new Date(now - 3_600_000).toISOString(),
          end_time: new Date(now + 3_600_000).toISOString(),
          page_query: { page_size: 10, page_token: "" }
        }
      )
      const refunds = listed.tests.find((t) => t.name === "test_refunds")
      expect(refunds).toBeDefined()
      const history = await ok<{ recent: ReadonlyArray<{ uploadId: string }> }>("flaky-tests/get-test-history", {
        repo: repoRef,
        test_id: refunds!.id
      })
      const uploadId = history.recent[0]!.uploadId
      const view = await ok<Record<string, unknown>>("flaky-tests/get-upload", { repo: repoRef, upload_id: uploadId })
      expect(view).toMatchObject({
        id: uploadId,
        sha,
        branch: "feature",
        prNumber: 7,
        jobName: "unit",
        tests: 3,
        passed: 1,
        failed: 1,
        skipped: 1,
        infra: false,
        failures: [{ testId: refunds!.id, name: "test_refunds" }]
      })
      expect(String((view.failures as ReadonlyArray<{ failureSummary: string }>)[0]?.failureSummary)).toContain(
        "expected 2, got 3"
      )
      const missing = await server.post("flaky-tests/get-upload", {
        repo: repoRef,
        upload_id: "00000000-0000-4000-8000-000000000000"
      })
      expect(missing.status).toBe(404)
      const otherRepo = await server.post("flaky-tests/get-upload", {
        repo: { ...repoRef, name: "elsewhere" },
        upload_id: uploadId
      })
      expect(otherRepo.status).toBe(404)
      const bad = await server.post("flaky-tests/get-upload", { repo: repoRef, upload_id: "nope" })
      expect(bad.status).toBe(400)
    })
  })
}
