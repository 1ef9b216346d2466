/**
 * `npm test`: the whole suite, its test files run by a few `bun test` processes at once (TEST_WORKERS, default 2),
 * longest files first (by their wall time in the last whole run, by size before). Each file's output is printed in
 * one piece when it ends; the end lists the slowest files, then Bun's own summary (" N pass", " N fail"), added up.
 * With arguments, it is plain `bun test` with them (`npm test -- test/unit`).
 *
 * Why files in parallel: most of a test's time is spent waiting (for a server to start, git, a runner's round), so
 * two processes on two cores finish the suite sooner than one. Each process gets the same migrated embedded
 * database to start its servers from (GREENLINE_TEST_SEED, made once here), and each fresh PostgreSQL database is a
 * copy of one migrated here (GREENLINE_TEST_PG_TEMPLATE).
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
const queue = [...files]
/** each file's wall time and when it started (s after the suite's start), for the summary of where the time goes */
const durations: Array<{ readonly file: string; readonly seconds: number; readonly startedAt: number }> = []

const runFile = async (file: string) => {
  const fileStarted = performance.now()
  // one stream, as a terminal shows it: what a server logged stays next to the test that made it log
  const child = Bun.spawn(["sh", "-c", 'exec "$0" "$@" 2>&1', bun, "test", ...TIMEOUT, `./${file}`], {
    cwd: root,
    env,
    stdin: "ignore",
    stdout: "pipe"
  })
  const [text, code] = await Promise.all([new Response(child.stdout).text(), child.exited])
  durations.push({ file, seconds: (performance.now() - fileStarted) / 1000, startedAt: (fileStarted - started) / 1000 })
  const count = (word: string) => Number(new RegExp(`^ *(\\d+) ${word}$`, "m").exec(text)?.[1] ?? 0)
  const filePassed = count("pass")
  let fileFailed = count("fail")
  // a process that ended badly without a summary (a crash) counts as a failure of its file
  if (code !== 0 && fileFailed === 0) {
    fileFailed = 1
    failures.push(`(fail) ${file}: bun test exited with ${code} without a summary`)
  }
  passed += filePassed
  failed += fileFailed
  ran += filePassed + fileFailed
  for (const line of text.split("\n")) if (line.startsWith("(fail)") && !failures.includes(line)) failures.push(line)
  // the file's own output, without Bun's banner and per-file summary (the sums follow at the end)
  const body = text
    .split("\n")
    .filter((l) => !/^bun test v|^ *\d+ (pass|fail|expect\(\) calls)$|^Ran \d+ tests? across/.test(l))
    .filter((l, i, all) => !(l === "" && all[i - 1] === ""))
    .join("\n")
    .trim()
  process.stdout.write(`${body}\n\n`)
}

await Promise.all(
  Array.from({ length: Math.min(workers, files.length) }, async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) await runFile(file)
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
if (failures.length > 0) {
  process.stdout.write(`${failures.length} tests failed:\n${failures.join("\n")}\n\n`)
}
const seconds = ((performance.now() - started) / 1000).toFixed(2)
process.stdout.write(` ${passed} pass\n ${failed} fail\nRan ${ran} tests across ${files.length} files. [${seconds}s]\n`)
process.exit(failed > 0 ? 1 : 0)
