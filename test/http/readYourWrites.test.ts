/**
 * Read-your-writes through the API (issue #15, Build 1): a write that answered 200 is visible to the very next read,
 * whatever the runner has done with it yet. Each check reads right after the write, without waiting for the runner.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Effect } from "effect"
import type { RunnerProbeShape } from "../../src/queue/runner/probe.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, eventually, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 60_000

interface Pr {
  readonly prNumber: number
  readonly state: string
  readonly priorityValue: number
  readonly position: number | null
  readonly testRunId: string | null
  readonly isCurrentlySubmittedToQueue: boolean
  readonly timeline?: ReadonlyArray<{ state: string; reason: string }>
}

interface QueueView {
  readonly state: string
  readonly enqueuedPullRequests: ReadonlyArray<Pr>
}

const servers = new Map<string, TestServer>()
const roots: Array<string> = []
const repos: Array<TestRepo> = []
let counter = 0

const serverFor = async (db: "pglite" | "postgres") => {
  let s = servers.get(db)
  if (s === undefined) {
    const root = tempDir("greenline-ryw-git-")
    roots.push(root)
    s = await startTestServer({ db, gitRoot: root, gitPollMs: 100 })
    servers.set(db, s)
  }
  return s
}

beforeAll(async () => {
  for (const db of databases) await serverFor(db)
}, 120_000)

afterAll(async () => {
  for (const s of servers.values()) await s.close()
  for (const r of repos) r.cleanup()
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

/** A fresh repository and queue on the database's server; `prs` PRs created (not submitted). */
const open = async (db: "pglite" | "postgres", prs: number, config: Record<string, unknown> = {}) => {
  const server = await serverFor(db)
  const repo = createTestRepo({ root: server.gitRoot, repo: { host: "local", owner: "acme", name: `ryw${++counter}` } })
  repos.push(repo)
  for (let n = 1; n <= prs; n++) repo.createPr(n, { files: { [`pr-${n}.txt`]: `${n}\n` } })
  const key = { repo: repo.repo, targetBranch: "main" }
  const post = (op: string, body: Record<string, unknown> = {}) => server.post(op, { ...key, ...body })
  const ok = async <A>(op: string, body: Record<string, unknown> = {}) => {
    const r = await post(op, body)
    if (r.status !== 200)
      throw new Error(`${op} ${JSON.stringify(body)} answered ${r.status}: ${JSON.stringify(r.body)}`)
    return r.body as A
  }
  await ok("createQueue")
  await ok("updateQueue", { requiredStatuses: ["ci"], ...config })
  const queueId = await server.queueId(key)
  /** Steps the queue's runner (a tick, then its next rounds) until `check` gives a value. */
  const until = <A>(what: string, check: () => Promise<A | undefined | false>) => server.until(queueId, what, check)
  const pr = (n: number, includeTimeline = false) =>
    ok<Pr>("getSubmittedPullRequest", { pr: { number: n }, includeTimeline })
  const queue = () => ok<QueueView>("getQueue")
  const order = async () => (await queue()).enqueuedPullRequests.map((p) => p.prNumber)
  /** Waits until the runner has stepped PR `n`'s submission (its timeline, written by the runner, has an item). */
  const placed = (n: number) => until(`PR #${n} placed`, async () => ((await pr(n, true)).timeline?.length ?? 0) > 0)
  return { server, repo, key, post, ok, pr, queue, order, placed, until }
}

