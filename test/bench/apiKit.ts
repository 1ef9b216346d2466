/**
 * What bench:api and bench:api-compare share: wrk runs (Debian's `wrk`, in its own process, on loopback) and a
 * Greenline server with a paused queue of 10 entries on a fresh database (PostgreSQL or PGlite).
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SQL } from "bun"
import { createTestRepo } from "../support/git.ts"
import { type ServerProcess, spawnServer } from "../support/process.ts"
import { freshBenchDatabase } from "./engineKit.ts"

export const TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32)
export const PG = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

export type Kind = "postgres" | "pglite"

export const requireWrk = () => {
  if (Bun.which("wrk") === null) {
    process.stderr.write("this benchmark needs wrk (apt-get install wrk)\n")
    process.exit(2)
  }
}

export const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-api-"))

export interface Result {
  readonly rps: number
  readonly requests: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
}

export const parseLatency = (text: string, pct: string) => {
  const m = new RegExp(`^\\s*${pct}%\\s+([0-9.]+)(us|ms|s)`, "m").exec(text)
  if (!m?.[1]) return Number.NaN
  const v = Number(m[1])
  return m[2] === "us" ? v / 1000 : m[2] === "s" ? v * 1000 : v
}

/** A POST of `body` with the bench token, as a wrk script. */
export const postScript = (body: string) =>
  `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["content-type"] = "application/json"\nwrk.headers["x-api-token"] = "${TOKEN}"\n`

/**
 * One wrk run of `seconds`. With `rate` (requests per second in all), every connection waits between its requests so
 * that the connections together send about that many (wrk's Lua `delay`), to read the latency at a given load.
 */
export const wrk = (url: string, script: string, seconds: number, rate?: number): Result => {
  const file = path.join(tmp, `wrk-${Math.random().toString(36).slice(2)}.lua`)
  const pace =
    rate === undefined ? "" : `function delay() return ${Math.max(1, Math.round((1000 * CONNECTIONS) / rate))} end\n`
  fs.writeFileSync(file, script + pace)
  const args = ["wrk", "-t2", `-c${CONNECTIONS}`, `-d${seconds}s`, "--latency", "-s", file, url]
  const r = Bun.spawnSync(args, { stdout: "pipe", stderr: "pipe" })
  const text = r.stdout.toString()
  return {
    rps: Number(/Requests\/sec:\s+([0-9.]+)/.exec(text)?.[1] ?? Number.NaN),
    requests: Number(/(\d+) requests in/.exec(text)?.[1] ?? Number.NaN),
    p50: parseLatency(text, "50"),
    p99: parseLatency(text, "99"),
    non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(text)?.[1] ?? 0)
  }
}

export interface BenchQueue {
  readonly server: ServerProcess
  readonly repo: ReturnType<typeof createTestRepo>
  readonly key: { readonly repo: { host: string; owner: string; name: string }; readonly targetBranch: string }
  /** the body of a read: the queue's key, with `pr` the PR's */
  readonly body: (pr?: number) => string
  readonly env: Record<string, string>
  /** the PostgreSQL database's name (its URL is env.DATABASE_URL), or the PGlite data directory */
  readonly database: string
  readonly cleanup: () => Promise<void>
}

/**
 * A server of the checkout at `root` on a fresh database, its queue paused with PRs 1–10 submitted. `extraPrs`
 * more PR refs (11 on) are made for submissions.
 */
export const benchQueue = async (
  kind: Kind,
  options: { readonly name: string; readonly extraPrs?: number; readonly root?: string }
): Promise<BenchQueue> => {
  const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: options.name } })
  const head = repo.createPr(1, { files: { "one.txt": "1\n" }, title: "Bench PR" })
  const refs = Array.from({ length: (options.extraPrs ?? 0) + 10 }, (_, i) => `create refs/pull/${i + 2}/head ${head}`)
  Bun.spawnSync(["git", "--git-dir", repo.gitDir, "update-ref", "--stdin"], {
    stdin: new TextEncoder().encode(`${refs.join("\n")}\n`)
  })
  const dataDir = path.join(tmp, `data-${options.name}`)
  let database = path.join(dataDir, "pg")
  let dropDb = async () => {}
  const env: Record<string, string> = {
    GIT_ROOT: repo.root,
    DATA_DIR: dataDir,
    RATE_LIMIT_PER_SECOND: "10000000",
    GIT_POLL_MS: "60000"
  }
  if (kind === "postgres") {
    database = `gl_bench_${process.pid}_${options.name.replace(/\W/g, "_")}`
    const fresh = await freshBenchDatabase(PG, database)
    env.DATABASE_URL = fresh.url
    dropDb = fresh.drop
  }
  const key = { repo: repo.repo, targetBranch: "main" }
  const server = await spawnServer(env, TOKEN, options.root)
  await server.post("createQueue", key)
  await server.post("updateQueue", { ...key, requiredStatuses: ["ci"], state: "paused" })
  for (let n = 1; n <= 10; n++) await server.post("submitPullRequest", { ...key, pr: { number: n } })
  return {
    server,
    repo,
    key,
    env,
    database,
    body: (pr) => JSON.stringify(pr === undefined ? key : { ...key, pr: { number: pr } }),
    cleanup: async () => {
      await server.kill("SIGTERM")
      await dropDb()
      repo.cleanup()
    }
  }
}

/** CPU time (user + system, ms) a process has used, from /proc. */
export const cpuMs = (pid: number): number => {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
    return (Number(fields[11]) + Number(fields[12])) * (1000 / 100)
  } catch {
    return 0
  }
}

/** The PostgreSQL backends serving `database` now. */
export const backendsOf = async (database: string): Promise<ReadonlyArray<number>> => {
  const admin = new SQL(PG)
  const rows = (await admin.unsafe(`select pid from pg_stat_activity where datname = $1`, [database])) as Array<{
    pid: number
  }>
  await admin.close()
  return rows.map((r) => r.pid)
}

export const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a")
