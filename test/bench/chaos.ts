/**
 * Chaos run (#15 Build 6): 2 or 3 Greenline instances on one PostgreSQL and one Git root, 200 PRs (about 10% bad, 2%
 * of CI runs failing spuriously, some conflicting), submissions to random instances, and a random instance (its whole
 * process group) SIGKILLed every 2-10 s and restarted, sometimes all at once. A CI simulator reports the statuses of
 * the test branches to whichever instance is up. Per round it checks what must never happen and measures liveness,
 * and prints a table.
 *
 *   TEST_DATABASE_URL=postgres://... npm run chaos -- [--rounds 20] [--instances 2] [--prs 200] [--seed 1]
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { SQL } from "bun"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { freshPostgres, TEST_TOKEN, tempDir } from "../support/server.ts"

const ROOT = path.join(import.meta.dir, "..", "..")

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const ROUNDS = arg("rounds", 1)
const INSTANCES = arg("instances", 2)
const PRS = arg("prs", 200)
const SEED = arg("seed", Date.now() % 100_000)
const ROUND_LIMIT_MS = arg("limit-s", 900) * 1000
const BAD_SHARE = 0.1
const FLAKY_SHARE = 0.02
const CONFLICTING = 10

/** mulberry32: a small seeded generator, so that a round can be replayed by its seed. */
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const pct = (xs: ReadonlyArray<number>, q: number) => {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

interface Instance {
  readonly index: number
  url: string | null
  child: ChildProcess | null
  errorLines: number
  starts: number
}

interface RoundResult {
  readonly round: number
  readonly seed: number
  readonly merged: number
  readonly failed: number
  readonly cancelled: number
  readonly open: number
  readonly lost: number
  readonly doubleMerges: number
  readonly untestedOnMain: number
  readonly badMerged: number
  readonly unexplained: number
  readonly kills: number
  readonly leaseP50: number
  readonly leaseP99: number
  readonly leaseMax: number
  readonly takeoverP50: number
  readonly takeoverP99: number
  readonly takeoverMax: number
  readonly http5xx: number
  /** requests a live instance did not answer within 10 s */
  readonly slow: number
  readonly errorLines: number
  readonly leftBranches: number
  readonly staleLocks: number
  readonly seconds: number
}

const runRound = async (round: number, seed: number): Promise<RoundResult> => {
  const random = rng(seed)
  const pg = await freshPostgres()
  const repo: TestRepo = createTestRepo({ repo: { host: "local", owner: "acme", name: "chaos" } })
  const key = { repo: repo.repo, targetBranch: "main" }
  const started = Date.now()
  // which PRs are bad (their change makes CI fail) and which conflict (pairs that write the same file)
  const bad = new Set<number>()
  const conflicting = new Set<number>()
  while (bad.size < Math.round(PRS * BAD_SHARE)) bad.add(1 + Math.floor(random() * PRS))
  while (conflicting.size < Math.min(CONFLICTING, PRS)) {
    const n = 1 + Math.floor(random() * PRS)
    if (!bad.has(n)) conflicting.add(n)
  }
  for (let n = 1; n <= PRS; n++) {
    const files: Record<string, string> = { [`pr-${n}.txt`]: `${n}\n` }
    if (bad.has(n)) files[`bad-${n}.txt`] = "breaks the build\n"
    if (conflicting.has(n)) files["shared.txt"] = `written by ${n}\n`
    repo.createPr(n, { files })
  }
  const initialSha = repo.branchSha("main")!

  // ---------------------------------------------------------------- instances
  const instances: Instance[] = Array.from({ length: INSTANCES }, (_, index) => ({
    index,
    url: null,
    child: null,
    errorLines: 0,
    starts: 0
  }))
  let errorsShown = 0
  /** every start's DATA_DIR, removed at the end of the round */
  const dataDirs: Array<string> = []
  const start = (inst: Instance) =>
    new Promise<void>((resolveStart, reject) => {
      let resolve = resolveStart
      const dataDir = tempDir("greenline-chaos-data-")
      dataDirs.push(dataDir)
      const child = spawn(process.execPath, ["src/main.ts"], {
        cwd: ROOT,
        detached: true,
        env: {
          ...process.env,
          PORT: "0",
          HOST: "127.0.0.1",
          LOG_LEVEL: "warn",
          BOOTSTRAP_TOKEN: TEST_TOKEN,
          DATABASE_URL: pg.url,
          GIT_ROOT: repo.root,
          DATA_DIR: dataDir,
          GIT_POLL_MS: "500"
        },
        stdio: ["ignore", "pipe", "pipe"]
      })
      inst.child = child
      inst.starts++
      let buffered = ""
      const onLine = (line: string) => {
        if (/"level":"ERROR"|"logLevel":"ERROR"/.test(line)) {
          inst.errorLines++
          // the first few of a round, so that the table's count can be explained
          if (errorsShown++ < 5) console.error(`round ${round}: instance ${inst.index}: ${line.slice(0, 600)}`)
        }
      }
      // the end of what it wrote, for a start that fails
      let tail = ""
      const scan = (chunk: Buffer) => {
        buffered += chunk.toString("utf8")
        tail = (tail + chunk.toString("utf8")).slice(-1000)
        const lines = buffered.split("\n")
        buffered = lines.pop() ?? ""
        for (const line of lines) {
          onLine(line)
          const m = /"message":"greenline listening","port":(\d+)/.exec(line)
          if (m?.[1] !== undefined && inst.child === child) {
            inst.url = `http://127.0.0.1:${m[1]}`
            resolve()
          }
        }
      }
      child.stdout?.on("data", scan)
      child.stderr?.on("data", scan)
      child.on("exit", (code, signal) => {
        clearTimeout(timer)
        if (inst.child === child) inst.url = null
        reject(new Error(`exited before listening (${signal ?? `code ${code}`}): ${tail.slice(-500)}`))
      })
      // an instance that never says it listens must not hold the killer (a round once waited for one for 12 min)
      let listening = false
      const timer = setTimeout(() => {
        if (listening) return
        console.error(`instance ${child.pid}: not listening after 90 s; killed (${buffered.slice(-300)})`)
        try {
          process.kill(-(child.pid ?? 0), "SIGKILL")
        } catch {}
      }, 90_000)
      const done = resolve
      resolve = () => {
        listening = true
        clearTimeout(timer)
        done()
      }
    })
  const kill = async (inst: Instance) => {
    const child = inst.child
    if (child === null || child.pid === undefined) return
    inst.url = null
    const exited = new Promise((r) => child.once("exit", r))
    try {
      process.kill(-child.pid, "SIGKILL")
    } catch {}
    await Promise.race([exited, sleep(5000)])
    inst.child = null
  }
  const up = () => instances.filter((i) => i.url !== null)

  // ---------------------------------------------------------------- HTTP to any instance
  let http5xx = 0
  let slow = 0
  const post = async (op: string, body: unknown): Promise<{ status: number; body: unknown } | null> => {
    const live = up()
    const inst = live[Math.floor(random() * live.length)]
    if (inst?.url == null) return null
    try {
      const r = await fetch(`${inst.url}/v1/${op}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-token": TEST_TOKEN },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000)
      })
      if (r.status >= 500 && r.status !== 503) http5xx++
      return { status: r.status, body: await r.json().catch(() => null) }
    } catch (e) {
      if (e instanceof Error && e.name === "TimeoutError") slow++
      return null // the instance died under the request, or did not answer in time
    }
  }
  const postUntil = async (op: string, body: unknown, ok = (s: number) => s === 200) => {
    for (let attempt = 0; attempt < 600; attempt++) {
      const r = await post(op, body)
      if (r !== null && ok(r.status)) return r
      await sleep(100)
    }
    throw new Error(`${op} never answered`)
  }

  // an instance that exits at its first start (a round once lost one so, taking the whole run down) is started again
  const startFirst = async (inst: Instance) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await start(inst)
      } catch (e) {
        console.error(`round ${round}: an instance's first start failed (attempt ${attempt}): ${e}`)
        if (attempt === 3) throw e
      }
    }
  }
  await Promise.all(instances.map(startFirst))
  await postUntil("createQueue", { ...key, concurrency: 4 })
  await postUntil("updateQueue", { ...key, requiredStatuses: ["ci"], testingTimeoutMinutes: 60 })

  let stop = false
  const progressAt: number[] = []
  const killsAt: number[] = []

  // ---------------------------------------------------------------- the lease, as the database holds it
  const db = new SQL(pg.url)
  const leaseChanges: Array<{ at: number; owner: string }> = []
  const leaseWatch = (async () => {
    let last = ""
    while (!stop) {
      try {
        const rows = await db`select owner, fencing from queue_runtime`
        const owner = rows.length === 0 ? "" : `${String(rows[0].owner)}#${String(rows[0].fencing)}`
        if (owner !== last) {
          last = owner
          leaseChanges.push({ at: Date.now(), owner })
        }
      } catch {}
      await sleep(250)
    }
  })()
  /** the lease holder when `at`, and its first change after */
  const ownerAt = (at: number) => [...leaseChanges].reverse().find((c) => c.at <= at)?.owner ?? ""
  const leaseTakeovers: number[] = []

  // ---------------------------------------------------------------- the killer
  const killer = (async () => {
    while (!stop) {
      await sleep(2000 + random() * 8000)
      if (stop) break
      const all = random() < 0.1
      const victims = all ? instances : [instances[Math.floor(random() * instances.length)]!]
      const killedAt = Date.now()
      killsAt.push(killedAt)
      const holder = ownerAt(killedAt)
      const victimPids = victims.map((v) => v.child?.pid)
      const ownerKilled = victimPids.some((pid) => pid !== undefined && holder.includes(`-${pid}-`))
      await Promise.all(victims.map(kill))
      if (ownerKilled) {
        // the time until another owner holds the lease (a new fencing token)
        void (async () => {
          const deadline = killedAt + 120_000
          while (Date.now() < deadline && !stop) {
            const next = leaseChanges.find((c) => c.at > killedAt && c.owner !== "" && c.owner !== holder)
            if (next !== undefined) {
              leaseTakeovers.push((next.at - killedAt) / 1000)
              return
            }
            await sleep(250)
          }
        })()
      }
      await sleep(200 + random() * 1500)
      await Promise.all(
        victims.map((v) => start(v).catch((e) => console.error(`round ${round}: a restart failed: ${e}`)))
      )
    }
  })()

  // ---------------------------------------------------------------- CI simulator
  const reported = new Map<string, "success" | "failure">()
  const spurious = new Set<string>()
  const passedTips = new Set<string>()
  const ci = (async () => {
    const inFlight = new Set<string>()
    const seenRefs = new Set<string>()
    while (!stop) {
      let refs: string[] = []
      try {
        const out = repo.git("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/trunk-merge/")
        refs = out === "" ? [] : out.split("\n")
      } catch {}
      for (const line of refs) {
        // a CI runs on every push: a run rebuilt at the same sha on a new branch is tested again
        const sha = line.split(" ")[0]!
        if (seenRefs.has(line) || inFlight.has(line)) continue
        seenRefs.add(line)
        inFlight.add(line)
        void (async () => {
          await sleep(300 + random() * 2500)
          let files: string[] = []
          try {
            files = repo.git("ls-tree", "--name-only", sha).split("\n")
          } catch {
            inFlight.delete(line)
            return
          }
          const flaky = random() < FLAKY_SHARE
          const state = flaky || files.some((f) => f.startsWith("bad-")) ? "failure" : "success"
          if (flaky) spurious.add(sha)
          await postUntil("reportStatus", { repo: repo.repo, sha, context: "ci", state }).catch(() => undefined)
          reported.set(sha, state)
          if (state === "success") passedTips.add(sha)
          inFlight.delete(line)
        })()
      }
      await sleep(200)
    }
  })()

  // ---------------------------------------------------------------- submissions
  const accepted = new Set<number>()
  const order = Array.from({ length: PRS }, (_, k) => k + 1).sort(() => random() - 0.5)
  for (const n of order) {
    const r = await postUntil("submitPullRequest", { ...key, pr: { number: n } }, (s) => s === 200)
    if (r.status === 200) accepted.add(n)
    await sleep(random() * 100)
  }

  // ---------------------------------------------------------------- watch progress
  const ended = new Map<number, string>()
  let lastMain = repo.branchSha("main")
  while (Date.now() - started < ROUND_LIMIT_MS && ended.size < accepted.size) {
    const main = repo.branchSha("main")
    if (main !== lastMain) {
      lastMain = main
      progressAt.push(Date.now())
    }
    for (const n of accepted) {
      // an instance that answers slowly must not hold the round past its limit, one PR at a time
      if (Date.now() - started >= ROUND_LIMIT_MS) break
      if (ended.has(n)) continue
      const r = await post("getSubmittedPullRequest", { ...key, pr: { number: n } })
      const state = (r?.body as { state?: string } | null)?.state
      if (state === "merged" || state === "failed" || state === "cancelled") {
        ended.set(n, state)
        progressAt.push(Date.now())
      }
    }
    await sleep(1000)
  }
  const endedAt = Date.now()
  const idleAtEnd = ((endedAt - (progressAt.length === 0 ? started : Math.max(...progressAt))) / 1000).toFixed(0)
  if (ended.size < accepted.size) {
    // what the PRs left open show, for a round that did not finish
    const states = new Map<string, number>()
    for (const n of accepted) {
      if (ended.has(n)) continue
      const r = await post("getSubmittedPullRequest", { ...key, pr: { number: n } })
      const state = (r?.body as { state?: string } | null)?.state ?? "unknown"
      states.set(state, (states.get(state) ?? 0) + 1)
    }
    const queue = await post("getQueue", key)
    console.error(
      `round ${round}: ${accepted.size - ended.size} open after ${((endedAt - started) / 1000).toFixed(0)} s, no progress for the last ${idleAtEnd} s; states ${JSON.stringify(Object.fromEntries(states))}; runnerError ${JSON.stringify((queue?.body as { runnerError?: unknown } | null)?.runnerError ?? null)}`
    )
  }
  stop = true
  await killer
  await ci
  await leaseWatch
  // every instance up, so that the last deletions of test branches can run
  await Promise.all(instances.filter((i) => i.url === null).map((i) => start(i).catch(() => undefined)))
  await sleep(8000)

  // ---------------------------------------------------------------- checks
  const branchesLeft = (() => {
    const out = repo.git("for-each-ref", "--format=%(refname)", "refs/heads/trunk-merge/")
    return out === "" ? 0 : out.split("\n").length
  })()
  const staleLocks = (() => {
    let n = 0
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(dir, e.name))
        else if (e.name.endsWith(".lock")) {
          n++
          const file = path.join(dir, e.name)
          const age = (Date.now() - fs.statSync(file).mtimeMs) / 1000
          console.error(`round ${round}: lock left: ${path.relative(repo.gitDir, file)} (${age.toFixed(0)} s old)`)
        }
      }
    }
    walk(path.join(repo.gitDir, "refs"))
    return n
  })()
  const walk = repo.git("rev-list", "--first-parent", "--reverse", `${initialSha}..main`)
  const mainCommits = walk === "" ? [] : walk.split("\n")
  const tested = new Set<string>()
  if (passedTips.size > 0) {
    const out = repo.git("rev-list", ...passedTips, `^${initialSha}`)
    for (const c of out === "" ? [] : out.split("\n")) tested.add(c)
  }
  const untestedOnMain = mainCommits.filter((c) => !tested.has(c)).length
  const touched = new Map<string, number>()
  for (const c of mainCommits) {
    const names = repo.git("diff-tree", "--no-commit-id", "--name-only", "-r", `${c}^1`, c)
    for (const f of names === "" ? [] : names.split("\n")) touched.set(f, (touched.get(f) ?? 0) + 1)
  }
  let doubleMerges = 0
  let badMerged = 0
  for (let n = 1; n <= PRS; n++) {
    if ((touched.get(`pr-${n}.txt`) ?? 0) > 1) doubleMerges++
    if (bad.has(n) && (touched.get(`pr-${n}.txt`) ?? 0) > 0) badMerged++
  }
  // a good PR that failed: explained by a spurious failure of a run that contained it, or by a conflict
  const inSpurious = new Set<string>()
  for (const sha of spurious) for (const f of repo.git("ls-tree", "--name-only", sha).split("\n")) inSpurious.add(f)
  let unexplained = 0
  for (const [n, state] of ended) {
    if (state !== "failed" || bad.has(n) || conflicting.has(n)) continue
    if (!inSpurious.has(`pr-${n}.txt`)) unexplained++
  }
  // lost: a submission that answered 200 and then is unknown or did not end
  let lost = 0
  for (const n of accepted) {
    const r = await post("getSubmittedPullRequest", { ...key, pr: { number: n } })
    if (r === null || r.status === 404) lost++
  }
  // time from a kill to the next progress (while work was left)
  const takeovers: number[] = []
  for (const k of killsAt) {
    const next = progressAt.find((p) => p > k)
    if (next !== undefined) takeovers.push((next - k) / 1000)
  }
  const errorLines = instances.reduce((a, i) => a + i.errorLines, 0)
  await Promise.all(instances.map(kill))
  await db.close()
  await pg.drop().catch(() => undefined)
  repo.cleanup()
  for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true })
  const count = (s: string) => [...ended.values()].filter((x) => x === s).length
  return {
    round,
    seed,
    merged: count("merged"),
    failed: count("failed"),
    cancelled: count("cancelled"),
    open: accepted.size - ended.size,
    lost,
    doubleMerges,
    untestedOnMain,
    badMerged,
    unexplained,
    kills: killsAt.length,
    leaseP50: pct(leaseTakeovers, 0.5),
    leaseP99: pct(leaseTakeovers, 0.99),
    leaseMax: leaseTakeovers.length === 0 ? Number.NaN : Math.max(...leaseTakeovers),
    takeoverP50: pct(takeovers, 0.5),
    takeoverP99: pct(takeovers, 0.99),
    takeoverMax: takeovers.length === 0 ? Number.NaN : Math.max(...takeovers),
    http5xx,
    slow,
    errorLines,
    leftBranches: branchesLeft,
    staleLocks,
    seconds: (Date.now() - started) / 1000
  }
}

