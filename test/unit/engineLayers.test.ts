/**
 * The engine driven through its service, without a server: the memory Git host and CI of test/support/layers.ts,
 * the real storage on an in-memory PGlite, stepped by ticks of the queue's runner (test/support/rounds.ts). The test
 * owns the clock (Effect's TestClock, set to the wall clock's time at the start): the runner's timers (its Git poll,
 * its retries, the lease loop's) never fire on their own, so every round is one that a wake-up or a tick asked for.
 */

import { afterEach, beforeAll, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, ManagedRuntime, Option, TestClock, TestContext } from "effect"
import { Engine, EngineRunner, type QueueKey, type QueueRow } from "../../src/queue/Engine.ts"
import { defaultQueueConfig, type QueueConfig } from "../../src/queue/schemas.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { engineTestLayer, type Files, makeMemoryCi, makeMemoryGit } from "../support/layers.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"
import { makeRunnerSignal } from "../support/rounds.ts"

const TIMEOUT = 60_000
const FINAL = new Set(["merged", "failed", "cancelled"])

type Runtime = ManagedRuntime.ManagedRuntime<Engine | EngineRunner | Tenancy | SqlClient.SqlClient, unknown>
let open: Runtime | undefined
let seed: Blob

// the migrated database dump is made once per process (slow on a loaded machine): not inside a test's time
beforeAll(async () => {
  seed = await pgliteSeed()
}, 300_000)

afterEach(async () => {
  await open?.dispose()
  open = undefined
})

/** A queue on `acme/app@main` with `config`, its runners started; CI passes unless the commit has a `broken` file. */
const setup = async (config: Partial<QueueConfig> = {}) => {
  const git = makeMemoryGit()
  const repo = git.repo({ host: "local", owner: "acme", name: "app" })
  const ci = makeMemoryCi(git, (files: Files) => !Object.values(files).some((text) => text.includes("broken")))
  // the lease loop's timer off and the Git poll an hour apart: a test that moves the clock fires the queue's own
  // timers (a testing timeout), not thousands of polls on the way (a tick looks at the Git host anyway)
  const rounds = makeRunnerSignal({ leaseTimer: false })
  const layer = engineTestLayer({ seed, git, ci, probe: rounds.probe, config: { gitPollMs: 3_600_000 } })
  const runtime: Runtime = ManagedRuntime.make(layer.pipe(Layer.provideMerge(TestContext.TestContext)))
  open = runtime
  const run = <A, E>(effect: Effect.Effect<A, E, Engine | EngineRunner | Tenancy | SqlClient.SqlClient>) =>
    runtime.runPromise(effect)
  const queue = await run(
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.now())
      const tenancy = yield* Tenancy
      const engine = yield* Engine
      yield* tenancy.createOrg("acme")
      const stored = yield* tenancy.addRepo("acme", repo.ref)
      const created = yield* engine.queues.create(stored, "main", {
        ...defaultQueueConfig("main"),
        requiredStatuses: ["ci"],
        ...config
      })
      const queue = Option.getOrThrow(created)
      yield* engine.queueCreated(queue)
      yield* Effect.flatMap(EngineRunner, (r) => r.start)
      return queue
    })
  )
  const key: QueueKey = { orgId: queue.repo.orgId, repo: repo.ref, branch: "main" }
  const until = async (what: string, check: () => Promise<boolean>) => void (await rounds.until(queue.id, what, check))
  return { git, repo, ci, rounds, run, queue, key, until, ...kit(run, queue, key, until) }
}

