/**
 * Flaky-test service benchmark: `bun test/bench/flaky.ts` (PostgreSQL at BENCH_DATABASE_URL, default
 * postgres://postgres@127.0.0.1:5432/test; a fresh database is created and dropped).
 *
 * 1. Ingest: a generated ~20 MiB JUnit file through `Flaky.upload` (parse, ids, COPY, classification, commit), five
 *    times (BENCH_INGEST_RUNS), results/s, next to a plain COPY (psql `\copy`, median of 3) of the same rows into a
 *    table with the same indexes, and a plain multi-row insert (unnest) of the same rows. Peak RSS while ingesting,
 *    and of a separate process that ingests the file once.
 * 2. list-failing-tests p50/p95 (first page of 100, the whole service call with stats) over RESULTS results of
 *    50,000 test cases spread over 30 days, generated with generate_series (BENCH_RESULTS, default 10,000,000).
 *
 * Env: BENCH_RESULTS (default 10000000), BENCH_QUERIES (default 50).
 */

import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { layerPostgres } from "../../src/db/Database.ts"
import { Flaky, FlakyLive } from "../../src/flaky/Flaky.ts"
import { flakyMigration, flakyResultsByTime } from "../../src/flaky/migration.ts"
import { BunRuntimeLive } from "../../src/kernel/bunRuntime.ts"
import { GitError, GitHost, type GitHostService } from "../../src/queue/GitHost.ts"
import { Tenancy, TenancyLive } from "../../src/tenancy/Tenancy.ts"
import { generate } from "./junitGen.ts"

const BASE_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const RESULTS = Number(process.env.BENCH_RESULTS ?? 10_000_000)
const QUERIES = Number(process.env.BENCH_QUERIES ?? 50)
const TESTS = 50_000
const DAY = 86_400_000

const log = (s: string) => console.error(`[bench] ${s}`)
const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
const mib = (n: number) => (n / 1024 / 1024).toFixed(1)

// ---- the JUnit file: ~20 MiB, 10% failures with a stack trace, some skipped
const gitStub = Layer.succeed(GitHost, {
  readFile: () => Effect.fail(new GitError({ message: "not on disk" } as never))
} as unknown as GitHostService)

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN

const psql = (url: string, command: string) => {
  const r = spawnSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-qAtc", command], { encoding: "utf8" })
  if (r.status !== 0) throw new Error(`psql failed: ${r.stderr}`)
  return r.stdout.trim()
}

/**
 * The process's own peak RSS (Linux `VmHWM`, of this address space). Not `resourceUsage().maxRSS`: a child started
 * by spawn carries the parent's peak in it (the kernel keeps the larger of the two across exec).
 */
const highWaterRss = (): number => {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))
    return m ? Number(m[1]) * 1024 : 0
  } catch {
    return 0
  }
}

/** A separate process that only ingests one file (for a clean peak RSS): prints JSON. */
const ingestChild = async (dbUrl: string, file: string) => {
  const rt = ManagedRuntime.make(
    FlakyLive.pipe(
      Layer.provideMerge(
        Layer.mergeAll(TenancyLive, makeAppConfig({ publicUrl: "http://bench" }), gitStub, BunRuntimeLive).pipe(
          Layer.provideMerge(layerPostgres(dbUrl))
        )
      )
    )
  )
  const org = await rt.runPromise(Effect.orDie(Effect.flatMap(Tenancy, (t) => t.createOrg("child", true))))
  await rt.runPromise(
    Effect.flatMap(Tenancy, (t) => Effect.orDie(t.findRepo(org, { host: "github.com", owner: "child", name: "rss" })))
  )
  const before = process.memoryUsage.rss()
  let peak = before
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss())
  }, 2)
  const t0 = performance.now()
  const bytes = new Uint8Array(await Bun.file(file).arrayBuffer())
  const summary = await rt.runPromise(
    Effect.flatMap(Flaky, (f) =>
      f.upload(
        org,
        JSON.stringify({
          repo: { host: "github.com", owner: "child", name: "rss" },
          org_url_slug: "child",
          sha: "c".repeat(40),
          branch: "main"
        }),
        [{ filename: "bench.xml", bytes }]
      )
    )
  )
  const ms = performance.now() - t0
  clearInterval(sampler)
  peak = Math.max(peak, process.memoryUsage.rss(), highWaterRss())
  console.log(JSON.stringify({ ms, tests: summary.tests, before, peak }))
  await rt.dispose()
}

