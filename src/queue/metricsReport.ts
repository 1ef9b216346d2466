import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { formatLabels, formatNumber, renderFamily } from "../kernel/prometheusText.ts"

/**
 * `GET /v1/getMergeQueueMetrics`: the hosted product's queue metrics (contract.md §2), computed from the stored
 * entries, timelines (the event log's transition records) and test runs, so every instance answers the same and a restart loses nothing.
 */

export const BUCKETS = [60, 300, 600, 900, 1800, 3600, 5400, 7200] as const

type QueueType = "main" | "bisection"

export interface MetricsScope {
  readonly orgId: string
  /** Limit to one repository. */
  readonly repoId?: string
}

const HOUR_MS = 3_600_000
const CLOCK_MARGIN_MS = 300_000

/** One series' numbers: a queue and a queue type, everything counted by the database. */
interface SeriesRow {
  readonly id: string
  readonly branch: string
  readonly owner: string
  readonly name: string
  readonly queue_type: QueueType
  readonly depth: number
  readonly awaiting: number
  readonly slots: number
  readonly concurrency: number
  readonly head_age: number
  readonly merged: number
  readonly failed: number
  readonly cancelled: number
  readonly restarts: number
  readonly wait_buckets: ReadonlyArray<number> | null
  readonly wait_sum: number | null
  readonly wait_count: number | null
  readonly test_buckets: ReadonlyArray<number> | null
  readonly test_sum: number | null
  readonly test_count: number | null
  readonly queue_buckets: ReadonlyArray<number> | null
  readonly queue_sum: number | null
  readonly queue_count: number | null
  /** #31: 1 while a freeze (or merge schedule) holds; the longest wait of a PR for it (s) */
  readonly frozen: number
  readonly freeze_wait: number
}

/** Which bucket `s` (seconds) falls in: the first `le` it does not exceed (BUCKETS.length: only +Inf). */
const BUCKET_OF = `case ${BUCKETS.map((le, i) => `when s <= ${le} then ${i}`).join(" ")} else ${BUCKETS.length} end`

/** From counts per bucket (`b`, `n`, `total`), the cumulative bucket counts, sum and count of a histogram. */
const CUMULATIVE = (prefix: string) =>
  `array[${BUCKETS.map((_, i) => `coalesce(sum(n) filter (where b <= ${i}), 0)`).join(", ")}]::int[] as ${prefix}_buckets,
   coalesce(sum(total), 0)::float8 as ${prefix}_sum, coalesce(sum(n), 0)::int as ${prefix}_count`

/**
 * One statement computes every series: the organization's (or repository's) queues, each with the two queue types,
 * and per series the gauges and the histograms' bucket counts, aggregated in the database, so the answer's size and
 * the work here depend on the number of queues, not on the number of entries (a histogram is counted per bucket
 * first, then made cumulative over those few rows: cheaper than one filtered count per bucket over every row).
 * The time-bounded parts read the indexes on the event log's ends and restarts by time (`event_log_ends_at`),
 * `entries (state_changed_at)`, `entries (first_tested_at)`, `entries (ended_at)` and `test_runs (ended_at)`.
 * Durations are taken with `date_part('epoch', …)`, a float: `extract` answers a numeric since PostgreSQL 14, and
 * computing and summing those took a third of the statement's time.
 */
