import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { createTestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

/**
 * The single-file CI client (issue 19): a CI job simulated in a temporary directory with no Greenline checkout,
 * using only the file downloaded from `GET /cli/greenline.mjs`, run with plain `node`.
 */

const node = Bun.which("node")
if (node === null) throw new Error("node is needed on PATH for the CI client test")

const JUNIT = (failing: boolean) => `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="math" tests="2" failures="${failing ? 1 : 0}">
    <testcase classname="math" name="adds" file="math.test.js" time="0.01"/>
    <testcase classname="math" name="divides sometimes" file="math.test.js" time="0.02">${failing ? '<failure message="expected 2, got 3">AssertionError</failure>' : ""}</testcase>
  </testsuite>
</testsuites>
`

for (const db of databases) {
  describe(`CI client (${db})`, () => {
    let server: TestServer
    let job: string
    let client: string
    const repo = { host: "local", owner: "acme", name: `ci-client-${db}` }
    const repoArg = `${repo.host}/${repo.owner}/${repo.name}`

    beforeAll(async () => {
      server = await startTestServer({ db })
      // the job's folder: a checkout of the project under test, nothing of Greenline's
      job = tempDir("greenline-job-")
      const response = await fetch(`${server.url}/cli/greenline.mjs`)
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("javascript")
      client = path.join(job, "greenline.mjs")
      fs.writeFileSync(client, await response.text())
      // the test command: writes a JUnit report and exits 1 when FAIL is set (a test failed), 0 otherwise
      fs.writeFileSync(
        path.join(job, "run-tests.sh"),
        `mkdir -p reports/unit
if [ -n "$FAIL" ]; then cp fail.xml reports/unit/TEST-math.xml; exit 1; fi
cp pass.xml reports/unit/TEST-math.xml
`
      )
      fs.writeFileSync(path.join(job, "fail.xml"), JUNIT(true))
      fs.writeFileSync(path.join(job, "pass.xml"), JUNIT(false))
      createTestRepo({ root: server.gitRoot, repo }).createPr(7, { files: { "seven.txt": "7\n" } })
      // paused: the submitted PR stays queued while the test looks at it
      expect((await server.post("createQueue", { repo, targetBranch: "main" })).status).toBe(200)
      expect((await server.post("updateQueue", { repo, targetBranch: "main", state: "paused" })).status).toBe(200)
    })
    afterAll(async () => {
      await server?.close()
      if (job) fs.rmSync(job, { recursive: true, force: true })
    })

    // asynchronous: the server answers from this very process
    const run = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
      const r = Bun.spawn([node, client, ...args], {
        cwd: job,
        // only what a CI job has: no Greenline checkout, no Bun on PATH
        env: {
          PATH: path.dirname(node),
          HOME: job,
          GREENLINE_URL: server.url,
          GREENLINE_TOKEN: server.token,
          GREENLINE_ORG: "acme-org",
          GREENLINE_REPO: repoArg,
          GITHUB_SHA: "0123456789abcdef0123456789abcdef01234567",
          GITHUB_REF_NAME: "feature",
          ...env
        },
        stdout: "pipe",
        stderr: "pipe"
      })
      const [out, err, code] = await Promise.all([
        new Response(r.stdout).text(),
        new Response(r.stderr).text(),
        r.exited
      ])
      return { code, out, err }
    }
    const test_ = ["test", "--junit", "reports/**/*.xml", "--", "sh", "run-tests.sh"]

    test("the file is a Node.js program with every command's help", async () => {
      const help = await run(["--help"])
      expect(help.code).toBe(0)
      for (const command of [
        "upload",
        "test",
        "quarantine list",
        "quarantine set",
        "queue status",
        "submit",
        "cancel"
      ]) {
        expect(help.out).toContain(command)
      }
      const upload = await run(["upload", "--help"])
      expect(upload.out).toContain("--exit-code N")
      expect((await run(["test", "--help"])).out).toContain("--junit GLOB")
      expect(upload.out).not.toContain("\u001b[")
    })

    test("test: a passing command passes, a failing one fails until its failure is quarantined", async () => {
      const passing = await run(test_)
      expect(passing.err).toBe("")
      expect(passing.code).toBe(0)
      expect(passing.out).toContain("2 tests, 2 passed, 0 failed")

      const failing = await run(test_, { FAIL: "1" })
      expect(failing.code).toBe(1)
      expect(failing.out).toContain("1 failed")
      expect(failing.out).toContain("1 not quarantined")

      // find the failing test's id, and quarantine it with the client
      const scope = { repo, org_url_slug: "acme-org" }
      const failingTests = await server.post("flaky-tests/list-failing-tests", {
        ...scope,
        start_time: new Date(Date.now() - 3_600_000).toISOString(),
        end_time: new Date(Date.now() + 60_000).toISOString(),
        page_query: { page_size: 10, page_token: "" }
      })
      const id = (failingTests.body as { tests: ReadonlyArray<{ id: string; name: string }> }).tests.find(
        (t) => t.name === "divides sometimes"
      )?.id
      expect(id).toBeDefined()
      expect((await server.post("flaky-tests/update-settings", { ...scope, quarantining_enabled: true })).status).toBe(
        200
      )
      const set = await run(["quarantine", "set", id ?? "", "always"])
      expect(set.err).toBe("")
      expect(set.code).toBe(0)
      const list = await run(["quarantine", "list"])
      expect(list.code).toBe(0)
      expect(list.out).toContain(`${id}\talways\t`)
      expect(list.out).toContain("divides sometimes")

      const quarantined = await run(test_, { FAIL: "1" })
      expect(quarantined.code).toBe(0)
      expect(quarantined.out).toContain("every failure is quarantined: this job passes")

      // back to auto: not flaky by the detector's rules yet, so the failure fails the job again
      expect((await run(["quarantine", "set", id ?? "", "auto"])).code).toBe(0)
      expect((await run(test_, { FAIL: "1" })).code).toBe(1)
    })

    test("test fails safe: with the server unreachable, the command's exit code stands, with a warning", async () => {
      const down = { GREENLINE_URL: "http://127.0.0.1:9", GREENLINE_RETRIES: "0" }
      const failing = await run(test_, { ...down, FAIL: "1" })
      expect(failing.code).toBe(1)
      expect(failing.err).toContain("warning: the results were not uploaded: the connection to 127.0.0.1:9 was refused")
      const passing = await run(test_, down)
      expect(passing.code).toBe(0)
      expect(passing.err).toContain("warning")
      // a report from an earlier run is not this run's: nothing new was written by `true`
      const stale = await run(["test", "--junit", "reports/**/*.xml", "--", "true"])
      expect(stale.code).toBe(0)
      expect(stale.err).toContain("no JUnit file matching reports/**/*.xml was written")
    })

    test("upload takes globs relative to the job's folder", async () => {
      const r = await run(["upload", "--exit-code", "3", "reports/**/*.xml"])
      expect(r.err).toBe("")
      expect(r.code).toBe(0)
      expect(r.out).toContain("Uploaded 1 file")
      expect((await run(["upload", "nothing/*.xml"])).code).toBe(2)
    })

    test("queue status, submit and cancel", async () => {
      const empty = await run(["queue", "status"])
      expect(empty.code).toBe(0)
      expect(empty.out).toContain(`${repoArg}@main: paused, single mode, concurrency 1, 0 pull requests`)
      const submit = await run(["submit", "--pr", "7", "--priority", "high"])
      expect(submit.err).toBe("")
      expect(submit.code).toBe(0)
      const status = await run(["queue", "status"])
      expect(status.out).toMatch(/PR 7\t\w+\thigh/)
      expect((await run(["cancel", "--pr", "7"])).code).toBe(0)
      // an error answer: exit 4, with the envelope's code and message
      const again = await run(["cancel", "--pr", "7"])
      expect(again.code).toBe(4)
      expect(again.err).toContain("the server answered 409 PR_NOT_ACTIVE")
      expect((await run(["submit"])).code).toBe(2)
    })

    test("exit codes are the same for every command: 4 for an error answer, 3 for no server, 2 for a wrong line", async () => {
      const wrongToken = { GREENLINE_TOKEN: "glt_not_a_token_0123456789abcdef" }
      const noServer = { GREENLINE_URL: "http://127.0.0.1:9", GREENLINE_RETRIES: "0" }
      const commands: ReadonlyArray<ReadonlyArray<string>> = [
        ["upload", "reports/**/*.xml"],
        ["queue", "status"],
        ["submit", "--pr", "7"],
        ["cancel", "--pr", "7"],
        ["quarantine", "list"],
        ["quarantine", "set", "00000000-0000-4000-8000-000000000000", "always"]
      ]
      for (const command of commands) {
        const refused = await run(command, wrongToken)
        expect({ command, code: refused.code }).toEqual({ command, code: 4 })
        expect(refused.err).toContain("the server answered 401 UNAUTHORIZED")
        const unreachable = await run(command, noServer)
        expect({ command, code: unreachable.code }).toEqual({ command, code: 3 })
        expect(unreachable.err).toContain("was refused")
        const wrong = await run([...command, "--timeout", "soon"])
        expect({ command, code: wrong.code }).toEqual({ command, code: 2 })
      }
      // every command's help says so
      for (const command of [["upload"], ["queue", "status"], ["cancel"]]) {
        expect((await run([...command, "--help"])).out).toContain("4 the server answered with an error")
      }
    })
  })
}