const main = async () => {
  const admin = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(BASE_URL) }))
  const dbName = `gl_bench_${crypto.randomUUID().replace(/-/g, "").slice(0, 10)}`
  await admin.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`create database ${dbName}`)))
  const url = new URL(BASE_URL)
  url.pathname = `/${dbName}`
  const dbUrl = url.toString()
  const tmp = mkdtempSync(path.join(tmpdir(), "gl-bench-"))
  const base = Layer.tap(layerPostgres(dbUrl), (ctx) =>
    Effect.orDie(
      Effect.provide(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const rows = yield* sql<{ t: string | null }>`select to_regclass('public.test_cases')::text as t`
          if (!rows[0]?.t) yield* Effect.zipRight(flakyMigration, flakyResultsByTime)
        }),
        ctx
      )
    )
  )
  const layer = FlakyLive.pipe(
    Layer.provideMerge(
      Layer.mergeAll(TenancyLive, makeAppConfig({ publicUrl: "http://bench" }), gitStub, BunRuntimeLive).pipe(
        Layer.provideMerge(base)
      )
    )
  )
  const rt = ManagedRuntime.make(layer)
  const sqlRun = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
    rt.runPromise(
      Effect.orDie(
        Effect.flatMap(SqlClient.SqlClient, f).pipe(
          Effect.tapError((e) => Effect.sync(() => console.error("SQL error:", (e as { cause?: unknown }).cause ?? e)))
        )
      )
    )
  try {
    const org = await rt.runPromise(Effect.orDie(Effect.flatMap(Tenancy, (t) => t.createOrg("bench", true))))
    const out: string[] = []
    out.push(
      `Command: \`bun test/bench/flaky.ts\` (PostgreSQL ${psql(dbUrl, "show server_version")}, ${navigator.hardwareConcurrency} cores, Bun ${Bun.version})`,
      ""
    )

    // ---------------- 1. ingest (BENCH_SKIP_INGEST=1 skips it)
    if (process.env.BENCH_SKIP_INGEST === undefined) {
      const { bytes, testcases } = generate(20 * 1024 * 1024)
      log(`generated ${mib(bytes.length)} MiB, ${fmt(testcases)} testcases`)
      const meta = (sha: string) =>
        JSON.stringify({
          repo: { host: "github.com", owner: "bench", name: "ingest" },
          org_url_slug: "bench",
          sha,
          branch: "main"
        })
      Bun.gc(true)
      const rssBase = process.memoryUsage.rss()
      let rssPeak = rssBase
      const sampler = setInterval(() => {
        rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
      }, 5)
      const ingestRows: string[] = []
      const rates: number[] = []
      let lastUploadId = ""
      let lastRate = 0
      const RUNS = Number(process.env.BENCH_INGEST_RUNS ?? 5)
      for (let run = 0; run < RUNS; run++) {
        const started = performance.now()
        const summary = await rt.runPromise(
          Effect.flatMap(Flaky, (f) =>
            f.upload(org, meta(`${run}`.padStart(40, "a")), [{ filename: "bench.xml", bytes }])
          )
        )
        const ms = performance.now() - started
        rssPeak = Math.max(rssPeak, process.memoryUsage.rss())
        const rows = await sqlRun(
          (sql) =>
            sql<{ n: number }>`select count(*)::int as n from test_results where upload_id = ${summary.upload_id}`
        )
        const n = rows[0]?.n ?? 0
        lastUploadId = summary.upload_id
        lastRate = n / (ms / 1000)
        if (run > 0) rates.push(lastRate)
        ingestRows.push(
          `| Flaky.upload, run ${run + 1}${run === 0 ? " (new test cases)" : " (existing test cases, history)"} | ${fmt(n)} | ${fmt(ms)} | ${fmt(lastRate)} |`
        )
        log(`upload ${run + 1}: ${fmt(n)} results in ${fmt(ms)} ms`)
      }
      clearInterval(sampler)

      // plain COPY of the same rows (CSV exported from the last upload), same table shape and indexes
      const csv = path.join(tmp, "rows.csv")
      await sqlRun((sql) => sql.unsafe(`create table bench_copy (like test_results including all)`))
      psql(dbUrl, `\\copy (select * from test_results where upload_id = '${lastUploadId}') to '${csv}' csv`)
      // three times (the machine is shared: the median is the baseline), into an emptied table each time
      const copyTimes: number[] = []
      for (let k = 0; k < 3; k++) {
        await sqlRun((sql) => sql.unsafe(`truncate bench_copy`))
        const t0 = performance.now()
        psql(dbUrl, `\\copy bench_copy from '${csv}' csv`)
        copyTimes.push(performance.now() - t0)
      }
      const copyMs = [...copyTimes].sort((a, b) => a - b)[1] ?? Number.NaN
      const copied = Number(psql(dbUrl, "select count(*) from bench_copy"))
      const copyRate = copied / (copyMs / 1000)
      let started = performance.now()

      // plain multi-row insert (unnest) of the same rows
      await sqlRun((sql) => sql.unsafe(`truncate bench_copy`))
      const all = await sqlRun(
        (sql) =>
          sql<{
            test_case_id: string
            ord: number
            status: string
            retry: boolean
            failure_key: string | null
            failure_summary: string | null
          }>`
        select test_case_id, ord, status, retry, failure_key, failure_summary from test_results
        where upload_id = ${lastUploadId} order by ord`
      )
      const arr = (values: ReadonlyArray<string | null>) =>
        `{${values.map((v) => (v === null ? "NULL" : `"${v.replace(/[\\"]/g, "\\$&")}"`)).join(",")}}`
      const batches: Array<ReadonlyArray<string>> = []
      for (let i = 0; i < all.length; i += 5000) {
        const part = all.slice(i, i + 5000)
        batches.push([
          `{${part.map((r) => r.test_case_id).join(",")}}`,
          `{${part.map((r) => r.ord).join(",")}}`,
          arr(part.map((r) => r.status)),
          `{${part.map((r) => (r.retry ? "t" : "f")).join(",")}}`,
          arr(part.map((r) => r.failure_key)),
          arr(part.map((r) => r.failure_summary))
        ])
      }
      started = performance.now()
      await sqlRun((sql) =>
        sql.withTransaction(
          Effect.forEach(
            batches,
            ([ids, ords, statuses, retries, keys, sums]) =>
              sql`insert into bench_copy (repo_id, test_case_id, upload_id, run_at, ord, sha, branch, pr_number, status, retry,
                  failure_key, failure_summary, infra)
                select gen_random_uuid(), t.id, gen_random_uuid(), now(), t.ord, 'sha', 'main', null, t.status, t.retry,
                  t.fkey, t.fsum, false
                from unnest(${ids}::uuid[], ${ords}::int[], ${statuses}::text[], ${retries}::bool[], ${keys}::text[],
                  ${sums}::text[]) as t(id, ord, status, retry, fkey, fsum)`,
            { discard: true }
          )
        )
      )
      const insertMs = performance.now() - started
      const insertRate = all.length / (insertMs / 1000)

      const medianRate = [...rates].sort((a, b) => a - b)[Math.floor(rates.length / 2)] ?? lastRate
      out.push("### Ingest (20 MiB JUnit file, PostgreSQL)", "")
      out.push("| what | results | ms | results/s |", "|---|---:|---:|---:|", ...ingestRows)
      out.push(
        `| plain COPY (psql \\copy, CSV) of the same rows, same indexes (median of 3: ${copyTimes.map(fmt).join(", ")} ms) | ${fmt(copied)} | ${fmt(copyMs)} | ${fmt(copyRate)} |`
      )
      out.push(
        `| plain multi-row insert (unnest, 5,000 rows/statement) | ${fmt(all.length)} | ${fmt(insertMs)} | ${fmt(insertRate)} |`
      )
      out.push("")
      out.push(
        `Ingest (median of runs 2–${RUNS}: ${fmt(medianRate)} results/s) vs plain COPY: ${(medianRate / copyRate).toFixed(2)}×; vs plain multi-row insert: ${(medianRate / insertRate).toFixed(2)}×. ` +
          `Input ${mib(bytes.length)} MiB, ${fmt(testcases)} testcases. Peak RSS while ingesting: ${mib(rssPeak)} MiB ` +
          `(process total; ${mib(rssPeak - rssBase)} MiB above the ${mib(rssBase)} MiB before the first upload, which includes the generated file).`,
        ""
      )
      // peak RSS of a fresh process that ingests the same file (read from disk)
      const xmlFile = path.join(tmp, "bench.xml")
      await Bun.write(xmlFile, bytes)
      const child = spawnSync(process.execPath, [import.meta.path, "--ingest-child", dbUrl, xmlFile], {
        encoding: "utf8"
      })
      if (child.status !== 0) throw new Error(`ingest child failed: ${child.stderr}`)
      const c = JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "{}") as {
        ms: number
        tests: number
        before: number
        peak: number
      }
      out.push(
        `Peak RSS of a separate process ingesting the same 20 MiB file (read from disk): **${mib(c.peak)} MiB** ` +
          `(${mib(c.before)} MiB before the upload; ${fmt(c.ms)} ms).`,
        ""
      )
      console.log(out.join("\n"))
      out.length = 0
    }

    // ---------------- 2. list-failing-tests on RESULTS results (BENCH_RESULTS=0 skips it)
    if (RESULTS <= 0) return
    const repoIdRows = await rt.runPromise(
      Effect.orDie(
        Effect.flatMap(Tenancy, (t) => t.addRepo("bench", { host: "github.com", owner: "bench", name: "big" }))
      )
    )
    const repoId = repoIdRows.id
    const uploads = Math.ceil(RESULTS / TESTS)
    const now = Date.now()
    log(`generating ${fmt(RESULTS)} results (${fmt(uploads)} uploads of ${fmt(TESTS)} tests over 30 days)`)
    const genStart = performance.now()
    await sqlRun((sql) =>
      Effect.gen(function* () {
        yield* sql.unsafe(`drop index test_results_time`)
        yield* sql.unsafe(`drop index test_results_case_time`)
        yield* sql.unsafe(`drop index test_results_failures`)
        yield* sql`
          insert into test_cases (repo_id, id, name, classname, file, parent, variant, status_at)
          select ${repoId}::uuid, md5('tc' || i)::uuid, 'suite' || (i / 100) || '/test ' || i, 'pkg.C' || (i % 50),
            'src/s' || (i / 100) || '.ts', 'suite', '', now()
          from generate_series(0, ${TESTS - 1}) i`
        yield* sql`
          insert into test_uploads (id, repo_id, sha, branch, pr_number, job_name, variant, run_at, tests, passed, failed,
            skipped, ignored, infra)
          select md5('up' || u)::uuid, ${repoId}::uuid, md5('sha' || u), case when u % 3 = 0 then 'main' else 'pr' end,
            case when u % 3 = 0 then null else u end, 'job', '',
            to_timestamp(${now / 1000}::float8 - 30 * 86400 + u * (30.0 * 86400 / ${uploads})), ${TESTS}, 0, 0, 0, 0, false
          from generate_series(0, ${uploads - 1}) u`
        // tests i % 20 = 0 fail 20% of their runs, the others 0.2%
        yield* sql`
          insert into test_results (repo_id, test_case_id, upload_id, run_at, ord, sha, branch, pr_number, status, retry,
            failure_key, failure_summary, infra)
          select ${repoId}::uuid, md5('tc' || i)::uuid, md5('up' || u)::uuid,
            to_timestamp(${now / 1000}::float8 - 30 * 86400 + u * (30.0 * 86400 / ${uploads})), i, md5('sha' || u),
            case when u % 3 = 0 then 'main' else 'pr' end, case when u % 3 = 0 then null else u end,
            f.status, false, case when f.status = 'failed' then 'expected <n> to equal <n>' end,
            case when f.status = 'failed' then 'expected 1 to equal 2' end, false
          from (
            -- random() in the select list: evaluated for every row
            select u, i,
              case when random() < (case when i % 20 = 0 then 0.2 else 0.002 end) then 'failed' else 'passed' end
                as status
            from generate_series(0, ${uploads - 1}) u
            cross join generate_series(0, ${TESTS - 1}) i
          ) f
          where f.u::bigint * ${TESTS} + f.i < ${RESULTS}`
        yield* sql.unsafe(`create index test_results_time on test_results using brin (run_at)`)
        yield* sql.unsafe(`create index test_results_case_time on test_results (test_case_id, run_at)`)
        yield* sql.unsafe(
          `create index test_results_failures on test_results (repo_id, run_at, test_case_id) where status = 'failed'`
        )
        yield* sql.unsafe(`vacuum analyze test_results`)
        yield* sql.unsafe(`vacuum analyze test_cases`)
      })
    )
    const genMs = performance.now() - genStart
    const total = Number(psql(dbUrl, `select count(*) from test_results where repo_id = '${repoId}'`))
    log(`generated in ${fmt(genMs)} ms`)

    const scope = { repo: { host: "github.com", owner: "bench", name: "big" }, org_url_slug: "bench" }
    const measure = async (
      label: string,
      startOf: (k: number) => number,
      rangeMs: number,
      pageToken: (k: number) => Promise<string>
    ) => {
      const times: number[] = []
      let rows = 0
      for (let k = 0; k < QUERIES + 3; k++) {
        const start = startOf(k)
        const token = await pageToken(k)
        const t0 = performance.now()
        const res = await rt.runPromise(
          Effect.flatMap(Flaky, (f) =>
            f.listFailingTests(org, {
              ...scope,
              start_time: new Date(start).toISOString(),
              end_time: new Date(start + rangeMs).toISOString(),
              page_query: { page_size: 100, page_token: token }
            })
          )
        )
        const ms = performance.now() - t0
        if (k >= 3) times.push(ms) // 3 warm-up calls
        rows = res.page.total_rows
      }
      times.sort((a, b) => a - b)
      return `| ${label} | ${fmt(rows)} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 95).toFixed(1)} |`
    }
    const last7 = (k: number) => now - 7 * DAY - (k % 5) * 60_000
    const anyWeek = (k: number) => now - 30 * DAY + ((k * 7919) % 23) * DAY
    const first = async () => ""
    const rowsOut = [
      await measure("last 7 days, first page", last7, 7 * DAY, first),
      await measure("a 7-day window anywhere in the 30 days, first page", anyWeek, 7 * DAY, first),
      await measure("last 24 hours, first page", (k) => now - DAY - (k % 5) * 60_000, DAY, first)
    ]
    // a page deep in the list: the token of page 20 of the same query
    const deepStart = now - 7 * DAY
    const deepToken = await rt
      .runPromise(
        Effect.flatMap(Flaky, (f) =>
          f.listFailingTests(org, {
            ...scope,
            start_time: new Date(deepStart).toISOString(),
            end_time: new Date(deepStart + 7 * DAY).toISOString(),
            page_query: { page_size: 100, page_token: "" }
          })
        )
      )
      .then((r) => r.page.last_page_token)
    rowsOut.push(
      await measure(
        "last 7 days, last page",
        () => deepStart,
        7 * DAY,
        async () => deepToken
      )
    )

    out.push(
      `### list-failing-tests (PostgreSQL, ${fmt(total)} results of ${fmt(TESTS)} test cases over 30 days, ${QUERIES} calls each)`,
      ""
    )
    out.push(
      `Data: ${fmt(uploads)} uploads; 1 test in 20 fails 20% of its runs, the others 0.2%; generated with generate_series in ${fmt(genMs / 1000)} s. ` +
        "Time = the whole service call (failing page of 100 with 7-day/24-hour rates, PRs, most common failures).",
      ""
    )
    out.push("| query | failing tests (total_rows) | p50 ms | p95 ms |", "|---|---:|---:|---:|", ...rowsOut, "")
    console.log(out.join("\n"))
  } finally {
    await rt.dispose()
    await admin.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`drop database if exists ${dbName} with (force)`))
    )
    await admin.dispose()
    rmSync(tmp, { recursive: true, force: true })
  }
}

if (process.argv[2] === "--ingest-child") await ingestChild(process.argv[3] ?? "", process.argv[4] ?? "")
else await main()
