import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Deferred, Effect } from "effect"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { eventually, pgUrl, startTestServer, type TestServer } from "../support/server.ts"

/** The queue metrics of GET /v1/getMergeQueueMetrics after a known sequence, and GET /metrics. */

const promtool = process.env.PROMTOOL ?? Bun.which("promtool")

const scrapeOperator = async (server: TestServer, token: string) => {
  const r = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
  expect(r.status).toBe(200)
  return r.text()
}

/** The value of a one-series gauge of the database pool. */
const poolValue = (text: string, name: string, database: string) => {
  const m = new RegExp(`^${name}\\{database="${database}"\\} (\\S+)$`, "m").exec(text)
  return m?.[1] === undefined ? undefined : Number(m[1])
}

const POOL_GAUGES = [
  "greenline_db_pool_connections",
  "greenline_db_pool_connections_in_use",
  "greenline_db_pool_connections_idle",
  "greenline_db_pool_waiting",
  "greenline_db_pool_connections_max"
]

/**
 * Holds `holders` transactions open on the server's database, then asks for one more statement, which has to wait;
 * returns a function that lets them all finish.
 */
const holdConnections = async (server: TestServer, holders: number) => {
  const gate = await server.run(Deferred.make<void>())
  const held = Array.from({ length: holders }, () =>
    server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(Deferred.await(gate))))
  )
  const queued = server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`select 1`))
  return async () => {
    await server.run(Deferred.succeed(gate, undefined))
    await Promise.all([...held, queued])
  }
}

