/**
 * Liveness of the runner (#15): settings at the bounds of contract.md, the status window of a run across restarts,
 * test branches of ended runs, speculation depth. The real server over real bare repositories, CI played by the test.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import * as fs from "node:fs"
import { openScenario, type Scenario, type ScenarioOptions } from "../support/scenario.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 60_000
const MAX_U32 = 4294967295
let server: TestServer
let root: string
let counter = 0

beforeAll(async () => {
  root = tempDir("greenline-scenario-liveness-git-")
  server = await startTestServer({ db: "pglite", gitRoot: root, gitPollMs: 100 })
})

afterAll(async () => {
  await server.close()
  fs.rmSync(root, { recursive: true, force: true })
})

const scenario = async (options: Omit<ScenarioOptions, "name">, body: (s: Scenario) => Promise<void>) => {
  const s = await openScenario(server, root, { ...options, name: `l${++counter}` })
  try {
    await body(s)
    await s.checkOnePromise()
  } finally {
    s.close()
  }
}

test(
  "concurrency and bisectionConcurrency at 4294967295: the queue still tests, bisects and merges",
  () =>
    scenario({ config: { concurrency: MAX_U32, bisectionConcurrency: MAX_U32 } }, async (s) => {
      for (const n of [1, 2, 3]) s.createPr(n)
      for (const n of [1, 2, 3]) await s.submit(n)
      await s.ciPass(1)
      await s.waitState(1, "merged")
      await s.ciFail(2)
      await s.waitState(2, "failed")
      await s.ciPass(3)
      await s.waitState(3, "merged")
      expect((await s.ok<{ concurrency: number }>("getQueue")).concurrency).toBe(MAX_U32)
    }),
  TIMEOUT
)
