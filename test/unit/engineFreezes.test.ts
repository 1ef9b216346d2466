/**
 * Freezes (#31) through the engine, without a server: the memory Git host and CI, the real storage on PGlite, the
 * queue's runner stepped by ticks, and a test clock (Effect's TestClock) that the test moves: a freeze ends when the
 * test moves the clock past it, and the runner's wake-up at that time merges what waited. Then impact previews (also
 * #31): each action is previewed, then applied, and the runs it interrupted and the PRs it tested again are compared.
 */

import { afterEach, beforeAll, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, ManagedRuntime, Option, TestClock, TestContext } from "effect"
import { Engine, EngineRunner, type QueueKey, type QueueRow } from "../../src/queue/Engine.ts"
import type { FreezeInput } from "../../src/queue/freezeStore.ts"
import type { MergeSchedule } from "../../src/queue/freezes.ts"
import { renderQueueMetrics } from "../../src/queue/metricsReport.ts"
import type { PreviewAction } from "../../src/queue/preview.ts"
import { defaultQueueConfig, type QueueConfig } from "../../src/queue/schemas.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { engineTestLayer, type Files, makeMemoryCi, makeMemoryGit } from "../support/layers.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"
import { makeRunnerSignal } from "../support/rounds.ts"

const TIMEOUT = 60_000
const FINAL = new Set(["merged", "failed", "cancelled"])
const HOUR = 3_600_000

type Runtime = ManagedRuntime.ManagedRuntime<Engine | EngineRunner | Tenancy | SqlClient.SqlClient, unknown>
let open: Runtime | undefined
let seed: Blob

beforeAll(async () => {
  seed = await pgliteSeed()
}, 300_000)

afterEach(async () => {
  await open?.dispose()
  open = undefined
})