describe("metrics", () => {
  let server: TestServer
  let repo: TestRepo
  const key = () => ({ repo: repo.repo, targetBranch: "main" })

  const stateOf = async (n: number) =>
    (await server.post("getSubmittedPullRequest", { ...key(), pr: { number: n } })).body as {
      state: string
      testRunId: string | null
    }

  /** Steps the queue's runner (a tick, then its next rounds) until `check` gives a value. */
  let queueId: string
  const until = <A>(what: string, check: () => Promise<A | undefined | false>) => server.until(queueId, what, check)

  const report = async (n: number, state: "success" | "failure") => {
    const pr = await until(`#${n} testing`, async () => {
      const s = await stateOf(n)
      return s.state === "testing" && s.testRunId ? s : undefined
    })
    const sha = await until("test branch", async () => {
      const d = await server.post("getMergeQueueTestingDetails", { ...key(), testRunId: pr.testRunId })
      return (d.body as { testBranchSha: string }).testBranchSha || undefined
    })
    await server.post("reportStatus", { repo: repo.repo, sha, context: "ci", state })
  }

  beforeAll(async () => {
    repo = createTestRepo({ repo: { host: "local", owner: "acme", name: "metrics" } })
    server = await startTestServer({ db: "pglite", gitRoot: repo.root, metricsToken: "metrics-secret" })
    await server.post("createQueue", key())
    await server.post("updateQueue", { ...key(), requiredStatuses: ["ci"] })
    queueId = await server.queueId(key())
    repo.createPr(1, { files: { "one.txt": "1\n" } })
    repo.createPr(2, { files: { "two.txt": "2\n" } })
    repo.createPr(3, { files: { "three.txt": "3\n" } })
    await server.post("submitPullRequest", { ...key(), pr: { number: 1 } })
    await report(1, "success")
    await until("#1 merged", async () => (await stateOf(1)).state === "merged")
    await server.post("submitPullRequest", { ...key(), pr: { number: 2 } })
    await report(2, "failure")
    await until("#2 failed", async () => (await stateOf(2)).state === "failed")
    await server.post("submitPullRequest", { ...key(), pr: { number: 3 } })
    await server.post("cancelPullRequest", { ...key(), pr: { number: 3 } })
    // the state shows at once; the conclusion the metrics count is the timeline item the runner's round writes
    await until("#3 cancelled", async () => {
      const r = (await server.post("getSubmittedPullRequest", { ...key(), pr: { number: 3 }, includeTimeline: true }))
        .body as { state: string; timeline?: ReadonlyArray<{ reason: string }> }
      return r.state === "cancelled" && r.timeline?.at(-1)?.reason === "API_REQUESTED"
    })
  })
  afterAll(async () => {
    await server.close()
    repo.cleanup()
  })

  const scrape = async (query = "") => {
    const r = await fetch(`${server.url}/v1/getMergeQueueMetrics${query}`, {
      headers: { authorization: `Bearer ${server.token}` }
    })
    return { status: r.status, type: r.headers.get("content-type"), text: await r.text() }
  }

  test("the exposition has every family with HELP, TYPE, labels and the hosted product's buckets", async () => {
    const { status, type, text } = await scrape()
    expect(status).toBe(200)
    expect(type).toBe("text/plain; version=0.0.4; charset=utf-8")
    for (const [name, kind] of [
      ["mq_depth_current", "gauge"],
      ["mq_awaiting_mergeability", "gauge"],
      ["mq_testing_slots_active", "gauge"],
      ["mq_pr_conclusions_1h_total", "gauge"],
      ["mq_pr_restarts_1h_total", "gauge"],
      ["mq_pr_wait_duration_1h_seconds", "histogram"],
      ["mq_pr_test_duration_1h_seconds", "histogram"],
      ["mq_pr_time_in_queue_1h_seconds", "histogram"]
    ]) {
      expect(text).toContain(`# HELP ${name} `)
      expect(text).toContain(`# TYPE ${name} ${kind}`)
    }
    const labels = 'repo="acme/metrics",branch="main",queue_type="main"'
    expect(text).toContain(`mq_pr_conclusions_1h_total{${labels},conclusion="merged"} 1`)
    expect(text).toContain(`mq_pr_conclusions_1h_total{${labels},conclusion="failed"} 1`)
    expect(text).toContain(`mq_pr_conclusions_1h_total{${labels},conclusion="cancelled"} 1`)
    expect(text).toContain(`mq_depth_current{${labels}} 0`)
    expect(text).toContain(`mq_testing_slots_active{${labels}} 0`)
    expect(text).toContain('queue_type="bisection"')
    for (const le of ["60", "300", "600", "900", "1800", "3600", "5400", "7200", "+Inf"]) {
      expect(text).toContain(`mq_pr_time_in_queue_1h_seconds_bucket{${labels},le="${le}"} 3`)
    }
    expect(text).toContain(`mq_pr_time_in_queue_1h_seconds_count{${labels}} 3`)
    expect(text).toContain(`mq_pr_test_duration_1h_seconds_count{${labels}} 2`)
    // #3 started testing before it was cancelled
    expect(text).toContain(`mq_pr_wait_duration_1h_seconds_count{${labels}} 3`)
  })

  test("scoped to one repository; repo without repoHost is a 400, an unknown repository a 404", async () => {
    expect((await scrape("?repo=acme/metrics&repoHost=local")).text).toContain('repo="acme/metrics"')
    expect((await scrape("?repo=acme/metrics")).status).toBe(400)
    expect((await scrape("?repo=acme/nothing&repoHost=local")).status).toBe(404)
    expect((await scrape("?repo=bad&repoHost=local")).status).toBe(400)
    const anonymous = await fetch(`${server.url}/v1/getMergeQueueMetrics`)
    expect(anonymous.status).toBe(401)
  })

  test("a queue whose concurrency is the contract's largest (4294967295) is reported, not a 500", async () => {
    const wide = { repo: repo.repo, targetBranch: "wide" }
    expect((await server.post("createQueue", { ...wide, concurrency: 4294967295 })).status).toBe(200)
    try {
      const { status, text } = await scrape("?repo=acme/metrics&repoHost=local")
      expect(status).toBe(200)
      expect(text).toContain(
        'mq_testing_slots_capacity{repo="acme/metrics",branch="wide",queue_type="main"} 4294967295'
      )
    } finally {
      await server.post("deleteQueue", wide)
    }
  })

  test.if(promtool !== null || process.env.CI === "true")(
    "promtool check metrics finds nothing but the _total gauges",
    async () => {
      expect(promtool).not.toBeNull()
      const { text } = await scrape()
      const check = Bun.spawnSync([promtool ?? "promtool", "check", "metrics"], {
        stdin: new TextEncoder().encode(text),
        stderr: "pipe",
        stdout: "pipe"
      })
      const complaints = `${check.stdout.toString()}${check.stderr.toString()}`
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l !== "")
      for (const line of complaints) {
        expect(line).toMatch(
          /^(mq_pr_conclusions_1h_total|mq_pr_restarts_1h_total) non-counter metrics should not have "_total" suffix$/
        )
      }
    }
  )

  test("GET /metrics is guarded by METRICS_TOKEN and exposes the process's metrics", async () => {
    expect((await fetch(`${server.url}/metrics`)).status).toBe(401)
    expect((await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401)
    const ok = await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer metrics-secret" } })
    expect(ok.status).toBe(200)
    const text = await ok.text()
    expect(text).toContain('greenline_http_requests_total{route="/v1/submitPullRequest",status="200"}')
    expect(text).toContain("greenline_http_request_duration_seconds_bucket")
    expect(text).toContain("greenline_queue_runner_lag_seconds_count")
    expect(text).toContain('greenline_process_memory_bytes{kind="rss"}')
  })

  test("GET /metrics shows the use of PGlite's one connection: held, waited for, then free", async () => {
    const idle = await scrapeOperator(server, "metrics-secret")
    for (const name of POOL_GAUGES) {
      expect(idle).toContain(`# HELP ${name} `)
      expect(idle).toContain(`# TYPE ${name} gauge`)
    }
    expect(poolValue(idle, "greenline_db_pool_connections", "pglite")).toBe(1)
    expect(poolValue(idle, "greenline_db_pool_connections_max", "pglite")).toBe(1)
    const release = await holdConnections(server, 1)
    // the pool's counts move outside any round or event (a statement queued, then served): the scrape is polled
    const busy = await eventually(async () => {
      const text = await scrapeOperator(server, "metrics-secret")
      return (poolValue(text, "greenline_db_pool_waiting", "pglite") ?? 0) >= 1 ? text : undefined
    })
    expect(poolValue(busy, "greenline_db_pool_connections_in_use", "pglite")).toBe(1)
    expect(poolValue(busy, "greenline_db_pool_connections_idle", "pglite")).toBe(0)
    await release()
    // (polled too: the connection goes back to the pool after the statements answered)
    await eventually(async () => {
      const text = await scrapeOperator(server, "metrics-secret")
      const free =
        poolValue(text, "greenline_db_pool_connections_in_use", "pglite") === 0 &&
        poolValue(text, "greenline_db_pool_waiting", "pglite") === 0 &&
        poolValue(text, "greenline_db_pool_connections_idle", "pglite") === 1
      return free ? true : undefined
    })
  })

  test("histogram buckets are cumulative and a duration equal to a bound is counted in its bucket", async () => {
    // one queue of another repository of the same organization, with entries and runs of known durations
    await server.run(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const repoId = crypto.randomUUID()
            const queueId = crypto.randomUUID()
            yield* sql`insert into repositories (id, org_id, host, owner, name)
                       select ${repoId}, id, 'local', 'acme', 'buckets' from organizations where slug = 'acme-org'`
            yield* sql`insert into queues (id, repo_id, branch, config)
                       select ${queueId}, ${repoId}, 'main', config from queues limit 1`
            // waits of 300 s (on a bound) and 301 s, and one first tested more than an hour ago; times in queue of
            // 900 s (on a bound), 1000 s and 7201 s (+Inf only)
            for (const [pr, wait, inQueue] of [
              [1, 300, 900],
              [2, 301, 1000],
              [3, 201, 7201]
            ] as const) {
              yield* sql`insert into entries (id, queue_id, pr_number, state, state_changed_at, submitted_at,
                                              first_tested_at, ended_at, priority, head_sha)
                         values (${crypto.randomUUID()}, ${queueId}, ${pr}, 'merged', now(),
                                 now() - ${inQueue} * interval '1 second',
                                 now() - ${inQueue - wait} * interval '1 second', now(), 100, 'abc')`
            }
            // a bisection run of exactly an hour
            yield* sql`insert into test_runs (id, queue_id, record, status, created_at, ended_at)
                       values ('bucket-run', ${queueId}, '{"queueType":"bisection"}'::jsonb, 'succeeded',
                               now() - interval '3600 seconds', now())`
          })
        )
      )
    )
    const { text } = await scrape("?repo=acme/buckets&repoHost=local")
    const main = 'repo="acme/buckets",branch="main",queue_type="main"'
    const bisection = 'repo="acme/buckets",branch="main",queue_type="bisection"'
    const lines = text.split("\n")
    const buckets = (name: string, labels: string) =>
      ["60", "300", "600", "900", "1800", "3600", "5400", "7200", "+Inf"].map((le) => {
        const prefix = `${name}_bucket{${labels},le="${le}"} `
        const line = lines.find((l) => l.startsWith(prefix))
        return line === undefined ? Number.NaN : Number(line.slice(prefix.length))
      })
    expect(buckets("mq_pr_wait_duration_1h_seconds", main)).toEqual([0, 1, 2, 2, 2, 2, 2, 2, 2])
    expect(buckets("mq_pr_time_in_queue_1h_seconds", main)).toEqual([0, 0, 0, 1, 2, 2, 2, 2, 3])
    expect(text).toContain(`mq_pr_wait_duration_1h_seconds_sum{${main}} 601`)
    expect(buckets("mq_pr_test_duration_1h_seconds", bisection)).toEqual([0, 0, 0, 0, 0, 1, 1, 1, 1])
    expect(buckets("mq_pr_test_duration_1h_seconds", main)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0])
    expect(text).toContain(`mq_pr_conclusions_1h_total{${main},conclusion="merged"} 0`)
  })

  test.if(promtool !== null || process.env.CI === "true")("promtool check metrics accepts GET /metrics", async () => {
    expect(promtool).not.toBeNull()
    const text = await scrapeOperator(server, "metrics-secret")
    const check = Bun.spawnSync([promtool ?? "promtool", "check", "metrics"], {
      stdin: new TextEncoder().encode(text),
      stderr: "pipe",
      stdout: "pipe"
    })
    expect(`${check.stdout.toString()}${check.stderr.toString()}`.trim()).toBe("")
    expect(check.exitCode).toBe(0)
  })
})

