/**
 * Idle queues (#37): a queue with nothing to do runs no rounds on the Git poll's interval; a push to its target branch
 * wakes it through the local provider's shared ref watch, a submission through its wake-up. The real server over real
 * bare repositories; the test never ticks the runner after it settled, so only those wake-ups can run its rounds.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { openScenario } from "../support/scenario.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 60_000
let server: TestServer
let root: string

beforeAll(async () => {
  root = tempDir("greenline-scenario-idle-git-")
  server = await startTestServer({ db: "pglite", gitRoot: root, gitPollMs: 100 })
}, 60_000)

afterAll(async () => {
  await server.close()
  fs.rmSync(root, { recursive: true, force: true })
})

const storedTarget = (queueId: string) =>
  server.run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(
        sql<{
          target: string | null
        }>`select state->>'targetSha' as target from queue_runtime where queue_id = ${queueId}`,
        (rows) => rows[0]?.target ?? null
      )
    )
  )

test(
  "an idle queue notices a push to its target without a tick, then merges a submission on it",
  async () => {
    const s = await openScenario(server, root, { name: "idle1" })
    try {
      const queueId = await server.queueId(s.key)
      await s.tick()
      expect(await storedTarget(queueId)).toBe(s.initialSha)
      const pushed = s.repo.pushToMain({ "outside.txt": "outside\n" })
      // no tick: the shared ref watch wakes the runner, whose round reads the target and saves it
      await server.until(queueId, "the pushed target stored", async () => (await storedTarget(queueId)) === pushed, {
        tick: false
      })
      s.createPr(1)
      await s.submit(1)
      await s.ciPass(1)
      await s.waitState(1, "merged")
      await s.checkOnePromise({ outside: [pushed] })
    } finally {
      await s.close()
    }
  },
  TIMEOUT
)
