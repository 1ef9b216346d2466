/**
 * Detection quality of the flaky-test service: `npm run bench:flaky-quality`.
 *
 * Synthetic histories with a known truth go through the real ingest path: each CI run is a JUnit file uploaded with
 * `Flaky.upload` (parse, store, classify in the upload's transaction) into PGlite (or PostgreSQL at
 * BENCH_DATABASE_URL, in a fresh database), with the service's clock at the run's time. At the end the statuses are
 * read from the service and compared with the truth.
 *
 * Population (per scenario, seeded; #36: realistic): flaky tests whose per-run failure probability comes from a
 * mixture fitted to FlakeFlagger's quantiles (`flakeRate`: median ~0.6%, a tail of tests that fail 5-60% of the
 * time), broken tests (every attempt fails, from the start or from a run on), healthy tests, healthy tests that
 * regress once or twice for 3-12 runs and are fixed, and infrastructure-failure uploads (85-100% of the tests fail).
 * Runs on `main` at the times of `runTimes`: weekdays only, one day in three busy, all within 6.9 days (the
 * detector's 7-day window). Two scenarios: one retry per failed test (a repeated testcase element in the same
 * upload), and no retries. The rule before #36 and the one before #20 are replayed in memory on the same histories.
 * BENCH_SERVICE=0 skips the service (the current rule is replayed in memory too: seconds instead of minutes).
 *
 * Measures:
 * - recall over detectable flaky tests: detectable = with retries, a failure that passed on retry in the window;
 *   without retries, at least 2 separate failure episodes (the least a pattern can show: one episode cannot be told
 *   from a regression and its fix);
 * - precision of `flaky`: truly flaky among the tests called flaky;
 * - broken recall; fixed regressions flagged (`flaky`) at the end; healthy tests flagged (not `healthy`).
 *
 * Env: BENCH_SEED (default 1), BENCH_RUNS (default 150), BENCH_FLAKY (250), BENCH_HEALTHY (300), BENCH_BROKEN (30),
 * BENCH_REGRESSED (100), BENCH_SERVICE (1), BENCH_DATABASE_URL (PostgreSQL instead of PGlite).
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
import * as before36 from "./baseline/classify-before-36.ts"

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const SEED = num("BENCH_SEED", 1)
const RUNS = num("BENCH_RUNS", 150)
const N_FLAKY = num("BENCH_FLAKY", 250)
const N_HEALTHY = num("BENCH_HEALTHY", 300)
const N_BROKEN = num("BENCH_BROKEN", 30)
const N_REGRESSED = num("BENCH_REGRESSED", 100)
const SERVICE = process.env.BENCH_SERVICE !== "0"
const INFRA_SHARE = 0.03
const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
/** the runs span 6.9 days (Monday afternoon to the next Monday noon, the weekend empty): all in the detector's window */
const SPAN_MS = 6.9 * DAY_MS
/** a Monday */
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

/**
 * A flaky test's per-run failure probability, from a mixture fitted to the quantiles of FlakeFlagger's rerun data
 * (Alshammari et al., ICSE 2021: 811 flaky of 22,245 tests; per-test failure rates heavily skewed, median about 0.7%
 * of runs, a long tail to 50% and more). The data set itself is not copied: 80% of the tests from a log-normal body
 * (median 0.4%, σ 1.1 in log space), 20% from a log-uniform tail of tests that fail often (5%–60%).
 */
export const flakeRate = (r: () => number): number =>
  r() < 0.8
    ? Math.min(0.05, Math.max(0.0005, Math.exp(Math.log(0.004) + 1.1 * normal(r))))
    : Math.exp(Math.log(0.05) + r() * Math.log(0.6 / 0.05))

