import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Schema } from "effect"
import { type Interval, isRestart, medianSeconds, overTime, quantile } from "./figures.ts"
import type { RunRecord } from "./planner/index.ts"
import type { QueueRow } from "./QueueRepo.ts"
import { EntryStateValue, Mode, QueueStateValue, RepoRef } from "./schemas.ts"
import { iso, parseJson } from "./store.ts"

/**
 * Read-only views of a queue's activity for the dashboard (extension endpoints): the queues of an organization with
 * their figures, the runs in flight, the waiting and not-ready entries with the reason of their last change, recent
 * conclusions, and a pull request's runs, CI output and comments. The queue's own tables, read here and nowhere else
 * outside the engine.
 */

const Time = Schema.String

export const QueueSummary = Schema.Struct({
  repo: RepoRef,
  targetBranch: Schema.String,
  state: QueueStateValue,
  mode: Mode,
  concurrency: Schema.Number,
  waiting: Schema.Number,
  testing: Schema.Number,
  notReady: Schema.Number,
  merged24h: Schema.Number,
  failed24h: Schema.Number,
  cancelled24h: Schema.Number,
  /** merged / (merged + failed) over 24 h; null when nothing concluded */
  successRate24h: Schema.NullOr(Schema.Number),
  /** p50 of submission to merge over the PRs merged in 24 h, in seconds */
  p50TimeInQueueSeconds: Schema.NullOr(Schema.Number)
}).annotations({ identifier: "QueueSummary" })
export type QueueSummary = typeof QueueSummary.Type

export const ListQueuesResponse = Schema.Struct({ queues: Schema.Array(QueueSummary) }).annotations({
  identifier: "ListQueuesResponse"
})

export const RunView = Schema.Struct({
  id: Schema.String,
  branch: Schema.String,
  status: Schema.Literal("building", "in_progress", "succeeded", "failed", "cancelled"),
  queueType: Schema.Literal("main", "bisection"),
  parentRunId: Schema.NullOr(Schema.String),
  baseSha: Schema.String,
  testBranchSha: Schema.NullOr(Schema.String),
  /** every PR applied, in order: first those it is built on (ahead), then the tested ones */
  prNumbers: Schema.Array(Schema.Number),
  testedPrNumbers: Schema.Array(Schema.Number),
  dependentPrs: Schema.Array(Schema.Number),
  failureReason: Schema.NullOr(Schema.String),
  createdAt: Time,
  endedAt: Schema.NullOr(Time)
}).annotations({ identifier: "RunView" })
export type RunView = typeof RunView.Type

/**
 * What a not_ready entry waits for, from what the engine decides readiness on (planner/step.ts `eligible`): in a
 * parallel queue, the impacted targets of its current head; and how long it may wait before it is cancelled
 * (`notReadyTimeoutHours`).
 */
export const EntryReadiness = Schema.Struct({
  headSha: Schema.String,
  impactedTargetsRequired: Schema.Boolean,
  /** impacted targets were uploaded for `headSha` */
  impactedTargetsUploaded: Schema.Boolean,
  /**
   * when it is cancelled (NOT_READY_TIMEOUT_EXPIRED) if it is still not ready; null when that lies beyond the last
   * representable date (year 275760: `notReadyTimeoutHours` near its maximum), that is never
   */
  cancelsAt: Schema.NullOr(Time)
}).annotations({ identifier: "EntryReadiness" })

export const EntryView = Schema.Struct({
  prNumber: Schema.Number,
  title: Schema.String,
  author: Schema.String,
  state: EntryStateValue,
  priorityValue: Schema.Number,
  submittedAt: Time,
  stateChangedAt: Time,
  endedAt: Schema.NullOr(Time),
  /** the reason of its last state change (the timeline's), for not-ready and concluded entries; else "" */
  reason: Schema.String,
  /** the run it is in, or (failed) the run that failed it */
  runId: Schema.NullOr(Schema.String),
  /** for a not_ready entry (getQueueActivity's `active`): what it waits for */
  readiness: Schema.optionalWith(EntryReadiness, { exact: true })
}).annotations({ identifier: "EntryView" })
export type EntryView = typeof EntryView.Type