export const renderQueueMetrics = (
  scope: MetricsScope,
  now: number
): Effect.Effect<string, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const since = new Date(now - HOUR_MS)
    // An entry's state_changed_at is written with each of its timeline records (same time, same transaction), so the
    // entries with timeline records in the last hour changed in the last hour: looking among those only keeps the join
    // as small as the last hour, whatever the history; the margin covers clocks of instances that differ a little.
    const changedSince = new Date(now - HOUR_MS - CLOCK_MARGIN_MS)
    const repoFilter = scope.repoId === undefined ? sql`true` : sql`r.id = ${scope.repoId}`
    const bucketOf = sql.literal(BUCKET_OF)
    const rows = yield* sql<SeriesRow>`
      with q as materialized (
        select q.id, q.branch, r.owner, r.name,
               coalesce((q.config->>'concurrency')::float8, 1) as concurrency
        from queues q join repositories r on r.id = q.repo_id
        where r.org_id = ${scope.orgId} and ${repoFilter}
      ),
      active as (
        select queue_id, count(*) filter (where state <> 'not_ready')::int as depth,
               count(*) filter (where state = 'not_ready')::int as awaiting,
               min(submitted_at) filter (where state <> 'not_ready') as oldest
        from entries
        where queue_id in (select id from q)
          and state in ('not_ready','pending','testing','tests_passed','pending_failure')
        group by queue_id
      ),
      slots as (
        select queue_id, coalesce(record->>'queueType', 'main') as queue_type, count(*)::int as n from test_runs
        where queue_id in (select id from q) and status in ('building','in_progress')
        group by 1, 2
      ),
      timeline as (
        select e.queue_id,
               count(*) filter (where t.state = 'merged')::int as merged,
               count(*) filter (where t.state = 'failed')::int as failed,
               count(*) filter (where t.state = 'cancelled')::int as cancelled,
               count(*) filter (where t.reason = 'RESTART_REQUESTED')::int as restarts
        from event_log t join entries e on e.id = t.entry_id
        where t.entry_id is not null and t.occurred_at >= ${since} and e.state_changed_at >= ${changedSince} and e.queue_id in (select id from q)
          and (t.state in ('merged','failed','cancelled') or t.reason = 'RESTART_REQUESTED')
        group by e.queue_id
      ),
      wait_counts as (
        select queue_id, ${bucketOf} as b, count(*) as n, sum(s) as total
        from (select queue_id, date_part('epoch', first_tested_at - submitted_at) as s from entries
              where first_tested_at >= ${since} and queue_id in (select id from q)) x
        group by 1, 2
      ),
      waits as (select queue_id, ${sql.literal(CUMULATIVE("wait"))} from wait_counts group by queue_id),
      in_queue_counts as (
        select queue_id, ${bucketOf} as b, count(*) as n, sum(s) as total
        from (select queue_id, date_part('epoch', ended_at - submitted_at) as s from entries
              where ended_at >= ${since} and queue_id in (select id from q)) x
        group by 1, 2
      ),
      in_queue as (select queue_id, ${sql.literal(CUMULATIVE("queue"))} from in_queue_counts group by queue_id),
      test_counts as (
        select queue_id, queue_type, ${bucketOf} as b, count(*) as n, sum(s) as total
        from (select queue_id, coalesce(record->>'queueType', 'main') as queue_type,
                     date_part('epoch', ended_at - created_at) as s from test_runs
              where ended_at >= ${since} and status in ('succeeded','failed') and queue_id in (select id from q)) x
        group by 1, 2, 3
      ),
      tests as (
        select queue_id, queue_type, ${sql.literal(CUMULATIVE("test"))} from test_counts group by queue_id, queue_type
      ),
      frozen as (
        select queue_id, state->'freeze'->>'mode' as mode from queue_runtime
        where queue_id in (select id from q) and json_typeof(state->'freeze') = 'object'
      ),
      freeze_waits as (
        select f.queue_id, min(e.state_changed_at) as since from frozen f join entries e on e.queue_id = f.queue_id
        where e.state = 'tests_passed' or (f.mode = 'all' and e.state = 'pending')
        group by f.queue_id
      )
      select q.id, q.branch, q.owner, q.name, t.queue_type,
             coalesce(a.depth, 0) as depth, coalesce(a.awaiting, 0) as awaiting, coalesce(s.n, 0) as slots,
             q.concurrency,
             coalesce(greatest(date_part('epoch', ${new Date(now)}::timestamptz - a.oldest), 0), 0)::float8 as head_age,
             coalesce(l.merged, 0) as merged, coalesce(l.failed, 0) as failed,
             coalesce(l.cancelled, 0) as cancelled, coalesce(l.restarts, 0) as restarts,
             w.wait_buckets, w.wait_sum, w.wait_count, ts.test_buckets, ts.test_sum, ts.test_count,
             iq.queue_buckets, iq.queue_sum, iq.queue_count,
             (fz.queue_id is not null)::int as frozen,
             coalesce(greatest(date_part('epoch', ${new Date(now)}::timestamptz - fw.since), 0), 0)::float8 as freeze_wait
      from q cross join (values ('main', 0), ('bisection', 1)) t(queue_type, o)
      left join active a on a.queue_id = q.id and t.queue_type = 'main'
      left join slots s on s.queue_id = q.id and s.queue_type = t.queue_type
      left join timeline l on l.queue_id = q.id and t.queue_type = 'main'
      left join waits w on w.queue_id = q.id and t.queue_type = 'main'
      left join in_queue iq on iq.queue_id = q.id and t.queue_type = 'main'
      left join tests ts on ts.queue_id = q.id and ts.queue_type = t.queue_type
      left join frozen fz on fz.queue_id = q.id and t.queue_type = 'main'
      left join freeze_waits fw on fw.queue_id = q.id and t.queue_type = 'main'
      order by q.owner, q.name, q.branch, t.o`
    if (rows.length === 0) return emptyExposition()

    // the label set of each series, written once
    const labels = rows.map((r) =>
      formatLabels({ repo: `${r.owner}/${r.name}`, branch: r.branch, queue_type: r.queue_type }).slice(1, -1)
    )
    const gauge = (name: string, help: string, value: (r: SeriesRow) => number) =>
      renderFamily(
        { name, help, type: "gauge" },
        rows.map((r, i) => `${name}{${labels[i]}} ${formatNumber(value(r))}`)
      )
    const histogram = (
      name: string,
      help: string,
      value: (r: SeriesRow) => readonly [ReadonlyArray<number> | null, number | null, number | null]
    ) => {
      const lines: Array<string> = []
      rows.forEach((r, i) => {
        const [buckets, sum, count] = value(r)
        BUCKETS.forEach((le, b) => {
          lines.push(`${name}_bucket{${labels[i]},le="${le}"} ${buckets?.[b] ?? 0}`)
        })
        lines.push(`${name}_bucket{${labels[i]},le="+Inf"} ${count ?? 0}`)
        lines.push(`${name}_sum{${labels[i]}} ${formatNumber(sum ?? 0)}`)
        lines.push(`${name}_count{${labels[i]}} ${count ?? 0}`)
      })
      return renderFamily({ name, help, type: "histogram" }, lines)
    }

    const families = [
      gauge(
        "mq_depth_current",
        "Active pull requests in the queue, not counting those waiting for readiness",
        (r) => r.depth
      ),
      gauge("mq_awaiting_mergeability", "Pull requests submitted but not ready to be tested", (r) => r.awaiting),
      gauge("mq_testing_slots_active", "Test runs in progress", (r) => r.slots),
      // extensions (not in the hosted product): what the alert rules of docker/prometheus/rules.yml watch
      gauge("mq_testing_slots_capacity", "The queue's concurrency: test runs it may have at once", (r) =>
        r.queue_type === "main" ? r.concurrency : 0
      ),
      gauge(
        "mq_head_entry_age_seconds",
        "Seconds since the oldest active pull request in the queue was submitted (0 when none)",
        (r) => r.head_age
      ),
      renderFamily(
        {
          name: "mq_pr_conclusions_1h_total",
          help: "Pull requests that left the queue in the last hour, by conclusion",
          type: "gauge"
        },
        rows.flatMap((r, i) =>
          (["merged", "failed", "cancelled"] as const).map(
            (c) => `mq_pr_conclusions_1h_total{${labels[i]},conclusion="${c}"} ${r[c]}`
          )
        )
      ),
      gauge("mq_pr_restarts_1h_total", "Test restarts requested in the last hour", (r) => r.restarts),
      histogram("mq_pr_wait_duration_1h_seconds", "Time from submission to the first test, last hour", (r) => [
        r.wait_buckets,
        r.wait_sum,
        r.wait_count
      ]),
      histogram("mq_pr_test_duration_1h_seconds", "Duration of finished test runs, last hour", (r) => [
        r.test_buckets,
        r.test_sum,
        r.test_count
      ]),
      // extension (#31): freezes
      gauge(
        "mq_frozen",
        "1 while a freeze or the merge schedule's closed hours hold the queue, else 0",
        (r) => r.frozen
      ),
      gauge(
        "mq_freeze_wait_seconds",
        "Seconds the longest-waiting pull request has waited for the freeze in force (0 when none waits)",
        (r) => r.freeze_wait
      ),
      histogram("mq_pr_time_in_queue_1h_seconds", "Time from submission to leaving the queue, last hour", (r) => [
        r.queue_buckets,
        r.queue_sum,
        r.queue_count
      ])
    ]
    return `${families.join("\n")}\n`
  })

const emptyExposition = () =>
  `${[
    ["mq_depth_current", "gauge"],
    ["mq_awaiting_mergeability", "gauge"],
    ["mq_testing_slots_active", "gauge"],
    ["mq_testing_slots_capacity", "gauge"],
    ["mq_head_entry_age_seconds", "gauge"],
    ["mq_pr_conclusions_1h_total", "gauge"],
    ["mq_pr_restarts_1h_total", "gauge"],
    ["mq_pr_wait_duration_1h_seconds", "histogram"],
    ["mq_pr_test_duration_1h_seconds", "histogram"],
    ["mq_frozen", "gauge"],
    ["mq_freeze_wait_seconds", "gauge"],
    ["mq_pr_time_in_queue_1h_seconds", "histogram"]
  ]
    .map(([name, type]) => `# HELP ${name} ${name}\n# TYPE ${name} ${type}`)
    .join("\n")}\n`
