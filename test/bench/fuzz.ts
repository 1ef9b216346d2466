import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { freshPostgres } from "../support/server.ts"
import {
  deleteRace,
  extremeRequest,
  type FuzzRequest,
  Generator,
  makeExtremeQueues,
  makeRequest,
  makeState,
  type OpenApiDoc,
  operationsOf,
  Rng,
  send,
  snapshot,
  Tally
} from "./fuzzKit.ts"

/**
 * `npm run fuzz -- [--db pglite|postgres] [--requests N] [--seed S] [--concurrency C]`: a server in its own process
 * (as `npm start` runs it), then N requests made from its OpenAPI document, valid and mutated (fuzzKit.ts), every
 * 50th a read of a queue at extreme settings (every integer setting at its maximum or minimum, PRs waiting). It
 * prints a table per kind of request, the server's peak RSS, whether the state made before the run is intact, and
 * the ERROR lines the server logged. PostgreSQL comes from TEST_DATABASE_URL (a fresh database, dropped after).
 * Exit code 1 when a target is missed (a 5xx, an error outside the envelope, a crash, the state changed).
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback
}
const db = arg("db", "pglite") as "pglite" | "postgres"
const total = Number(arg("requests", "10000"))
const seed = Number(arg("seed", "1"))
const concurrency = Number(arg("concurrency", "8"))
/** a time budget: the run ends after this many seconds even if fewer requests were sent (a busy machine) */
const budget = Number(arg("seconds", "0"))
/** only requests whose category contains this (to look at one kind of request alone) */
const only = arg("only", "")
const TOKEN = "fuzz-token-0123456789abcdefghijklmnopqrstuvwxyz"

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "greenline-fuzz-"))
const pg = db === "postgres" ? await freshPostgres() : undefined
const child = Bun.spawn([process.execPath, "--max-http-header-size=65536", "src/main.ts"], {
  cwd: ROOT,
  env: {
    ...process.env,
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    DATABASE_URL: pg?.url ?? "",
    GIT_ROOT: path.join(dataDir, "git"),
    BOOTSTRAP_TOKEN: TOKEN,
    RATE_LIMIT_PER_SECOND: "1000000",
    // every queue's runner polls Git every GIT_POLL_MS (2 s by default) and saves a round; the run creates a few
    // hundred queues, whose idle rounds took most of the server (PGlite: its one connection) and brought the run
    // down to a few requests a second. The fuzz is about the answers, so the runners poll once a minute.
    GIT_POLL_MS: "60000",
    // an answer that breaks its own schema becomes a 500, which the fuzz counts
    CHECK_ANSWERS: "true",
    LOG_LEVEL: "warn"
  },
  stdin: "ignore",
  stdout: "pipe",
  stderr: "pipe"
})
let out = ""
let errorLines: Array<string> = []
const drain = async (stream: ReadableStream<Uint8Array>, onText: (s: string) => void) => {
  const decoder = new TextDecoder()
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }))
}
let exited = false
void child.exited.then(() => {
  exited = true
})
let port: number | undefined
const listening = new Promise<void>((resolve) => {
  void drain(child.stdout, (s) => {
    out = (out + s).slice(-100_000)
    const m = /"message":"greenline listening","port":(\d+)/.exec(out)
    if (m?.[1] !== undefined && port === undefined) {
      port = Number(m[1])
      resolve()
    }
  })
})
let errText = ""
void drain(child.stderr, (s) => {
  errText += s
  const lines = errText.split("\n")
  errText = lines.pop() ?? ""
  errorLines.push(...lines.filter((l) => l.includes('"ERROR"') || /\bERROR\b/.test(l)))
  if (errorLines.length > 1000) errorLines = errorLines.slice(-1000)
})
await Promise.race([listening, child.exited.then(() => Promise.reject(new Error(`the server exited: ${errText}`)))])
const base = `http://127.0.0.1:${port}`