const COLUMNS: ReadonlyArray<[string, (r: RoundResult) => string]> = [
  ["round", (r) => String(r.round)],
  ["seed", (r) => String(r.seed)],
  ["merged", (r) => String(r.merged)],
  ["failed", (r) => String(r.failed)],
  ["cancelled", (r) => String(r.cancelled)],
  ["open", (r) => String(r.open)],
  ["lost", (r) => String(r.lost)],
  ["double", (r) => String(r.doubleMerges)],
  ["untested on main", (r) => String(r.untestedOnMain)],
  ["bad merged", (r) => String(r.badMerged)],
  ["unexplained failures", (r) => String(r.unexplained)],
  ["kills", (r) => String(r.kills)],
  ["lease takeover p50 s", (r) => r.leaseP50.toFixed(1)],
  ["p99 s", (r) => r.leaseP99.toFixed(1)],
  ["max s", (r) => r.leaseMax.toFixed(1)],
  ["kill to progress p50 s", (r) => r.takeoverP50.toFixed(1)],
  ["p99 s", (r) => r.takeoverP99.toFixed(1)],
  ["max s", (r) => r.takeoverMax.toFixed(1)],
  ["5xx", (r) => String(r.http5xx)],
  ["answers > 10 s", (r) => String(r.slow)],
  ["ERROR lines", (r) => String(r.errorLines)],
  ["branches left", (r) => String(r.leftBranches)],
  ["stale locks", (r) => String(r.staleLocks)],
  ["time s", (r) => r.seconds.toFixed(0)]
]