export const QueueActivity = Schema.Struct({
  runs: Schema.Array(RunView),
  /** active entries (not_ready included), oldest submission first */
  active: Schema.Array(EntryView),
  /** merged, failed and cancelled, newest first */
  recent: Schema.Array(EntryView)
}).annotations({ identifier: "QueueActivity" })
export type QueueActivity = typeof QueueActivity.Type

export const CiOutputView = Schema.Struct({
  id: Schema.String,
  runId: Schema.String,
  sha: Schema.String,
  exitCode: Schema.NullOr(Schema.Number),
  createdAt: Time,
  /** the last 64 KiB */
  output: Schema.String,
  truncated: Schema.Boolean
}).annotations({ identifier: "CiOutput" })

export const CommentView = Schema.Struct({ id: Schema.String, body: Schema.String, createdAt: Time }).annotations({
  identifier: "PullRequestComment"
})

export const PullRequestRuns = Schema.Struct({
  runs: Schema.Array(RunView),
  ciOutputs: Schema.Array(CiOutputView),
  comments: Schema.Array(CommentView)
})
export type PullRequestRuns = typeof PullRequestRuns.Type

interface SummaryRow {
  readonly host: string
  readonly owner: string
  readonly name: string
  readonly branch: string
  readonly config: unknown
  readonly waiting: number | string
  readonly testing: number | string
  readonly not_ready: number | string
  readonly merged: number | string
  readonly failed: number | string
  readonly cancelled: number | string
  /** the merged PRs' times in the queue (seconds), a JSON array */
  readonly waits: string | null
}

interface EntryViewRow {
  readonly pr_number: number | string
  readonly title: string
  readonly author: string
  readonly state: string
  readonly priority: number
  readonly submitted_at: Date | string
  readonly state_changed_at: Date | string
  readonly ended_at: Date | string | null
  readonly run_id: string | null
  readonly reason: string | null
  /** set for not_ready entries of the active list */
  readonly head_sha?: string
  readonly has_targets?: boolean | null
}

const time = (t: Date | string) => iso(new Date(t))

const entryView = (r: EntryViewRow): EntryView => ({
  prNumber: Number(r.pr_number),
  title: r.title,
  author: r.author,
  state: r.state as EntryView["state"],
  priorityValue: r.priority,
  submittedAt: time(r.submitted_at),
  stateChangedAt: time(r.state_changed_at),
  endedAt: r.ended_at === null ? null : time(r.ended_at),
  reason: r.reason ?? "",
  runId: r.run_id
})

const HOUR_MS = 3_600_000
/** The last instant a JavaScript Date (and an ISO 8601 answer) can hold. */
const MAX_DATE_MS = 8.64e15

/** The instant `ms`, or null when it lies beyond what a date can hold (a setting near its maximum). */
const isoOrNever = (ms: number): string | null => (Number.isFinite(ms) && Math.abs(ms) <= MAX_DATE_MS ? iso(ms) : null)

/** An active entry, with its readiness when it is not ready (the queue's mode and wait limit). */
const activeView = (queue: QueueRow, r: EntryViewRow): EntryView => {
  const view = entryView(r)
  if (r.state !== "not_ready") return view
  const changed = Date.parse(view.stateChangedAt)
  return {
    ...view,
    readiness: {
      headSha: r.head_sha ?? "",
      impactedTargetsRequired: queue.config.mode === "parallel",
      impactedTargetsUploaded: r.has_targets === true,
      cancelsAt: isoOrNever(changed + (queue.config.notReadyTimeoutHours ?? 24) * HOUR_MS)
    }
  }
}