/** A queue on `acme/app@main`, the clock at `start`; CI passes unless the commit has a `broken` file. */
const setup = async (start: number, config: Partial<QueueConfig> = {}) => {
  const git = makeMemoryGit()
  const repo = git.repo({ host: "local", owner: "acme", name: "app" })
  const ci = makeMemoryCi(git, (files: Files) => !Object.values(files).some((text) => text.includes("broken")))
  const rounds = makeRunnerSignal({ leaseTimer: false })
  const layer = engineTestLayer({ seed, git, ci, probe: rounds.probe, config: { gitPollMs: 1000 * HOUR } })
  const runtime: Runtime = ManagedRuntime.make(layer.pipe(Layer.provideMerge(TestContext.TestContext)))
  open = runtime
  const run = <A, E>(effect: Effect.Effect<A, E, Engine | EngineRunner | Tenancy | SqlClient.SqlClient>) =>
    runtime.runPromise(effect)
  const queue = await run(
    Effect.gen(function* () {
      yield* TestClock.setTime(start)
      const tenancy = yield* Tenancy
      const engine = yield* Engine
      yield* tenancy.createOrg("acme")
      const stored = yield* tenancy.addRepo("acme", repo.ref)
      const created = yield* engine.queues.create(stored, "main", {
        ...defaultQueueConfig("main"),
        requiredStatuses: ["ci"],
        concurrency: 3,
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
  const pr = (n: number) => run(Effect.flatMap(Engine, (e) => e.getSubmitted(key, n, true)))
  const reasons = async (n: number) => ((await pr(n)).timeline ?? []).map((t) => `${t.state}:${t.reason}`)
  const state = async (n: number) => (await pr(n)).state
  return {
    git,
    repo,
    ci,
    rounds,
    run,
    queue,
    pr,
    state,
    reasons,
    until,
    tick: () => rounds.tick(queue.id),
    /** moves the test clock (the runner's wake-up at a freeze's end fires), then a round */
    later: async (ms: number) => {
      await run(TestClock.adjust(ms))
      await rounds.tick(queue.id)
    },
    submit: (n: number, ignoreFreeze = false) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const read = yield* engine.readPullRequest(queue, n)
          const ok = yield* engine.submitBatched({
            queue,
            prNumber: n,
            priority: ignoreFreeze ? 0 : undefined,
            noBatch: undefined,
            pr: read,
            ...(ignoreFreeze ? { ignoreFreeze: true } : {})
          })
          expect(ok).toBe("written")
        })
      ),
    /** createFreeze: the write in one transaction, then the runners' wake-ups */
    freeze: (input: Partial<FreezeInput>, q: QueueRow | null = queue) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const sql = yield* SqlClient.SqlClient
          const made = yield* sql.withTransaction(
            engine.freezes.create(
              queue.repo.id,
              q?.id ?? null,
              {
                reason: "release",
                mode: "merge",
                startsAt: null,
                endsAt: null,
                cron: null,
                timeZone: null,
                durationMinutes: null,
                ...input
              },
              "test"
            )
          )
          for (const id of made.queues) yield* engine.wake(id)
          return made.row
        })
      ),
    schedule: (schedule: MergeSchedule | null) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const sql = yield* SqlClient.SqlClient
          yield* sql.withTransaction(engine.freezes.setSchedule(queue.id, schedule))
          yield* engine.wake(queue.id)
        })
      ),
    unfreeze: (id: string) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const sql = yield* SqlClient.SqlClient
          const done = yield* sql.withTransaction(engine.freezes.remove(queue.repo.id, id))
          for (const q of done.queues) yield* engine.wake(q)
        })
      ),
    /** the queue's main series of a gauge in getMergeQueueMetrics' text */
    gauge: async (name: string) => {
      const text = await run(
        Effect.flatMap(TestClock.currentTimeMillis, (now) => renderQueueMetrics({ orgId: queue.repo.orgId }, now))
      )
      const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes('queue_type="main"'))
      return Number(line?.split(" ").at(-1))
    },
    preview: (action: PreviewAction) => run(Effect.flatMap(Engine, (e) => e.preview(queue, action))),
    /** the ids of cancelled runs, and each active PR's run */
    runs: () =>
      run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const cancelled = yield* sql<{ id: string }>`select id from test_runs where status = 'cancelled'`
          const entries = yield* sql<{ pr_number: number; run_id: string | null }>`
            select pr_number, run_id from entries where state in ('pending', 'testing', 'tests_passed')`
          return {
            cancelled: new Set(cancelled.map((r) => r.id)),
            runOf: new Map(entries.map((e) => [Number(e.pr_number), e.run_id]))
          }
        })
      ),
    /** what cancelPullRequest, restartTestsOnPullRequest and a new priority do: a write, then the wake-up */
    act: (action: PreviewAction) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const sql = yield* SqlClient.SqlClient
          if (action._tag === "cancel") yield* sql.withTransaction(engine.cancel(queue, action.prNumber))
          else if (action._tag === "restart") yield* sql.withTransaction(engine.restart(queue, action.prNumber))
          else {
            const read = yield* engine.readPullRequest(queue, action.prNumber)
            yield* engine.submitBatched({
              queue,
              prNumber: action.prNumber,
              priority: action.priority,
              noBatch: undefined,
              pr: read
            })
          }
          yield* engine.wake(queue.id)
        })
      ),
    targets: (n: number, targets: ReadonlyArray<string>) =>
      run(
        Effect.gen(function* () {
          const engine = yield* Engine
          const sql = yield* SqlClient.SqlClient
          const read = yield* engine.readPullRequest(queue, n)
          yield* sql.withTransaction(engine.setImpactedTargets(queue, n, read.headSha, targets))
          yield* engine.wake(queue.id)
        })
      ),
    events: () =>
      run(
        Effect.map(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql<{ type: string }>`select type from event_log where type like 'queue.%' order by seq`
          ),
          (rows) => rows.map((r) => r.type)
        )
      ),
    waitState: (n: number, want: string) =>
      until(`PR #${n} ${want}`, async () => {
        const now = (await pr(n)).state
        if (now !== want && FINAL.has(now)) throw new Error(`PR #${n} is ${now}: ${(await reasons(n)).join(", ")}`)
        return now === want
      })
  }
}

