import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Clock, Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { layerPgliteMemory, layerPostgres } from "../../src/db/Database.ts"
import type { FlakyError } from "../../src/flaky/errors.ts"
import { FlakyEvents, type QuarantineSettingChanged } from "../../src/flaky/events.ts"
import { Flaky, FlakyLive } from "../../src/flaky/Flaky.ts"
import { fromDomainError } from "../../src/http/errors.ts"
import { BunRuntimeLive } from "../../src/kernel/bunRuntime.ts"
import type { Database } from "../../src/kernel/Database.ts"
import { GitError, GitHost, type GitHostService } from "../../src/queue/GitHost.ts"
import { type Organization, Tenancy, TenancyLive } from "../../src/tenancy/Tenancy.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"

/**
 * Quarantine with an owner and an end (issue #20, semantics §8 revised): overrides with owner, reason, ticket and
 * expiry; expired overrides lapse and say so once; auto-quarantined tests leave after N clean runs; the export (JSON,
 * CSV) and its import. Time is the service's clock, set by the test.
 */

const HOUR = 3_600_000
const DAY = 24 * HOUR
const T0 = Date.UTC(2026, 2, 1, 9)

let simNow = T0
const clock: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => simNow,
  unsafeCurrentTimeNanos: () => BigInt(simNow) * 1_000_000n,
  currentTimeMillis: Effect.sync(() => simNow),
  currentTimeNanos: Effect.sync(() => BigInt(simNow) * 1_000_000n),
  sleep: () => Effect.void
}

const gitStub = Layer.succeed(GitHost, {
  readFile: () => Effect.fail(new GitError({ message: "not on disk" } as never))
} as unknown as GitHostService)

type Db = Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error>

const sent: QuarantineSettingChanged[] = []
const recorder = Layer.succeed(FlakyEvents, {
  quarantiningSettingChanged: (changes) => Effect.sync(() => void sent.push(...changes))
})

const appLayer = (db: Db) =>
  FlakyLive.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        TenancyLive,
        makeAppConfig({ publicUrl: "http://greenline.test" }),
        gitStub,
        recorder,
        BunRuntimeLive
      ).pipe(Layer.provideMerge(db))
    )
  )

const junit = (cases: ReadonlyArray<readonly [string, "passed" | "failed"]>) =>
  `<?xml version="1.0"?>\n<testsuites><testsuite name="s">${cases
    .map(([name, status]) =>
      status === "failed"
        ? `<testcase name="${name}" classname="pkg.C" file="src/a.test.ts"><failure message="boom">x</failure></testcase>`
        : `<testcase name="${name}" classname="pkg.C" file="src/a.test.ts"/>`
    )
    .join("\n")}</testsuite></testsuites>\n`