export const runView = (run: RunRecord): RunView => ({
  id: run.id,
  branch: run.branch,
  status: run.status,
  queueType: run.queueType,
  parentRunId: run.parentRunId,
  baseSha: run.baseSha,
  testBranchSha: run.testBranchSha,
  prNumbers: run.items.map((i) => i.prNumber),
  testedPrNumbers: run.items.filter((i) => run.testedEntryIds.includes(i.entryId)).map((i) => i.prNumber),
  dependentPrs: [...run.dependentPrs],
  failureReason: run.failureReason,
  createdAt: iso(run.createdAt),
  endedAt: run.endedAt === null ? null : iso(run.endedAt)
})

const OUTPUT_TAIL = 64 * 1024
const RECENT = 30

export interface QueueActivityShape {
  readonly listQueues: (orgId: string) => Effect.Effect<ReadonlyArray<QueueSummary>, SqlError>
  readonly activity: (queue: QueueRow) => Effect.Effect<QueueActivity, SqlError>
  /** The test runs PR `prNumber` was part of (newest first), their CI output, and the comments on the PR. */
  readonly pullRequest: (queue: QueueRow, prNumber: number) => Effect.Effect<PullRequestRuns, SqlError>
  /** The target branches of the queues of `repo` (owned by `orgId`) PR `prNumber` was submitted to, latest first. */
  readonly branchesOfPr: (
    orgId: string,
    repo: { readonly host: string; readonly owner: string; readonly name: string },
    prNumber: number
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
}

export class QueueActivityReader extends Context.Tag("greenline/QueueActivity")<
  QueueActivityReader,
  QueueActivityShape
>() {}

export const QueueActivityLive = Layer.effect(
  QueueActivityReader,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    // the last reason only where the page shows it (not ready, concluded): one timeline lookup per such entry, not
    // 500 for a long queue
    const entryColumns = sql`e.pr_number, e.title, e.author, e.state, e.priority, e.submitted_at, e.state_changed_at,
      e.ended_at, e.run_id,
      case when e.state in ('not_ready', 'merged', 'failed', 'cancelled') then
        (select t.reason from event_log t where t.entry_id = e.id order by t.seq desc limit 1) end as reason`

    return {
      listQueues: (orgId) =>
        Effect.map(
          sql<SummaryRow>`
            select r.host, r.owner, r.name, q.branch, q.config,
              count(*) filter (where e.state in ('pending', 'pending_failure')) as waiting,
              count(*) filter (where e.state in ('testing', 'tests_passed')) as testing,
              count(*) filter (where e.state = 'not_ready') as not_ready,
              count(*) filter (where e.state = 'merged' and e.ended_at > now() - interval '24 hours') as merged,
              count(*) filter (where e.state = 'failed' and e.ended_at > now() - interval '24 hours') as failed,
              count(*) filter (where e.state = 'cancelled' and e.ended_at > now() - interval '24 hours') as cancelled,
              json_agg(extract(epoch from e.ended_at - e.submitted_at))
                filter (where e.state = 'merged' and e.ended_at > now() - interval '24 hours')::text as waits
            from queues q
            join repositories r on r.id = q.repo_id
            left join entries e on e.queue_id = q.id
            where r.org_id = ${orgId}
            group by r.host, r.owner, r.name, q.branch, q.config
            order by r.host, r.owner, r.name, q.branch`,
          (rows) =>
            rows.map((r): QueueSummary => {
              const config = parseJson<{
                state: QueueSummary["state"]
                mode: QueueSummary["mode"]
                concurrency: number
              }>(r.config)
              const merged = Number(r.merged)
              const failed = Number(r.failed)
              return {
                repo: { host: r.host, owner: r.owner, name: r.name },
                targetBranch: r.branch,
                state: config.state,
                mode: config.mode,
                concurrency: config.concurrency,
                waiting: Number(r.waiting),
                testing: Number(r.testing),
                notReady: Number(r.not_ready),
                merged24h: merged,
                failed24h: failed,
                cancelled24h: Number(r.cancelled),
                successRate24h: merged + failed === 0 ? null : merged / (merged + failed),
                // the health page's definition (figures.ts): nearest rank over the merged PRs' times
                p50TimeInQueueSeconds: (() => {
                  const median = medianSeconds(
                    r.waits === null ? [] : parseJson<Array<number | string>>(r.waits).map(Number)
                  )
                  return median === null ? null : Math.round(median)
                })()
              }
            })
        ),

      activity: (queue) =>
        Effect.gen(function* () {
          const runs = yield* sql<{ record: unknown }>`
            select record from test_runs where queue_id = ${queue.id} and status in ('building', 'in_progress')
            order by created_at`
          // a not_ready entry's head and whether its impacted targets are there (what readiness waits on)
          const active = yield* sql<EntryViewRow>`
            select ${entryColumns}, e.head_sha,
              case when e.state = 'not_ready' then exists (select 1 from impacted_targets t
                where t.repo_id = ${queue.repo.id} and t.pr_number = e.pr_number and t.sha = e.head_sha) end
                as has_targets
            from entries e
            where e.queue_id = ${queue.id}
              and e.state in ('not_ready', 'pending', 'testing', 'tests_passed', 'pending_failure')
            order by e.submitted_at, e.pr_number`
          const recent = yield* sql<EntryViewRow>`
            select ${entryColumns} from entries e
            where e.queue_id = ${queue.id} and e.state in ('merged', 'failed', 'cancelled')
            order by e.ended_at desc nulls last, e.pr_number desc limit ${RECENT}`
          return {
            runs: runs.map((r) => runView(parseJson<RunRecord>(r.record))),
            active: active.map((r) => activeView(queue, r)),
            recent: recent.map(entryView)
          }
        }),

      branchesOfPr: (orgId, repo, prNumber) =>
        Effect.map(
          sql<{ branch: string }>`
            select q.branch from entries e
            join queues q on q.id = e.queue_id
            join repositories r on r.id = q.repo_id
            where r.org_id = ${orgId} and r.host = ${repo.host} and r.owner = ${repo.owner} and r.name = ${repo.name}
              and e.pr_number = ${prNumber}
            order by e.state_changed_at desc`,
          (rows) => rows.map((r) => r.branch)
        ),

      pullRequest: (queue, prNumber) =>
        Effect.gen(function* () {
          const pattern = JSON.stringify({ items: [{ prNumber }] })
          const runs = yield* sql<{ id: string; record: unknown }>`
            select id, record from test_runs
            where queue_id = ${queue.id} and record @> ${pattern}::jsonb
            order by created_at desc limit 50`
          const ids = runs.map((r) => r.id)
          const outputs =
            ids.length === 0
              ? []
              : yield* sql<{
                  id: string
                  run_id: string
                  sha: string
                  exit_code: number | null
                  created_at: Date | string
                  tail: string
                  length: number | string
                }>`
                  select id, run_id, sha, exit_code, created_at, right(output, ${OUTPUT_TAIL}) as tail,
                    length(output) as length
                  from ci_outputs where run_id in ${sql.in(ids)} order by created_at desc`
          const comments = yield* sql<{ id: string | number; body: string; created_at: Date | string }>`
            select id, body, created_at from pr_comments
            where repo_id = ${queue.repo.id} and pr_number = ${prNumber} order by id`
          return {
            runs: runs.map((r) => runView(parseJson<RunRecord>(r.record))),
            ciOutputs: outputs.map((o) => ({
              id: o.id,
              runId: o.run_id,
              sha: o.sha,
              exitCode: o.exit_code,
              createdAt: time(o.created_at),
              output: o.tail,
              truncated: Number(o.length) > OUTPUT_TAIL
            })),
            comments: comments.map((c) => ({ id: String(c.id), body: c.body, createdAt: time(c.created_at) }))
          }
        })
    }
  })
)

