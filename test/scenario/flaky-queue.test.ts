/**
 * Flaky failures in the merge queue (issue #20, extension `quarantinedFailuresPass`, off by default), on real Git:
 * a test run whose required status failed, and whose test-branch sha's JUnit upload shows that every failed test is
 * quarantined, counts as passed; the PR merges and its timeline says why. A failure of a test that is not
 * quarantined still fails the run, and so does everything with the setting off.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { openScenario, type Scenario } from "../support/scenario.ts"
import { databases, startTestServer, TEST_TOKEN, type TestServer, tempDir } from "../support/server.ts"

for (const db of databases) {
  describe(`flaky failures in the merge queue (${db})`, () => {
    let server: TestServer
    let root: string

    beforeAll(async () => {
      root = tempDir("greenline-scenario-flaky-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100 })
    })

    afterAll(async () => {
      await server.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    const junit = (cases: ReadonlyArray<readonly [string, "passed" | "failed"]>) =>
      `<?xml version="1.0"?>\n<testsuites><testsuite name="s">${cases
        .map(([name, status]) =>
          status === "failed"
            ? `<testcase name="${name}" classname="pkg.C" file="src/a.test.ts"><failure message="boom">x</failure></testcase>`
            : `<testcase name="${name}" classname="pkg.C" file="src/a.test.ts"/>`
        )
        .join("\n")}</testsuite></testsuites>\n`

    /** POST /v1/flaky-tests/upload, as the CLI does */
    const upload = async (
      s: Scenario,
      sha: string,
      branch: string,
      cases: ReadonlyArray<readonly [string, "passed" | "failed"]>
    ) => {
      const form = new FormData()
      form.append("metadata", JSON.stringify({ repo: s.key.repo, org_url_slug: "acme-org", sha, branch }))
      form.append("junit", new Blob([junit(cases)], { type: "application/xml" }), "junit.xml")
      const response = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": TEST_TOKEN },
        body: form
      })
      expect(response.status).toBe(200)
      return (await response.json()) as { all_failures_quarantined: boolean }
    }

    /** quarantine `name` (always_quarantine) after one upload on main that shows the test */
    const quarantine = async (s: Scenario, name: string) => {
      await upload(s, s.initialSha, "main", [
        [name, "failed"],
        ["steady", "passed"],
        ["other", "passed"]
      ])
      const scope = { repo: s.key.repo, org_url_slug: "acme-org" }
      expect((await server.post("flaky-tests/update-settings", { ...scope, quarantining_enabled: true })).status).toBe(
        200
      )
      const failing = (await server.post("flaky-tests/list-failing-tests", {
        ...scope,
        start_time: new Date(Date.now() - 3_600_000).toISOString(),
        end_time: new Date(Date.now() + 3_600_000).toISOString(),
        page_query: { page_size: 100, page_token: "" }
      })) as { status: number; body: { tests: ReadonlyArray<{ id: string; name: string }> } }
      const id = failing.body.tests.find((t) => t.name === name)?.id
      const set = await server.post("flaky-tests/set-quarantine-override", {
        ...scope,
        test_case_id: id,
        override: "always_quarantine",
        owner: "@acme/web",
        reason: "known flake"
      })
      expect(set.status).toBe(200)
    }

    test("a run that failed only in quarantined tests counts as passed, and the timeline says so", async () => {
      const s = await openScenario(server, root, {
        name: "fq1",
        concurrency: 1,
        config: { quarantinedFailuresPass: true }
      })
      try {
        await quarantine(s, "shaky")
        s.createPr(1)
        await s.submit(1)
        const run = await s.waitRun(1)
        const summary = await upload(s, run.sha, run.details.testBranch, [
          ["shaky", "failed"],
          ["steady", "passed"],
          ["other", "passed"]
        ])
        expect(summary.all_failures_quarantined).toBe(true)
        await s.report(run.sha, "failure")
        await s.waitState(1, "merged")
        expect((await s.timeline(1)).map((t) => t.reason)).toContain("TEST_RUN_PASSED_QUARANTINED_FAILURES_ONLY")
        await s.checkOnePromise()

        // a failure of a test that is not quarantined fails the run
        s.createPr(2)
        await s.submit(2)
        const second = await s.waitRun(2)
        await upload(s, second.sha, second.details.testBranch, [
          ["shaky", "failed"],
          ["steady", "failed"],
          ["other", "passed"]
        ])
        await s.report(second.sha, "failure")
        await s.waitState(2, "failed")
        expect((await s.timeline(2)).at(-1)?.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
      } finally {
        await s.close()
      }
    })

    test("off by default: the same run fails", async () => {
      const s = await openScenario(server, root, { name: "fq2", concurrency: 1 })
      try {
        await quarantine(s, "shaky")
        s.createPr(1)
        await s.submit(1)
        const run = await s.waitRun(1)
        await upload(s, run.sha, run.details.testBranch, [
          ["shaky", "failed"],
          ["steady", "passed"],
          ["other", "passed"]
        ])
        await s.report(run.sha, "failure")
        await s.waitState(1, "failed")
        expect((await s.timeline(1)).at(-1)?.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
      } finally {
        await s.close()
      }
    })

    test("known-flaky failures that are not quarantined retry the run once (flakyRetryBudget), then it fails", async () => {
      const s = await openScenario(server, root, { name: "fq3", concurrency: 1, config: { flakyRetryBudget: 1 } })
      try {
        // "wobbly" failed and passed on one commit of main: flaky, not quarantined (quarantining is off)
        for (const status of ["failed", "passed"] as const)
          await upload(s, s.initialSha, "main", [
            ["wobbly", status],
            ["steady", "passed"],
            ["other", "passed"]
          ])
        s.createPr(1)
        await s.submit(1)
        const first = await s.waitRun(1)
        await upload(s, first.sha, first.details.testBranch, [
          ["wobbly", "failed"],
          ["steady", "passed"],
          ["other", "passed"]
        ])
        await s.report(first.sha, "failure")
        // run again, and this time it passes
        const second = await s.waitRun(1, [first.runId])
        expect((await s.timeline(1)).map((t) => t.reason)).toContain("TEST_RUN_RETRIED_KNOWN_FLAKY_FAILURES")
        await s.report(second.sha, "success")
        await s.waitState(1, "merged")
        await s.checkOnePromise()

        // the budget is one retry: a second failure fails the PR
        s.createPr(2)
        await s.submit(2)
        const a = await s.waitRun(2)
        await upload(s, a.sha, a.details.testBranch, [
          ["wobbly", "failed"],
          ["steady", "passed"],
          ["other", "passed"]
        ])
        await s.report(a.sha, "failure")
        const b = await s.waitRun(2, [a.runId])
        await upload(s, b.sha, b.details.testBranch, [
          ["wobbly", "failed"],
          ["steady", "passed"],
          ["other", "passed"]
        ])
        await s.report(b.sha, "failure")
        await s.waitState(2, "failed")
        expect(await s.testingCount(2)).toBe(2)
        expect((await s.timeline(2)).at(-1)?.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
      } finally {
        await s.close()
      }
    })

    test("quarantine export (JSON, CSV) and import over HTTP", async () => {
      const s = await openScenario(server, root, { name: "fq4", concurrency: 1 })
      try {
        await quarantine(s, "shaky")
        const get = (path: string) => fetch(`${server.url}${path}`, { headers: { "x-api-token": TEST_TOKEN } })
        const json = await get("/v1/flaky-tests/export?org_url_slug=acme-org&repo=local/acme/fq4")
        expect(json.status).toBe(200)
        const body = (await json.json()) as { tests: ReadonlyArray<{ name: string; owner: string | null }> }
        expect(body.tests.map((t) => [t.name, t.owner])).toEqual([["shaky", "@acme/web"]])
        const csv = await get("/v1/flaky-tests/export.csv?org_url_slug=acme-org&repo=local/acme/fq4")
        expect(csv.status).toBe(200)
        expect(csv.headers.get("content-type")).toStartWith("text/csv")
        const text = await csv.text()
        expect(text.split("\r\n")[1]).toContain(",shaky,")
        const bad = await get("/v1/flaky-tests/export?org_url_slug=acme-org&repo=nope")
        expect(bad.status).toBe(400)
        expect(((await bad.json()) as { error: { code: string } }).error.code).toBe("INVALID_REQUEST")
        const imported = await server.post("flaky-tests/import", {
          repo: s.key.repo,
          org_url_slug: "acme-org",
          csv: text
        })
        expect(imported).toEqual({ status: 200, body: { imported: 1, created: 0, cleared: 0 } })
      } finally {
        await s.close()
      }
    })
  })
}