const population = (r: () => number): TestSpec[] => {
  const tests: TestSpec[] = []
  for (let i = 0; i < N_FLAKY; i++)
    tests.push({ name: `flaky_${i}`, truth: "flaky", p: flakeRate(r), from: 0, blocks: [] })
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

/**
 * The runs' times, oldest first, the last at END, all within the 7-day window that ends there: working hours
 * (07:00–21:00 UTC) on weekdays, none at weekends; one weekday in three is busy (2.5 times the runs), and the runs
 * of a day come at random times (bunched and spread).
 */
export const runTimes = (r: () => number, runs: number): number[] => {
  const start = END - SPAN_MS
  const days: Array<{ from: number; to: number; weight: number }> = []
  for (let d = Math.floor(start / DAY_MS) * DAY_MS; d <= END; d += DAY_MS) {
    const weekday = new Date(d).getUTCDay()
    if (weekday === 0 || weekday === 6) continue
    const from = Math.max(start, d + 7 * HOUR_MS)
    const to = Math.min(END, d + 21 * HOUR_MS)
    if (to <= from) continue
    const busy = r() < 1 / 3 ? 2.5 : 1
    days.push({ from, to, weight: (busy * (to - from)) / (14 * HOUR_MS) })
  }
  const total = days.reduce((a, d) => a + d.weight, 0)
  const times: number[] = []
  for (let k = 0; k < runs - 1; k++) {
    const x = r() * total
    let acc = 0
    const day =
      days.find((d) => {
        acc += d.weight
        return x < acc
      }) ?? (days[days.length - 1] as (typeof days)[number])
    times.push(Math.round(day.from + r() * (day.to - day.from - 60_000)))
  }
  times.push(END)
  times.sort((a, b) => a - b)
  // distinct times (the history is ordered by time)
  for (let k = 1; k < times.length; k++)
    if ((times[k] as number) <= (times[k - 1] as number)) times[k] = (times[k - 1] as number) + 1000
  return times
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
  times: ReadonlyArray<number>,
  retries: number
): { readonly status: Map<string, string>; readonly reasons: Map<string, string> } => {
  const history: after.HistoryResult[][] = tests.map(() => [])
  const previous: Array<after.PreviousStatus | null> = tests.map(() => null)
  const stable = new Set(["main"])
  // each test's most recent failure that counts, and where its 7-day window starts in its history
  const lastFailedAt = tests.map(() => Number.NEGATIVE_INFINITY)
  const windowStart = tests.map(() => 0)
  runs.forEach((run, k) => {
    const at = times[k] as number
    const sha = `${retries}${k.toString(16).padStart(39, "0")}`
    tests.forEach((_t, i) => {
      const attempts = run.byTest[i] ?? []
      const h = history[i] as after.HistoryResult[]
      for (const failed of attempts)
        h.push({ at, sha, branch: "main", status: failed ? "failed" : "passed", uploadId: `u${k}`, infra: run.infra })
      if (run.infra) return
      if (attempts.some((f) => f)) lastFailedAt[i] = at
      const p = previous[i] ?? null
      // the service classifies a test only when it failed in the last 7 days or is not healthy
      const since = at - 7 * DAY_MS
      if ((lastFailedAt[i] as number) < since && (p === null || p.value === "healthy")) return
      let start = windowStart[i] as number
      while (start < h.length && (h[start] as after.HistoryResult).at < since) start++
      windowStart[i] = start
      const c = classify({
        now: at,
        results: start === 0 ? h : h.slice(start),
        previous: p,
        stableBranches: stable
      })
      previous[i] = { value: c.value, reason: c.reason, since: c.timestamp, flakySignalAt: c.flakySignalAt }
    })
  })
  return {
    status: new Map(tests.map((t, i) => [t.name, previous[i]?.value ?? "healthy"])),
    reasons: new Map(tests.map((t, i) => [t.name, previous[i]?.reason ?? ""]))
  }
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
  /** recall by per-run failure probability (BANDS) */
  readonly bands: ReadonlyArray<{ readonly of: number; readonly caught: number }>
  readonly seconds: number
}

/** the per-run failure probability bands of the recall breakdown */
const BANDS: ReadonlyArray<readonly [number, number]> = [
  [0, 0.01],
  [0.01, 0.05],
  [0.05, 0.2],
  [0.2, 1.01]
]
const bandLabel = ([lo, hi]: readonly [number, number]) =>
  hi > 1 ? `p ≥ ${lo * 100}%` : lo === 0 ? `p < ${hi * 100}%` : `${lo * 100}% ≤ p < ${hi * 100}%`

/** a test's failed runs as episodes (lengths, oldest first), the last one "open" when it lasts to the last run */
const layout = (i: number, runs: ReadonlyArray<Attempts>): string => {
  const lengths: number[] = []
  let streak = 0
  for (const run of runs) {
    if (run.infra) continue
    const allFailed = (run.byTest[i] ?? []).every((f) => f)
    if (allFailed) streak++
    else if (streak > 0) {
      lengths.push(streak)
      streak = 0
    }
  }
  return `episodes [${lengths.join(",")}${streak > 0 ? `${lengths.length > 0 ? "," : ""}${streak} open` : ""}]`
}

const quantile = (xs: readonly number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number
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
      const times = runTimes(r, RUNS)
      const repo = { host: "github.com", owner: "quality", name: retries > 0 ? "retry" : "noretry" }
      const status = new Map<string, string>()
      const reasons = new Map<string, string>()
      let seconds = Number.NaN
      if (SERVICE) {
        const t0 = performance.now()
        for (let k = 0; k < RUNS; k++) {
          const at = times[k] as number
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
        seconds = (performance.now() - t0) / 1000
        // the statuses at the end, as the service reports them
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
      }
      const evaluate = (label: string, statusOf: ReadonlyMap<string, string>, secs: number): Row => {
        const of = (t: TestSpec) => statusOf.get(t.name) ?? "healthy"
        let detectableN = 0
        let caught = 0
        let flakyAny = 0
        const bands = BANDS.map(() => ({ of: 0, caught: 0 }))
        tests.forEach((t, i) => {
          if (t.truth !== "flaky") return
          if (runs.some((run) => !run.infra && (run.byTest[i] ?? []).some((f) => f))) flakyAny++
          if (!detectable(i, runs, retries)) return
          detectableN++
          const band = bands[BANDS.findIndex(([lo, hi]) => t.p >= lo && t.p < hi)] as { of: number; caught: number }
          band.of++
          if (of(t) === "flaky") {
            caught++
            band.caught++
          }
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
          bands,
          seconds: secs
        }
      }
      const t1 = performance.now()
      const replayed = replay(after.classify, tests, runs, times, retries)
      const replaySeconds = (performance.now() - t1) / 1000
      if (SERVICE) {
        rows.push(evaluate(scenario, status, seconds))
        const disagree = tests.filter(
          (t) => (replayed.status.get(t.name) ?? "healthy") !== (status.get(t.name) ?? "healthy")
        )
        if (disagree.length > 0)
          log(
            `${scenario}: the in-memory replay disagrees with the service on ${disagree.map((t) => t.name).join(", ")}`
          )
      } else {
        for (const [k, v] of replayed.status) status.set(k, v)
        for (const [k, v] of replayed.reasons) reasons.set(k, v)
        rows.push(evaluate(`${scenario} (in memory)`, status, replaySeconds))
      }
      const t2 = performance.now()
      const old36 = replay(before36.classify as Classifier, tests, runs, times, retries)
      rows.push(
        evaluate(`${scenario}, before #36 (baseline, in memory)`, old36.status, (performance.now() - t2) / 1000)
      )
      const t3 = performance.now()
      const old = replay(before.classify as Classifier, tests, runs, times, retries)
      rows.push(evaluate(`${scenario}, before #20 (baseline, in memory)`, old.status, (performance.now() - t3) / 1000))
      const of = (t: TestSpec) => status.get(t.name) ?? "healthy"
      const misses = tests.filter((t, i) => t.truth === "flaky" && detectable(i, runs, retries) && of(t) !== "flaky")
      for (const t of misses) {
        const i = tests.indexOf(t)
        log(
          `${scenario}: missed ${t.name} p=${t.p.toFixed(4)} ${of(t)} ${layout(i, runs)} (${reasons.get(t.name) ?? ""})`
        )
      }
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
    `\nflaky-quality: seed ${SEED}, ${RUNS} runs on main over 6.9 days (weekdays only, one in three busy), ${n} tests per scenario (${N_FLAKY} flaky, ${N_BROKEN} broken, ${N_HEALTHY} healthy, ${N_REGRESSED} regressing and fixed), ~${Math.round(INFRA_SHARE * 100)}% infrastructure-failure uploads, ${dropDb === undefined ? "PGlite" : "PostgreSQL"}\n`
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
  console.log(`\nrecall over detectable flaky tests by per-run failure probability p\n`)
  console.log(`| scenario | ${BANDS.map(bandLabel).join(" | ")} |`)
  console.log(`|---|${BANDS.map(() => "---:").join("|")}|`)
  for (const row of rows)
    console.log(
      `| ${row.scenario} | ${row.bands.map((b) => (b.of === 0 ? "n/a" : `${fmt(b.caught / b.of)} (${b.caught} of ${b.of})`)).join(" | ")} |`
    )
  const rates = population(rng(SEED * 7919))
    .filter((t) => t.truth === "flaky")
    .map((t) => t.p)
  console.log(
    `\nflaky tests' per-run failure probability (drawn): median ${(100 * quantile(rates, 0.5)).toFixed(2)}%, p75 ${(100 * quantile(rates, 0.75)).toFixed(1)}%, p90 ${(100 * quantile(rates, 0.9)).toFixed(1)}%, max ${(100 * quantile(rates, 1)).toFixed(0)}%; ${rates.filter((p) => p >= 0.1).length} of ${rates.length} at 10% or more`
  )
}

await main()