export const HealthRequest = Schema.Struct({
  repo: RepoRef,
  targetBranch: Schema.String.pipe(Schema.minLength(1, { message: () => "must be a non-empty string" })),
  days: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 90, { message: () => "must be an integer from 1 to 90" })),
    { exact: true }
  ),
  bucket: Schema.optionalWith(Schema.Literal("hour", "day"), { exact: true })
}).annotations({ identifier: "QueueHealthRequest" })

export const HealthPoint = Schema.Struct({
  start: Time,
  merged: Schema.Number,
  failed: Schema.Number,
  cancelled: Schema.Number,
  /** conclusions by their reason ("merged", or the failure or cancel reason) */
  reasons: Schema.Record({ key: Schema.String, value: Schema.Number }),
  timeInQueueP50: Schema.NullOr(Schema.Number),
  timeInQueueP95: Schema.NullOr(Schema.Number),
  timeInQueueP99: Schema.NullOr(Schema.Number),
  ciRunsPerMerge: Schema.NullOr(Schema.Number),
  /** every restart (automatic or requested) of the PRs merged in the bucket, per merged PR (figures.ts, #33) */
  restartsPerMerge: Schema.NullOr(Schema.Number),
  /** extension (#33): those restarts by their reason (PREREQUISITE_MERGE_ITEM_FAILED, RESTART_REQUESTED, ...) */
  restartsByCause: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.Number }), { exact: true }),
  /** the most entries in the queue at once during the bucket (#33: no longer a sample at its end) */
  depth: Schema.Number,
  /** extension (#33): the mean number of entries in the queue over the bucket (time-weighted) */
  depthMean: Schema.optionalWith(Schema.Number, { exact: true }),
  averageBatchSize: Schema.NullOr(Schema.Number),
  /** the most runs in flight at once during the bucket (#33: no longer a sample at its end) */
  slotsUsed: Schema.Number,
  /** extension (#33): the mean number of runs in flight over the bucket (time-weighted) */
  slotsMean: Schema.optionalWith(Schema.Number, { exact: true }),
  /** the PRs that concluded in the bucket */
  prs: Schema.Array(Schema.Struct({ prNumber: Schema.Number, state: Schema.String, reason: Schema.String }))
}).annotations({ identifier: "QueueHealthPoint" })