const suite = (kind: string, makeDb: () => Promise<{ db: Db; cleanup: () => Promise<void> } | undefined>) =>
  describe(`quarantine lifecycle on ${kind}`, () => {
    let rt: ManagedRuntime.ManagedRuntime<Flaky | Tenancy | SqlClient.SqlClient, unknown>
    let cleanup: () => Promise<void> = async () => {}
    let org: Organization
    let skipped = false

    beforeAll(async () => {
      const made = await makeDb()
      if (made === undefined) {
        skipped = true
        return
      }
      cleanup = made.cleanup
      rt = ManagedRuntime.make(appLayer(made.db))
      org = await rt.runPromise(Effect.flatMap(Tenancy, (t) => t.createOrg("acme", true)))
    })
    afterAll(async () => {
      if (!skipped) await rt.dispose()
      await cleanup()
    })

    const run = <A>(f: (flaky: typeof Flaky.Service) => Effect.Effect<A, FlakyError>) =>
      rt.runPromise(Effect.flatMap(Flaky, f).pipe(Effect.withClock(clock)))
    // the service's domain error as the HTTP edge answers it
    const fail = <A>(f: (flaky: typeof Flaky.Service) => Effect.Effect<A, FlakyError>) =>
      rt.runPromise(
        Effect.flip(Effect.mapError(Effect.flatMap(Flaky, f), fromDomainError)).pipe(Effect.withClock(clock))
      )
    const repoRef = (name: string) => ({ host: "github.com", owner: "acme", name })
    const scope = (repo: string) => ({ repo: repoRef(repo), org_url_slug: "acme" })
    let shaN = 0
    const upload = (repo: string, cases: ReadonlyArray<readonly [string, "passed" | "failed"]>, sha?: string) =>
      run((f) =>
        f.upload(
          org,
          JSON.stringify({
            repo: repoRef(repo),
            org_url_slug: "acme",
            sha: sha ?? `${++shaN}`.padStart(40, "0"),
            branch: "main"
          }),
          [{ filename: "a.xml", bytes: new TextEncoder().encode(junit(cases)) }]
        )
      )
    const quarantined = (repo: string) =>
      run((f) => f.listQuarantinedTests(org, { ...scope(repo), page_query: { page_size: 100, page_token: "" } })).then(
        (r) => r.quarantined_tests.map((t) => t.name)
      )
    const others: ReadonlyArray<readonly [string, "passed"]> = [
      ["o1", "passed"],
      ["o2", "passed"],
      ["o3", "passed"],
      ["o4", "passed"]
    ]

    test("an override carries owner, reason, ticket and expiry; an expired one lapses and says so once", async () => {
      if (skipped) return
      simNow = T0
      sent.length = 0
      await upload("own", [["t1", "failed"], ...others])
      await run((f) => f.updateSettings(org, { ...scope("own"), quarantining_enabled: true }))
      // the test is in no export yet (no override, not quarantined): set it by its id from the failing list
      const failing = await run((f) =>
        f.listFailingTests(org, {
          ...scope("own"),
          start_time: new Date(T0 - DAY).toISOString(),
          end_time: new Date(T0 + HOUR).toISOString(),
          page_query: { page_size: 100, page_token: "" }
        })
      )
      const id = failing.tests[0]?.id ?? ""
      // bad input: an owner that is no CODEOWNERS owner, a ticket that is no URL, an expiry in the past
      const bad = await fail((f) =>
        f.setQuarantineOverride(org, {
          ...scope("own"),
          test_case_id: id,
          override: "always_quarantine",
          expires_at: new Date(T0 - HOUR).toISOString()
        })
      )
      expect(bad).toMatchObject({ status: 400, code: "INVALID_REQUEST" })
      expect(bad.details?.[0]?.path).toBe("expires_at")
      expect(sent).toEqual([])

      const expires = new Date(T0 + 2 * DAY).toISOString()
      await run((f) =>
        f.setQuarantineOverride(org, {
          ...scope("own"),
          test_case_id: id,
          override: "always_quarantine",
          owner: "@acme/payments",
          reason: "times out on the shared runner, see ticket",
          ticket_url: "https://tracker.example/PAY-12",
          expires_at: expires
        })
      )
      expect(await quarantined("own")).toEqual(["t1"])
      const exported = await run((f) => f.exportQuarantine(org, { org_url_slug: "acme", repo: "acme/own" }))
      expect(exported.tests).toEqual([
        expect.objectContaining({
          test_case_id: id,
          name: "t1",
          quarantine_setting: "always_quarantine",
          quarantined: true,
          owner: "@acme/payments",
          reason: "times out on the shared runner, see ticket",
          ticket_url: "https://tracker.example/PAY-12",
          expires_at: expires,
          set_at: new Date(T0).toISOString()
        })
      ])
      expect(sent).toEqual([
        expect.objectContaining({ testCaseId: id, previous: "unspecified", current: "always_quarantine", cause: "set" })
      ])
      let s = await upload("own", [["t1", "failed"], ...others])
      expect(s.all_failures_quarantined).toBe(true)

      // past the expiry: the next upload finds the override lapsed, and the failure counts again
      simNow = T0 + 2 * DAY + 1
      s = await upload("own", [["t1", "failed"], ...others])
      expect(s).toMatchObject({ quarantined_failures: 0, unquarantined_failures: 1, all_failures_quarantined: false })
      expect(await quarantined("own")).toEqual([])
      expect(sent.slice(1)).toEqual([
        expect.objectContaining({
          testCaseId: id,
          previous: "always_quarantine",
          current: "unspecified",
          cause: "expired",
          owner: "@acme/payments",
          expiresAt: new Date(expires)
        })
      ])
      // once
      await upload("own", [["t1", "failed"], ...others])
      expect(sent.length).toBe(2)
    })

    test("bad owner and ticket URL are refused with their paths", async () => {
      if (skipped) return
      simNow = T0
      await upload("own2", [["t1", "failed"], ...others])
      const id = (
        await run((f) =>
          f.listFailingTests(org, {
            ...scope("own2"),
            start_time: new Date(T0 - DAY).toISOString(),
            end_time: new Date(T0 + HOUR).toISOString(),
            page_query: { page_size: 100, page_token: "" }
          })
        )
      ).tests[0]?.id
      const { Schema } = await import("effect")
      const { SetQuarantineOverrideRequest } = await import("../../src/flaky/schemas.ts")
      const decode = Schema.decodeUnknownEither(SetQuarantineOverrideRequest, { errors: "all" })
      const base = { ...scope("own2"), test_case_id: id, override: "always_quarantine" }
      expect(decode({ ...base, owner: "payments team" })._tag).toBe("Left")
      expect(decode({ ...base, ticket_url: "ftp://x/y" })._tag).toBe("Left")
      expect(decode({ ...base, owner: "@acme/payments", ticket_url: "https://t.example/1" })._tag).toBe("Right")
      expect(decode({ ...base, owner: "dev@example.com" })._tag).toBe("Right")
    })

    test("an auto-quarantined test leaves quarantine after N clean runs, and comes back when it fails again", async () => {
      if (skipped) return
      simNow = T0
      const settings = await run((f) =>
        f.updateSettings(org, {
          ...scope("auto"),
          quarantining_enabled: true,
          auto_quarantine: true,
          auto_release_clean_runs: 3
        })
      )
      expect(settings).toEqual({ quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 3 })
      // failed and passed on one commit: flaky, auto-quarantined
      const sha = "f".repeat(40)
      await upload("auto", [["a1", "failed"], ["a1", "passed"], ...others], sha)
      expect(await quarantined("auto")).toEqual(["a1"])
      for (let i = 0; i < 2; i++) {
        simNow += HOUR
        await upload("auto", [["a1", "passed"], ...others])
      }
      // the retry's run had a failed attempt: 2 clean runs so far
      expect(await quarantined("auto")).toEqual(["a1"])
      simNow += HOUR
      await upload("auto", [["a1", "passed"], ...others])
      expect(await quarantined("auto")).toEqual([])
      const e = await run((f) => f.exportQuarantine(org, { org_url_slug: "acme", repo: "acme/auto" }))
      expect(e.tests).toEqual([])
      // still flaky (its pass on retry is in the window), and a new failure puts it back
      simNow += HOUR
      const s = await upload("auto", [["a1", "failed"], ["a1", "passed"], ...others])
      expect(s.all_failures_quarantined).toBe(true)
      expect(await quarantined("auto")).toEqual(["a1"])
    })

    test("export as CSV, import into another repository: the same state; unknown tests are created", async () => {
      if (skipped) return
      simNow = T0
      sent.length = 0
      await upload("from", [["x,1", "failed"], ["y", "failed"], ...others])
      await run((f) => f.updateSettings(org, { ...scope("from"), quarantining_enabled: true }))
      const ids = await run((f) =>
        f.listFailingTests(org, {
          ...scope("from"),
          start_time: new Date(T0 - DAY).toISOString(),
          end_time: new Date(T0 + HOUR).toISOString(),
          page_query: { page_size: 100, page_token: "" }
        })
      )
      const x = ids.tests.find((t) => t.name === "x,1")?.id ?? ""
      const y = ids.tests.find((t) => t.name === "y")?.id ?? ""
      await run((f) =>
        f.setQuarantineOverride(org, {
          ...scope("from"),
          test_case_id: x,
          override: "always_quarantine",
          owner: "@acme/web",
          reason: 'flaky "sometimes", on CI, see\nticket',
          expires_at: new Date(T0 + 5 * DAY).toISOString()
        })
      )
      await run((f) =>
        f.setQuarantineOverride(org, { ...scope("from"), test_case_id: y, override: "never_quarantine", owner: "@al" })
      )
      const csv = await run((f) => f.exportQuarantineCsv(org, { org_url_slug: "acme", repo: "github.com/acme/from" }))
      expect(csv.split("\r\n")[0]).toBe(
        "test_case_id,name,classname,file,parent,variant,quarantine_setting,quarantined,status,owner,reason,ticket_url,expires_at,set_at"
      )
      expect(csv).toContain('"flaky ""sometimes"", on CI, see\nticket"')

      // into another repository of the organization: ids differ there, so drop them and match by name
      const withoutIds = csv
        .split("\r\n")
        .map((line, i) => (i === 0 || line === "" ? line : line.replace(/^[0-9a-f-]{36}/, "")))
        .join("\r\n")
      const answer = await run((f) => f.importQuarantine(org, { ...scope("to"), csv: withoutIds }))
      expect(answer).toEqual({ imported: 2, created: 2, cleared: 0 })
      const a = await run((f) => f.exportQuarantine(org, { org_url_slug: "acme", repo: "acme/from" }))
      const b = await run((f) => f.exportQuarantine(org, { org_url_slug: "acme", repo: "acme/to" }))
      const strip = (t: (typeof a.tests)[number]) => ({ ...t, test_case_id: "", quarantined: false, set_at: "" })
      expect(b.tests.map(strip)).toEqual(a.tests.map(strip))
      expect(sent.filter((c) => c.cause === "imported").length).toBe(2)
      // and the import itself round-trips through JSON (same repository: nothing changes)
      const again = await run((f) => f.importQuarantine(org, { ...scope("from"), tests: a.tests }))
      expect(again).toEqual({ imported: 2, created: 0, cleared: 0 })
      // a bad row changes nothing, and names its row and field
      const bad = await fail((f) =>
        f.importQuarantine(org, {
          ...scope("to"),
          csv: "name,quarantine_setting,owner\nz,always_quarantine,@ok\nw,always_quarantine,not an owner\n"
        })
      )
      expect(bad).toMatchObject({ status: 400, code: "INVALID_REQUEST" })
      expect(bad.details?.[0]?.path).toBe("csv[2].owner")
      const b2 = await run((f) => f.exportQuarantine(org, { org_url_slug: "acme", repo: "acme/to" }))
      expect(b2.tests.map((t) => t.name)).toEqual(b.tests.map((t) => t.name))
    })
  })

suite("PGlite", async () => ({ db: layerPgliteMemory(await pgliteSeed()), cleanup: async () => {} }))

const BASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
suite("PostgreSQL", async () => {
  const admin = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(BASE_URL) }))
  const name = `gl_test_${crypto.randomUUID().replace(/-/g, "").slice(0, 12)}`
  try {
    await admin.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`create database ${name}`)))
  } catch (e) {
    await admin.dispose()
    if (process.env.TEST_DATABASE_URL !== undefined) throw e
    console.warn(`PostgreSQL at ${BASE_URL} is not reachable: skipping the PostgreSQL suite`)
    return undefined
  }
  const url = new URL(BASE_URL)
  url.pathname = `/${name}`
  return {
    db: layerPostgres(url.toString()),
    cleanup: async () => {
      await admin.runPromise(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`drop database if exists ${name} with (force)`))
      )
      await admin.dispose()
    }
  }
})
