/**
 * Failure triage (issue #33) through the real server on local Git, CI played by the test: a failed PR's `failure`
 * block in getSubmittedPullRequest (the failing run, its failed required status with its link, the failed tests of
 * the JUnit uploads whose commit is the run's test-branch SHA, each marked new / known flaky / broken on the target
 * branch), a restart's causing PR and its failed run, and the queue's failures view grouped by reason and by test.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { startReceiver } from "../support/receiver.ts"
import { openScenario } from "../support/scenario.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 90_000
const SLUG = "acme-org"

interface FailedTest {
  readonly name: string
  readonly classname: string
  readonly message: string
  readonly mark: string
  readonly failureRate: number
  readonly quarantined: boolean
}
interface Failure {
  readonly reason: string
  readonly testRunId: string | null
  readonly testBranchSha: string | null
  readonly failedStatuses: ReadonlyArray<{ context: string; state: string; url: string | null }>
  readonly causedBy: { prNumber: number; testRunId: string | null } | null
  readonly tests: { uploads: number; failed: ReadonlyArray<FailedTest>; truncated: boolean }
}
interface Record {
  readonly state: string
  readonly testRunId: string | null
  readonly failure?: Failure
  readonly timeBreakdown?: {
    readonly restarts: ReadonlyArray<{ causedByPr: number | null; causedByTestRunId?: string | null }>
  }
}

type Case = readonly [name: string, status: "passed" | "failed", message?: string]
const junit = (cases: ReadonlyArray<Case>) => `<?xml version="1.0"?>
<testsuite name="suite" tests="${cases.length}">${cases
  .map(
    ([name, status, message]) =>
      `<testcase classname="app.checkout" name="${name}" file="tests/checkout_test.py" time="0.1">${
        status === "failed" ? `<failure message="${message ?? "assertion failed"}">${message ?? "boom"}</failure>` : ""
      }</testcase>`
  )
  .join("")}
</testsuite>`

for (const db of databases) {
  describe(`failure triage (${db})`, () => {
    let server: TestServer
    let root: string
    beforeAll(async () => {
      root = tempDir("greenline-triage-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100, config: { webhookAllowPrivate: true } })
    })
    afterAll(async () => {
      await server.close()
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
      "a failed PR names its failing status, its failed tests with their marks; a restart names its cause's run",
      async () => {
        const name = `triage-${db}`
        const s = await openScenario(server, root, { name, concurrency: 2 })
        const flaky = async (op: string, body: object) => {
          const r = await server.post(`flaky-tests/${op}`, { repo: s.key.repo, org_url_slug: SLUG, ...body })
          if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
          return r.body
        }
        try {
          // the target branch's own results: test_new passes there, test_broken fails there
          await upload(name, s.initialSha, "main", [
            ["test_new", "passed"],
            ["test_broken", "failed", "KeyError: total"],
            ["test_flaky", "passed"]
          ])
          // #2 is tested on top of #1; #1's run fails
          s.createPr(1)
          s.createPr(2)
          await s.submit(1)
          await s.submit(2)
          await s.waitState(2, "testing")
          const run1 = await s.waitRun(1)
          const link = "https://ci.example/runs/1"
          const reported = await server.post("reportStatus", {
            repo: s.key.repo,
            sha: run1.sha,
            context: "ci",
            state: "failure",
            targetUrl: link
          })
          expect(reported.status).toBe(200)
          await s.waitState(1, "failed")

          // before any upload: the status, no tests
          const bare = await s.ok<Record>("getSubmittedPullRequest", { pr: { number: 1 } })
          expect(bare.failure?.failedStatuses).toEqual([{ context: "ci", state: "FAILURE", url: link }])
          expect(bare.failure?.testRunId).toBe(run1.runId)
          expect(bare.failure?.tests).toEqual({ uploads: 0, failed: [], truncated: false })

          // the run's uploads arrive later (the block is read when asked), and test_flaky is quarantined
          await upload(name, run1.sha, run1.details.testBranch, [
            ["test_new", "failed", "AssertionError: expected 3 got 4"],
            ["test_broken", "failed", "KeyError: total"],
            ["test_flaky", "failed", "TimeoutError: payment mock"],
            ["test_ok", "passed"]
          ])
          await flaky("update-settings", { quarantining_enabled: true })
          const list = (await flaky("list-failing-tests", {
            start_time: new Date(Date.now() - 86_400_000).toISOString(),
            end_time: new Date(Date.now() + 3_600_000).toISOString(),
            page_query: { page_size: 100, page_token: "" }
          })) as { tests: ReadonlyArray<{ id: string; name: string }> }
          const flakyId = list.tests.find((t) => t.name === "test_flaky")?.id
          expect(flakyId).toBeDefined()
          await flaky("set-quarantine-override", { test_case_id: flakyId, override: "always_quarantine" })

          const one = await s.ok<Record>("getSubmittedPullRequest", { pr: { number: 1 } })
          expect(one.state).toBe("failed")
          const f = one.failure!
          expect(f.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
          expect(f.testBranchSha).toBe(run1.sha)
          expect(f.causedBy).toBeNull()
          expect(f.tests.uploads).toBe(1)
          expect(f.tests.failed.map((t) => [t.name, t.mark, t.quarantined])).toEqual([
            ["test_broken", "broken_on_target", false],
            ["test_flaky", "known_flaky", true],
            ["test_new", "new", false]
          ])
          const flakyTest = f.tests.failed.find((t) => t.name === "test_flaky")!
          // one failure in two results of the last 7 days
          expect(flakyTest.failureRate).toBe(0.5)
          expect(flakyTest.message).toContain("TimeoutError")

          // #2 was restarted because #1 failed: the cause and its failed run
          const two = await s.ok<Record>("getSubmittedPullRequest", { pr: { number: 2 } })
          expect(two.failure).toBeUndefined()
          expect(two.timeBreakdown?.restarts.map((r) => [r.causedByPr, r.causedByTestRunId])).toEqual([[1, run1.runId]])

          // #2 fails too, with test_new failing the same way, its results uploaded before its status: its comment
          // and its webhook name the failed test with its mark; the failures view groups the two failures
          const receiver = startReceiver()
          const endpoint = await s.ok<{ id: string }>("createWebhookEndpoint", { url: receiver.url })
          const run2 = await s.waitRun(2)
          await upload(name, run2.sha, run2.details.testBranch, [
            ["test_new", "failed", "AssertionError: expected 3 got 4"],
            ["test_ok", "passed"]
          ])
          await s.report(run2.sha, "failure")
          await s.waitState(2, "failed")
          const activity = await s.ok<{ comments: ReadonlyArray<{ body: string }> }>("getPullRequestActivity", {
            pr: { number: 2 }
          })
          expect(activity.comments.at(-1)?.body).toBe(
            "Failed in the merge queue: TEST_RUN_REQUIRED_STATUS_FAILED\nFailed tests: `test_new` (new)"
          )
          try {
            const hook = await receiver.waitFor(
              (r) => r.message.type === "pull_request.failed" && r.message.data.pr_number === 2,
              "pull_request.failed of #2"
            )
            expect(hook.message.data.failed_tests).toEqual([
              {
                name: "test_new",
                classname: "app.checkout",
                mark: "new",
                failure_rate: 2 / 3,
                quarantined: false,
                message: "AssertionError: expected 3 got 4"
              }
            ])
          } finally {
            await server.post("deleteWebhookEndpoint", { id: endpoint.id })
            await receiver.stop()
          }
          const twoFailed = await s.ok<Record>("getSubmittedPullRequest", { pr: { number: 2 } })
          expect(twoFailed.failure?.testRunId).toBe(run2.runId)
          expect(twoFailed.failure?.tests.failed.map((t) => [t.name, t.mark])).toEqual([["test_new", "new"]])

          const view = await s.ok<{
            failures: ReadonlyArray<{ prNumber: number; reason: string; testRunId: string | null }>
            byReason: ReadonlyArray<{ reason: string; count: number; prs: ReadonlyArray<number> }>
            byTest: ReadonlyArray<{ tests: ReadonlyArray<string>; count: number; prs: ReadonlyArray<number> }>
          }>("listQueueFailures", {})
          expect(view.failures.map((x) => [x.prNumber, x.testRunId])).toEqual([
            [2, run2.runId],
            [1, run1.runId]
          ])
          expect(view.byReason).toEqual([{ reason: "TEST_RUN_REQUIRED_STATUS_FAILED", count: 2, prs: [2, 1] }])
          expect(view.byTest[0]).toMatchObject({ tests: ["app.checkout.test_new"], count: 2, prs: [2, 1] })
          expect(view.byTest.length).toBe(3)

          // bad input: the contract's envelope
          const bad = await s.post("listQueueFailures", { limit: 0 })
          expect(bad.status).toBe(400)
          expect((bad.body as { error: { code: string } }).error.code).toBe("INVALID_REQUEST")
        } finally {
          await s.close()
        }
      },
      TIMEOUT
    )
  })
}