export const QueueHealth = Schema.Struct({
  bucketSeconds: Schema.Number,
  concurrency: Schema.Number,
  /** the batch size the queue fills batches to (batchingMinSize) */
  batchSize: Schema.Number,
  points: Schema.Array(HealthPoint)
}).annotations({ identifier: "QueueHealth" })
export type QueueHealth = typeof QueueHealth.Type

/** A queue's health over `days` in buckets of an hour or a day: one read of its entries and runs, counted here. */
export const queueHealth = (queue: QueueRow, days: number, bucket: "hour" | "day", now: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const step = bucket === "hour" ? 3_600_000 : 86_400_000
    const end = Math.ceil(now / step) * step
    const from = end - Math.ceil((days * 86_400_000) / step) * step
    const entries = yield* sql<{
      pr_number: number | string
      state: string
      submitted_at: Date | string
      ended_at: Date | string | null
      restarts: number
      reason: string | null
    }>`
      select e.pr_number, e.state, e.submitted_at, e.ended_at, e.restarts,
        (select t.reason from event_log t where t.entry_id = e.id order by t.seq desc limit 1) as reason
      from entries e
      where e.queue_id = ${queue.id} and (e.ended_at is null or e.ended_at >= ${new Date(from)})`
    const runs = yield* sql<{ created_at: Date | string; ended_at: Date | string | null; tested: number | string }>`
      select created_at, ended_at, jsonb_array_length(record->'testedEntryIds') as tested
      from test_runs where queue_id = ${queue.id} and (ended_at is null or ended_at >= ${new Date(from)})`
    // every restart of the entries merged in the window, since their submission (figures.ts: `isRestart`)
    const moves = yield* sql<{ pr_number: number | string; state: string; prev: string | null; reason: string }>`
      select x.pr_number, x.state, x.prev, x.reason from (
        select e.pr_number, t.state, t.reason, t.occurred_at, e.submitted_at,
          lag(t.state) over (partition by t.entry_id order by t.seq) as prev
        from entries e join event_log t on t.entry_id = e.id
        where e.queue_id = ${queue.id} and e.state = 'merged' and e.ended_at >= ${new Date(from)}
      ) x
      where x.state = 'pending' and x.occurred_at >= x.submitted_at`
    const restartsOf = new Map<number, Array<string>>()
    for (const m of moves) {
      if (!isRestart(m.prev, m.state)) continue
      const n = Number(m.pr_number)
      restartsOf.set(n, [...(restartsOf.get(n) ?? []), m.reason])
    }
    const ms = (t: Date | string) => new Date(t).getTime()
    const queued: ReadonlyArray<Interval> = entries.map((e) => ({
      from: ms(e.submitted_at),
      to: e.ended_at === null ? null : ms(e.ended_at)
    }))
    const inFlight: ReadonlyArray<Interval> = runs.map((r) => ({
      from: ms(r.created_at),
      to: r.ended_at === null ? null : ms(r.ended_at)
    }))
    const points: Array<typeof HealthPoint.Type> = []
    for (let start = from; start < end; start += step) {
      const stop = start + step
      const concluded = entries.filter((e) => e.ended_at !== null && ms(e.ended_at) >= start && ms(e.ended_at) < stop)
      const merged = concluded.filter((e) => e.state === "merged")
      const waits = merged.map((e) => (ms(e.ended_at!) - ms(e.submitted_at)) / 1000).sort((a, b) => a - b)
      const restartsByCause: Record<string, number> = {}
      let restarts = 0
      for (const e of merged) {
        for (const reason of restartsOf.get(Number(e.pr_number)) ?? []) {
          restarts++
          restartsByCause[reason] = (restartsByCause[reason] ?? 0) + 1
        }
      }
      const reasons: Record<string, number> = {}
      for (const e of concluded) {
        const key = e.state === "merged" ? "merged" : `${e.state}: ${e.reason ?? ""}`
        reasons[key] = (reasons[key] ?? 0) + 1
      }
      const ended = runs.filter((r) => r.ended_at !== null && ms(r.ended_at) >= start && ms(r.ended_at) < stop)
      const created = runs.filter((r) => ms(r.created_at) >= start && ms(r.created_at) < stop)
      const until = Math.min(stop, now)
      const depth = overTime(queued, start, until)
      const slots = overTime(inFlight, start, until)
      points.push({
        start: iso(start),
        merged: merged.length,
        failed: concluded.filter((e) => e.state === "failed").length,
        cancelled: concluded.filter((e) => e.state === "cancelled").length,
        reasons,
        timeInQueueP50: quantile(waits, 0.5),
        timeInQueueP95: quantile(waits, 0.95),
        timeInQueueP99: quantile(waits, 0.99),
        ciRunsPerMerge: merged.length === 0 ? null : ended.length / merged.length,
        restartsPerMerge: merged.length === 0 ? null : restarts / merged.length,
        restartsByCause,
        depth: depth.max,
        depthMean: depth.mean,
        averageBatchSize:
          created.length === 0 ? null : created.reduce((n, r) => n + Number(r.tested), 0) / created.length,
        slotsUsed: slots.max,
        slotsMean: slots.mean,
        prs: concluded.map((e) => ({ prNumber: Number(e.pr_number), state: e.state, reason: e.reason ?? "" }))
      })
    }
    return {
      bucketSeconds: step / 1000,
      concurrency: queue.config.concurrency,
      batchSize: queue.config.batch ? queue.config.batchingMinSize : 1,
      points
    }
  })
