/**
 * Freezes over HTTP (#31), on PGlite and PostgreSQL: create ("freeze now until"), list, update and delete; bad input
 * answers the error envelope and changes nothing; getQueue shows the freeze in force and when it ends, and the PRs
 * that wait for it; changing freezes is `maintain`, and so is submitting with ignoreFreeze, which the audit log names.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Effect } from "effect"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const SLUG = "acme-org"
const repo = { host: "local", owner: "acme", name: "app" }
const key = { repo, targetBranch: "main" }

interface Freeze {
  readonly id: string
  readonly targetBranch: string | null
  readonly reason: string
  readonly mode: string
  readonly startsAt: string | null
  readonly endsAt: string | null
  readonly cron: string | null
  readonly active: boolean
  readonly activeUntil: string | null
  readonly nextStartAt: string | null
  readonly createdBy: string
}

for (const db of databases) {
  describe(`freezes over HTTP (${db})`, () => {
    let server: TestServer
    let root: string
    let git: TestRepo
    let write: string
    const call = (op: string, body: unknown, token = server.token) => server.post(op, body, { "x-api-token": token })
    const ok = async <A>(op: string, body: unknown, token = server.token): Promise<A> => {
      const r = await call(op, body, token)
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }
    const code = (r: { status: number; body: unknown }) => [
      r.status,
      (r.body as { error: { code: string } }).error.code
    ]
    const list = async () => (await ok<{ freezes: ReadonlyArray<Freeze> }>("listFreezes", { repo })).freezes

    beforeAll(async () => {
      root = tempDir("greenline-freezes-git-")
      git = createTestRepo({ root, repo })
      git.createPr(1, { files: { "pr1.txt": "1" } })
      server = await startTestServer({ db, gitRoot: root, leaseTimer: false, gitPollMs: 60_000 })
      write = (await server.run(Effect.flatMap(Tenancy, (t) => t.createToken(SLUG, "ci", "write")))).token
      await ok("createQueue", key)
      await ok("createQueue", { repo, targetBranch: "release" })
    })
    afterAll(async () => {
      await server?.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test("freeze now for two hours: listed, in force on getQueue with its end, then changed and deleted", async () => {
      const before = Date.now()
      const made = await ok<Freeze>("createFreeze", { ...key, reason: "release 4.2", forMinutes: 120 })
      expect(made).toMatchObject({ targetBranch: "main", reason: "release 4.2", mode: "merge", active: true })
      expect(Date.parse(made.startsAt!)).toBeGreaterThanOrEqual(before - 1000)
      expect(Date.parse(made.endsAt!) - Date.parse(made.startsAt!)).toBe(120 * 60_000)
      expect(made.activeUntil).toBe(made.endsAt)
      expect(made.createdBy).toBe("bootstrap")
      expect((await list()).map((f) => f.id)).toEqual([made.id])

      const queue = await ok<{
        freeze: { source: string; id: string; reason: string; mode: string; endsAt: string | null } | null
      }>("getQueue", key)
      expect(queue.freeze).toEqual({
        source: "freeze",
        id: made.id,
        reason: "release 4.2",
        mode: "merge",
        endsAt: made.endsAt
      })
      // the other queue of the repository is not frozen
      expect((await ok<{ freeze: unknown }>("getQueue", { repo, targetBranch: "release" })).freeze).toBeNull()

      const changed = await ok<Freeze>("updateFreeze", { repo, id: made.id, mode: "all", forMinutes: 30 })
      expect(changed.mode).toBe("all")
      expect(Date.parse(changed.endsAt!) - Date.parse(changed.startsAt!)).toBe(30 * 60_000)
      expect((await ok<{ freeze: { mode: string } }>("getQueue", key)).freeze.mode).toBe("all")

      expect(await ok<object>("deleteFreeze", { repo, id: made.id })).toEqual({})
      expect(await list()).toEqual([])
      expect((await ok<{ freeze: unknown }>("getQueue", key)).freeze).toBeNull()
      expect(code(await call("deleteFreeze", { repo, id: made.id }))).toEqual([404, "NOT_FOUND"])
    })

    test("a recurring freeze of every queue of the repository shows when it next starts", async () => {
      const made = await ok<Freeze>("createFreeze", {
        repo,
        reason: "weekend",
        cron: "0 16 * * 5",
        timeZone: "Europe/Berlin",
        durationMinutes: 64 * 60
      })
      expect(made).toMatchObject({ targetBranch: null, cron: "0 16 * * 5", startsAt: null, endsAt: null })
      expect(made.active ? made.activeUntil : made.nextStartAt).not.toBeNull()
      const forQueue = await ok<{ freezes: ReadonlyArray<Freeze> }>("listFreezes", key)
      expect(forQueue.freezes.map((f) => f.id)).toEqual([made.id])
      await ok("deleteFreeze", { repo, id: made.id })
    })

    test("bad input answers the error envelope and changes nothing", async () => {
      const bad: ReadonlyArray<Record<string, unknown>> = [
        { ...key, reason: "" },
        { ...key, reason: "x", cron: "0 16 * *", timeZone: "UTC", durationMinutes: 60 },
        { ...key, reason: "x", cron: "0 16 * * 5", timeZone: "Mars/Olympus", durationMinutes: 60 },
        { ...key, reason: "x", cron: "0 16 * * 5" },
        { ...key, reason: "x", startsAt: "2026-03-02T12:00:00Z", endsAt: "2026-03-02T10:00:00Z" },
        { ...key, reason: "x", endsAt: "2099-01-01T00:00:00Z", forMinutes: 5 },
        { ...key, reason: "x", mode: "sometimes" },
        { ...key, reason: "x", startsAt: "tomorrow" }
      ]
      for (const body of bad) expect(code(await call("createFreeze", body))).toEqual([400, "INVALID_REQUEST"])
      expect(code(await call("createFreeze", { repo, targetBranch: "nope", reason: "x" }))).toEqual([
        404,
        "QUEUE_NOT_FOUND"
      ])
      expect(await list()).toEqual([])
    })

    test("a merge schedule: set, shown by getQueue, checked, removed", async () => {
      const schedule = {
        timeZone: "America/New_York",
        windows: [{ days: [1, 2, 3, 4, 5], from: "09:00", to: "18:00" }]
      }
      const set = await ok<{ schedule: unknown; open: boolean; nextChangeAt: string | null }>("setMergeSchedule", {
        ...key,
        schedule
      })
      expect(set.schedule).toEqual(schedule)
      expect(set.nextChangeAt).not.toBeNull()
      const queue = await ok<{ mergeSchedule: unknown; freeze: { source: string } | null }>("getQueue", key)
      expect(queue.mergeSchedule).toEqual(schedule)
      expect(queue.freeze === null || queue.freeze.source === "schedule").toBe(true)
      expect(queue.freeze === null).toBe(set.open)
      for (const bad of [
        { ...schedule, timeZone: "Nowhere/None" },
        { ...schedule, windows: [{ days: [1], from: "18:00", to: "09:00" }] },
        { ...schedule, windows: [{ days: [9], from: "09:00", to: "18:00" }] }
      ]) {
        expect(code(await call("setMergeSchedule", { ...key, schedule: bad }))).toEqual([400, "INVALID_REQUEST"])
      }
      expect((await ok<{ mergeSchedule: unknown }>("getQueue", key)).mergeSchedule).toEqual(schedule)
      expect(code(await call("setMergeSchedule", { ...key, schedule }, write))).toEqual([403, "PERMISSION_DENIED"])
      await ok("setMergeSchedule", { ...key, schedule: null })
      const after = await ok<{ mergeSchedule: unknown; freeze: unknown }>("getQueue", key)
      expect(after.mergeSchedule).toBeNull()
      expect(after.freeze).toBeNull()
    })

    test("impact previews answer over HTTP and change nothing; a PR not in the queue is 409 PR_NOT_ACTIVE", async () => {
      const paused = key
      git.createPr(5, { files: { "pr5.txt": "5" } })
      await ok("updateQueue", { ...paused, state: "paused" })
      expect(code(await call("previewCancelPullRequest", { ...paused, pr: { number: 5 } }))).toEqual([
        409,
        "PR_NOT_ACTIVE"
      ])
      await ok("submitPullRequest", { ...paused, pr: { number: 5 } })
      for (const [op, extra] of [
        ["previewCancelPullRequest", {}],
        ["previewRestartTests", {}],
        ["previewSubmitPullRequest", { priority: "urgent" }]
      ] as const) {
        const p = await ok<{
          interruptedRuns: unknown[]
          retestedPrs: number[]
          estimates: Array<{ prNumber: number }>
        }>(op, { ...paused, pr: { number: 5 }, ...extra }, write)
        expect(p.interruptedRuns).toEqual([])
        expect(p.retestedPrs).toEqual([])
        expect(p.estimates.map((e) => e.prNumber)).toEqual([5])
      }
      const pr = await ok<{ state: string }>("getSubmittedPullRequest", { ...paused, pr: { number: 5 } })
      expect(pr.state).toBe("pending")
      await ok("cancelPullRequest", { ...paused, pr: { number: 5 } })
      await ok("updateQueue", { ...paused, state: "running" })
    })

    test("roles: a write token reads freezes but changes none, and cannot submit with ignoreFreeze; the audit log names who did", async () => {
      expect(await ok<object>("listFreezes", { repo }, write)).toEqual({ freezes: [] })
      expect(code(await call("createFreeze", { ...key, reason: "x" }, write))).toEqual([403, "PERMISSION_DENIED"])
      expect(code(await call("submitPullRequest", { ...key, pr: { number: 1 }, ignoreFreeze: true }, write))).toEqual([
        403,
        "PERMISSION_DENIED"
      ])
      expect(await list()).toEqual([])
      await ok("submitPullRequest", { ...key, pr: { number: 1 }, ignoreFreeze: true })
      const audit = await ok<{ events: ReadonlyArray<{ action: string; target: string; outcome: string }> }>(
        "listAuditEvents",
        {}
      )
      const submits = audit.events.filter((e) => e.action === "submitPullRequest")
      expect(submits.some((e) => e.outcome === "allowed" && e.target === "local/acme/app@main #1 ignoreFreeze")).toBe(
        true
      )
      await ok("cancelPullRequest", { ...key, pr: { number: 1 } })
    })
  })
}
