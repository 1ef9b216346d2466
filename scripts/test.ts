/**
 * `npm test`: the whole suite in a few `bun test` processes at once (TEST_WORKERS, default 2). Most test files share
 * processes, in chunks of about 40 s by each file's wall time in the last whole run (by size before); a file that
 * starts processes of its own runs alone. Each file's output is printed in one piece when it ends; the end lists the
 * slowest files, then Bun's own summary (" N pass", " N fail"), added up. With arguments, it is plain `bun test` with
 * them (`npm test -- test/unit`).
 *
 * Why shared processes and not one per file: each new process compiles the same code again (the JIT warming up on
 * Effect's runtime, the PGlite module), which cost a third of the suite's CPU; two processes on two cores still
 * overlap one file's waiting (a server starting, git, a runner's round) with the other's work. Each process gets the
 * same migrated embedded database to start its servers from (GREENLINE_TEST_SEED, made once here), and each fresh
 * PostgreSQL database is a copy of one migrated here (GREENLINE_TEST_PG_TEMPLATE).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SQL } from "bun"

const root = path.join(import.meta.dir, "..")
const bun = process.execPath
const TIMEOUT = ["--timeout", "120000"]

const args = process.argv.slice(2)
if (args.length > 0) {
  const child = Bun.spawn([bun, "test", ...TIMEOUT, ...args], { cwd: root, stdio: ["inherit", "inherit", "inherit"] })
  process.exit(await child.exited)
}

const started = performance.now()
/** Each file's wall time in the last whole run (s), kept out of the repository; a file's size guesses the others'. */
const TIMES_FILE = path.join(root, "node_modules", ".cache", "greenline-test-times.json")
const lastTimes = ((): Record<string, number> => {
  try {
    return JSON.parse(fs.readFileSync(TIMES_FILE, "utf8")) as Record<string, number>
  } catch {
    return {}
  }
})()
const paths = (fs.readdirSync(path.join(root, "test"), { recursive: true }) as Array<string>)
  .filter((f) => /\.test\.tsx?$/.test(f))
  .map((f) => path.join("test", f))
const sizeOf = (f: string) => fs.statSync(path.join(root, f)).size
// seconds per byte of the files timed before, to put the sizes of new files on the same scale
const timed = paths.filter((f) => lastTimes[f] !== undefined)
const perByte =
  timed.length === 0 ? 1 : timed.reduce((t, f) => t + lastTimes[f]!, 0) / timed.reduce((t, f) => t + sizeOf(f), 0)
const guess = new Map(paths.map((f) => [f, lastTimes[f] ?? sizeOf(f) * perByte]))
// longest first: a long file started last would end last, after the other workers ran out of files
const files = paths.sort((a, b) => guess.get(b)! - guess.get(a)!)

const workers = Math.max(1, Number(process.env.TEST_WORKERS ?? 2) || 2)
const seedFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "greenline-seed-")), "seed.tar")
const made = Bun.spawnSync([bun, "test/support/pgliteSeed.ts", seedFile], { cwd: root, stderr: "inherit" })
// and, with TEST_DATABASE_URL, one migrated PostgreSQL database that each test's fresh database copies
const pgUrl = process.env.TEST_DATABASE_URL
const pgTemplate = pgUrl ? `gl_test_template_${process.pid}` : undefined
const pgAdmin = async (url: string, statement: string) => {
  const admin = new SQL(url)
  try {
    await admin.unsafe(statement)
  } finally {
    await admin.close()
  }
}
let templateMade = false
if (pgUrl !== undefined && pgTemplate !== undefined) {
  try {
    await pgAdmin(pgUrl, `create database ${pgTemplate}`)
    const url = new URL(pgUrl)
    url.pathname = `/${pgTemplate}`
    templateMade =
      Bun.spawnSync([bun, "test/support/pgTemplate.ts", url.toString()], { cwd: root, stderr: "inherit" }).exitCode ===
      0
  } catch (error) {
    process.stderr.write(`no migrated PostgreSQL template (each test database migrates itself): ${error}\n`)
  }
}
const env = {
  ...process.env,
  ...(made.exitCode === 0 ? { GREENLINE_TEST_SEED: seedFile } : {}),
  ...(templateMade && pgTemplate !== undefined ? { GREENLINE_TEST_PG_TEMPLATE: pgTemplate } : {})
}

