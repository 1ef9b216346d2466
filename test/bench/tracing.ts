/**
 * bench:tracing — what tracing costs: the same server on the same PostgreSQL database without
 * OTEL_EXPORTER_OTLP_ENDPOINT and with it (exporting to a small OTLP/HTTP receiver in this process), in alternating
 * rounds of wrk on loopback against two read endpoints. Prints requests per second, p50 and p99 per setting, the
 * ratio, and how many spans reached the receiver.
 *   bun test/bench/tracing.ts     (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=32 BENCH_ROUNDS=3 bun test/bench/tracing.ts
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import Pg from "pg"
import { createTestRepo } from "../support/git.ts"
import { spawnServer } from "../support/process.ts"
import { CONNECTIONS, cpuMs, PG, parseLatency, postScript, requireWrk, TOKEN, tmp } from "./apiKit.ts"

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)

requireWrk()

interface Result {
  /** CPU time of the server process per request served (user + system), ms. */
  readonly cpuMs: number
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly requests: number
}

/** One wrk run, without blocking this process: the OTLP receiver below must answer the server meanwhile. */
const wrk = async (url: string, body: string, pid: number): Promise<Result> => {
  const cpuBefore = cpuMs(pid)
  const script = path.join(tmp, `wrk-${Math.random().toString(36).slice(2)}.lua`)
  fs.writeFileSync(script, postScript(body))
  const r = Bun.spawn(["wrk", "-t2", `-c${CONNECTIONS}`, `-d${SECONDS}s`, "--latency", "-s", script, url], {
    stdout: "pipe",
    stderr: "ignore"
  })
  const text = await new Response(r.stdout).text()
  await r.exited
  const cpu = cpuMs(pid) - cpuBefore
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(text)?.[1] ?? 0)
  if (non2xx > 0) throw new Error(`${url}: ${non2xx} answers were not 2xx`)
  const requests = Number(/(\d+) requests in/.exec(text)?.[1] ?? 0)
  return {
    rps: Number(/Requests\/sec:\s+([0-9.]+)/.exec(text)?.[1] ?? Number.NaN),
    p50: parseLatency(text, "50"),
    p99: parseLatency(text, "99"),
    requests,
    cpuMs: cpu / requests
  }
}

// the OTLP/HTTP receiver: counts the spans it is sent (each has one "spanId")
let spans = 0
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const text = await request.text()
    for (let i = text.indexOf('"spanId"'); i !== -1; i = text.indexOf('"spanId"', i + 8)) spans++
    return Response.json({})
  }
})

const name = `gl_bench_tracing_${process.pid}`
const admin = new Pg.Client({ connectionString: PG })
await admin.connect()
await admin.query(`drop database if exists ${name}`)
await admin.query(`create database ${name}`)
const url = new URL(PG)
url.pathname = `/${name}`

const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: "tracing" } })
repo.createPr(1, { files: { "one.txt": "1\n" }, title: "Bench PR" })
const env = {
  DATABASE_URL: url.toString(),
  GIT_ROOT: repo.root,
  RATE_LIMIT_PER_SECOND: "10000000",
  GIT_POLL_MS: "60000"
}
const key = { repo: repo.repo, targetBranch: "main" }

const settings = {
  off: {},
  // a queue large enough that the batch processor drops nothing: the cost of exporting every span is measured
  on: {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}`,
    OTEL_SERVICE_NAME: "greenline-bench",
    OTEL_BSP_MAX_QUEUE_SIZE: "100000"
  }
} as const
const results: Record<string, Record<keyof typeof settings, Array<Result>>> = {
  getSubmittedPullRequest: { off: [], on: [] },
  getQueue: { off: [], on: [] }
}
let spansPerRequest = Number.NaN

try {
  const first = await spawnServer(env, TOKEN)
  await first.post("createQueue", key)
  await first.post("updateQueue", { ...key, requiredStatuses: ["ci"], state: "paused" })
  await first.post("submitPullRequest", { ...key, pr: { number: 1 } })
  await first.kill("SIGTERM")

  for (let round = 0; round < ROUNDS; round++) {
    for (const setting of round % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const)) {
      const server = await spawnServer({ ...env, ...settings[setting] }, TOKEN)
      const before = spans
      let served = 0
      for (const [op, body] of [
        ["getSubmittedPullRequest", JSON.stringify({ ...key, pr: { number: 1 } })],
        ["getQueue", JSON.stringify(key)]
      ] as const) {
        const r = await wrk(`${server.url}/v1/${op}`, body, server.pid)
        results[op]?.[setting].push(r)
        served += r.requests
      }
      // SIGTERM: the server flushes its last batch of spans before it exits
      await server.kill("SIGTERM")
      if (setting === "on") spansPerRequest = (spans - before) / served
    }
  }
} finally {
  receiver.stop(true)
  await admin.query(`drop database if exists ${name} with (force)`)
  await admin.end()
  repo.cleanup()
  fs.rmSync(tmp, { recursive: true, force: true })
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1
    ? (s[(s.length - 1) / 2] ?? Number.NaN)
    : ((s[s.length / 2 - 1] ?? 0) + (s[s.length / 2] ?? 0)) / 2
}
const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a")
const lines = [
  "| operation | tracing | req/s | p50 ms | p99 ms | server CPU ms per request | req/s vs off | CPU vs off |",
  "|---|---|---:|---:|---:|---:|---:|---:|"
]
for (const [op, r] of Object.entries(results)) {
  const off = median(r.off.map((x) => x.rps))
  const offCpu = median(r.off.map((x) => x.cpuMs))
  for (const setting of ["off", "on"] as const) {
    const rps = median(r[setting].map((x) => x.rps))
    const cpu = median(r[setting].map((x) => x.cpuMs))
    lines.push(
      `| ${op} | ${setting} | ${f(rps, 0)} | ${f(median(r[setting].map((x) => x.p50)), 2)} | ${f(median(r[setting].map((x) => x.p99)), 2)} | ${f(cpu, 3)} | ${f(rps / off, 2)}× | ${f(cpu / offCpu, 2)}× |`
    )
  }
}
process.stdout.write(
  `\nbench:tracing — PostgreSQL, wrk -t2 -c${CONNECTIONS} -d${SECONDS}s on loopback, medians of ${ROUNDS} alternating rounds, ` +
    `${os.cpus().length} cores; with tracing on, ${f(spansPerRequest, 2)} spans reached the receiver per request served\n\n` +
    `${lines.join("\n")}\n`
)
