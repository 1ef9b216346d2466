/**
 * A database outage (issue #38): PostgreSQL stopped under load, then started again. While it is away every request
 * that needs it answers 503 SERVICE_UNAVAILABLE with Retry-After, never 500; nothing is half-written (a queue without
 * its runner's state, a submission answered 200 and lost); and afterwards the queue carries on: every pull request
 * merges exactly once.
 *
 * The PostgreSQL server is the test's own (test/support/ownPostgres.ts: a cluster in a temporary folder on a free
 * loopback port), never the shared one of TEST_DATABASE_URL. The load is bounded by counts, not by time: the outage
 * lasts until enough requests met it, and the recovery until enough in a row were answered.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { type OwnPostgres, ownPostgres } from "../support/ownPostgres.ts"
import { openScenario } from "../support/scenario.ts"
import { eventually, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 240_000
const PRS = 12

let pg: OwnPostgres | undefined
let server: TestServer | undefined
let url = ""

beforeAll(async () => {
  pg = await ownPostgres()
  if (pg === undefined) return
  await pg.start()
  url = await pg.createDatabase("greenline")
}, 120_000)

afterAll(async () => {
  await server?.close()
  pg?.destroy()
})

interface Answer {
  readonly op: string
  readonly status: number
  readonly code: string | undefined
  readonly retryAfter: string | null
  readonly phase: "before" | "down" | "after"
}

describe("a database outage", () => {
  test(
    "PostgreSQL stopped under load: 503 SERVICE_UNAVAILABLE with Retry-After, nothing half-written, every PR merges once after",
    async () => {
      if (pg === undefined) {
        // no PostgreSQL installed here: nothing to stop (CI installs it, and runs this)
        console.warn("no PostgreSQL binaries under /usr/lib/postgresql: the outage test did not run")
        return
      }
      const root = tempDir("greenline-outage-git-")
      server = await startTestServer({ db: "postgres", databaseUrl: url, gitRoot: root, gitPollMs: 100 })
      const srv = server
      const s = await openScenario(srv, root, {
        name: "outage",
        concurrency: 2,
        config: { state: "paused" },
        waitMs: 90_000
      })
      for (let n = 1; n <= PRS; n++) s.createPr(n)

      // the load: writes and reads of the queue, new queues; each answer is recorded with the phase it was sent in
      // (an object, not `let`s: a worker's loop in Bun 1.3.9 went on reading a `let` flag's old value after it changed)
      const load: { phase: Answer["phase"]; stop: boolean } = { phase: "before", stop: false }
      const answers: Array<Answer> = []
      const submittedOk = new Set<number>()
      const createdOk = new Set<string>()
      let k = 0
      const send = async (op: string, body: Record<string, unknown>, target = s.key) => {
        const sent = load.phase
        const response = await fetch(`${srv.url}/v1/${op}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-token": srv.token },
          body: JSON.stringify({ ...target, ...body })
        })
        const text = await response.text()
        let code: string | undefined
        try {
          code = (JSON.parse(text) as { error?: { code?: string } }).error?.code
        } catch {}
        answers.push({
          op,
          status: response.status,
          code,
          retryAfter: response.headers.get("retry-after"),
          phase: sent
        })
        return response.status
      }
      const worker = async (w: number) => {
        while (!load.stop) {
          const i = k++
          const n = 1 + ((i * 7 + w) % PRS)
          switch (i % 6) {
            case 0:
            case 3: {
              const priority = ["medium", "high", "low"][i % 3]
              if ((await send("submitPullRequest", { pr: { number: n }, priority })) === 200) submittedOk.add(n)
              break
            }
            case 1:
              await send("getQueue", {})
              break
            case 2:
              await send("getSubmittedPullRequest", { pr: { number: n }, includeTimeline: true })
              break
            case 4: {
              const branch = `side-${i}`
              const key = { repo: s.key.repo, targetBranch: branch }
              if ((await send("createQueue", {}, key)) === 200) createdOk.add(branch)
              break
            }
            default:
              await send("getQueueActivity", {})
          }
        }
      }
      const workers = Array.from({ length: 4 }, (_, w) => worker(w))
      const count = (p: Answer["phase"]) => answers.filter((a) => a.phase === p).length
      try {
        await eventually(async () => count("before") >= 60 || undefined, 60_000, "load before the outage")
        // (pg_ctl runs synchronously: no request is answered while it stops the server; those sent before count as
        // sent before)
        pg.stop()
        load.phase = "down"
        // the outage lasts until 80 requests met it
        await eventually(async () => count("down") >= 80 || undefined, 60_000, "requests during the outage")
        const ready = await fetch(`${srv.url}/readyz`)
        expect(ready.status).toBe(503)
        await pg.start()
        load.phase = "after"
        // recovered: 40 answers in a row that are not 503
        await eventually(
          async () => {
            const after = answers.filter((a) => a.phase === "after")
            return after.length >= 40 && after.slice(-40).every((a) => a.status !== 503) ? true : undefined
          },
          90_000,
          "the service back"
        )
      } finally {
        load.stop = true
        await Promise.all(workers)
      }
      // every answer was one the contract allows; nothing 5xx but 503, and each 503 is the outage's, with Retry-After
      const bad = answers.filter((a) => ![200, 404, 409, 503].includes(a.status))
      expect(bad).toEqual([])
      const unavailable = answers.filter((a) => a.status === 503)
      expect(unavailable.length).toBeGreaterThan(0)
      for (const a of unavailable) {
        expect({ code: a.code, retryAfter: Number(a.retryAfter) > 0 }).toEqual({
          code: "SERVICE_UNAVAILABLE",
          retryAfter: true
        })
      }
      // while it was down nothing that needs the database succeeded (the token was known already); the last requests
      // sent then may be answered once it is back (pg_ctl holds the process while it starts it)
      const down = answers.filter((a) => a.phase === "down").slice(0, 40)
      expect(down.filter((a) => a.status !== 503).map((a) => [a.op, a.status])).toEqual([])
      expect((await fetch(`${srv.url}/readyz`)).status).toBe(200)

      // nothing half-written: every queue has its runner's state; every submission answered 200 has its entry;
      // every queue made with an answer 200 is there
      const db = new SQL(url)
      try {
        const orphans = await db`select count(*)::int as n from queues q
                                 where not exists (select 1 from queue_runtime r where r.queue_id = q.id)`
        expect(orphans[0].n).toBe(0)
        const entries = await db`select pr_number from entries e join queues q on q.id = e.queue_id
                                 where q.branch = 'main'`
        const stored = new Set(entries.map((r: { pr_number: string | number }) => Number(r.pr_number)))
        for (const n of submittedOk) expect({ pr: n, stored: stored.has(n) }).toEqual({ pr: n, stored: true })
      } finally {
        await db.close()
      }
      for (const branch of createdOk) {
        expect((await srv.post("getQueue", { repo: s.key.repo, targetBranch: branch })).status).toBe(200)
        expect((await srv.post("deleteQueue", { repo: s.key.repo, targetBranch: branch })).status).toBe(200)
      }
      // and the queue carries on: every PR submitted, tested and merged exactly once
      for (let n = 1; n <= PRS; n++) await s.submit(n)
      await s.updateQueue({ state: "running" })
      await s.autoCi(
        Array.from({ length: PRS }, (_, i) => i + 1),
        () => "success",
        150_000
      )
      for (let n = 1; n <= PRS; n++) expect((await s.pr(n)).state).toBe("merged")
      await s.checkOnePromise()
      await s.close()
    },
    TIMEOUT
  )
})