const kit = (
  run: <A, E>(effect: Effect.Effect<A, E, Engine | SqlClient.SqlClient>) => Promise<A>,
  queue: QueueRow,
  key: QueueKey,
  until: (what: string, check: () => Promise<boolean>) => Promise<void>
) => {
  const pr = (n: number) => run(Effect.flatMap(Engine, (e) => e.getSubmitted(key, n, true)))
  const reasons = async (n: number) => ((await pr(n)).timeline ?? []).map((t) => `${t.state}:${t.reason}`)
  return {
    pr,
    reasons,
    /** what the submit operation does: read the PR from the host, then submit in a batched transaction */
    submit: (n: number) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const read = yield* engine.readPullRequest(queue, n)
          const ok = yield* engine.submitBatched({
            queue,
            prNumber: n,
            priority: undefined,
            noBatch: undefined,
            pr: read
          })
          expect(ok).toBe("written")
        })
      ),
    /** what the cancel operation does: the write in one transaction, then the runner's wake-up */
    cancel: (n: number) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const sql = yield* SqlClient.SqlClient
          yield* sql.withTransaction(engine.cancel(queue, n))
          yield* engine.wake(queue.id)
        })
      ),
    /** steps until PR `n` is in `state`; fails at once when it ended in another state */
    waitState: (n: number, state: string) =>
      until(`PR #${n} ${state}`, async () => {
        const now = (await pr(n)).state
        if (now !== state && FINAL.has(now)) throw new Error(`PR #${n} is ${now}: ${(await reasons(n)).join(", ")}`)
        return now === state
      })
  }
}

test(
  "a submitted PR is tested on a test branch, passes CI and lands: main moves to the tested commit",
  async () => {
    const s = await setup()
    const head = s.repo.openPr(1, { "pr-1.txt": "one\n" })
    const before = s.repo.branch("main")!
    await s.submit(1)
    await s.waitState(1, "merged")
    const merged = await s.pr(1)
    expect(merged.prSha).toBe(head)
    expect(merged.verifiedByTestRun).not.toBeNull()
    const tip = s.repo.branch("main")!
    expect(tip).not.toBe(before)
    expect(s.ci.ran).toEqual([tip])
    expect(s.repo.files(tip)).toEqual({ "README.md": "hello\n", "pr-1.txt": "one\n" })
    expect(s.repo.history("main")).toEqual(["PR #1 (#1)"])
    expect(await s.reasons(1)).toEqual([
      "pending:SUBMITTED",
      "testing:TEST_RUN_STARTED",
      "tests_passed:TEST_RUN_PASSED",
      "merged:MERGED"
    ])
  },
  TIMEOUT
)

test(
  "a batch of 4 with one broken PR is bisected: the other three land in order, the broken one fails",
  async () => {
    const s = await setup({ batch: true, batchingMinSize: 4 })
    for (const n of [1, 2, 3, 4]) s.repo.openPr(n, { [`pr-${n}.txt`]: n === 2 ? "broken\n" : `${n}\n` })
    for (const n of [1, 2, 3, 4]) await s.submit(n)
    for (const n of [1, 3, 4]) await s.waitState(n, "merged")
    await s.waitState(2, "failed")
    expect(s.repo.history("main")).toEqual(["PR #1 (#1)", "PR #3 (#3)", "PR #4 (#4)"])
    expect(Object.keys(s.repo.files(s.repo.branch("main")!)).sort()).toEqual([
      "README.md",
      "pr-1.txt",
      "pr-3.txt",
      "pr-4.txt"
    ])
    const reasons = await s.reasons(2)
    expect(reasons).toContain("pending:BISECTION_REQUIRED")
    expect(reasons.at(-1)).toBe("failed:TEST_RUN_REQUIRED_STATUS_FAILED")
    // the first run tested the whole batch, then the bisection
    expect(s.ci.ran.length).toBeGreaterThanOrEqual(3)
    expect(Object.keys(s.repo.files(s.ci.ran[0]!)).sort()).toEqual([
      "README.md",
      "pr-1.txt",
      "pr-2.txt",
      "pr-3.txt",
      "pr-4.txt"
    ])
  },
  TIMEOUT
)

test(
  "a PR cancelled while its run is testing is cancelled: main does not move and its test branch is deleted",
  async () => {
    const s = await setup()
    s.ci.hold()
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    const before = s.repo.branch("main")!
    await s.submit(1)
    await s.waitState(1, "testing")
    const runId = (await s.pr(1)).testRunId!
    const branch = (await s.run(Effect.flatMap(Engine, (e) => e.testingDetails(s.queue, runId)))).testBranch
    expect(s.repo.branch(branch)).toBeDefined()
    await s.cancel(1)
    await s.until("test branch deleted", async () => s.repo.branch(branch) === undefined)
    s.ci.release()
    expect((await s.pr(1)).state).toBe("cancelled")
    expect((await s.reasons(1)).at(-1)).toBe("cancelled:API_REQUESTED")
    expect(s.repo.branch("main")).toBe(before)
    // cancelling again: the PR is no longer active
    await expect(s.cancel(1)).rejects.toThrow()
  },
  TIMEOUT
)

