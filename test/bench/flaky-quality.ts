/**
 * Detection quality of the flaky-test service: `npm run bench:flaky-quality`.
 *
 * Synthetic histories with a known truth go through the real ingest path: each CI run is a JUnit file uploaded with
 * `Flaky.upload` (parse, store, classify in the upload's transaction) into PGlite (or PostgreSQL at
 * BENCH_DATABASE_URL, in a fresh database), with the service's clock at the run's time. At the end the statuses are
 * read from the service and compared with the truth.
 *
 * Population (per scenario, seeded): flaky tests whose per-run failure probability is log-normal around a median of
 * 0.7% (most below 1%, a long tail up to 90%), broken tests (every attempt fails, from the start or from a run on),
 * healthy tests, healthy tests that regress once or twice for 3-12 runs and are fixed, and infrastructure-failure
 * uploads (85-100% of the tests fail). Runs on `main` every ~47 minutes over 6.5 days. Two scenarios: one retry per
 * failed test (a repeated testcase element in the same upload), and no retries.
 *
 * Measures:
 * - recall over detectable flaky tests: detectable = with retries, a failure that passed on retry in the window;
 *   without retries, at least 2 separate failure episodes (the least a pattern can show: one episode cannot be told
 *   from a regression and its fix);
 * - precision of `flaky`: truly flaky among the tests called flaky;
 * - broken recall; fixed regressions flagged (`flaky`) at the end; healthy tests flagged (not `healthy`).
 *
 * Env: BENCH_SEED (default 1), BENCH_RUNS (default 200), BENCH_FLAKY (250), BENCH_HEALTHY (300), BENCH_BROKEN (30),
 * BENCH_REGRESSED (60), BENCH_DATABASE_URL (PostgreSQL instead of PGlite).
 */

import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Clock, Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { layerPgliteMemory, layerPostgres } from "../../src/db/Database.ts"
import * as after from "../../src/flaky/classify.ts"
import { Flaky, FlakyLive } from "../../src/flaky/Flaky.ts"
import { BunRuntimeLive } from "../../src/kernel/bunRuntime.ts"
import type { Database } from "../../src/kernel/Database.ts"
import { GitError, GitHost, type GitHostService } from "../../src/queue/GitHost.ts"
import { Tenancy, TenancyLive } from "../../src/tenancy/Tenancy.ts"
import * as before from "./baseline/classify-before-20.ts"

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const SEED = num("BENCH_SEED", 1)
const RUNS = num("BENCH_RUNS", 200)
const N_FLAKY = num("BENCH_FLAKY", 250)
const N_HEALTHY = num("BENCH_HEALTHY", 300)
const N_BROKEN = num("BENCH_BROKEN", 30)
const N_REGRESSED = num("BENCH_REGRESSED", 60)
const INFRA_SHARE = 0.03
const SPAN_MS = 6.5 * 86_400_000
const END = Date.UTC(2026, 5, 1, 12)

const log = (s: string) => console.error(`[bench] ${s}`)

// ---- a seeded generator (mulberry32) and the draws the population needs
const rng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const normal = (r: () => number) => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r())
const int = (r: () => number, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1))

type Truth = "flaky" | "broken" | "healthy" | "regressed"
interface TestSpec {
  readonly name: string
  readonly truth: Truth
  /** flaky: per-attempt failure probability */
  readonly p: number
  /** broken: first failing run; regressed: [start, end) of each regression */
  readonly from: number
  readonly blocks: ReadonlyArray<readonly [number, number]>
}

const population = (r: () => number): TestSpec[] => {
  const tests: TestSpec[] = []
  for (let i = 0; i < N_FLAKY; i++) {
    // log-normal: median 0.7%, σ 1.6 in log space (the FlakeFlagger median is 0.7%), clipped to [0.05%, 90%]
    const p = Math.min(0.9, Math.max(0.0005, Math.exp(Math.log(0.007) + 1.6 * normal(r))))
    tests.push({ name: `flaky_${i}`, truth: "flaky", p, from: 0, blocks: [] })
  }
  for (let i = 0; i < N_BROKEN; i++) {
    const from = i % 2 === 0 ? 0 : int(r, 0, RUNS - 20)
    tests.push({ name: `broken_${i}`, truth: "broken", p: 1, from, blocks: [] })
  }
  for (let i = 0; i < N_HEALTHY; i++) tests.push({ name: `healthy_${i}`, truth: "healthy", p: 0, from: 0, blocks: [] })
  for (let i = 0; i < N_REGRESSED; i++) {
    // 3-12 runs, fixed at least 15 runs before the end; one in five regresses twice
    const blocks: Array<readonly [number, number]> = []
    const twice = i % 5 === 0
    const first = int(r, 0, twice ? Math.floor((RUNS - 30) / 2) : RUNS - 30)
    const len1 = int(r, 3, 12)
    blocks.push([first, first + len1])
    if (twice) {
      const second = int(r, first + len1 + 10, RUNS - 30)
      blocks.push([second, second + int(r, 3, 12)])
    }
    tests.push({ name: `regressed_${i}`, truth: "regressed", p: 0, from: 0, blocks })
  }
  return tests
}