const row = (cells: ReadonlyArray<string>) => `| ${cells.join(" | ")} |`

const main = async () => {
  if (process.env.TEST_DATABASE_URL === undefined) {
    console.error("chaos needs PostgreSQL: set TEST_DATABASE_URL")
    process.exit(2)
  }
  console.log(`chaos: ${ROUNDS} rounds, ${INSTANCES} instances, ${PRS} PRs, seed ${SEED}`)
  console.log(row(COLUMNS.map(([h]) => h)))
  console.log(row(COLUMNS.map(() => "---")))
  const results: RoundResult[] = []
  for (let round = 1; round <= ROUNDS; round++) {
    const r = await runRound(round, SEED + round)
    results.push(r)
    console.log(row(COLUMNS.map(([, f]) => f(r))))
  }
  const sum = (f: (r: RoundResult) => number) => results.reduce((a, r) => a + f(r), 0)
  const takeoverP99 = Math.max(...results.map((r) => (Number.isNaN(r.takeoverP99) ? 0 : r.takeoverP99)))
  const leaseP99 = Math.max(...results.map((r) => (Number.isNaN(r.leaseP99) ? 0 : r.leaseP99)))
  console.log(
    `summary: ${results.length} rounds; lost ${sum((r) => r.lost)}, double merges ${sum((r) => r.doubleMerges)}, untested on main ${sum((r) => r.untestedOnMain)}, bad merged ${sum((r) => r.badMerged)}, unexplained failures ${sum((r) => r.unexplained)}, open at the end ${sum((r) => r.open)}, kills ${sum((r) => r.kills)}, worst lease takeover p99 ${leaseP99.toFixed(1)} s, worst kill-to-progress p99 ${takeoverP99.toFixed(1)} s, 5xx ${sum((r) => r.http5xx)}, answers over 10 s ${sum((r) => r.slow)}, ERROR lines ${sum((r) => r.errorLines)}, branches left ${sum((r) => r.leftBranches)}, stale locks ${sum((r) => r.staleLocks)}`
  )
  process.exit(0)
}

await main()
