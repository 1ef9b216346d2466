import { Database } from "bun:sqlite"
import { afterAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { createTestRepo } from "../support/git.ts"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { type ServerProcess, spawnServer } from "../support/process.ts"
import { removeDir, tempDir } from "../support/tmp.ts"

/**
 * Backups of the embedded database (issue 38): `greenline backup <file>` while the server serves, with pull requests
 * in the queue and writes going on, then `greenline restore <file>` into a new data directory: a server there has the
 * same queues, pull requests, timelines, tokens and flaky-test history. A restore refuses a data directory that
 * holds a database, one a server runs on, and a file that is not a whole backup; PostgreSQL is pg_dump's.
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const TOKEN = "backup-test-token-0123456789abcdef0123456789"
const repoRef = { host: "local", owner: "acme", name: "backup" }
const Q = { repo: repoRef, targetBranch: "main" }
const scope = { repo: repoRef, org_url_slug: "default" }

const cli = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Bun.spawn([process.execPath, "src/cli.ts", ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: "", BOOTSTRAP_TOKEN: "", ...env },
    stdout: "pipe",
    stderr: "pipe"
  })

const cliDone = async (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const child = cli(args, env)
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { code, out, err }
}

const junit = (retried: boolean) => `<?xml version="1.0"?>
<testsuite name="suite" tests="1">
  <testcase classname="app.cart" name="test_add_item" file="tests/cart_test.py" time="0.2">${
    retried ? `<flakyFailure message="stale session">AssertionError: stale session</flakyFailure>` : ""
  }</testcase>
</testsuite>`

const ok = async <A = Record<string, unknown>>(server: ServerProcess, op: string, body: unknown): Promise<A> => {
  const r = await server.post(op, body)
  if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
  return r.body as A
}

interface Pr {
  readonly state: string
  readonly testRunId?: string | null
  readonly timeline?: Array<unknown>
}

const prOf = (server: ServerProcess, n: number) =>
  ok<Pr>(server, "getSubmittedPullRequest", { ...Q, pr: { number: n }, includeTimeline: true })

const until = async (what: string, check: () => Promise<boolean>, ms = 60_000) => {
  const deadline = performance.now() + ms
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(100)
  }
}

/** What the restored server must answer the same: the queue, each PR with its timeline, tokens, flaky history. */
const snapshot = async (server: ServerProcess, testId: string) => {
  const queue = await ok<{
    state: string
    concurrency: number
    enqueuedPullRequests: ReadonlyArray<{ number: number }>
  }>(server, "getQueue", Q)
  const prs = await Promise.all([1, 2, 3].map((n) => prOf(server, n)))
  const tokens = await ok<{ tokens: ReadonlyArray<{ id: string; name: string }> }>(server, "listApiTokens", {})
  const history = await ok<{ statusHistory: ReadonlyArray<unknown> }>(server, "flaky-tests/get-test-history", {
    repo: repoRef,
    test_id: testId
  })
  const queues = await ok<{ queues: ReadonlyArray<{ repo: { name: string } }> }>(server, "listQueues", {})
  return {
    queue: {
      state: queue.state,
      concurrency: queue.concurrency,
      enqueued: queue.enqueuedPullRequests.map((p) => p.number)
    },
    prs: prs.map((p) => ({ state: p.state, testRunId: p.testRunId ?? null, timeline: p.timeline })),
    tokens: tokens.tokens.map((t) => [t.id, t.name]).sort(),
    history: history.statusHistory,
    queueCount: queues.queues.length
  }
}

describe("backup and restore of the embedded database", () => {
  const dirs: Array<string> = []
  const servers: Array<ServerProcess> = []
  afterAll(async () => {
    for (const s of servers) await s.kill("SIGKILL").catch(() => {})
    for (const d of dirs) removeDir(d)
  })

  test("a backup made while serving, with PRs in the queue, restores into a new data directory with the same state", async () => {
    const dataDir = await seededDataDir()
    const gitRoot = tempDir("greenline-backup-git-")
    const work = tempDir("greenline-backup-")
    dirs.push(dataDir, gitRoot, work)
    const repo = createTestRepo({ root: gitRoot, repo: repoRef })
    for (const n of [1, 2, 3]) repo.createPr(n, { files: { [`f${n}.txt`]: `${n}\n` }, title: `Change ${n}` })
    const env = { DATA_DIR: dataDir, DATABASE_URL: "", GIT_ROOT: gitRoot, GIT_POLL_MS: "200" }
    const first = await spawnServer(env, TOKEN)
    servers.push(first)

    // a queue that waits for CI status "ci": PR 1 merges, PR 2 waits in testing, PR 3 behind it
    await ok(first, "createQueue", { ...Q, concurrency: 1 })
    await ok(first, "updateQueue", { ...Q, requiredStatuses: ["ci"] })
    for (const n of [1, 2, 3]) await ok(first, "submitPullRequest", { ...Q, pr: { number: n } })
    await until("PR 1 testing", async () => (await prOf(first, 1)).testRunId != null)
    const run = (await prOf(first, 1)).testRunId
    let sha = ""
    await until("PR 1's test branch", async () => {
      const details = await ok<{ testBranchSha: string }>(first, "getMergeQueueTestingDetails", {
        ...Q,
        testRunId: run
      })
      sha = details.testBranchSha
      return sha !== ""
    })
    await ok(first, "reportStatus", { repo: repoRef, sha, context: "ci", state: "success" })
    await until("PR 1 merged and PR 2 testing", async () => {
      const [one, two] = await Promise.all([prOf(first, 1), prOf(first, 2)])
      return one.state === "merged" && two.testRunId != null
    })

    // a token and a flaky test with a status history
    const made = await ok<{ id: string; token: string }>(first, "createApiToken", { name: "restored-ci" })
    await ok(first, "flaky-tests/update-settings", { ...scope, quarantining_enabled: true, auto_quarantine: true })
    for (const [retried, sha] of [
      [false, "a"],
      [true, "b"]
    ] as const) {
      const form = new FormData()
      form.append(
        "metadata",
        JSON.stringify({ ...scope, sha: sha.repeat(40), branch: "main", run_at: new Date().toISOString() })
      )
      form.append("junit", new File([junit(retried)], "junit.xml", { type: "application/xml" }))
      const r = await fetch(`${first.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": TOKEN },
        body: form
      })
      expect(r.status).toBe(200)
    }
    const failing = await ok<{ tests: ReadonlyArray<{ id: string; name: string }> }>(
      first,
      "flaky-tests/list-failing-tests",
      {
        ...scope,
        start_time: new Date(Date.now() - 86_400_000).toISOString(),
        end_time: new Date(Date.now() + 3_600_000).toISOString(),
        page_query: { page_size: 10, page_token: "" }
      }
    )
    const testId = failing.tests.find((t) => t.name === "test_add_item")?.id ?? ""
    expect(testId).not.toBe("")

    const before = await snapshot(first, testId)
    expect(before.prs.map((p) => p.state)).toEqual(["merged", "testing", "pending"])
    expect(before.history.length).toBeGreaterThan(0)

    // the backup, while other requests write on: each acknowledged one before the backup is in it
    let writing = true
    let written = 0
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        const r = await first.post("createQueue", { repo: { ...repoRef, name: `busy-${i}` }, targetBranch: "main" })
        expect(r.status).toBe(200)
        written++
      }
    })()
    await until("a few writes", async () => written >= 3)
    const file = path.join(work, "nested", "greenline.tar.gz")
    const backup = await cliDone(["backup", file], { DATA_DIR: dataDir })
    writing = false
    await writer
    expect({ code: backup.code, err: backup.err }).toEqual({ code: 0, err: "" })
    expect(backup.out).toContain(`(made by the running server, process ${first.pid})`)
    expect(fs.readdirSync(path.dirname(file))).toEqual(["greenline.tar.gz"])
    // its owner's only: it holds token hashes and webhook secrets
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)

    // nothing moved in the queue meanwhile (the PRs wait for a status): what the restore must show
    expect(await snapshot(first, testId)).toMatchObject({
      prs: before.prs,
      tokens: before.tokens,
      history: before.history
    })
    await first.kill("SIGTERM")

    const restoredDir = path.join(tempDir("greenline-restored-"), "data")
    dirs.push(path.dirname(restoredDir))
    const restore = await cliDone(["restore", file], { DATA_DIR: restoredDir })
    expect({ code: restore.code, err: restore.err }).toEqual({ code: 0, err: "" })
    expect(restore.out).toContain(`restored ${file} into ${restoredDir}`)

    const second = await spawnServer({ ...env, DATA_DIR: restoredDir }, TOKEN)
    servers.push(second)
    const after = await snapshot(second, testId)
    expect(after.queue).toEqual(before.queue)
    expect(after.tokens).toEqual(before.tokens)
    expect(after.history).toEqual(before.history)
    expect(after.prs.map((p) => [p.state, p.testRunId])).toEqual(before.prs.map((p) => [p.state, p.testRunId]))
    // the restored server may go on with a PR's story, never rewrite it
    for (const [i, p] of after.prs.entries()) {
      expect(p.timeline?.slice(0, before.prs[i]?.timeline?.length)).toEqual(before.prs[i]?.timeline)
    }
    // the queues made while the backup ran: those before it are there, none is half there
    expect(after.queueCount).toBeGreaterThanOrEqual(before.queueCount + 3)
    expect(after.queueCount).toBeLessThanOrEqual(before.queueCount + written)
    // the token made before the backup works on the restored server
    const withToken = await fetch(`${second.url}/v1/getQueue`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-token": made.token },
      body: JSON.stringify(Q)
    })
    expect(withToken.status).toBe(200)

    // a restore never overwrites: not a data directory with a database, not one a server runs on
    const again = await cliDone(["restore", file], { DATA_DIR: restoredDir })
    expect(again.code).not.toBe(0)
    expect(again.err).toContain("in use by process")
    await second.kill("SIGTERM")
    const over = await cliDone(["restore", file], { DATA_DIR: restoredDir })
    expect(over.code).not.toBe(0)
    expect(over.err).toContain("already holds a database")

    // a backup with no server running opens the database itself
    const offline = await cliDone(["backup", path.join(work, "offline.tar.gz")], { DATA_DIR: restoredDir })
    expect({ code: offline.code, err: offline.err }).toEqual({ code: 0, err: "" })
    expect(offline.out).not.toContain("running server")
  }, 240_000)

  test("refusals: a damaged file, an empty data directory to back up, PostgreSQL", async () => {
    const work = tempDir("greenline-backup-refusals-")
    dirs.push(work)
    const damaged = path.join(work, "damaged.tar.gz")
    fs.writeFileSync(damaged, Bun.gzipSync(new Uint8Array(4096)).slice(0, 100))
    const bad = await cliDone(["restore", damaged], { DATA_DIR: path.join(work, "into") })
    expect(bad.code).not.toBe(0)
    expect(bad.err).toContain("is not a backup of Greenline")
    // nothing was left where the restore would have gone
    expect(fs.existsSync(path.join(work, "into", "pg"))).toBe(false)
    const notTar = path.join(work, "not.tar.gz")
    fs.writeFileSync(notTar, Bun.gzipSync(new Uint8Array(8192).fill(7)))
    const notOne = await cliDone(["restore", notTar], { DATA_DIR: path.join(work, "into2") })
    expect(notOne.code).not.toBe(0)
    expect(fs.existsSync(path.join(work, "into2", "pg"))).toBe(false)
    // a SQLite file is no PostgreSQL data directory either
    const sqlite = path.join(work, "other.db")
    new Database(sqlite).run("create table t (a int)")
    expect((await cliDone(["restore", sqlite], { DATA_DIR: path.join(work, "into3") })).code).not.toBe(0)

    const empty = await cliDone(["backup", path.join(work, "b.tar.gz")], { DATA_DIR: path.join(work, "nothing") })
    expect(empty.code).not.toBe(0)
    expect(empty.err).toContain("there is no embedded database")
    expect(fs.existsSync(path.join(work, "nothing", "pg"))).toBe(false)

    const pg = await cliDone(["backup", path.join(work, "b.tar.gz")], { DATABASE_URL: "postgres://127.0.0.1:1/none" })
    expect(pg.code).not.toBe(0)
    expect(pg.err).toContain("pg_dump")
  }, 60_000)
})
