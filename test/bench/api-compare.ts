/**
 * bench:api-compare — the read path of this checkout against another commit's, in the same run, on the same
 * machine: both servers up at once on databases of their own, loaded one at a time with wrk, alternating which goes
 * first, the first rounds counted as warm-up. Reports the median requests per second and the CPU each read costs
 * (the server process, and on PostgreSQL its backends, read from /proc): on a noisy machine two runs of one server
 * differ by up to 1.3× in req/s, so a single pair of runs is not a comparison.
 *   npm run bench:api-compare -- <commit>
 *   BENCH_ROUNDS=8 BENCH_WARMUP_ROUNDS=2 BENCH_SECONDS=5 BENCH_KINDS=postgres npm run bench:api-compare -- c516d16
 * The other commit is checked out in a temporary worktree and its dependencies installed there (bun's cache).
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  type BenchQueue,
  backendsOf,
  benchQueue,
  CONNECTIONS,
  cpuMs,
  f,
  type Kind,
  postScript,
  requireWrk,
  tmp,
  wrk
} from "./apiKit.ts"

const rev = process.argv[2]
if (rev === undefined) {
  process.stderr.write("usage: npm run bench:api-compare -- <commit>\n")
  process.exit(2)
}
requireWrk()
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6)
const WARMUP_ROUNDS = Number(process.env.BENCH_WARMUP_ROUNDS ?? 2)
const KINDS = (process.env.BENCH_KINDS ?? "postgres,pglite").split(",") as Array<Kind>
const ROOT = path.join(import.meta.dir, "..", "..")

const git = (...args: Array<string>) => {
  const r = Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" })
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`)
  return r.stdout.toString().trim()
}

const otherRoot = path.join(tmp, "other")
const sha = git("rev-parse", "--short", rev)
git("worktree", "add", "--detach", otherRoot, rev)
const installed = Bun.spawnSync([process.execPath, "install", "--frozen-lockfile"], {
  cwd: otherRoot,
  stdout: "ignore",
  stderr: "pipe"
})
if (installed.exitCode !== 0) throw new Error(`installing ${sha}'s dependencies: ${installed.stderr.toString()}`)

interface Sample {
  readonly rps: number
  readonly serverUs: number
  readonly pgUs: number
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

const sampleOf = async (kind: Kind, q: BenchQueue, op: string, body: string): Promise<Sample> => {
  const backends = kind === "postgres" ? await backendsOf(q.database) : []
  const pgCpu = () => backends.reduce((sum, pid) => sum + cpuMs(pid), 0)
  const server0 = cpuMs(q.server.pid)
  const pg0 = pgCpu()
  const r = wrk(`${q.server.url}/v1/${op}`, postScript(body), SECONDS)
  const perRead = (ms: number) => (1000 * ms) / r.requests
  return { rps: r.rps, serverUs: perRead(cpuMs(q.server.pid) - server0), pgUs: perRead(pgCpu() - pg0) }
}

const rows: Array<string> = []
try {
  for (const kind of KINDS) {
    const other = await benchQueue(kind, { name: `cmp-${sha}-${kind}`, root: otherRoot })
    const ours = await benchQueue(kind, { name: `cmp-head-${kind}`, root: ROOT })
    try {
      for (const op of ["getSubmittedPullRequest", "getQueue"]) {
        const samples = { other: [] as Array<Sample>, ours: [] as Array<Sample> }
        for (let round = 0; round < WARMUP_ROUNDS + ROUNDS; round++) {
          const order = round % 2 === 0 ? (["other", "ours"] as const) : (["ours", "other"] as const)
          for (const which of order) {
            const q = which === "other" ? other : ours
            const s = await sampleOf(kind, q, op, op === "getQueue" ? q.body() : q.body(1))
            if (round >= WARMUP_ROUNDS) samples[which].push(s)
          }
        }
        const m = (which: "other" | "ours", k: keyof Sample) => median(samples[which].map((s) => s[k]))
        const cpu = (which: "other" | "ours") => m(which, "serverUs") + (kind === "postgres" ? m(which, "pgUs") : 0)
        rows.push(
          `| ${kind} | ${op} | ${f(m("other", "rps"), 0)} | ${f(m("ours", "rps"), 0)} | **${f(m("ours", "rps") / m("other", "rps"), 2)}** | ${f(m("other", "serverUs"), 0)} / ${f(m("ours", "serverUs"), 0)} | ${kind === "postgres" ? `${f(m("other", "pgUs"), 0)} / ${f(m("ours", "pgUs"), 0)}` : "in the server"} | ${f(cpu("other") / cpu("ours"), 2)} |`
        )
        const per = (which: "other" | "ours") => samples[which].map((s) => f(s.rps, 0)).join(" ")
        rows.push(`| | req/s per round (${sha}; this checkout) | ${per("other")} | ${per("ours")} | | | | |`)
      }
    } finally {
      await other.cleanup()
      await ours.cleanup()
    }
  }
} finally {
  git("worktree", "remove", "--force", otherRoot)
}

process.stdout.write(
  `\nbench:api-compare — ${sha} against this checkout; wrk -t2 -c${CONNECTIONS} -d${SECONDS}s per run, ${ROUNDS} rounds after ${WARMUP_ROUNDS} of warm-up, medians; ${os.cpus().length} cores\n\n` +
    `| database | operation | ${sha} req/s | this req/s | ratio | server CPU per read, µs (${sha} / this) | PostgreSQL CPU per read, µs | CPU ratio (${sha} / this) |\n` +
    `|---|---|---:|---:|---:|---:|---:|---:|\n${rows.join("\n")}\n`
)
fs.rmSync(tmp, { recursive: true, force: true })