let passed = 0
let failed = 0
let ran = 0
const failures: Array<string> = []
const bunCrashes: Array<string> = []
/** each file's wall time and when it started (s after the suite's start), for the summary of where the time goes */
const durations: Array<{ readonly file: string; readonly seconds: number; readonly startedAt: number }> = []

/** Bun's banner, per-process summary and blank runs: the sums follow at the end */
const bodyOf = (lines: ReadonlyArray<string>) =>
  lines
    .filter((l) => !/^bun test v|^ *\d+ (pass|fail|expect\(\) calls)$|^Ran \d+ tests? across/.test(l))
    .filter((l, i, all) => !(l === "" && all[i - 1] === ""))
    .join("\n")
    .trim()

/**
 * Runs `group` in one `bun test` process. Its output is cut at Bun's file headers ("test/x.test.ts:"), so each
 * file's part is printed in one piece as soon as the next file begins, and each file's wall time is the time from
 * its header to the next.
 */
const runGroup = async (group: ReadonlyArray<string>, attempt = 0): Promise<void> => {
  // one stream, as a terminal shows it: what a server logged stays next to the test that made it log
  const child = Bun.spawn(["sh", "-c", 'exec "$0" "$@" 2>&1', bun, "test", ...TIMEOUT, ...group.map((f) => `./${f}`)], {
    cwd: root,
    env,
    stdin: "ignore",
    stdout: "pipe"
  })
  const headers = new Set(group.map((f) => `${f}:`))
  let current: { file: string; startedAt: number; lines: Array<string> } | undefined
  const before: Array<string> = []
  const all: Array<string> = []
  const endFile = () => {
    if (current === undefined) return
    const now = performance.now()
    durations.push({
      file: current.file,
      seconds: (now - current.startedAt) / 1000,
      startedAt: (current.startedAt - started) / 1000
    })
    process.stdout.write(`${bodyOf(current.lines)}\n\n`)
    current = undefined
  }
  // Bun lists the process's failed tests again at its end: the sums at the end list them once for all processes
  let trailer = false
  const take = (line: string) => {
    all.push(line)
    if (/^\d+ tests? failed:$/.test(line)) trailer = true
    if (trailer) return
    if (headers.has(line)) {
      endFile()
      // what the process printed before its first header (a file's set-up logs) belongs to that file
      current = { file: line.slice(0, -1), startedAt: performance.now(), lines: [...before.splice(0), line] }
    } else (current?.lines ?? before).push(line)
  }
  let rest = ""
  const decoder = new TextDecoder()
  for await (const chunk of child.stdout) {
    const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n")
    rest = lines.pop() ?? ""
    for (const line of lines) take(line)
  }
  if (rest !== "") take(rest)
  const code = await child.exited
  const crashedIn = current?.file
  endFile()
  if (before.length > 0) process.stdout.write(`${bodyOf(before)}\n\n`)
  const text = all.join("\n")
  const count = (word: string) => Number(new RegExp(`^ *(\\d+) ${word}$`, "m").exec(text)?.[1] ?? 0)
  // Bun itself crashed (a segfault it reports as "a bug in Bun, not your code"): the process's results are lost,
  // whatever its tests did; its files run once more in a new process, and the run says so at its end
  if (code !== 0 && attempt === 0 && /oh no: Bun has crashed/.test(text)) {
    bunCrashes.push(`Bun crashed (exit ${code}) in ${crashedIn ?? group.join(", ")}; its files ran again`)
    process.stdout.write(`\n${bunCrashes.at(-1)}\n\n`)
    return runGroup(group, attempt + 1)
  }
  const groupPassed = count("pass")
  let groupFailed = count("fail")
  // a process that ended badly without a summary (a crash) counts as a failure of the file it was running
  if (code !== 0 && groupFailed === 0) {
    groupFailed = 1
    failures.push(`(fail) ${crashedIn ?? group.join(", ")}: bun test exited with ${code} without a summary`)
  }
  passed += groupPassed
  failed += groupFailed
  ran += groupPassed + groupFailed
  for (const line of all) if (line.startsWith("(fail)") && !failures.includes(line)) failures.push(line)
}