describe("read-your-writes", () => {
  for (const db of databases) {
    test(
      `cancelPullRequest: the next reads show the PR cancelled, out of the queue, and deleteQueue does not count it (${db})`,
      async () => {
        const q = await open(db, 8, { concurrency: 2 })
        // PR 1 and 2 are tested (the runner placed them); the others are cancelled as soon as they are submitted
        await q.ok("submitPullRequest", { pr: { number: 1 } })
        await q.ok("submitPullRequest", { pr: { number: 2 } })
        await q.until("PR 2 testing", async () => ((await q.pr(2)).state === "testing" ? true : undefined))
        for (let n = 1; n <= 8; n++) {
          if (n > 2) await q.ok("submitPullRequest", { pr: { number: n } })
          await q.ok("cancelPullRequest", { pr: { number: n } })
          const read = await q.pr(n)
          expect({
            n,
            state: read.state,
            submitted: read.isCurrentlySubmittedToQueue,
            position: read.position
          }).toEqual({
            n,
            state: "cancelled",
            submitted: false,
            position: null
          })
          expect(await q.order()).not.toContain(n)
          // a second cancel is refused: the PR is not in the queue any more
          const again = await q.post("cancelPullRequest", { pr: { number: n } })
          expect(again.status).toBe(409)
        }
        // the queue holds nothing: it can be deleted at once
        const deleted = await q.post("deleteQueue")
        expect({ status: deleted.status, body: deleted.body }).toEqual({ status: 200, body: {} })
        expect((await q.post("getQueue")).status).toBe(404)
      },
      TIMEOUT
    )

    test(
      `cancel, then resubmit: the PR is back in the queue at once (${db})`,
      async () => {
        const q = await open(db, 3, { state: "paused" })
        for (const n of [1, 2, 3]) await q.ok("submitPullRequest", { pr: { number: n } })
        await q.placed(3)
        await q.ok("cancelPullRequest", { pr: { number: 2 } })
        expect(await q.order()).toEqual([1, 3])
        expect((await q.pr(3)).position).toBe(2)
        await q.ok("submitPullRequest", { pr: { number: 2 } })
        const back = await q.pr(2)
        expect({ state: back.state, position: back.position }).toEqual({ state: "pending", position: 3 })
        expect(await q.order()).toEqual([1, 3, 2])
        // and the runner, once it has stepped both, agrees
        await q.until(
          "the runner's cancellation of PR 2",
          async () => ((await q.pr(2, true)).timeline ?? []).some((t) => t.state === "cancelled") || undefined
        )
        await q.until("PR 2 pending", async () => ((await q.pr(2)).state === "pending" ? true : undefined))
        expect(await q.order()).toEqual([1, 3, 2])
      },
      TIMEOUT
    )

    for (const state of ["paused", "draining"] as const) {
      test(
        `submitPullRequest with a priority: order and position follow priority, then submission, at once (${state}, ${db})`,
        async () => {
          const q = await open(db, 6, { state })
          await q.ok("submitPullRequest", { pr: { number: 1 }, priority: "medium" })
          await q.placed(1)
          await q.ok("submitPullRequest", { pr: { number: 2 }, priority: "high" })
          expect(await q.order()).toEqual([2, 1])
          expect((await q.pr(2)).position).toBe(1)
          expect((await q.pr(1)).position).toBe(2)
          await q.placed(2)
          // urgent, high, medium, low and 42, submitted out of order; some placed by the runner, some not yet
          await q.ok("submitPullRequest", { pr: { number: 3 }, priority: "low" })
          await q.placed(3)
          await q.ok("submitPullRequest", { pr: { number: 4 }, priority: 42 })
          await q.ok("submitPullRequest", { pr: { number: 5 }, priority: "urgent" })
          await q.ok("submitPullRequest", { pr: { number: 6 }, priority: "medium" })
          const expected = [5, 2, 4, 1, 6, 3]
          const check = async () => {
            const view = await q.queue()
            expect(view.enqueuedPullRequests.map((p) => p.prNumber)).toEqual(expected)
            expect(view.enqueuedPullRequests.map((p) => p.position)).toEqual([1, 2, 3, 4, 5, 6])
            for (const [i, n] of expected.entries())
              expect({ n, position: (await q.pr(n)).position }).toEqual({ n, position: i + 1 })
          }
          await check()
          // once the runner has stepped every submission, it reads the same
          for (const n of [4, 5, 6]) await q.placed(n)
          await check()
          // a new priority for a PR already waiting moves it at once
          await q.ok("submitPullRequest", { pr: { number: 3 }, priority: "high" })
          expect(await q.order()).toEqual([5, 2, 3, 4, 1, 6])
          expect((await q.pr(3)).priorityValue).toBe(10)
        },
        TIMEOUT
      )
    }

    test(
      `submitPullRequest while a PR is testing: a higher priority goes ahead of what waits, not of what tests (${db})`,
      async () => {
        const q = await open(db, 3, { concurrency: 1 })
        await q.ok("submitPullRequest", { pr: { number: 1 } })
        await q.until("PR 1 testing", async () => ((await q.pr(1)).state === "testing" ? true : undefined))
        await q.ok("submitPullRequest", { pr: { number: 2 }, priority: "low" })
        await q.placed(2)
        await q.ok("submitPullRequest", { pr: { number: 3 }, priority: "high" })
        expect(await q.order()).toEqual([1, 3, 2])
        expect((await q.pr(3)).position).toBe(2)
      },
      TIMEOUT
    )

    test(
      `restartTestsOnPullRequest: the PR leaves its run at once (${db})`,
      async () => {
        const q = await open(db, 1)
        await q.ok("submitPullRequest", { pr: { number: 1 } })
        const testing = await q.until("PR 1 testing", async () => {
          const r = await q.pr(1)
          return r.state === "testing" && r.testRunId !== null ? r : undefined
        })
        await q.ok("restartTestsOnPullRequest", { pr: { number: 1 } })
        const after = await q.pr(1)
        expect(after.testRunId).not.toBe(testing.testRunId)
        // and the runner tests it again, in a new run
        const again = await q.until("PR 1 in a new run", async () => {
          const r = await q.pr(1)
          return r.state === "testing" && r.testRunId !== null && r.testRunId !== testing.testRunId ? r : undefined
        })
        expect(again.testRunId).not.toBe(testing.testRunId)
      },
      TIMEOUT
    )

    test(
      `updateQueue and setImpactedTargets: visible at once (${db})`,
      async () => {
        const q = await open(db, 2, { mode: "parallel", state: "paused" })
        const updated = await q.ok<{ state: string; concurrency: number }>("updateQueue", { concurrency: 5 })
        expect(updated.concurrency).toBe(5)
        expect((await q.ok<{ concurrency: number }>("getQueue")).concurrency).toBe(5)
        await q.ok("submitPullRequest", { pr: { number: 1 } })
        await q.ok("submitPullRequest", { pr: { number: 2 } })
        await q.placed(2)
        expect((await q.pr(1)).state).toBe("not_ready")
        expect(await q.order()).toEqual([])
        const sha1 = q.repo.git("rev-parse", "refs/pull/1/head")
        const sha2 = q.repo.git("rev-parse", "refs/pull/2/head")
        await q.ok("setImpactedTargets", { pr: { number: 2, sha: sha2 }, impactedTargets: ["b"] })
        expect((await q.pr(2)).state).toBe("pending")
        expect(await q.order()).toEqual([2])
        expect((await q.pr(2)).position).toBe(1)
        await q.ok("setImpactedTargets", { pr: { number: 1, sha: sha1 }, impactedTargets: ["a"] })
        expect(await q.order()).toEqual([1, 2])
        expect((await q.pr(1)).position).toBe(1)
        expect((await q.pr(2)).position).toBe(2)
      },
      TIMEOUT
    )
  }
})

