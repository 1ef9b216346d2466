/**
 * bench:scale (#37) — what idle queues cost one instance: the server process's CPU (a share of one core) and RSS with
 * 0, 100 and 1,000 queues that have nothing to do, on PGlite and on PostgreSQL (there also the CPU of its backends
 * serving the instance), each against the smallest case of the same run (ratios). Given a commit, the same is
 * measured for that commit's server in the same run (a temporary worktree), as the baseline.
 *   npm run bench:scale                     (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test)
 *   npm run bench:scale -- 53e1243          (and the server of commit 53e1243 beside this checkout's)
 *   BENCH_SCALE_QUEUES=0,100,1000,5000 BENCH_SETTLE_SECONDS=10 BENCH_IDLE_SECONDS=20 BENCH_KINDS=pglite npm run bench:scale
 *   BENCH_BASELINE_QUEUES=0,100 BENCH_SHARING=0 BENCH_SHARED_QUEUES=300 npm run bench:scale -- 53e1243
 * The queues are two per repository (main and release), repositories copied from one made by git. Every server runs
 * with the default GIT_POLL_MS (2 s). The machine is shared: the CPU of one idle 0-queue server is the noise floor.
 */

import * as fs from "node:fs"
import * as path from "node:path"
import { createTestRepo } from "../support/git.ts"
import { type ServerProcess, spawnServer } from "../support/process.ts"
import { backendsOf, cpuMs, f, type Kind, PG, TOKEN, tmp } from "./apiKit.ts"
import { freshBenchDatabase } from "./engineKit.ts"

const QUEUES = (process.env.BENCH_SCALE_QUEUES ?? "0,100,1000").split(",").map(Number)
/** The baseline's sizes (default the same): its 1,000 idle queues take minutes to create on a loaded machine. */
const BASELINE_QUEUES = (process.env.BENCH_BASELINE_QUEUES ?? QUEUES.join(",")).split(",").map(Number)
const SETTLE_SECONDS = Number(process.env.BENCH_SETTLE_SECONDS ?? 10)
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 20)
const KINDS = (process.env.BENCH_KINDS ?? "pglite,postgres").split(",") as Array<Kind>
const ROOT = path.join(import.meta.dir, "..", "..")
const rev = process.argv[2]

const git = (...args: Array<string>) => {
  const r = Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "pipe" })
  if (r.exitCode !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr.toString()}`)
  return r.stdout.toString().trim()
}

/** The server checkouts measured: this one, and the baseline commit's when one is given. */
const checkouts: Array<{ readonly name: string; readonly root: string }> = [{ name: "this", root: ROOT }]
if (rev !== undefined) {
  const otherRoot = path.join(tmp, "baseline")
  const sha = git("rev-parse", "--short", rev)
  git("worktree", "add", "--detach", otherRoot, rev)
  const installed = Bun.spawnSync([process.execPath, "install", "--frozen-lockfile"], {
    cwd: otherRoot,
    stdout: "ignore",
    stderr: "pipe"
  })
  if (installed.exitCode !== 0) throw new Error(`installing ${sha}'s dependencies: ${installed.stderr.toString()}`)
  checkouts.unshift({ name: sha, root: otherRoot })
}

/** A Git root with `queues / 2` repositories (rounded up), each with `main` and `release`: copies of one repository. */
const gitRootWith = (queues: number, label: string) => {
  const root = path.join(tmp, `git-${label}`)
  const template = createTestRepo({ root, repo: { host: "local", owner: "scale", name: "r0" } })
  template.setBranch("release", template.branchSha("main") ?? "")
  const repos = Math.ceil(queues / 2)
  for (let i = 1; i < repos; i++) {
    fs.cpSync(template.gitDir, path.join(root, "local", "scale", `r${i}.git`), { recursive: true })
  }
  const keys: Array<{ repo: { host: string; owner: string; name: string }; targetBranch: string }> = []
  for (let i = 0; i < queues; i++) {
    keys.push({ repo: { host: "local", owner: "scale", name: `r${i >> 1}` }, targetBranch: i % 2 ? "release" : "main" })
  }
  return { root, keys, cleanup: () => fs.rmSync(root, { recursive: true, force: true }) }
}

const rssMb = (pid: number): number => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return Number(m?.[1] ?? Number.NaN) / 1024
  } catch {
    return Number.NaN
  }
}

