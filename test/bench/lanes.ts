/**
 * bench:lanes — parallel mode with very large impacted-target lists. The same 12 PRs go through one queue in
 * parallel mode (concurrency 12, CI answering at once) twice in one run on PostgreSQL: with 3 targets per PR (the
 * baseline) and with BENCH_TARGETS (default 200,000) per PR. PR k touches its own package; every third PR also
 * touches one target of the PR before it, so lanes of two form. Prints setImpactedTargets latency, the time until
 * every PR merged, the planner step time and the size of the stored queue state, and the ratio to the baseline.
 *   bun test/bench/lanes.ts   (BENCH_TARGETS=200000, BENCH_DATABASE_URL default postgres://postgres@127.0.0.1:5432/test)
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { Metrics } from "../../src/metrics/Metrics.ts"
import { startServer } from "../../src/server.ts"
import { createTestRepo } from "../support/git.ts"
import { freshBenchDatabase, instantCi } from "./engineKit.ts"

const PRS = 12
const LARGE = Number(process.env.BENCH_TARGETS ?? 200_000)
const PG = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"

const percentile = (xs: ReadonlyArray<number>, q: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN
}

const targetsOf = (k: number, n: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < n; i++) out.push(`//services/pkg${k}/module${i % 997}:target_${i}`)
  if (k % 3 === 0) out.push(`//services/pkg${k - 1}/module0:target_0`)
  return out
}

const run = async (perPr: number) => {
  const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: `lanes-${perPr}` } })
  const base = repo.branchSha("main") as string
  const heads: Array<string> = []
  for (let n = 1; n <= PRS; n++) {
    const sha = repo.commit(base, { files: { [`pkg${n}/file.txt`]: `${n}\n` }, message: `PR ${n}` })
    Bun.spawnSync(["git", "--git-dir", repo.gitDir, "update-ref", `refs/pull/${n}/head`, sha])
    heads.push(sha)
  }
  const db = await freshBenchDatabase(PG, `gl_bench_lanes_${process.pid}_${perPr}`)
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-lanes-"))
  const server = await startServer(
    makeAppConfig({
      port: 0,
      host: "127.0.0.1",
      dataDir,
      gitRoot: repo.root,
      databaseUrl: Option.some(Redacted.make(db.url)),
      bootstrapToken: Option.some(Redacted.make(TOKEN)),
      rateLimitPerSecond: 1_000_000,
      gitPollMs: 1000,
      logLevel: "error"
    })
  )
  const post = async (op: string, body: unknown) => {
    const res = await fetch(`${server.url}/v1/${op}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-token": TOKEN },
      body: JSON.stringify(body)
    })
    const json = (await res.json()) as Record<string, unknown>
    if (!res.ok) throw new Error(`${op}: ${res.status} ${JSON.stringify(json)}`)
    return json
  }
  const key = { repo: repo.repo, targetBranch: "main" }
  await post("createQueue", { ...key, concurrency: PRS, mode: "parallel" })
  await post("updateQueue", { ...key, requiredStatuses: ["ci"] })

  const stopCi = instantCi(server)

  const bodies = Array.from({ length: PRS }, (_, k) => targetsOf(k + 1, perPr))
  const started = performance.now()
  const latencies: Array<number> = []
  for (let n = 1; n <= PRS; n++) {
    await post("submitPullRequest", { ...key, pr: { number: n } })
    const head = heads[n - 1]
    const t0 = performance.now()
    await post("setImpactedTargets", { ...key, pr: { number: n, sha: head }, impactedTargets: bodies[n - 1] })
    latencies.push(performance.now() - t0)
  }
  let stateBytes = 0
  for (;;) {
    const sizes = await server.run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ bytes: number }>`select length(state::text) as bytes from queue_runtime`
      )
    )
    stateBytes = Math.max(stateBytes, ...sizes.map((s) => Number(s.bytes)))
    const states = await Promise.all(
      Array.from({ length: PRS }, (_, k) => post("getSubmittedPullRequest", { ...key, pr: { number: k + 1 } }))
    )
    if (states.every((s) => s.state === "merged")) break
    const bad = states.find((s) => s.state === "failed" || s.state === "cancelled")
    if (bad !== undefined) throw new Error(`a PR ended ${String(bad.state)}`)
    await Bun.sleep(50)
  }
  const seconds = (performance.now() - started) / 1000
  await stopCi()
  const steps = await server.run(Effect.map(Metrics, (m) => m.stepPercentiles([0.5, 0.99])))
  await server.stop()
  await db.drop()
  repo.cleanup()
  fs.rmSync(dataDir, { recursive: true, force: true })
  return {
    perPr,
    bodyMiB: JSON.stringify(bodies[1]).length / 2 ** 20,
    setP50: percentile(latencies, 0.5),
    setMax: Math.max(...latencies),
    seconds,
    stepP50: (steps.values[0] ?? Number.NaN) * 1e6,
    stepP99: (steps.values[1] ?? Number.NaN) * 1e6,
    stateBytes
  }
}

const small = await run(3)
const large = await run(LARGE)
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`
const lines = [
  `bench:lanes — ${PRS} PRs in parallel mode, concurrency ${PRS}, CI answering at once, PostgreSQL, ${os.cpus().length} cores`,
  "",
  "| targets per PR | body MiB | setImpactedTargets p50 ms | max ms | all merged s | step p50 µs | step p99 µs | state bytes |",
  "|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...[small, large].map(
    (r) =>
      `| ${r.perPr} | ${r.bodyMiB.toFixed(2)} | ${r.setP50.toFixed(1)} | ${r.setMax.toFixed(1)} | ${r.seconds.toFixed(2)} | ${r.stepP50.toFixed(0)} | ${r.stepP99.toFixed(0)} | ${r.stateBytes} |`
  ),
  `| ratio | | ${ratio(large.setP50, small.setP50)} | | ${ratio(large.seconds, small.seconds)} | ${ratio(large.stepP50, small.stepP50)} | ${ratio(large.stepP99, small.stepP99)} | ${ratio(large.stateBytes, small.stateBytes)} |`
]
process.stdout.write(`${lines.join("\n")}\n`)