/**
 * Estimates, positions and their reasons (issue #38): a write shows in them at the very next read. The runner is held
 * after a round (its probe waits) while the writes are made and read, so every read is of a write it has not stepped.
 */
describe("read-your-writes of the derived fields (estimates and their reasons)", () => {
  interface Estimated extends Pr {
    readonly estimatedMergeAt: string | null
    readonly estimatedTestingStartAt: string | null
    readonly estimateUnavailableReason: string | null
  }

  for (const db of databases) {
    test(
      `pause, resume, priority and cancel show in the next read's estimates (${db})`,
      async () => {
        // the gate: while held, each runner waits at the end of its round
        let held = false
        let waiting: Array<() => void> = []
        const probe: RunnerProbeShape = {
          afterPush: () => Effect.void,
          roundDone: () =>
            Effect.async<void>((resume) => {
              if (!held) return resume(Effect.void)
              waiting.push(() => resume(Effect.void))
            })
        }
        /** Holds the runner: resolves once it waits at the end of a round (it steps nothing until `release`). */
        const hold = async () => {
          held = true
          await eventually(async () => waiting.length > 0 || undefined, 20_000, "the runner held")
        }
        const release = () => {
          held = false
          const w = waiting
          waiting = []
          for (const go of w) go()
        }
        const root = tempDir("greenline-ryw-estimates-")
        roots.push(root)
        const server = await startTestServer({ db, gitRoot: root, gitPollMs: 50, probe })
        try {
          const repo = createTestRepo({ root, repo: { host: "local", owner: "acme", name: "estimates" } })
          repos.push(repo)
          for (let n = 1; n <= 6; n++) repo.createPr(n, { files: { [`pr-${n}.txt`]: `${n}\n` } })
          const key = { repo: repo.repo, targetBranch: "main" }
          const ok = async <A>(op: string, body: Record<string, unknown> = {}) => {
            const r = await server.post(op, { ...key, ...body })
            if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
            return r.body as A
          }
          const pr = (n: number) => ok<Estimated>("getSubmittedPullRequest", { pr: { number: n } })
          const queued = async () =>
            new Map(
              (await ok<{ enqueuedPullRequests: ReadonlyArray<Estimated> }>("getQueue")).enqueuedPullRequests.map(
                (e) => [e.prNumber, e] as const
              )
            )
          await ok("createQueue")
          await ok("updateQueue", { requiredStatuses: ["ci"], concurrency: 1 })
          // three finished runs: a queue has estimates from then on
          for (const n of [1, 2, 3]) {
            await ok("submitPullRequest", { pr: { number: n } })
            const runId = await eventually(async () => (await pr(n)).testRunId ?? undefined, 20_000, `PR ${n} testing`)
            const sha = await eventually(
              async () =>
                (await ok<{ testBranchSha: string }>("getMergeQueueTestingDetails", { testRunId: runId }))
                  .testBranchSha || undefined,
              20_000,
              `PR ${n}'s test branch`
            )
            await ok("reportStatus", { sha, context: "ci", state: "success" })
            await eventually(async () => ((await pr(n)).state === "merged" ? true : undefined), 20_000, `#${n} merged`)
          }

          await hold()
          await ok("updateQueue", { state: "paused" })
          for (const n of [4, 5, 6]) await ok("submitPullRequest", { pr: { number: n } })
          for (const n of [4, 5, 6]) expect([n, (await pr(n)).estimateUnavailableReason]).toEqual([n, "QUEUE_PAUSED"])
          expect([...(await queued()).values()].map((e) => e.estimateUnavailableReason)).toEqual([
            "QUEUE_PAUSED",
            "QUEUE_PAUSED",
            "QUEUE_PAUSED"
          ])

          // resumed: the next read estimates, with the runner still holding the pause
          await ok("updateQueue", { state: "running" })
          for (const n of [4, 5, 6]) {
            const read = await pr(n)
            expect([n, read.estimateUnavailableReason, read.estimatedMergeAt === null]).toEqual([n, null, false])
          }
          const resumed = await queued()
          expect([...resumed.values()].map((e) => e.estimateUnavailableReason)).toEqual([null, null, null])
          const at = (e: Estimated | undefined) => Date.parse(e?.estimatedMergeAt ?? "")
          expect(at(resumed.get(4)) < at(resumed.get(5)) && at(resumed.get(5)) < at(resumed.get(6))).toBe(true)
          // paused again, and running again: each read follows the last write
          await ok("updateQueue", { state: "paused" })
          expect((await pr(5)).estimateUnavailableReason).toBe("QUEUE_PAUSED")
          await ok("updateQueue", { state: "running" })
          expect((await pr(5)).estimateUnavailableReason).toBeNull()

          // the runner tests #4; then a higher priority takes #6 ahead of #5 (not of #4, which is testing), and
          // its estimate with it
          release()
          await eventually(async () => ((await pr(4)).state === "testing" ? true : undefined), 20_000, "#4 testing")
          await hold()
          const waited = await queued()
          expect([...waited.keys()]).toEqual([4, 5, 6])
          expect(at(waited.get(6)) > at(waited.get(5))).toBe(true)
          await ok("submitPullRequest", { pr: { number: 6 }, priority: "high" })
          const raised = await queued()
          expect([...raised.keys()]).toEqual([4, 6, 5])
          expect(at(raised.get(6)) < at(raised.get(5))).toBe(true)
          expect((await pr(6)).position).toBe(2)
          expect(at(await pr(6))).toBe(at(raised.get(6)))

          // cancelled: #6 leaves, and #5 is estimated without it
          const before5 = at(raised.get(5))
          await ok("cancelPullRequest", { pr: { number: 6 } })
          const after = await queued()
          expect([...after.keys()]).toEqual([4, 5])
          expect(at(after.get(5)) < before5).toBe(true)
          expect(at(await pr(5))).toBe(at(after.get(5)))
          expect((await pr(6)).estimatedMergeAt ?? null).toBeNull()
          release()

          // and once the runner has stepped them, it agrees
          await eventually(async () => ((await pr(6)).state === "cancelled" ? true : undefined), 20_000, "#6 out")
          expect([...(await queued()).keys()]).toEqual([4, 5])
        } finally {
          release()
          await server.close()
        }
      },
      TIMEOUT
    )
  }
})