describe.if(pgUrl !== undefined)("metrics on PostgreSQL", () => {
  const POOL = 6
  let server: TestServer
  beforeAll(async () => {
    // a pool smaller than the default (DATABASE_POOL_MAX): the gauges follow the configured size
    server = await startTestServer({
      db: "postgres",
      metricsToken: "metrics-secret",
      config: { databasePoolMax: POOL }
    })
  })
  afterAll(async () => {
    await server.close()
  })

  test("GET /metrics shows the pg pool: every connection taken, a statement waiting, then idle again", async () => {
    const first = await scrapeOperator(server, "metrics-secret")
    for (const name of POOL_GAUGES) expect(first).toContain(`# TYPE ${name} gauge`)
    expect(poolValue(first, "greenline_db_pool_connections_max", "postgres")).toBe(POOL)
    const release = await holdConnections(server, POOL)
    // the pool's counts move outside any round or event (statements queued, then served): the scrape is polled
    const full = await eventually(async () => {
      const text = await scrapeOperator(server, "metrics-secret")
      return poolValue(text, "greenline_db_pool_connections_in_use", "postgres") === POOL ? text : undefined
    })
    expect(poolValue(full, "greenline_db_pool_connections", "postgres")).toBe(POOL)
    expect(poolValue(full, "greenline_db_pool_connections_idle", "postgres")).toBe(0)
    expect(poolValue(full, "greenline_db_pool_waiting", "postgres")).toBeGreaterThanOrEqual(1)
    await release()
    // (polled too: the connections go back to the pool after the statements answered)
    const after = await eventually(async () => {
      const text = await scrapeOperator(server, "metrics-secret")
      return poolValue(text, "greenline_db_pool_waiting", "postgres") === 0 &&
        (poolValue(text, "greenline_db_pool_connections_idle", "postgres") ?? 0) >= 1
        ? text
        : undefined
    })
    const open = poolValue(after, "greenline_db_pool_connections", "postgres") ?? 0
    const inUse = poolValue(after, "greenline_db_pool_connections_in_use", "postgres") ?? 0
    const idle = poolValue(after, "greenline_db_pool_connections_idle", "postgres") ?? 0
    expect(inUse).toBeLessThan(POOL)
    expect(inUse + idle).toBe(open)
  })
})