const doc = (await (await fetch(`${base}/v1/openapi.json`)).json()) as OpenApiDoc
const ops = operationsOf(doc)
const rng = new Rng(seed)
const gen = new Generator(doc, rng)
const memoryKb = (field: "VmHWM" | "VmRSS") =>
  Number(
    new RegExp(`${field}:\\s+(\\d+)`).exec(fs.readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? Number.NaN
  )
const rssAtStartKb = memoryKb("VmRSS")
const before = await makeState(base, TOKEN).catch(async (e) => {
  console.error(
    `could not make the state: ${e}\nserver exit: ${child.exitCode}\n${errorLines.join("\n")}\n${errText}\n${out}`
  )
  process.exit(1)
})

// queues at the edges of their settings, with PRs waiting: every 50th request reads one of them
const extremes = await makeExtremeQueues(base, TOKEN, doc, gen, path.join(dataDir, "git")).catch((e) => {
  console.error(`could not make the queues at extreme settings: ${e}`)
  process.exit(1)
})

const tally = new Tally()
const started = performance.now()
let sent = 0
let races = 0
/** the last requests sent, shown when the server dies */
const recent: Array<FuzzRequest> = []
/** SIGINT or SIGTERM: stop sending, then check and print what was sent as usual */
let stopping = false
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130)
    stopping = true
    process.stderr.write(`${signal}: stopping after ${sent} requests\n`)
  })
}
const worker = async () => {
  while (sent < total && !exited && !stopping && (budget === 0 || performance.now() - started < budget * 1000)) {
    sent++
    if (sent % 1000 === 0 && only === "") {
      // every thousandth: deleteQueue racing the other writes
      for (const o of await deleteRace(base, TOKEN, `race${races++}`)) tally.add(o)
      continue
    }
    let request =
      sent % 50 === 25 && only === "" ? extremeRequest(rng, extremes) : makeRequest(gen, rng, ops, { heavy: 0.001 })
    while (only !== "" && !request.category.includes(only)) request = makeRequest(gen, rng, ops, { heavy: 0.001 })
    recent.push(request)
    if (recent.length > 2 * concurrency) recent.shift()
    tally.add(await send(base, TOKEN, request))
    if (sent % 1000 === 0) {
      process.stderr.write(`${sent} requests, ${Math.round(sent / ((performance.now() - started) / 1000))}/s\n`)
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, worker)).catch((e) => {
  console.error(
    `the run stopped: ${e}\nserver exit: ${child.exitCode} ${child.signalCode}\n${errorLines.slice(-5).join("\n")}\n${errText.slice(-3000)}`
  )
})
const seconds = (performance.now() - started) / 1000

const crashed = exited
if (crashed) {
  console.log(`the server died (${child.exitCode ?? child.signalCode}); the last requests sent:`)
  for (const r of recent) {
    const body =
      typeof r.body === "string"
        ? r.body
        : r.body instanceof Uint8Array
          ? new TextDecoder().decode(r.body.subarray(0, 300))
          : ""
    console.log(
      `  ${r.category}: ${r.method} ${r.target.slice(0, 200)} ${JSON.stringify(r.headers).slice(0, 200)} ${JSON.stringify(body.slice(0, 300))} ${r.raw === undefined ? "" : JSON.stringify(r.raw)}`
    )
  }
}
const peakKb = crashed ? Number.NaN : memoryKb("VmHWM")
const rssAtEndKb = crashed ? Number.NaN : memoryKb("VmRSS")
const after = crashed ? "(server gone)" : await snapshot(base, TOKEN)
const intact = before === after

child.kill("SIGTERM")
const code = await child.exited
await pg?.drop()
fs.rmSync(dataDir, { recursive: true, force: true })

const t = tally.total()
console.log(`\nfuzz: ${db}, ${t.n} requests, seed ${seed}, concurrency ${concurrency}, ${seconds.toFixed(0)} s\n`)
console.log(tally.table())
console.log(
  `\nRSS after start ${(rssAtStartKb / 1024).toFixed(0)} MB, at the end ${(rssAtEndKb / 1024).toFixed(0)} MB, peak ${(peakKb / 1024).toFixed(0)} MB · crashed: ${crashed ? "yes" : "no"} · state intact: ${intact ? "yes" : "no"} · ERROR lines logged: ${errorLines.length} · exit on SIGTERM: ${code}`
)
if (tally.problems.length > 0) console.log(`\nproblems (first ${tally.problems.length}):\n${tally.problems.join("\n")}`)
if (!intact) console.log(`\nbefore: ${before}\nafter:  ${after}`)
if (errorLines.length > 0) console.log(`\nERROR lines (last 10):\n${errorLines.slice(-10).join("\n").slice(0, 5000)}`)
process.exit(t.c5 > 0 || t.bad > 0 || crashed || !intact ? 1 : 0)
