import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { formatLabels, formatNumber, renderFamily, renderHistogram } from "./registry.ts"

/**
 * `GET /v1/getMergeQueueMetrics`: the hosted product's queue metrics (contract.md §2), computed from the stored
 * entries, timelines and test runs, so every instance answers the same and a restart loses nothing.
 */

export const BUCKETS = [60, 300, 600, 900, 1800, 3600, 5400, 7200] as const

type QueueType = "main" | "bisection"

interface QueueLabelRow {
  readonly id: string
  readonly branch: string
  readonly owner: string
  readonly name: string
}

export interface MetricsScope {
  readonly orgId: string
  /** Limit to one repository. */
  readonly repoId?: string
}

const HOUR_MS = 3_600_000

const histogram = (values: ReadonlyArray<number>) => {
  const counts = BUCKETS.map((le) => values.filter((v) => v <= le).length)
  return { counts, sum: values.reduce((a, b) => a + b, 0), count: values.length }
}

export const renderQueueMetrics = (
  scope: MetricsScope,
  now: number
): Effect.Effect<string, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const since = new Date(now - HOUR_MS)
    const repoFilter = scope.repoId === undefined ? sql`true` : sql`r.id = ${scope.repoId}`
    const queues = yield* sql<QueueLabelRow>`
      select q.id, q.branch, r.owner, r.name from queues q join repositories r on r.id = q.repo_id
      where r.org_id = ${scope.orgId} and ${repoFilter} order by r.owner, r.name, q.branch`
    if (queues.length === 0) return emptyExposition()
    const ids = queues.map((q) => q.id)

    const counts = yield* sql<{ queue_id: string; state: string; n: number }>`
      select queue_id, state, count(*)::int as n from entries
      where queue_id in ${sql.in(ids)} and state in ('not_ready','pending','testing','tests_passed','pending_failure')
      group by queue_id, state`
    const slots = yield* sql<{ queue_id: string; queue_type: string; n: number }>`
      select queue_id, coalesce(record->>'queueType', 'main') as queue_type, count(*)::int as n from test_runs
      where queue_id in ${sql.in(ids)} and status in ('building','in_progress')
      group by queue_id, queue_type`
    const conclusions = yield* sql<{ queue_id: string; state: string; n: number }>`
      select e.queue_id, t.state, count(*)::int as n from entry_timeline t join entries e on e.id = t.entry_id
      where e.queue_id in ${sql.in(ids)} and t.at >= ${since} and t.state in ('merged','failed','cancelled')
      group by e.queue_id, t.state`
    const restarts = yield* sql<{ queue_id: string; n: number }>`
      select e.queue_id, count(*)::int as n from entry_timeline t join entries e on e.id = t.entry_id
      where e.queue_id in ${sql.in(ids)} and t.at >= ${since} and t.reason = 'RESTART_REQUESTED'
      group by e.queue_id`
    const waits = yield* sql<{ queue_id: string; s: number }>`
      select queue_id, extract(epoch from (first_tested_at - submitted_at))::float8 as s from entries
      where queue_id in ${sql.in(ids)} and first_tested_at >= ${since}`
    const tests = yield* sql<{ queue_id: string; queue_type: string; s: number }>`
      select queue_id, coalesce(record->>'queueType', 'main') as queue_type,
             extract(epoch from (ended_at - created_at))::float8 as s
      from test_runs where queue_id in ${sql.in(ids)} and ended_at >= ${since}
        and status in ('succeeded','failed')`
    const inQueue = yield* sql<{ queue_id: string; s: number }>`
      select queue_id, extract(epoch from (ended_at - submitted_at))::float8 as s from entries
      where queue_id in ${sql.in(ids)} and ended_at >= ${since}`

    const labels = new Map(queues.map((q) => [q.id, { repo: `${q.owner}/${q.name}`, branch: q.branch }]))
    const series = (queueId: string, queueType: QueueType, extra: Record<string, string> = {}) => ({
      ...(labels.get(queueId) ?? { repo: "", branch: "" }),
      queue_type: queueType,
      ...extra
    })
    const sumWhere = <R extends { queue_id: string; n: number }>(
      rows: ReadonlyArray<R>,
      id: string,
      f: (r: R) => boolean
    ) => rows.filter((r) => r.queue_id === id && f(r)).reduce((a, r) => a + r.n, 0)

    const types: ReadonlyArray<QueueType> = ["main", "bisection"]
    const gauge = (name: string, help: string, value: (id: string, t: QueueType) => number) =>
      renderFamily(
        { name, help, type: "gauge" },
        ids.flatMap((id) => types.map((t) => `${name}${formatLabels(series(id, t))} ${formatNumber(value(id, t))}`))
      )

    const families = [
      gauge(
        "mq_depth_current",
        "Active pull requests in the queue, not counting those waiting for readiness",
        (id, t) => (t === "main" ? sumWhere(counts, id, (r) => r.state !== "not_ready") : 0)
      ),
      gauge("mq_awaiting_mergeability", "Pull requests submitted but not ready to be tested", (id, t) =>
        t === "main" ? sumWhere(counts, id, (r) => r.state === "not_ready") : 0
      ),
      gauge("mq_testing_slots_active", "Test runs in progress", (id, t) =>
        sumWhere(slots, id, (r) => r.queue_type === t)
      ),
      renderFamily(
        {
          name: "mq_pr_conclusions_1h_total",
          help: "Pull requests that left the queue in the last hour, by conclusion",
          type: "gauge"
        },
        ids.flatMap((id) =>
          types.flatMap((t) =>
            (["merged", "failed", "cancelled"] as const).map(
              (c) =>
                `mq_pr_conclusions_1h_total${formatLabels(series(id, t, { conclusion: c }))} ${
                  t === "main" ? sumWhere(conclusions, id, (r) => r.state === c) : 0
                }`
            )
          )
        )
      ),
      gauge("mq_pr_restarts_1h_total", "Test restarts requested in the last hour", (id, t) =>
        t === "main" ? sumWhere(restarts, id, () => true) : 0
      ),
      histogramFamily(
        "mq_pr_wait_duration_1h_seconds",
        "Time from submission to the first test, last hour",
        ids,
        types,
        series,
        (id, t) => (t === "main" ? waits.filter((w) => w.queue_id === id).map((w) => w.s) : [])
      ),
      histogramFamily(
        "mq_pr_test_duration_1h_seconds",
        "Duration of finished test runs, last hour",
        ids,
        types,
        series,
        (id, t) => tests.filter((w) => w.queue_id === id && w.queue_type === t).map((w) => w.s)
      ),
      histogramFamily(
        "mq_pr_time_in_queue_1h_seconds",
        "Time from submission to leaving the queue, last hour",
        ids,
        types,
        series,
        (id, t) => (t === "main" ? inQueue.filter((w) => w.queue_id === id).map((w) => w.s) : [])
      )
    ]
    return `${families.join("\n")}\n`
  })

const histogramFamily = (
  name: string,
  help: string,
  ids: ReadonlyArray<string>,
  types: ReadonlyArray<QueueType>,
  series: (id: string, t: QueueType) => Record<string, string>,
  values: (id: string, t: QueueType) => ReadonlyArray<number>
) =>
  renderFamily(
    { name, help, type: "histogram" },
    renderHistogram(
      name,
      ids.flatMap((id) => types.map((t) => ({ labels: series(id, t), ...histogram(values(id, t)) }))),
      BUCKETS
    )
  )

const emptyExposition = () =>
  `${[
    ["mq_depth_current", "gauge"],
    ["mq_awaiting_mergeability", "gauge"],
    ["mq_testing_slots_active", "gauge"],
    ["mq_pr_conclusions_1h_total", "gauge"],
    ["mq_pr_restarts_1h_total", "gauge"],
    ["mq_pr_wait_duration_1h_seconds", "histogram"],
    ["mq_pr_test_duration_1h_seconds", "histogram"],
    ["mq_pr_time_in_queue_1h_seconds", "histogram"]
  ]
    .map(([name, type]) => `# HELP ${name} ${name}\n# TYPE ${name} ${type}`)
    .join("\n")}\n`