test(
  "freeze now for an hour (merge mode): testing goes on, nothing merges, both merge in order after it without retesting",
  async () => {
    const start = Date.UTC(2026, 2, 2, 10)
    const s = await setup(start)
    await s.freeze({ startsAt: start, endsAt: start + HOUR })
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    s.repo.openPr(2, { "pr-2.txt": "two\n" })
    await s.submit(1)
    await s.submit(2)
    await s.waitState(1, "tests_passed")
    await s.waitState(2, "tests_passed")
    await s.tick()
    expect(s.repo.history("main")).toEqual([])
    const tested = s.ci.ran.length
    expect(await s.gauge("mq_frozen")).toBe(1)
    // a minute before its end: still frozen, the head has waited since it passed
    await s.later(HOUR - 60_000)
    expect(await s.state(1)).toBe("tests_passed")
    expect(await s.gauge("mq_freeze_wait_seconds")).toBeGreaterThanOrEqual(3540)
    await s.later(60_000)
    await s.waitState(2, "merged")
    expect(await s.gauge("mq_frozen")).toBe(0)
    expect(await s.gauge("mq_freeze_wait_seconds")).toBe(0)
    expect(s.repo.history("main")).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
    expect(s.ci.ran.length).toBe(tested)
    expect(await s.events()).toEqual(["queue.frozen", "queue.unfrozen"])
  },
  TIMEOUT
)

test(
  "an all freeze of every queue of the repository starts nothing until it is deleted",
  async () => {
    const start = Date.UTC(2026, 2, 2, 10)
    const s = await setup(start)
    const made = await s.freeze({ mode: "all", startsAt: start }, null)
    expect(made.branch).toBeNull()
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    await s.submit(1)
    await s.tick()
    expect(await s.state(1)).toBe("pending")
    expect(s.ci.ran).toEqual([])
    await s.unfreeze(made.id)
    await s.waitState(1, "merged")
    expect(await s.events()).toEqual(["queue.frozen", "queue.unfrozen"])
  },
  TIMEOUT
)

test(
  "every Friday 16:00 Europe/Berlin for 64 h, across the end of summer time: a PR passed on Friday merges Monday 07:00 CET",
  async () => {
    // Friday 23 October 2026 15:30 in Berlin (summer time, UTC+2)
    const start = Date.UTC(2026, 9, 23, 13, 30)
    const s = await setup(start)
    await s.freeze({ cron: "0 16 * * 5", timeZone: "Europe/Berlin", durationMinutes: 64 * 60 })
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    await s.submit(1)
    await s.waitState(1, "merged")
    // 16:00 CEST: the freeze begins (the runner's wake-up at its start)
    await s.later(30 * 60_000)
    s.repo.openPr(2, { "pr-2.txt": "two\n" })
    await s.submit(2)
    await s.waitState(2, "tests_passed")
    // the clocks go back on Sunday; Monday 06:59 UTC is 07:59 CET... the freeze ended at 07:00 CET = 06:00 UTC
    const mondaySix = Date.UTC(2026, 9, 26, 6)
    const now = start + 30 * 60_000
    await s.later(mondaySix - now - 60_000)
    expect(await s.state(2)).toBe("tests_passed")
    await s.later(60_000)
    await s.waitState(2, "merged")
    expect(s.repo.history("main")).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
  },
  TIMEOUT
)

test(
  "a push to the target during a freeze: the passed PR is tested again on the new tip, and merges after the freeze",
  async () => {
    const start = Date.UTC(2026, 2, 2, 10)
    const s = await setup(start)
    await s.freeze({ startsAt: start, endsAt: start + HOUR })
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    await s.submit(1)
    await s.waitState(1, "tests_passed")
    const main = s.repo.branch("main")!
    s.repo.setBranch("main", s.repo.commit([main], { ...s.repo.files(main), "hotfix.txt": "fix\n" }, "hotfix"))
    await s.until("PR #1 retested", async () => (await s.reasons(1)).includes("pending:MANUAL_PUSH_TO_TARGET_BRANCH"))
    await s.waitState(1, "tests_passed")
    expect(s.ci.ran.length).toBe(2)
    await s.later(HOUR)
    await s.waitState(1, "merged")
    expect(s.repo.files(s.repo.branch("main")!)["hotfix.txt"]).toBe("fix\n")
  },
  TIMEOUT
)

