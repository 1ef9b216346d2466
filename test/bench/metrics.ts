/**
 * bench:metrics — how long `GET /v1/getMergeQueueMetrics` takes for an organization with 100 queues and 10,000
 * entries (with their timelines and test runs) in the last hour, on PostgreSQL, against a baseline in the same run:
 * a plain `select count(*)` over the timeline records the endpoint reads (the last hour's ends and restarts, through
 * the same index) through the same driver (`pg`), from this process.
 * The rows are made in bulk in SQL (generate_series), beside older history (entries of the past weeks) that the
 * endpoint must not read.
 *   bun test/bench/metrics.ts        (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   BENCH_REQUESTS=100 BENCH_HISTORY=100000 bun test/bench/metrics.ts
 *   BENCH_KEEP=1 keeps the filled database (its name is printed), to look at query plans
 */

import * as os from "node:os"
import Pg from "pg"
import { createTestRepo } from "../support/git.ts"
import { spawnServer } from "../support/process.ts"

const TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
const PG = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 50)
const QUEUES = 100
const ENTRIES = Number(process.env.BENCH_ENTRIES ?? 10_000)
const HISTORY = Number(process.env.BENCH_HISTORY ?? 50_000)
const TARGET_MS = 100

const name = `gl_bench_metrics_${process.pid}`
const admin = new Pg.Client({ connectionString: PG })
await admin.connect()
await admin.query(`drop database if exists ${name}`)
await admin.query(`create database ${name}`)
const url = new URL(PG)
url.pathname = `/${name}`

const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: "metrics" } })
const server = await spawnServer(
  {
    DATABASE_URL: url.toString(),
    GIT_ROOT: repo.root,
    RATE_LIMIT_PER_SECOND: "10000000",
    GIT_POLL_MS: "60000",
    METRICS_TOKEN: TOKEN
  },
  TOKEN
)
const db = new Pg.Pool({ connectionString: url.toString(), max: 2 })

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN

const time = async (what: () => Promise<unknown>) => {
  for (let i = 0; i < 5; i++) await what()
  const ms: Array<number> = []
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now()
    await what()
    ms.push(performance.now() - started)
  }
  ms.sort((a, b) => a - b)
  return { p50: percentile(ms, 0.5), p95: percentile(ms, 0.95), max: ms.at(-1) ?? Number.NaN }
}