test(
  "two PRs changing one file differently: the first lands, the second fails with a merge conflict",
  async () => {
    const s = await setup()
    s.repo.openPr(1, { "shared.txt": "from one\n" })
    s.repo.openPr(2, { "shared.txt": "from two\n" })
    await s.submit(1)
    await s.submit(2)
    await s.waitState(1, "merged")
    await s.waitState(2, "failed")
    expect(s.repo.history("main")).toEqual(["PR #1 (#1)"])
    expect(s.repo.files(s.repo.branch("main")!)["shared.txt"]).toBe("from one\n")
    expect((await s.reasons(2)).at(-1)).toBe("failed:START_TEST_RUN_MERGE_CONFLICT")
  },
  TIMEOUT
)

test(
  "a run past its testing timeout fails its PR: the test moves the clock, no one waits",
  async () => {
    const s = await setup({ testingTimeoutMinutes: 5 })
    s.ci.hold()
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    await s.submit(1)
    await s.waitState(1, "testing")
    // four minutes on: still testing (the runner's round at that time changes nothing)
    await s.run(TestClock.adjust("4 minutes"))
    await s.rounds.tick(s.queue.id)
    expect((await s.pr(1)).state).toBe("testing")
    // past five minutes: the run timed out
    await s.run(TestClock.adjust("61 seconds"))
    await s.waitState(1, "failed")
    expect((await s.reasons(1)).at(-1)).toBe("failed:TEST_RUN_TIMEOUT")
    expect(s.repo.history("main")).toEqual([])
    s.ci.release()
  },
  TIMEOUT
)

test("the memory Git host: test branches conflict by path, compare-and-swap moves a branch only from expectedOld", async () => {
  const git = makeMemoryGit()
  const repo = git.repo({ host: "local", owner: "acme", name: "app" })
  const main = repo.branch("main")!
  const one = repo.openPr(1, { "a.txt": "1\n" }, { title: "One" })
  const two = repo.openPr(2, { "a.txt": "2\n" }, { title: "Two" })
  const three = repo.openPr(3, { "b.txt": "3\n" }, { title: "Three" })
  const item = (prNumber: number, headSha: string) => ({ prNumber, headSha, title: `PR ${prNumber}` })
  const build = (branch: string, items: ReadonlyArray<ReturnType<typeof item>>) =>
    Effect.runPromise(
      Effect.either(git.service.buildTestBranch({ repo: repo.ref, branch, baseSha: main, method: "squash", items }))
    )
  const clean = await build("t1", [item(1, one), item(3, three)])
  if (clean._tag === "Left") throw new Error(clean.left.message)
  expect(repo.branch("t1")).toBe(clean.right.sha)
  expect(repo.files(clean.right.sha)).toEqual({ "README.md": "hello\n", "a.txt": "1\n", "b.txt": "3\n" })
  // the same items on the same base give the same commits
  const again = await build("t2", [item(1, one), item(3, three)])
  expect(again._tag === "Right" && again.right.commits).toEqual(clean.right.commits)
  const conflict = await build("t3", [item(1, one), item(2, two)])
  expect(conflict._tag === "Left" && conflict.left).toMatchObject({ _tag: "MergeConflict", prNumber: 2, index: 1 })
  expect(repo.branch("t3")).toBeUndefined()
  const cas = (expected: string, next: string) =>
    Effect.runPromise(git.service.compareAndSwap(repo.ref, "main", expected, next))
  expect(await cas(one, clean.right.sha)).toBe(false)
  expect(repo.branch("main")).toBe(main)
  expect(await cas(main, clean.right.sha)).toBe(true)
  expect(repo.history("main")).toEqual(["PR 1 (#1)", "PR 3 (#3)"])
})