// ---- JUnit
const testcase = (name: string, failed: boolean) =>
  failed
    ? `<testcase name="${name}" classname="pkg.Suite" file="src/suite.test.ts"><failure message="expected 1, got 2">at line 7</failure></testcase>`
    : `<testcase name="${name}" classname="pkg.Suite" file="src/suite.test.ts"/>`

interface Attempts {
  /** each test's attempts in this run, true = failed */
  readonly byTest: ReadonlyArray<ReadonlyArray<boolean>>
  readonly infra: boolean
}

const simulate = (tests: ReadonlyArray<TestSpec>, retries: number, r: () => number): Attempts[] => {
  const runs: Attempts[] = []
  for (let k = 0; k < RUNS; k++) {
    const infra = r() < INFRA_SHARE
    const infraShare = 0.85 + 0.15 * r()
    const byTest = tests.map((t) => {
      const attempts: boolean[] = []
      for (let a = 0; a <= retries; a++) {
        const fails = infra
          ? r() < infraShare
          : t.truth === "flaky"
            ? r() < t.p
            : t.truth === "broken"
              ? k >= t.from
              : t.blocks.some(([s, e]) => k >= s && k < e)
        attempts.push(fails)
        // a retry only after a failure
        if (!fails) break
      }
      return attempts
    })
    runs.push({ byTest, infra })
  }
  return runs
}

const junitOf = (tests: ReadonlyArray<TestSpec>, run: Attempts): Uint8Array => {
  const parts: string[] = ['<?xml version="1.0"?>\n<testsuites><testsuite name="suite">']
  tests.forEach((t, i) => {
    for (const failed of run.byTest[i] ?? []) parts.push(testcase(t.name, failed))
  })
  parts.push("</testsuite></testsuites>\n")
  return new TextEncoder().encode(parts.join("\n"))
}

/** What the history lets anyone see: a pass on retry (with retries), or 2+ separate failure episodes (without). */
const detectable = (i: number, runs: ReadonlyArray<Attempts>, retries: number): boolean => {
  let episodes = 0
  let previousFailed = false
  for (const run of runs) {
    if (run.infra) continue
    const attempts = run.byTest[i] ?? []
    const anyFailed = attempts.some((f) => f)
    const allFailed = attempts.every((f) => f)
    if (retries > 0 && anyFailed && !allFailed) return true
    if (allFailed && !previousFailed) episodes++
    previousFailed = allFailed
  }
  return retries === 0 && episodes >= 2
}

/**
 * The baseline, in the same run: a classifier replayed in memory over the same histories, as the service would call
 * it (after each upload, for each test in it, with its 7-day history and its previous status; infrastructure-failure
 * uploads excluded). Run with the classifier before #20 (the comparison) and with the current one (a check that the
 * ingest path and the pure replay agree).
 */
type Classifier = (input: after.ClassifyInput) => after.Classification
const replay = (
  classify: Classifier,
  tests: ReadonlyArray<TestSpec>,
  runs: ReadonlyArray<Attempts>,
  retries: number
): Map<string, string> => {
  const history: after.HistoryResult[][] = tests.map(() => [])
  const previous: Array<after.PreviousStatus | null> = tests.map(() => null)
  const stable = new Set(["main"])
  runs.forEach((run, k) => {
    const at = Math.round(END - SPAN_MS + (k * SPAN_MS) / (RUNS - 1))
    const sha = `${retries}${k.toString(16).padStart(39, "0")}`
    tests.forEach((_t, i) => {
      const attempts = run.byTest[i] ?? []
      const h = history[i] as after.HistoryResult[]
      for (const failed of attempts)
        h.push({ at, sha, branch: "main", status: failed ? "failed" : "passed", uploadId: `u${k}`, infra: run.infra })
      if (run.infra) return
      const p = previous[i] ?? null
      // the service classifies a test only when it failed in the last 7 days or is not healthy
      const recent = h.some((r) => r.status === "failed" && !r.infra && r.at >= at - 7 * 86_400_000)
      if (!recent && (p === null || p.value === "healthy")) return
      const c = classify({
        now: at,
        results: h.filter((r) => r.at >= at - 7 * 86_400_000),
        previous: p,
        stableBranches: stable
      })
      previous[i] = { value: c.value, reason: c.reason, since: c.timestamp, flakySignalAt: c.flakySignalAt }
    })
  })
  return new Map(tests.map((t, i) => [t.name, previous[i]?.value ?? "healthy"]))
}