// The units the workers take, longest first. A file that starts processes of its own (servers, npm, the CLI) runs
// alone: in a process that already spawned and closed many children, Bun's spawn failed now and then with EBADF
// (epoll_ctl). The others share processes in chunks of about CHUNK_SECONDS, so each process lives a short while.
const CHUNK_SECONDS = 40
const spawnsProcesses = (file: string) =>
  /spawnServer|Bun\.spawn|child_process|spawnSync/.test(fs.readFileSync(path.join(root, file), "utf8"))
const units: Array<{ readonly files: Array<string>; seconds: number }> = []
const chunks: Array<{ readonly files: Array<string>; seconds: number }> = []
for (const file of files) {
  const seconds = guess.get(file)!
  if (spawnsProcesses(file)) {
    units.push({ files: [file], seconds })
    continue
  }
  // longest first, each into the emptiest chunk that has room (a new chunk when none has)
  const open = chunks.filter((c) => c.seconds + seconds <= CHUNK_SECONDS).sort((a, b) => a.seconds - b.seconds)[0]
  if (open === undefined) chunks.push({ files: [file], seconds })
  else {
    open.files.push(file)
    open.seconds += seconds
  }
}
const queue = [...units, ...chunks].sort((a, b) => b.seconds - a.seconds)
await Promise.all(
  Array.from({ length: Math.min(workers, queue.length) }, async () => {
    for (let unit = queue.shift(); unit !== undefined; unit = queue.shift()) await runGroup(unit.files)
  })
)
fs.rmSync(path.dirname(seedFile), { recursive: true, force: true })
if (pgUrl !== undefined && pgTemplate !== undefined) {
  await pgAdmin(pgUrl, `drop database if exists ${pgTemplate} with (force)`).catch(() => undefined)
}
// the next run's order (written aside and renamed: the cache directory may be shared by hard links)
try {
  fs.mkdirSync(path.dirname(TIMES_FILE), { recursive: true })
  const next = `${TIMES_FILE}.${process.pid}`
  fs.writeFileSync(
    next,
    JSON.stringify(Object.fromEntries(durations.map((d) => [d.file, Math.round(d.seconds * 10) / 10])))
  )
  fs.renameSync(next, TIMES_FILE)
} catch {}

// where the time went: the slowest files, with when each started (a long file started late ends late)
const SLOWEST = 15
const slowest = [...durations].sort((a, b) => b.seconds - a.seconds).slice(0, SLOWEST)
process.stdout.write(
  `The ${slowest.length} slowest of ${durations.length} files (wall time; started at, s):\n${slowest
    .map((d) => `${d.seconds.toFixed(1).padStart(6)} s  @${d.startedAt.toFixed(0).padStart(4)}  ${d.file}`)
    .join("\n")}\n\n`
)
if (bunCrashes.length > 0) process.stdout.write(`${bunCrashes.join("\n")}\n\n`)
if (failures.length > 0) {
  process.stdout.write(`${failures.length} tests failed:\n${failures.join("\n")}\n\n`)
}
const seconds = ((performance.now() - started) / 1000).toFixed(2)
process.stdout.write(` ${passed} pass\n ${failed} fail\nRan ${ran} tests across ${files.length} files. [${seconds}s]\n`)
process.exit(failed > 0 ? 1 : 0)
