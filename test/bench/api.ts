/**
 * bench:api — requests per second and latency of Greenline's HTTP API against a bare Bun.serve baseline doing the
 * same token check and SQL, in the same run, on PostgreSQL and on PGlite. Load comes from wrk (Debian's `wrk`
 * package) in its own process, on loopback. Every server is warmed up first (BENCH_WARMUP seconds of the same
 * requests): the JIT compiles a path only after it has run a while, and a service runs warm.
 *   bun test/bench/api.ts            (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=32 bun test/bench/api.ts
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { spawnServer } from "../support/process.ts"
import {
  benchQueue,
  CONNECTIONS,
  f,
  type Kind,
  postScript,
  type Result,
  requireWrk,
  TOKEN,
  tmp,
  wrk
} from "./apiKit.ts"

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const WARMUP = Number(process.env.BENCH_WARMUP ?? 4)
const SUBMIT_PRS = Number(process.env.BENCH_SUBMIT_PRS ?? 15000)
const ROOT = path.join(import.meta.dir, "..", "..")

requireWrk()

const spawnBaseline = async (target: string) => {
  const child = Bun.spawn([process.execPath, "test/bench/baseline-server.ts", target], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "inherit"
  })
  const reader = child.stdout.getReader()
  let text = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) throw new Error("baseline exited")
    text += new TextDecoder().decode(value)
    const m = /baseline listening (\d+)/.exec(text)
    if (m?.[1]) {
      // PGlite's data belongs to one process: the server opens it again only once the baseline has exited
      const kill = async () => {
        child.kill()
        await child.exited
      }
      return { url: `http://127.0.0.1:${m[1]}`, kill }
    }
  }
}

const rows: Array<string> = []
const row = (...cells: Array<string | number>) => rows.push(`| ${cells.join(" | ")} |`)

/** The reads, each measured after a warm-up of the same requests. */
const measure = (url: string, reads: ReadonlyArray<readonly [string, string]>) =>
  reads.map(([op, b]) => {
    if (WARMUP > 0) wrk(`${url}/v1/${op}`, postScript(b), WARMUP)
    return wrk(`${url}/v1/${op}`, postScript(b), SECONDS)
  })

const benchDatabase = async (kind: Kind) => {
  const q = await benchQueue(kind, { name: `api-${kind}`, extraPrs: SUBMIT_PRS })
  let server = q.server
  const reads = [
    ["getSubmittedPullRequest", q.body(1)],
    ["getQueue", q.body()]
  ] as const
  const ours = measure(server.url, reads)
  // the same reads at half the rate each reached: the latency when the service is not saturated
  const half = reads.map(([op, b], k) => wrk(`${server.url}/v1/${op}`, postScript(b), SECONDS, (ours[k]?.rps ?? 0) / 2))
  // PGlite belongs to one process: the baseline opens the same data only after the server stopped
  if (kind === "pglite") await server.kill("SIGTERM")
  const baseline = await spawnBaseline(q.env.DATABASE_URL ?? q.database)
  const base = measure(baseline.url, reads)
  await baseline.kill()
  if (kind === "pglite") server = await spawnServer(q.env, TOKEN)
  reads.forEach(([op], k) => {
    report(kind, op, ours[k] as Result, base[k] as Result)
  })
  reads.forEach(([op], k) => {
    const r = half[k] as Result
    row(kind, `${op} at half that rate`, f(r.rps, 0), f(r.p50, 2), f(r.p99, 2), "—", "latency when not saturated")
  })

  // submissions: each request a new PR number, until the prepared refs run out
  const submitScript = `
local counter = 0
local threads = {}
function setup(thread) thread:set("id", #threads) table.insert(threads, thread) end
function init(args) counter = 0 end
request = function()
  counter = counter + 1
  local n = 11 + id + counter * 2
  if n > ${SUBMIT_PRS + 10} then n = 11 end
  local body = '{"repo":{"host":"local","owner":"bench","name":"api-${kind}"},"targetBranch":"main","pr":{"number":' .. n .. '}}'
  return wrk.format("POST", "/v1/submitPullRequest", {["content-type"] = "application/json", ["x-api-token"] = "${TOKEN}"}, body)
end`
  const submit = wrk(`${server.url}/v1/submitPullRequest`, submitScript, SECONDS)
  const queue = (await server.post("getQueue", q.key)).body as { enqueuedPullRequests?: ReadonlyArray<unknown> }
  row(
    kind,
    "submitPullRequest",
    f(submit.rps, 0),
    f(submit.p50, 2),
    f(submit.p99, 2),
    "—",
    `${submit.non2xx} errors; ${queue.enqueuedPullRequests?.length ?? "?"} entries in the queue after`
  )
  await server.kill("SIGTERM")
  await q.cleanup()
}
const report = (kind: string, op: string, ours: Result, base: Result) => {
  row(
    kind,
    op,
    f(ours.rps, 0),
    f(ours.p50, 2),
    f(ours.p99, 2),
    `${f(base.rps, 0)} (${f(ours.rps / base.rps, 2)}×)`,
    `baseline p99 ${f(base.p99, 2)} ms`
  )
}

rows.push("| database | operation | Greenline req/s | p50 ms | p99 ms | bare Bun baseline req/s (ratio) | notes |")
rows.push("|---|---|---:|---:|---:|---:|---|")
for (const kind of ["postgres", "pglite"] as const) await benchDatabase(kind)
process.stdout.write(
  `\nbench:api — wrk -t2 -c${CONNECTIONS} -d${SECONDS}s on loopback, ${os.cpus().length} cores\n\n${rows.join("\n")}\n`
)
fs.rmSync(tmp, { recursive: true, force: true })
