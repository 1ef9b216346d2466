/**
 * bench:api — requests per second and latency of Greenline's HTTP API against a bare Bun.serve baseline doing the
 * same token check and SQL, in the same run, on PostgreSQL and on PGlite. Load comes from wrk (Debian's `wrk`
 * package) in its own process, on loopback.
 *   bun test/bench/api.ts            (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=32 bun test/bench/api.ts
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SQL } from "bun"
import { createTestRepo } from "../support/git.ts"
import { spawnServer } from "../support/process.ts"

const TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
const PG = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const SUBMIT_PRS = Number(process.env.BENCH_SUBMIT_PRS ?? 15000)
const ROOT = path.join(import.meta.dir, "..", "..")

if (Bun.which("wrk") === null) {
  process.stderr.write("bench:api needs wrk (apt-get install wrk)\n")
  process.exit(2)
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-api-"))

interface Result {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
}

const parseLatency = (text: string, pct: string) => {
  const m = new RegExp(`^\\s*${pct}%\\s+([0-9.]+)(us|ms|s)`, "m").exec(text)
  if (!m?.[1]) return Number.NaN
  const v = Number(m[1])
  return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v
}

/**
 * One wrk run. With `rate` (requests per second in all), every connection waits between its requests so that the
 * connections together send about that many (wrk's Lua `delay`), to read the latency at a given load.
 */
const wrk = (url: string, body: string, script?: string, rate?: number): Result => {
  const file = path.join(tmp, `wrk-${Math.random().toString(36).slice(2)}.lua`)
  const pace =
    rate === undefined ? "" : `function delay() return ${Math.max(1, Math.round((1000 * CONNECTIONS) / rate))} end\n`
  fs.writeFileSync(
    file,
    (script ??
      `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["content-type"] = "application/json"\nwrk.headers["x-api-token"] = "${TOKEN}"\n`) +
      pace
  )
  const args = ["wrk", "-t2", `-c${CONNECTIONS}`, `-d${SECONDS}s`, "--latency", "-s", file, url]
  const r = Bun.spawnSync(args, { stdout: "pipe", stderr: "pipe" })
  const text = r.stdout.toString()
  const rps = Number(/Requests\/sec:\s+([0-9.]+)/.exec(text)?.[1] ?? Number.NaN)
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(text)?.[1] ?? 0)
  return { rps, p50: parseLatency(text, "50"), p99: parseLatency(text, "99"), non2xx }
}

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
const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a")

const benchDatabase = async (kind: "postgres" | "pglite") => {
  const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: `api-${kind}` } })
  // PR refs for the submissions, made in one go
  const head = repo.createPr(1, { files: { "one.txt": "1\n" }, title: "Bench PR" })
  const refs = Array.from({ length: SUBMIT_PRS + 10 }, (_, i) => `create refs/pull/${i + 2}/head ${head}`).join("\n")
  Bun.spawnSync(["git", "--git-dir", repo.gitDir, "update-ref", "--stdin"], {
    stdin: new TextEncoder().encode(`${refs}\n`)
  })

  let databaseUrl: string | undefined
  let dropDb: (() => Promise<void>) | undefined
  const dataDir = path.join(tmp, `data-${kind}`)
  if (kind === "postgres") {
    const name = `gl_bench_${process.pid}`
    const admin = new SQL(PG)
    await admin.unsafe(`drop database if exists ${name}`)
    await admin.unsafe(`create database ${name}`)
    await admin.close()
    const u = new URL(PG)
    u.pathname = `/${name}`
    databaseUrl = u.toString()
    dropDb = async () => {
      const a = new SQL(PG)
      await a.unsafe(`drop database if exists ${name} with (force)`)
      await a.close()
    }
  }
  const env: Record<string, string> = {
    GIT_ROOT: repo.root,
    DATA_DIR: dataDir,
    RATE_LIMIT_PER_SECOND: "10000000",
    GIT_POLL_MS: "60000",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {})
  }
  const key = { repo: repo.repo, targetBranch: "main" }
  let server = await spawnServer(env, TOKEN)
  await server.post("createQueue", key)
  await server.post("updateQueue", { ...key, requiredStatuses: ["ci"], state: "paused" })
  for (let n = 1; n <= 10; n++) await server.post("submitPullRequest", { ...key, pr: { number: n } })
  const body = (pr?: number) => JSON.stringify(pr === undefined ? key : { ...key, pr: { number: pr } })

  // PGlite belongs to one process: the baseline opens the same data only after the server stopped
  const reads = [
    ["getSubmittedPullRequest", body(1)],
    ["getQueue", body()]
  ] as const
  const ours = reads.map(([op, b]) => wrk(`${server.url}/v1/${op}`, b))
  // the same reads at half the rate each reached: the latency when the service is not saturated
  const half = reads.map(([op, b], k) => wrk(`${server.url}/v1/${op}`, b, undefined, (ours[k]?.rps ?? 0) / 2))
  if (kind === "pglite") await server.kill("SIGTERM")
  const baseline = await spawnBaseline(kind === "pglite" ? path.join(dataDir, "pg") : (databaseUrl as string))
  const base = reads.map(([op, b]) => wrk(`${baseline.url}/v1/${op}`, b))
  await baseline.kill()
  if (kind === "pglite") server = await spawnServer(env, TOKEN)
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
  const submit = wrk(`${server.url}/v1/submitPullRequest`, "", submitScript)
  const queue = (await server.post("getQueue", key)).body as { enqueuedPullRequests?: ReadonlyArray<unknown> }
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
  await dropDb?.()
  repo.cleanup()
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