try {
  // one queue through the API, for a real organization and a real queue configuration to copy
  const created = await server.post("createQueue", { repo: repo.repo, targetBranch: "main" })
  if (created.status !== 200) throw new Error(`createQueue: ${JSON.stringify(created.body)}`)
  const seed = await db.query<{ org_id: string; config: unknown }>(
    "select r.org_id, q.config from queues q join repositories r on r.id = q.repo_id"
  )
  const orgId = seed.rows[0]?.org_id
  const config = JSON.stringify(seed.rows[0]?.config)
  const started = performance.now()
  await db.query("begin")
  // 25 repositories × 4 branches; the API's queue is left out of the fill
  await db.query(
    `insert into repositories (id, org_id, host, owner, name)
     select gen_random_uuid(), $1, 'local', 'bench', 'repo-' || g from generate_series(1, ${QUEUES / 4}) g`,
    [orgId]
  )
  await db.query(
    `insert into queues (id, repo_id, branch, config)
     select gen_random_uuid(), r.id, b, $1::jsonb
     from repositories r cross join (values ('main'), ('release-1'), ('release-2'), ('dev')) v(b)
     where r.name like 'repo-%'`,
    [config]
  )
  // entries: k numbers them; the last hour's (k <= ENTRIES) and older history (k > ENTRIES, 1 to 30 days ago)
  await db.query(
    `insert into entries (id, queue_id, pr_number, state, state_changed_at, submitted_at, first_tested_at, ended_at,
                          priority, head_sha)
     select gen_random_uuid(), q.id, k, s.state, coalesce(s.ended, s.tested, s.sub), s.sub,
            case when s.state in ('pending', 'not_ready') then null else s.tested end,
            case when s.state in ('merged', 'failed', 'cancelled') then s.ended end, 100, md5(k::text)
     from (select id, row_number() over (order by id) - 1 as qn from queues q
           where exists (select 1 from repositories r where r.id = q.repo_id and r.name like 'repo-%')) q
     cross join lateral generate_series(q.qn + 1, ${ENTRIES + HISTORY}, ${QUEUES}) k
     cross join lateral (
       select case when k % 20 < 14 or k > ${ENTRIES} then 'merged' when k % 20 < 16 then 'failed'
                   when k % 20 = 16 then 'cancelled' when k % 20 = 17 then 'testing'
                   when k % 20 = 18 then 'pending' else 'not_ready' end as state,
              base as sub,
              base + (30 + k % 300) * interval '1 second' as tested,
              base + (40 + k % 300 + k % 240) * interval '1 second' as ended
       from (select case when k <= ${ENTRIES} then now() - (3590 - (k * 7919) % 3000) * interval '1 second'
                         else now() - (1 + k % 30) * interval '1 day' + (k % 86400) * interval '1 second' end as base) b
     ) s`
  )
  // the timelines: each transition a record of the event log, on the Trunk event it is told as (a body of the size
  // of a pull request event's)
  await db.query(
    `insert into event_log (id, org_id, repo_id, branch, type, ordering_key, occurred_at, created_at, body,
                            entry_id, state, reason)
     select gen_random_uuid(), r.org_id, r.id, q.branch, 'pull_request.' || t.action,
            'pr:' || r.id || ':' || q.branch || ':' || e.pr_number, t.at, t.at,
            json_build_object('type', 'pull_request.' || t.action, 'timestamp', t.at,
              'data', json_build_object('action', t.action, 'pr_number', e.pr_number, 'author', e.author,
                'http_details_url', 'https://greenline.example/repos/local/bench/' || r.name || '/pull/' || e.pr_number,
                'repository', json_build_object('host', r.host, 'owner', r.owner, 'name', r.name),
                'target_branch', q.branch, 'reason', t.reason))::text,
            t.id, t.state, t.reason
     from (
       select id, submitted_at as at, 'pending' as state, 'SUBMITTED' as reason, 'submitted' as action, 1 as o from entries
       union all select id, first_tested_at, 'testing', 'TEST_STARTED', 'testing', 2 from entries
         where first_tested_at is not null
       union all select id, first_tested_at + interval '5 seconds', 'pending', 'RESTART_REQUESTED', 'queued', 3
         from entries where first_tested_at is not null and pr_number % 10 = 3
       union all select id, ended_at, state, case state when 'merged' then 'MERGED' when 'failed' then 'TESTS_FAILED'
         else 'CANCELLED' end, case state when 'cancelled' then 'canceled' else state end, 4
         from entries where ended_at is not null
     ) t join entries e on e.id = t.id join queues q on q.id = e.queue_id join repositories r on r.id = q.repo_id
     order by t.at, t.o`
  )
  await db.query(
    `insert into test_runs (id, queue_id, record, status, test_branch_sha, created_at, ended_at)
     select 'run-' || id, queue_id,
            jsonb_build_object('id', 'run-' || id, 'queueType', case when pr_number % 25 = 0 then 'bisection' else 'main' end),
            case state when 'merged' then 'succeeded' when 'failed' then 'failed' when 'testing' then 'in_progress'
                       else 'cancelled' end,
            md5(id::text), first_tested_at, ended_at
     from entries where first_tested_at is not null`
  )
  await db.query("commit")
  await db.query("analyze")
  const fillMs = performance.now() - started
  const counts = await db.query<{ entries: number; timeline: number; runs: number; recent: number }>(
    `select (select count(*)::int from entries) as entries, (select count(*)::int from event_log where entry_id is not null) as timeline,
            (select count(*)::int from test_runs) as runs,
            (select count(*)::int from entries where submitted_at >= now() - interval '1 hour') as recent`
  )

  const scrape = async () => {
    const r = await fetch(`${server.url}/v1/getMergeQueueMetrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    if (r.status !== 200) throw new Error(`getMergeQueueMetrics: ${r.status}`)
    return r.text()
  }
  // the answer is checked against the database before anything is timed
  const text = await scrape()
  const merged = text
    .split("\n")
    .filter((l) => l.startsWith("mq_pr_conclusions_1h_total{") && l.includes('conclusion="merged"'))
    .reduce((a, l) => a + Number(l.split(" ").at(-1)), 0)
  const expected = await db.query<{ n: number }>(
    `select count(*)::int as n from event_log t join entries e on e.id = t.entry_id
     join queues q on q.id = e.queue_id join repositories r on r.id = q.repo_id
     where r.org_id = $1 and t.state = 'merged' and t.occurred_at >= now() - interval '1 hour'`,
    [orgId]
  )
  if (merged !== expected.rows[0]?.n)
    throw new Error(`merged in the last hour: ${merged}, expected ${expected.rows[0]?.n}`)
  const series = text.split("\n").filter((l) => l !== "" && !l.startsWith("#")).length

  const serverSeconds = async () => {
    const r = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
    const text = await r.text()
    const value = (suffix: string) =>
      Number(
        new RegExp(
          `^greenline_http_request_duration_seconds_${suffix}\\{route="/v1/getMergeQueueMetrics"\\} (\\S+)$`,
          "m"
        ).exec(text)?.[1] ?? Number.NaN
      )
    return { sum: value("sum"), count: value("count") }
  }
  const before = await serverSeconds()
  const ours = await time(scrape)
  const after = await serverSeconds()
  // the server's own time per request (its request-duration histogram), without the transfer to this process
  const serverMs = ((after.sum - before.sum) * 1000) / (after.count - before.count)
  const baseline = await time(() =>
    db.query(
      `select count(*) from event_log t join entries e on e.id = t.entry_id
       join queues q on q.id = e.queue_id join repositories r on r.id = q.repo_id
       where r.org_id = $1 and t.entry_id is not null and t.occurred_at >= now() - interval '1 hour'
         and (t.state in ('merged', 'failed', 'cancelled') or t.reason = 'RESTART_REQUESTED')`,
      [orgId]
    )
  )

  const c = counts.rows[0]
  const f = (n: number) => n.toFixed(1)
  process.stdout.write(
    `\nbench:metrics — ${QUEUES + 1} queues, ${c?.recent} entries submitted in the last hour, ${c?.entries} entries, ` +
      `${c?.timeline} timeline records, ${c?.runs} test runs in all (filled in ${(fillMs / 1000).toFixed(1)} s); ` +
      `${REQUESTS} sequential requests after 5 warm-up, ${os.cpus().length} cores\n\n` +
      "| what | p50 ms | p95 ms | max ms | notes |\n|---|---:|---:|---:|---|\n" +
      `| GET /v1/getMergeQueueMetrics | ${f(ours.p50)} | ${f(ours.p95)} | ${f(ours.max)} | ${series} series, ${(text.length / 1024).toFixed(0)} KiB; mean in the server ${f(serverMs)} ms; target p95 < ${TARGET_MS} ms: ${ours.p95 < TARGET_MS ? "met" : "missed"} |\n` +
      `| baseline: select count(*) over the last hour's ends and restarts in the log (pg, same database) | ${f(baseline.p50)} | ${f(baseline.p95)} | ${f(baseline.max)} | ratio p50 ${(ours.p50 / baseline.p50).toFixed(1)}× |\n`
  )
} finally {
  await db.end()
  await server.kill("SIGTERM")
  if (process.env.BENCH_KEEP === "1") process.stdout.write(`kept database ${name}\n`)
  else await admin.query(`drop database if exists ${name} with (force)`)
  await admin.end()
  repo.cleanup()
}