interface Idle {
  readonly serverCores: number
  readonly pgCores: number
  readonly rssMb: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const measureIdle = async (kind: Kind, checkout: { name: string; root: string }, queues: number): Promise<Idle> => {
  const label = `${checkout.name}-${kind}-${queues}`
  const gitRoot = gitRootWith(queues, label)
  const env: Record<string, string> = {
    GIT_ROOT: gitRoot.root,
    DATA_DIR: path.join(tmp, `data-${label}`),
    RATE_LIMIT_PER_SECOND: "10000000"
  }
  let drop = async () => {}
  let database = ""
  if (kind === "postgres") {
    database = `gl_scale_${process.pid}_${label.replace(/\W/g, "_")}`
    const fresh = await freshBenchDatabase(PG, database)
    env.DATABASE_URL = fresh.url
    drop = fresh.drop
  }
  let server: ServerProcess | undefined
  try {
    server = await spawnServer(env, TOKEN, checkout.root)
    for (const key of gitRoot.keys) {
      const r = await server.post("createQueue", key)
      if (r.status !== 200) throw new Error(`createQueue answered ${r.status}: ${JSON.stringify(r.body)}`)
    }
    // every runner starts (the lease loop's next pass) and takes its queue over
    await sleep(SETTLE_SECONDS * 1000)
    const backends = kind === "postgres" ? await backendsOf(database) : []
    const pg0 = backends.map(cpuMs)
    const server0 = cpuMs(server.pid)
    const started = performance.now()
    await sleep(IDLE_SECONDS * 1000)
    const wall = performance.now() - started
    // a backend that closed meanwhile reads 0: only those still there count
    const pgMs = backends.reduce((sum, pid, i) => {
      const now = cpuMs(pid)
      return now > 0 ? sum + now - (pg0[i] ?? 0) : sum
    }, 0)
    return {
      serverCores: (cpuMs(server.pid) - server0) / wall,
      pgCores: pgMs / wall,
      rssMb: rssMb(server.pid)
    }
  } finally {
    await server?.kill("SIGTERM")
    await drop()
    gitRoot.cleanup()
  }
}

interface ShareView {
  readonly instance: string
  readonly owned: number
  readonly fair: number
  readonly live: number
  readonly hasShare: boolean
}

const shareOf = async (server: ServerProcess): Promise<ShareView | null> => {
  const r = await fetch(`${server.url}/readyz`)
  return ((await r.json()) as { runners: { share?: ShareView | null } }).runners.share ?? null
}

/** Seconds until every server of `live` has its share of `queues` and they hold them all between them. */
const untilBalanced = async (live: ReadonlyArray<ServerProcess>, queues: number, limitS = 180) => {
  const started = performance.now()
  for (;;) {
    const shares = await Promise.all(live.map((s) => shareOf(s).catch(() => null)))
    const total = shares.reduce((sum, s) => sum + (s?.owned ?? 0), 0)
    if (shares.every((s) => s !== null && s.live === live.length && s.hasShare) && total === queues) {
      return { seconds: (performance.now() - started) / 1000, owned: shares.map((s) => s?.owned ?? 0) }
    }
    if (performance.now() - started > limitS * 1000) throw new Error(`not balanced after ${limitS} s`)
    await sleep(250)
  }
}

const SHARED_QUEUES = Number(process.env.BENCH_SHARED_QUEUES ?? 300)

/**
 * Instances on one PostgreSQL sharing SHARED_QUEUES idle queues: the queues each owns once balanced, its idle CPU,
 * and the time to be balanced again after one is SIGKILLed and after one joins (queues move once their owner held
 * them a minute: the kill comes a minute after the first balance).
 */
const measureSharing = async (checkout: { name: string; root: string }) => {
  const label = `${checkout.name}-share`
  const gitRoot = gitRootWith(SHARED_QUEUES, label)
  const database = `gl_scale_${process.pid}_${label.replace(/\W/g, "_")}`
  const fresh = await freshBenchDatabase(PG, database)
  const env = { GIT_ROOT: gitRoot.root, DATABASE_URL: fresh.url, RATE_LIMIT_PER_SECOND: "10000000" }
  const servers: Array<ServerProcess> = []
  const spawn = async (i: number) => {
    const e = { ...env, DATA_DIR: path.join(tmp, `data-${label}-${i}`) }
    const s = await spawnServer(e, TOKEN, checkout.root)
    servers.push(s)
    return s
  }
  const out: Array<Array<string | number>> = []
  try {
    const a = await spawn(0)
    for (const key of gitRoot.keys) await a.post("createQueue", key)
    for (const n of [1, 2, 3]) {
      if (n > 1) await spawn(n - 1)
      const t = await untilBalanced(servers, SHARED_QUEUES)
      const cpu0 = servers.map((s) => cpuMs(s.pid))
      const started = performance.now()
      await sleep(IDLE_SECONDS * 1000)
      const wall = performance.now() - started
      const cores = servers.map((s, i) => (cpuMs(s.pid) - (cpu0[i] ?? 0)) / wall)
      out.push([n, t.owned.join(" / "), cores.map((c) => f(c, 3)).join(" / "), f(t.seconds, 1)])
    }
    // the queues of the third moved less than a minute ago: they may move again a minute later
    await sleep(Math.max(0, 61_000 - IDLE_SECONDS * 1000))
    const victim = servers.pop()
    await victim?.kill("SIGKILL")
    const killed = await untilBalanced(servers, SHARED_QUEUES)
    await spawn(3)
    const joined = await untilBalanced(servers, SHARED_QUEUES)
    return { out, killed, joined }
  } finally {
    for (const s of servers) await s.kill("SIGTERM").catch(() => undefined)
    await fresh.drop()
    gitRoot.cleanup()
  }
}

const rows: Array<string> = []
const row = (...cells: Array<string | number>) => rows.push(`| ${cells.join(" | ")} |`)
const ratio = (x: number, base: number) => (base > 0 ? `${f(x / base, 1)}×` : "n/a")

try {
  row(
    "server",
    "database",
    "idle queues",
    "server CPU (cores)",
    "× 0 queues",
    "PG backends CPU",
    "RSS MB",
    "RSS KB / queue"
  )
  row("---", "---", "---:", "---:", "---:", "---:", "---:", "---:")
  for (const kind of KINDS) {
    for (const checkout of checkouts) {
      let base: Idle | undefined
      for (const n of checkout.root === ROOT ? QUEUES : BASELINE_QUEUES) {
        // a server that did not start in time (a loaded machine) leaves its row out, the others go on
        const idle = await measureIdle(kind, checkout, n).catch((e: unknown) => {
          process.stderr.write(`${checkout.name} ${kind} ${n}: ${String(e)}\n`)
          return undefined
        })
        if (idle === undefined) continue
        base ??= idle
        const perQueue = n > 0 ? f(((idle.rssMb - base.rssMb) * 1024) / n, 0) : "-"
        row(
          checkout.name,
          kind,
          n,
          f(idle.serverCores, 3),
          ratio(idle.serverCores, base.serverCores),
          kind === "postgres" ? f(idle.pgCores, 3) : "-",
          f(idle.rssMb, 0),
          perQueue
        )
        process.stderr.write(`${rows[rows.length - 1]}\n`)
      }
    }
  }
  console.log(
    `\nIdle queues: CPU over ${IDLE_SECONDS} s after ${SETTLE_SECONDS} s of settling, GIT_POLL_MS 2000 (the default)\n`
  )
  console.log(rows.join("\n"))
  if (process.env.BENCH_SHARING !== "0" && KINDS.includes("postgres")) {
    const sharing = await measureSharing({ name: "this", root: ROOT })
    console.log(`\nInstances sharing ${SHARED_QUEUES} idle queues on one PostgreSQL\n`)
    console.log("| instances | queues owned | idle CPU each (cores) | seconds to balance after the start |")
    console.log("| ---: | --- | --- | ---: |")
    for (const r of sharing.out) console.log(`| ${r.join(" | ")} |`)
    console.log(
      `\nAfter a SIGKILL of one of 3: balanced again in ${f(sharing.killed.seconds, 1)} s (${sharing.killed.owned.join(" / ")}); ` +
        `after one joins: in ${f(sharing.joined.seconds, 1)} s (${sharing.joined.owned.join(" / ")})`
    )
  }
} finally {
  if (rev !== undefined) git("worktree", "remove", "--force", path.join(tmp, "baseline"))
  fs.rmSync(tmp, { recursive: true, force: true })
}
