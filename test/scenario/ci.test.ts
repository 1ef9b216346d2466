/**
 * The built-in command CI (CI_COMMAND) end to end: it runs in a checkout of every test branch and reports the `ci`
 * status, whose URL serves the command's output at /ci/output/<id>. A server of its own, since CI_COMMAND is a
 * setting of the whole server.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import * as fs from "node:fs"
import { openScenario, type Scenario } from "../support/scenario.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

let server: TestServer
let root: string

beforeAll(async () => {
  root = tempDir("greenline-scenario-ci-git-")
  server = await startTestServer({
    db: "pglite",
    gitRoot: root,
    gitPollMs: 100,
    // the pause lets the test see the run in progress
    ciCommand: "echo checking for a.txt; sleep 0.4; test -f a.txt"
  })
})

afterAll(async () => {
  await server.close()
  fs.rmSync(root, { recursive: true, force: true })
})

const output = async (s: Scenario, runId: string) => {
  const d = await s.details(runId)
  expect(d.statusChecks.map((c) => c.context)).toEqual(["ci"])
  const url = new URL(d.statusChecks[0]!.url)
  expect(url.pathname).toMatch(/^\/ci\/output\/[0-9a-f-]{36}$/)
  const response = await fetch(`${server.url}${url.pathname}`)
  expect(response.status).toBe(200)
  return response.text()
}

test("built-in CI: a passing command merges, a failing one fails, the output is served", async () => {
  const s = await openScenario(server, root, { name: "ci1", concurrency: 2 })
  try {
    s.createPr(1, { files: { "a.txt": "a\n" } }, "a.txt")
    await s.submit(1)
    const pass = await s.waitRun(1)
    await s.waitState(1, "merged")
    expect(await output(s, pass.runId)).toBe("checking for a.txt\n\n[exit code 0]\n")
    await s.checkOnePromise()
  } finally {
    await s.close()
  }
  const f = await openScenario(server, root, { name: "ci2", concurrency: 1 })
  try {
    f.createPr(1, { files: { "b.txt": "b\n" } }, "b.txt")
    await f.submit(1)
    const run = await f.waitRun(1)
    await f.waitState(1, "failed")
    expect((await f.timeline(1)).at(-1)?.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
    expect(await output(f, run.runId)).toBe("checking for a.txt\n\n[exit code 1]\n")
    const d = await f.details(run.runId)
    expect(d.statusChecks[0]!.state).toBe("FAILURE")
    await f.checkOnePromise()
  } finally {
    await f.close()
  }
}, 60_000)