const gitStub = Layer.succeed(GitHost, {
  readFile: () => Effect.fail(new GitError({ message: "not on disk" } as never))
} as unknown as GitHostService)

/** A clock the bench sets to each run's time (the service reads `now` from it). */
let simNow = END
const simClock: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => simNow,
  unsafeCurrentTimeNanos: () => BigInt(simNow) * 1_000_000n,
  currentTimeMillis: Effect.sync(() => simNow),
  currentTimeNanos: Effect.sync(() => BigInt(simNow) * 1_000_000n),
  sleep: () => Effect.void
}

interface Row {
  readonly scenario: string
  readonly recall: number
  readonly detectable: number
  readonly precision: number
  readonly calledFlaky: number
  readonly brokenRecall: number
  readonly regressionsFlagged: number
  readonly regressions: number
  readonly healthyFlagged: number
  readonly healthy: number
  readonly flakyAny: number
  readonly seconds: number
}

const fmt = (x: number) => (Number.isNaN(x) ? "n/a" : x.toFixed(3))
const share = (n: number, of: number) => `${n} of ${of} (${of === 0 ? "0" : ((100 * n) / of).toFixed(1)}%)`

const main = async () => {
  let db: Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error> = layerPgliteMemory()
  let dropDb: (() => Promise<void>) | undefined
  const base = process.env.BENCH_DATABASE_URL
  if (base !== undefined && base !== "") {
    const admin = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(base) }))
    const name = `gl_quality_${crypto.randomUUID().replace(/-/g, "").slice(0, 10)}`
    await admin.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`create database ${name}`)))
    const url = new URL(base)
    url.pathname = `/${name}`
    db = layerPostgres(url.toString())
    dropDb = async () => {
      await admin.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`drop database if exists ${name} with (force)`))
      )
      await admin.dispose()
    }
  }
  const rt = ManagedRuntime.make(
    FlakyLive.pipe(
      Layer.provideMerge(
        Layer.mergeAll(TenancyLive, makeAppConfig({ publicUrl: "http://bench" }), gitStub, BunRuntimeLive).pipe(
          Layer.provideMerge(db)
        )
      )
    )
  )
  const org = await rt.runPromise(Effect.orDie(Effect.flatMap(Tenancy, (t) => t.createOrg("quality", true))))
  const rows: Row[] = []
  try {
    for (const [scenario, retries] of [
      ["one retry", 1],
      ["no retries", 0]
    ] as const) {
      const r = rng(SEED * 7919 + retries)
      const tests = population(r)
      const runs = simulate(tests, retries, r)
      const repo = { host: "github.com", owner: "quality", name: retries > 0 ? "retry" : "noretry" }
      const t0 = performance.now()
      for (let k = 0; k < RUNS; k++) {
        const at = Math.round(END - SPAN_MS + (k * SPAN_MS) / (RUNS - 1))
        simNow = at
        const metadata = JSON.stringify({
          repo,
          org_url_slug: "quality",
          sha: `${retries}${k.toString(16).padStart(39, "0")}`,
          branch: "main",
          run_at: new Date(at).toISOString(),
          job_name: "unit"
        })
        const bytes = junitOf(tests, runs[k] as Attempts)
        await rt.runPromise(
          Effect.flatMap(Flaky, (f) => f.upload(org, metadata, [{ filename: `run-${k}.xml`, bytes }])).pipe(
            Effect.withClock(simClock)
          )
        )
        if (k % 50 === 49) log(`${scenario}: ${k + 1} of ${RUNS} runs`)
      }
      const seconds = (performance.now() - t0) / 1000
      // the statuses at the end, as the service reports them
      const status = new Map<string, string>()
      const reasons = new Map<string, string>()
      for (const value of ["flaky", "broken"] as const) {
        let token = ""
        for (;;) {
          const page = await rt.runPromise(
            Effect.flatMap(Flaky, (f) =>
              f.listUnhealthyTests(org, {
                repo,
                org_url_slug: "quality",
                status: value,
                page_query: { page_size: 100, page_token: token }
              })
            ).pipe(Effect.withClock(simClock))
          )
          for (const t of page.tests) {
            status.set(t.name, t.status.value)
            reasons.set(t.name, t.status.reason)
          }
          token = page.page.next_page_token
          if (token === "") break
        }
      }
      const evaluate = (label: string, statusOf: ReadonlyMap<string, string>, secs: number): Row => {
        const of = (t: TestSpec) => statusOf.get(t.name) ?? "healthy"
        let detectableN = 0
        let caught = 0
        let flakyAny = 0
        tests.forEach((t, i) => {
          if (t.truth !== "flaky") return
          if (runs.some((run) => !run.infra && (run.byTest[i] ?? []).some((f) => f))) flakyAny++
          if (!detectable(i, runs, retries)) return
          detectableN++
          if (of(t) === "flaky") caught++
        })
        const called = tests.filter((t) => of(t) === "flaky")
        const broken = tests.filter((t) => t.truth === "broken")
        const regressed = tests.filter((t) => t.truth === "regressed")
        const healthy = tests.filter((t) => t.truth === "healthy")
        return {
          scenario: label,
          recall: caught / detectableN,
          detectable: detectableN,
          precision: called.filter((t) => t.truth === "flaky").length / called.length,
          calledFlaky: called.length,
          brokenRecall: broken.filter((t) => of(t) === "broken").length / broken.length,
          regressionsFlagged: regressed.filter((t) => of(t) === "flaky").length,
          regressions: regressed.length,
          healthyFlagged: healthy.filter((t) => of(t) !== "healthy").length,
          healthy: healthy.length,
          flakyAny,
          seconds: secs
        }
      }
      const of = (t: TestSpec) => status.get(t.name) ?? "healthy"
      rows.push(evaluate(scenario, status, seconds))
      const replayed = replay(after.classify, tests, runs, retries)
      const disagree = tests.filter((t) => (replayed.get(t.name) ?? "healthy") !== of(t))
      if (disagree.length > 0)
        log(`${scenario}: the in-memory replay disagrees with the service on ${disagree.map((t) => t.name).join(", ")}`)
      const t1 = performance.now()
      const old = replay(before.classify as Classifier, tests, runs, retries)
      rows.push(evaluate(`${scenario}, before #20 (baseline, in memory)`, old, (performance.now() - t1) / 1000))
      const misses = tests.filter((t, i) => t.truth === "flaky" && detectable(i, runs, retries) && of(t) !== "flaky")
      if (misses.length > 0)
        log(
          `${scenario}: missed ${misses
            .slice(0, 12)
            .map((t) => `${t.name} p=${t.p.toFixed(4)} (${of(t)})`)
            .join(", ")}`
        )
      const wrong = tests.filter((t) => of(t) === "flaky" && t.truth !== "flaky")
      if (wrong.length > 0)
        log(
          `${scenario}: wrongly flaky ${wrong
            .slice(0, 6)
            .map((t) => `${t.name} (${reasons.get(t.name)})`)
            .join(", ")}`
        )
    }
  } finally {
    await rt.dispose()
    await dropDb?.()
  }

  const n = N_FLAKY + N_BROKEN + N_HEALTHY + N_REGRESSED
  console.log(
    `\nflaky-quality: seed ${SEED}, ${RUNS} runs on main over 6.5 days, ${n} tests per scenario (${N_FLAKY} flaky, ${N_BROKEN} broken, ${N_HEALTHY} healthy, ${N_REGRESSED} regressing and fixed), ~${Math.round(INFRA_SHARE * 100)}% infrastructure-failure uploads, ${dropDb === undefined ? "PGlite" : "PostgreSQL"}\n`
  )
  console.log(
    "| scenario | recall over detectable flaky | precision of `flaky` | broken recall | fixed regressions flagged | healthy flagged | flaky tests that failed at all | s |"
  )
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|")
  for (const row of rows) {
    console.log(
      `| ${row.scenario} | ${fmt(row.recall)} (of ${row.detectable}) | ${fmt(row.precision)} (of ${row.calledFlaky}) | ${fmt(
        row.brokenRecall
      )} | ${share(row.regressionsFlagged, row.regressions)} | ${share(row.healthyFlagged, row.healthy)} | ${row.flakyAny} | ${row.seconds.toFixed(0)} |`
    )
  }
}

await main()
