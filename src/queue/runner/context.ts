import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, FiberMap, Option } from "effect"
import { EventLog } from "../../kernel/EventLog.ts"
import type { Repository } from "../../tenancy/Tenancy.ts"
import { CommandCi, type CommandCiService } from "../CiRunner.ts"
import { makeRoundEventWriter } from "../events.ts"
import { PrFeedback, type PrFeedbackShape } from "../Feedback.ts"
import { freezeRulesOf, mergeScheduleOf } from "../freezeStore.ts"
import type { FreezeRule, MergeSchedule } from "../freezes.ts"
import { GitHost, type GitHostService, type RepoRef } from "../GitHost.ts"
import {
  type Command,
  makePlannerMemo,
  type PlannerEvent,
  type PlannerMemo,
  type QueueState,
  type RunRecord
} from "../planner/index.ts"
import { QueueEnv, type QueueEnvShape } from "../QueueEnv.ts"
import { QueueRepo, type QueueRepoShape, type QueueRow } from "../QueueRepo.ts"
import { Statuses, type StatusesShape } from "../Statuses.ts"
import { makeStore } from "../store.ts"
import { TestVerdicts, type TestVerdictsShape } from "../TestVerdicts.ts"
import { RunnerProbe, type RunnerProbeShape } from "./probe.ts"

/**
 * What one queue's runner holds while its instance has the lease: the services it works through (ports) and its
 * working state. Every part of the runner (round, command executors, lanes) takes it.
 */
export interface RunnerCtx {
  readonly queueId: string
  readonly sql: SqlClient.SqlClient
  readonly queues: QueueRepoShape
  readonly git: GitHostService
  readonly statuses: StatusesShape
  readonly config: QueueEnvShape
  readonly ci: CommandCiService
  /** what the Git host shows on the pull request besides (GitHub: its comment and status check); optional */
  readonly feedback: Option.Option<PrFeedbackShape>
  readonly probe: Option.Option<RunnerProbeShape>
  /** flaky-test results (#20): why a test run failed; optional */
  readonly testVerdicts: Option.Option<TestVerdictsShape>
  /** retries of each entry's runs for known-flaky failures (#20, `flakyRetryBudget`) */
  readonly flakyRetries: Map<string, number>
  readonly store: ReturnType<typeof makeStore>
  readonly ciJobs: FiberMap.FiberMap<string>
  readonly ciSemaphore: Effect.Semaphore
  readonly repo: RepoRef
  /** what the planner remembers from one of this queue's steps to the next (planner/types.ts) */
  readonly plannerMemo: PlannerMemo
  /** re-read when its configuration changes */
  queue: QueueRow
  state: QueueState
  /** commands saved in the outbox that still have to run (loaded at start, or failed and retried) */
  pendingCommands: ReadonlyArray<Command>
  /** results of the last round's commands: the next round's first events */
  memEvents: Array<PlannerEvent>
  /** the commands of the current round that failed unexpectedly; they run again in a later round */
  failed: Array<Command>
  nextWake: number
  lastPoll: number
  /**
   * The target's tip the runner last looked for outside merges at (the PR heads it contains), or one of its own
   * merges made: a poll that finds the tip elsewhere looks again (merge.ts `mergedHeads`)
   */
  scannedTip: string | null
  /** the state as the last idle round found it saved (undefined after any other round): the next idle round that
   * finds it unchanged saves nothing */
  savedStateJson: string | undefined
  /** sorted target hashes of the active entries' lists, by `<pr>@<sha>` (lanes.ts) */
  readonly targetHashes: Map<string, Float64Array>
  /** extension (#31): the freezes of the queue and its repository, read again at each ConfigChanged */
  freezeRules: ReadonlyArray<FreezeRule>
  /** extension (#31): the queue's merge schedule, read again at each ConfigChanged */
  mergeSchedule: MergeSchedule | null
}

export const repoRefOf = (repo: Repository): RepoRef => ({ host: repo.host, owner: repo.owner, name: repo.name })

const queueRow = (queues: QueueRepoShape, queueId: string) =>
  Effect.flatMap(queues.findById(queueId), (q) =>
    Option.match(q, { onNone: () => Effect.interrupt, onSome: Effect.succeed })
  )

/**
 * The queue's row again (its configuration changed), and its freezes (#31); interrupts the runner when the queue is
 * gone.
 */
export const reloadQueue = (ctx: RunnerCtx) =>
  Effect.gen(function* () {
    const queue = yield* queueRow(ctx.queues, ctx.queueId)
    ctx.queue = queue
    ctx.freezeRules = yield* freezeRulesOf(ctx.sql)(ctx.queueId)
    ctx.mergeSchedule = yield* mergeScheduleOf(ctx.sql)(ctx.queueId)
    return queue
  })

/** The runner's context for `queueId`, from its stored runtime; none when the queue has no runtime. */
export const makeRunnerCtx = (queueId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // each persisted round's transitions (the entries' timelines) and events (PR, batch and test run changes) go to
    // the event log in the round's transaction
    const eventLog = yield* EventLog
    const publicUrl = (yield* QueueEnv).publicUrl
    const testVerdicts = yield* Effect.serviceOption(TestVerdicts)
    const store = makeStore(sql, makeRoundEventWriter(sql, eventLog, publicUrl, testVerdicts))
    const loaded = yield* store.loadRuntime(queueId)
    if (Option.isNone(loaded)) return Option.none<RunnerCtx>()
    const queues = yield* QueueRepo
    const queue = yield* queueRow(queues, queueId)
    const ctx: RunnerCtx = {
      queueId,
      sql,
      queues,
      git: yield* GitHost,
      statuses: yield* Statuses,
      config: yield* QueueEnv,
      ci: yield* CommandCi,
      feedback: yield* Effect.serviceOption(PrFeedback),
      probe: yield* Effect.serviceOption(RunnerProbe),
      testVerdicts,
      flakyRetries: new Map(),
      store,
      ciJobs: yield* FiberMap.make<string>(),
      ciSemaphore: yield* Effect.makeSemaphore(Math.max(1, loaded.value.state.config.concurrency)),
      repo: repoRefOf(queue.repo),
      plannerMemo: makePlannerMemo(),
      queue,
      state: loaded.value.state,
      pendingCommands: loaded.value.outbox,
      memEvents: [],
      failed: [],
      nextWake: Number.POSITIVE_INFINITY,
      lastPoll: 0,
      scannedTip: loaded.value.state.targetSha,
      savedStateJson: undefined,
      targetHashes: new Map(),
      freezeRules: yield* freezeRulesOf(sql)(queueId),
      mergeSchedule: yield* mergeScheduleOf(sql)(queueId)
    }
    return Option.some(ctx)
  })

export const runOf = (ctx: RunnerCtx, runId: string): RunRecord | undefined =>
  ctx.state.runs.find((r) => r.id === runId)

/** Titles of entries, by id. */
export const titles = (ctx: RunnerCtx, entryIds: ReadonlyArray<string>) =>
  Effect.map(
    ctx.sql<{ id: string; title: string }>`select id, title from entries where id in ${ctx.sql.in(entryIds)}`,
    (rows) => new Map(rows.map((r) => [r.id, r.title]))
  )
