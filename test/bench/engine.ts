/**
 * bench:engine — 1,000 PRs through one queue at concurrency 8 with CI answering at once, on PostgreSQL and on
 * PGlite, through the real engine (runner, Git provider, storage). Prints PRs merged per second and the planner
 * step time p50/p99 (wall time of `step` inside the runner).
 *   bun test/bench/engine.ts   (BENCH_PRS=1000, BENCH_DATABASE_URL default postgres://postgres@127.0.0.1:5432/test)
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Option, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { Metrics } from "../../src/metrics/Metrics.ts"
import { startServer } from "../../src/server.ts"
import { createTestRepo } from "../support/git.ts"
import { freshBenchDatabase, instantCi } from "./engineKit.ts"

const PRS = Number(process.env.BENCH_PRS ?? 1000)
const PG = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"

const run = async (kind: "postgres" | "pglite") => {
  const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: `engine-${kind}` } })
  // one file per PR, so that every PR merges cleanly on top of the others
  const base = repo.branchSha("main") as string
  const lines: Array<string> = []
  for (let n = 1; n <= PRS; n++) {
    const sha = repo.commit(base, { files: { [`f/${n}.txt`]: `${n}\n` }, message: `PR ${n}` })
    lines.push(`create refs/pull/${n}/head ${sha}`)
  }
  Bun.spawnSync(["git", "--git-dir", repo.gitDir, "update-ref", "--stdin"], {
    stdin: new TextEncoder().encode(`${lines.join("\n")}\n`)
  })

  const db = kind === "postgres" ? await freshBenchDatabase(PG, `gl_bench_engine_${process.pid}`) : undefined
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-engine-"))
  const server = await startServer(
    makeAppConfig({
      port: 0,
      host: "127.0.0.1",
      dataDir: kind === "pglite" ? ":memory:" : dataDir,
      gitRoot: repo.root,
      databaseUrl: db ? Option.some(Redacted.make(db.url)) : Option.none(),
      bootstrapToken: Option.some(Redacted.make(TOKEN)),
      rateLimitPerSecond: 1_000_000,
      gitPollMs: 1000,
      logLevel: "error"
    })
  )
  const post = (op: string, body: unknown) =>
    fetch(`${server.url}/v1/${op}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-token": TOKEN },
      body: JSON.stringify(body)
    }).then((r) => r.json())
  const key = { repo: repo.repo, targetBranch: "main" }
  await post("createQueue", { ...key, concurrency: 8 })
  await post("updateQueue", { ...key, requiredStatuses: ["ci"] })

  const stopCi = instantCi(server)

  const started = performance.now()
  for (let n = 1; n <= PRS; n++) await post("submitPullRequest", { ...key, pr: { number: n } })
  const submitted = performance.now()
  for (;;) {
    const last = (await post("getSubmittedPullRequest", { ...key, pr: { number: PRS } })) as { state?: string }
    if (last.state === "merged") break
    if (last.state === "failed" || last.state === "cancelled") throw new Error(`#${PRS} ${last.state}`)
    await Bun.sleep(200)
  }
  const seconds = (performance.now() - started) / 1000
  await stopCi()
  const merged =
    Number(
      Bun.spawnSync(["git", "--git-dir", repo.gitDir, "rev-list", "--count", "--first-parent", "main"])
        .stdout.toString()
        .trim()
    ) - 1
  const steps = await server.run(Effect.map(Metrics, (m) => m.stepPercentiles([0.5, 0.99])))
  await server.stop()
  await db?.drop()
  repo.cleanup()
  fs.rmSync(dataDir, { recursive: true, force: true })
  return {
    kind,
    merged,
    seconds,
    submitSeconds: (submitted - started) / 1000,
    p50: (steps.values[0] ?? Number.NaN) * 1e6,
    p99: (steps.values[1] ?? Number.NaN) * 1e6,
    steps: steps.count
  }
}

const results = [await run("postgres"), await run("pglite")]
const lines = [
  `bench:engine — ${PRS} PRs, one queue, concurrency 8, CI answering at once, ${os.cpus().length} cores`,
  "",
  "| database | PRs merged | seconds | merged PRs/s | planner steps | step p50 µs | step p99 µs |",
  "|---|---:|---:|---:|---:|---:|---:|",
  ...results.map(
    (r) =>
      `| ${r.kind} | ${r.merged} | ${r.seconds.toFixed(1)} | ${(r.merged / r.seconds).toFixed(1)} | ${r.steps} (submit ${r.submitSeconds.toFixed(1)} s) | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} |`
  )
]
process.stdout.write(`${lines.join("\n")}\n`)
