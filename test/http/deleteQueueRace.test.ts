/**
 * deleteQueue racing the writes to its queue (issue #15, Build 7): each request either takes effect or is refused
 * with the contract's 404/409, never a 500 (a foreign-key violation, a deadlock), and what answered 200 holds.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const ROUNDS = 12
const PRS = 4

const servers = new Map<string, TestServer>()
const repos: Array<TestRepo> = []

beforeAll(async () => {
  for (const db of databases) servers.set(db, await startTestServer({ db, gitPollMs: 100 }))
}, 300_000)

afterAll(async () => {
  for (const s of servers.values()) await s.close()
  for (const r of repos) r.cleanup()
})

describe("deleteQueue races", () => {
  for (const db of databases) {
    test(`deleteQueue and the writes it races: 200, 404 or 409, never 500 (${db})`, async () => {
      const server = servers.get(db)!
      const repo = createTestRepo({ root: server.gitRoot, repo: { host: "local", owner: "acme", name: `race-${db}` } })
      repos.push(repo)
      const shas = new Map<number, string>()
      for (let n = 1; n <= PRS; n++) shas.set(n, repo.createPr(n, { files: { [`pr-${n}.txt`]: `${n}\n` } }))
      const key = { repo: repo.repo, targetBranch: "main" }
      const post = (op: string, body: Record<string, unknown> = {}) => server.post(op, { ...key, ...body })
      const answers: Array<{ op: string; status: number; code?: string }> = []
      for (let round = 0; round < ROUNDS; round++) {
        // an empty queue: the delete succeeds while the writes are under way
        expect((await post("createQueue")).status).toBe(200)
        const empty = await Promise.all(
          (
            [
              ["updateQueue", { concurrency: 2 }],
              ["setImpactedTargets", { pr: { number: 4, sha: shas.get(4) }, impactedTargets: ["a"] }],
              ["deleteQueue", {}],
              ["updateQueue", { state: "paused" }],
              ["submitPullRequest", { pr: { number: 4 } }],
              ["updateQueue", { concurrency: 5 }]
            ] as const
          ).map(async ([op, body]) => {
            const r = await post(op, body)
            return { op, status: r.status, code: (r.body as { error?: { code?: string } }).error?.code }
          })
        )
        answers.push(...empty)
        expect({ round, bad: empty.filter((a) => a.status >= 500) }).toEqual({ round, bad: [] })
        if ((await post("getQueue")).status === 200) {
          await post("cancelPullRequest", { pr: { number: 4 } })
          expect((await post("deleteQueue")).status).toBe(200)
        }
        expect((await post("createQueue")).status).toBe(200)
        await post("updateQueue", { requiredStatuses: ["ci"], mode: round % 2 === 0 ? "single" : "parallel" })
        expect((await post("submitPullRequest", { pr: { number: 1 } })).status).toBe(200)
        const requests: Array<[string, Record<string, unknown>]> = [
          ["cancelPullRequest", { pr: { number: 1 } }],
          ["deleteQueue", {}],
          ["submitPullRequest", { pr: { number: 2 } }],
          ["deleteQueue", {}],
          ["setImpactedTargets", { pr: { number: 1, sha: shas.get(1) }, impactedTargets: ["a"] }],
          ["updateQueue", { concurrency: 3 + round }],
          ["restartTestsOnPullRequest", { pr: { number: 1 } }],
          ["submitPullRequest", { pr: { number: 3 }, priority: "high" }],
          ["cancelPullRequest", { pr: { number: 2 } }],
          ["deleteQueue", {}],
          ["getQueue", {}],
          ["getSubmittedPullRequest", { pr: { number: 1 } }]
        ]
        // a different interleaving each round
        const order = requests.map((r, i) => [r, (i * 7 + round * 5) % requests.length] as const)
        order.sort((a, b) => a[1] - b[1])
        const results = await Promise.all(
          order.map(async ([[op, body]]) => {
            const r = await post(op, body)
            return { op, status: r.status, code: (r.body as { error?: { code?: string } }).error?.code }
          })
        )
        answers.push(...results)
        expect({ round, bad: results.filter((a) => a.status >= 500) }).toEqual({ round, bad: [] })
        // the end of the round: whatever is left (not_ready entries too) is cancelled and the queue deleted
        if ((await post("getQueue")).status === 200) {
          for (let n = 1; n <= PRS; n++) await post("cancelPullRequest", { pr: { number: n } })
          const deleted = await post("deleteQueue")
          expect({ round, status: deleted.status, body: deleted.body }).toEqual({ round, status: 200, body: {} })
        }
        expect((await post("getQueue")).status).toBe(404)
      }
      const allowed = new Set([200, 404, 409])
      const bad = answers.filter((a) => !allowed.has(a.status))
      expect(bad).toEqual([])
      // refusals carry the contract's codes
      for (const a of answers.filter((x) => x.status !== 200)) {
        expect([
          "QUEUE_NOT_FOUND",
          "QUEUE_NOT_EMPTY",
          "PR_NOT_FOUND",
          "PR_NOT_ACTIVE",
          "PR_TESTS_NOT_RESTARTABLE"
        ]).toContain(a.code ?? "")
      }
    }, 300_000)
  }

  for (const db of databases) {
    test(`reportStatus racing createQueue and deleteQueue on the same repository: 200, never 500 (${db})`, async () => {
      const server = servers.get(db)!
      const repo = createTestRepo({
        root: server.gitRoot,
        repo: { host: "local", owner: "acme", name: `status-race-${db}` }
      })
      repos.push(repo)
      const sha = repo.createPr(1, { files: { "pr-1.txt": "1\n" } })
      const branches = ["main", "b1", "b2", "b3"]
      const answers: Array<{ op: string; status: number; body: unknown }> = []
      const call = async (op: string, body: Record<string, unknown>) => {
        const r = await server.post(op, { repo: repo.repo, ...body })
        answers.push({ op, status: r.status, body: r.body })
      }
      for (let round = 0; round < 10; round++) {
        // a queue per branch that is created and deleted while statuses for the repository come in: a report
        // queues an event for every queue of the repository, in the transaction that stores the status
        await Promise.all([
          ...branches.flatMap((b) => [
            call("createQueue", { targetBranch: b }),
            call("deleteQueue", { targetBranch: b }),
            call("createQueue", { targetBranch: b }),
            call("deleteQueue", { targetBranch: b })
          ]),
          ...Array.from({ length: 12 }, (_, i) =>
            call("reportStatus", { sha, context: `ci-${i % 4}`, state: i % 3 === 0 ? "pending" : "success" })
          )
        ])
      }
      expect(answers.filter((a) => a.status >= 500)).toEqual([])
      expect(answers.filter((a) => a.op === "reportStatus" && a.status !== 200)).toEqual([])
      for (const a of answers.filter((x) => x.status !== 200)) {
        expect(["QUEUE_NOT_FOUND", "QUEUE_ALREADY_EXISTS"]).toContain(
          (a.body as { error?: { code?: string } }).error?.code ?? ""
        )
      }
      for (const b of branches) await server.post("deleteQueue", { repo: repo.repo, targetBranch: b })
    }, 300_000)
  }
})