test(
  "ignoreFreeze: an urgent PR submitted with it merges during the freeze, the others wait",
  async () => {
    const start = Date.UTC(2026, 2, 2, 10)
    const s = await setup(start)
    await s.freeze({ startsAt: start, endsAt: start + HOUR })
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    s.repo.openPr(9, { "pr-9.txt": "hotfix\n" })
    await s.submit(1)
    await s.waitState(1, "tests_passed")
    await s.submit(9, true)
    await s.waitState(9, "merged")
    expect(await s.state(1)).not.toBe("merged")
    await s.later(HOUR)
    await s.waitState(1, "merged")
    expect(s.repo.history("main")).toEqual(["PR #9 (#9)", "PR #1 (#1)"])
  },
  TIMEOUT
)

test(
  "a merge schedule Mon-Fri 09:00-18:00 New York: a PR that passes on Friday evening merges on Monday 09:00",
  async () => {
    // Friday 6 March 2026 17:30 EST
    const start = Date.UTC(2026, 2, 6, 22, 30)
    const s = await setup(start)
    await s.schedule({ timeZone: "America/New_York", windows: [{ days: [1, 2, 3, 4, 5], from: "09:00", to: "18:00" }] })
    s.repo.openPr(1, { "pr-1.txt": "one\n" })
    await s.submit(1)
    await s.waitState(1, "merged")
    // 18:00: closed (the runner's wake-up at the closing)
    await s.later(30 * 60_000)
    s.repo.openPr(2, { "pr-2.txt": "two\n" })
    await s.submit(2)
    await s.waitState(2, "tests_passed")
    // Monday 9 March 09:00 EDT (summer time began on Sunday) is 13:00 UTC
    const monday = Date.UTC(2026, 2, 9, 13)
    await s.later(monday - (start + 30 * 60_000) - 60_000)
    expect(await s.state(2)).toBe("tests_passed")
    await s.later(60_000)
    await s.waitState(2, "merged")
    expect(s.repo.history("main")).toEqual(["PR #1 (#1)", "PR #2 (#2)"])
    // removing the schedule opens the queue for good
    await s.schedule(null)
    expect(await s.events()).toEqual(["queue.frozen", "queue.unfrozen"])
  },
  TIMEOUT
)

for (const mode of ["single", "parallel"] as const) {
  for (const action of [
    { _tag: "cancel", prNumber: 2 },
    { _tag: "restart", prNumber: 1 },
    { _tag: "priority", prNumber: 3, priority: 0 }
  ] satisfies ReadonlyArray<PreviewAction>) {
    test(
      `${mode}: the preview of a ${action._tag} of #${action.prNumber} names the runs it interrupts and the PRs it tests again`,
      async () => {
        const s = await setup(Date.UTC(2026, 2, 2, 10), { mode })
        s.ci.hold()
        for (const n of [1, 2, 3]) s.repo.openPr(n, { [`pr-${n}.txt`]: `${n}\n` })
        for (const n of [1, 2, 3]) await s.submit(n)
        if (mode === "parallel") for (const n of [1, 2, 3]) await s.targets(n, ["app"])
        for (const n of [1, 2, 3]) await s.waitState(n, "testing")
        await s.later(10 * 60_000)
        const preview = await s.preview(action)
        expect(preview.interruptedRuns.length).toBeGreaterThan(0)
        expect(preview.retestedPrs.length).toBeGreaterThan(0)
        if (action._tag === "cancel") expect(preview.retestedPrs).toEqual([3])
        expect(preview.estimates.map((e) => e.prNumber)).toEqual([1, 2, 3])
        for (const r of preview.interruptedRuns) expect(r.runningSeconds).toBeGreaterThanOrEqual(600)
        const before = await s.runs()
        await s.act(action)
        await s.until("the action's runs cancelled", async () => {
          const now = await s.runs()
          return now.cancelled.size >= before.cancelled.size + preview.interruptedRuns.length
        })
        await s.tick()
        const after = await s.runs()
        const interrupted = [...after.cancelled].filter((id) => !before.cancelled.has(id)).sort()
        expect(interrupted).toEqual(preview.interruptedRuns.map((r) => r.testRunId).sort())
        const retested = [...before.runOf]
          .filter(([pr, run]) => run !== null && after.runOf.has(pr) && after.runOf.get(pr) !== run)
          .map(([pr]) => pr)
          .sort()
        expect(retested).toEqual([...preview.retestedPrs].sort())
        s.ci.release()
      },
      TIMEOUT
    )
  }
}
