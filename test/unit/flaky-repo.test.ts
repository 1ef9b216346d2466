import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as nodePath from "node:path"
import { fileURLToPath } from "node:url"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Layer, ManagedRuntime, Option, Redacted } from "effect"
import { fetchTransport } from "../../src/client/http.ts"
import { makeAppConfig } from "../../src/config.ts"
import { layerPgliteMemory, layerPostgres } from "../../src/db/Database.ts"
import type { FlakyError } from "../../src/flaky/errors.ts"
import { Flaky, FlakyLive } from "../../src/flaky/Flaky.ts"
import { FlakyRepo } from "../../src/flaky/FlakyRepo.ts"
import { flakyMigration, flakyResultsByTime } from "../../src/flaky/migration.ts"
import { testCaseId } from "../../src/flaky/testCaseIds.ts"
import { makeIdHasher } from "../../src/flaky/testCaseIdsBinary.ts"
import { runUpload, type UploadIo } from "../../src/flaky/uploadCli.ts"
import { type ApiError, fromDomainError } from "../../src/http/errors.ts"
import { PERMISSIONS } from "../../src/http/roles.ts"
import { makeApp, RateLimiter } from "../../src/http/router.ts"
import { flakyRoutes } from "../../src/http/routes/flaky.ts"
import { BunRuntimeLive, bunRuntime } from "../../src/kernel/bunRuntime.ts"
import type { Database } from "../../src/kernel/Database.ts"
import { GitError, GitHost, type GitHostService } from "../../src/queue/GitHost.ts"
import { type Organization, Tenancy, TenancyLive } from "../../src/tenancy/Tenancy.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"

const FIXTURES = new URL("../fixtures/junit/", import.meta.url)
const fixtureNames = readdirSync(fileURLToPath(FIXTURES)).filter((f) => f.endsWith(".xml"))
const MALFORMED = new Set(["corrupt-truncated.xml", "web-test-runner-retries-duplicate-testcase.xml"])
const fixture = (name: string) => new Uint8Array(readFileSync(fileURLToPath(new URL(name, FIXTURES))))

const PUBLIC_URL = "http://greenline.test"
const HOUR = 3_600_000
const DAY = 24 * HOUR

// ---- a Git host with one CODEOWNERS file (repository acme/coded, any sha)
const gitStub = Layer.succeed(GitHost, {
  readFile: (repo: { readonly name: string }, _sha: string, path: string) =>
    repo.name === "coded" && path === ".github/CODEOWNERS"
      ? Effect.succeed("* @acme/all\nsrc/lib/ @acme/lib\n")
      : repo.name === "coded"
        ? Effect.succeed(null)
        : Effect.fail(new GitError({ message: "not on disk" } as never))
} as unknown as GitHostService)

/** Creates the flaky tables unless the main migrations already did. */
const ensureSchema = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ t: string | null }>`select to_regclass('public.test_cases')::text as t`
  if (rows[0]?.t === null || rows[0]?.t === undefined) yield* Effect.zipRight(flakyMigration, flakyResultsByTime)
})

type Db = Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error>

/** The test case ids' hashing over Bun's SHA-1, as the service has it. */
const { fastTestCaseId, testCaseIds } = makeIdHasher(bunRuntime.sha1Into)

const appLayer = (db: Db) => {
  const base = Layer.tap(db, (ctx) => Effect.orDie(Effect.provide(ensureSchema, ctx)))
  const deps = Layer.mergeAll(TenancyLive, makeAppConfig({ publicUrl: PUBLIC_URL }), gitStub, BunRuntimeLive).pipe(
    Layer.provideMerge(base)
  )
  return FlakyLive.pipe(Layer.provideMerge(deps))
}

// ---- JUnit builders
interface Case {
  readonly name: string
  readonly status?: "passed" | "failed" | "skipped"
  readonly message?: string
  readonly file?: string
  readonly classname?: string
}
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/"/g, "&quot;")
const junit = (cases: ReadonlyArray<Case>, suite = "suite") =>
  `<?xml version="1.0"?>\n<testsuites><testsuite name="${esc(suite)}">\n${cases
    .map((c) => {
      const attrs = `name="${esc(c.name)}" classname="${esc(c.classname ?? "pkg.C")}" file="${esc(c.file ?? "src/a.test.ts")}"`
      if (c.status === "failed")
        return `<testcase ${attrs}><failure message="${esc(c.message ?? "boom 42")}">trace</failure></testcase>`
      if (c.status === "skipped") return `<testcase ${attrs}><skipped/></testcase>`
      return `<testcase ${attrs}/>`
    })
    .join("\n")}\n</testsuite></testsuites>\n`

const suite = (kind: string, makeDb: () => Promise<{ db: Db; cleanup: () => Promise<void> } | undefined>) =>
  describe(`flaky service on ${kind}`, () => {
    let rt: ManagedRuntime.ManagedRuntime<Flaky | FlakyRepo | Tenancy | SqlClient.SqlClient, unknown>
    let cleanup: () => Promise<void> = async () => {}
    let org: Organization
    let other: Organization
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
      other = await rt.runPromise(Effect.flatMap(Tenancy, (t) => t.createOrg("other", true)))
      await rt.runPromise(
        Effect.flatMap(Tenancy, (t) => t.addRepo("other", { host: "github.com", owner: "other", name: "theirs" }))
      )
    })
    afterAll(async () => {
      if (!skipped) await rt.dispose()
      await cleanup()
    })

    const run = <A>(f: (flaky: typeof Flaky.Service) => Effect.Effect<A, FlakyError>) =>
      rt.runPromise(Effect.flatMap(Flaky, f))
    // the service's domain error as the HTTP edge answers it
    const fail = async <A>(f: (flaky: typeof Flaky.Service) => Effect.Effect<A, FlakyError>): Promise<ApiError> =>
      rt.runPromise(Effect.flip(Effect.mapError(Effect.flatMap(Flaky, f), fromDomainError)))
    const count = (q: string) =>
      rt
        .runPromise(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql<{ n: number }>`select count(*)::int as n from ${sql.literal(q)}`
          )
        )
        .then((r) => r[0]?.n ?? -1)

    const repoRef = (name: string) => ({ host: "github.com", owner: "acme", name })
    const upload =
      (
        repo: string,
        parts: ReadonlyArray<readonly [string, string | Uint8Array]>,
        meta: Record<string, unknown> = {},
        as: Organization = org
      ) =>
      (flaky: typeof Flaky.Service) =>
        flaky.upload(
          as,
          JSON.stringify({
            repo: repoRef(repo),
            org_url_slug: as.slug,
            sha: "a".repeat(40),
            branch: "feature",
            ...meta
          }),
          parts.map(([filename, body]) => ({
            filename,
            bytes: typeof body === "string" ? new TextEncoder().encode(body) : body
          }))
        )
    const scope = (repo: string) => ({ repo: repoRef(repo), org_url_slug: "acme" })
    const page = (page_size = 100, page_token = "") => ({ page_size, page_token })
    const window = () => ({
      start_time: new Date(Date.now() - 6 * DAY).toISOString(),
      end_time: new Date(Date.now() + HOUR).toISOString()
    })
    const failing = async (repo: string) => {
      const res = await run((f) => f.listFailingTests(org, { ...scope(repo), ...window(), page_query: page() }))
      return res.tests
    }
    const byName = async (repo: string, name: string) => {
      const res = await run((f) => f.listFailingTests(org, { ...scope(repo), ...window(), page_query: page() }))
      const found = res.tests.find((t) => t.name === name)
      if (found === undefined) throw new Error(`no failing test ${name}`)
      return found
    }
    const details = (repo: string, id: string) =>
      run((f) => f.getTestDetails(org, { ...scope(repo), test_id: id })).then((r) => r.test)

    test("every fixture uploads; the malformed ones are refused with part and line and store nothing", async () => {
      if (skipped) return
      for (const name of fixtureNames) {
        const before = await count("test_results")
        const uploadsBefore = await count("test_uploads")
        if (MALFORMED.has(name)) {
          const error = await fail(
            upload(`fx-${name}`, [
              ["good.xml", junit([{ name: "ok" }])],
              [name, fixture(name)]
            ])
          )
          expect(error.code).toBe("INVALID_JUNIT")
          expect(error.status).toBe(400)
          expect(error.message).toContain(name)
          expect(error.message).toMatch(/line \d+/)
          expect(await count("test_results")).toBe(before)
          expect(await count("test_uploads")).toBe(uploadsBefore)
          // not even the repository was claimed
          const repo = await rt.runPromise(
            Effect.flatMap(Tenancy, (t) => Effect.orDie(t.findRepo(org, repoRef(`fx-${name}`))))
          )
          expect(Option.isNone(repo)).toBe(true)
        } else {
          const summary = await run(upload(`fx-${name}`, [[name, Bun.gzipSync(fixture(name))]]))
          expect(summary.tests + summary.ignored).toBeGreaterThan(0)
          expect(summary.tests).toBe(summary.passed + summary.failed + summary.skipped)
          expect(summary.quarantined_failures + summary.unquarantined_failures).toBe(summary.failed)
          expect(await count("test_uploads")).toBe(uploadsBefore + 1)
          if (summary.tests > 0) expect(await count("test_results")).toBeGreaterThan(before)
        }
      }
    })

    test("no-attributes fixture counts nameless testcases as ignored", async () => {
      if (skipped) return
      const summary = await run(upload("noattr", [["no-attributes.xml", fixture("no-attributes.xml")]]))
      expect(summary.ignored).toBeGreaterThan(0)
    })

    test("bulk insert round-trips awkward names (quotes, commas, braces, backslashes, NULL, unicode)", async () => {
      if (skipped) return
      const names = ['say "hi"', "a,b", "{braces}", "back\\slash", "NULL", "null", " spaced ", "日本語 😀"]
      const cases: Case[] = []
      for (let i = 0; i < 6000; i++)
        cases.push({
          name: `${names[i % names.length]} #${i}`,
          status: i % 7 === 0 ? "failed" : "passed",
          message: `msg "${i}", {x}`
        })
      const summary = await run(upload("awkward", [["big.xml", junit(cases)]]))
      expect(summary.tests).toBe(6000)
      const rows = await rt.runPromise(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ name: string }>`
          select tc.name from test_cases tc join repositories r on r.id = tc.repo_id where r.name = 'awkward'`
        )
      )
      const stored = new Set(rows.map((r) => r.name))
      expect(stored.size).toBe(6000)
      expect(cases.slice(0, 20).filter((c) => !stored.has(c.name))).toEqual([])
      const id = testCaseId({
        orgUrlSlug: "acme",
        repo: repoRef("awkward"),
        file: "src/a.test.ts",
        classname: "pkg.C",
        parent: "suite",
        name: cases[0]?.name ?? ""
      })
      const t = await details("awkward", id)
      expect(t.name).toBe('say "hi" #0')
      expect(t.most_common_failures[0]?.summary).toBe('msg "0", {x}')
    })

    test("pass-on-retry in one upload makes a test flaky; Surefire flakyFailure too", async () => {
      if (skipped) return
      await run(
        upload("retry", [
          ["r.xml", junit([{ name: "t1", status: "failed" }, { name: "t1" }, { name: "t2" }, { name: "t3" }])]
        ])
      )
      const t1 = await byName("retry", "t1")
      expect(t1.status.value).toBe("flaky")
      expect(t1.status.reason).toContain("failed and passed on commit aaaaaaa")
      expect(t1.failure_rate_last_7d).toBe(0.5)
      await run(upload("surefire", [["s.xml", fixture("surefire-flakyFailure.xml")]]))
      const tests = await failing("surefire")
      expect(tests.some((t) => t.status.value === "flaky")).toBe(true)
    })

    test("pass-on-retry across uploads of the same commit", async () => {
      if (skipped) return
      const others = [{ name: "p1" }, { name: "p2" }, { name: "p3" }]
      await run(
        upload("retry2", [["a.xml", junit([{ name: "x", status: "failed" }, ...others])]], { sha: "b".repeat(40) })
      )
      expect((await byName("retry2", "x")).status.value).toBe("healthy")
      await run(upload("retry2", [["a.xml", junit([{ name: "x" }, ...others])]], { sha: "b".repeat(40) }))
      const x = await byName("retry2", "x")
      expect(x.status.value).toBe("flaky")
      expect(x.status.reason).toContain("bbbbbbb")
    })

    test("failure rates over 7 days and 24 hours, PRs impacted, most common failures", async () => {
      if (skipped) return
      const others = [{ name: "o1" }, { name: "o2" }, { name: "o3" }, { name: "o4" }]
      const at = (msAgo: number) => new Date(Date.now() - msAgo).toISOString()
      // 3 days ago: fail (PR 1), 2 hours ago: fail (PR 2), pass, pass (PR 2), skipped
      await run(
        upload(
          "rates",
          [["a.xml", junit([{ name: "r", status: "failed", message: "timeout after 1000 ms" }, ...others])]],
          { run_at: at(3 * DAY), pr_number: 1, sha: "1".repeat(40) }
        )
      )
      await run(
        upload(
          "rates",
          [["a.xml", junit([{ name: "r", status: "failed", message: "timeout after 2500 ms" }, ...others])]],
          { run_at: at(2 * HOUR), pr_number: 2, sha: "2".repeat(40) }
        )
      )
      await run(
        upload("rates", [["a.xml", junit([{ name: "r" }, ...others])]], {
          run_at: at(HOUR),
          pr_number: 2,
          sha: "3".repeat(40)
        })
      )
      await run(
        upload("rates", [["a.xml", junit([{ name: "r", status: "skipped" }, ...others])]], {
          run_at: at(HOUR),
          sha: "4".repeat(40)
        })
      )
      const r = await byName("rates", "r")
      expect(r.failure_rate_last_7d).toBeCloseTo(2 / 3)
      expect(r.failure_rate_last_24h).toBeCloseTo(1 / 2)
      expect(r.pull_requests_impacted_last_7d).toBe(2)
      expect(r.most_common_failures.length).toBe(1)
      expect(r.most_common_failures[0]?.occurrence_count).toBe(2)
      expect(r.most_common_failures[0]?.summary).toBe("timeout after 2500 ms")
      expect(r.status.value).toBe("healthy")
      expect(r.html_url).toBe(`${PUBLIC_URL}/repos/github.com/acme/rates/tests/${r.id}`)
      expect(r.repository.html_url).toBe(`${PUBLIC_URL}/repos/github.com/acme/rates`)
      expect(r.ticket).toBeNull()
      expect(r.codeowners).toEqual([])
    })

    test("flaky by its pattern on main (failures interleaved with passes), and broken after 5 failures in a row on main", async () => {
      if (skipped) return
      const others = [{ name: "o1" }, { name: "o2" }, { name: "o3" }, { name: "o4" }]
      for (let i = 0; i < 10; i++) {
        const fr = i % 4 === 0 ? "failed" : "passed" // 3 of 10 fail
        await run(
          upload("rate-main", [["a.xml", junit([{ name: "fr", status: fr }, ...others])]], {
            branch: "main",
            sha: `${i}`.padStart(40, "c")
          })
        )
      }
      const fr = await details("rate-main", (await byName("rate-main", "fr")).id)
      expect(fr.status.value).toBe("flaky")
      expect(fr.status.reason).toContain("separate episodes in 7 days on stable branches")
      for (let i = 0; i < 5; i++) {
        await run(
          upload("broken", [["a.xml", junit([{ name: "b", status: "failed" }, ...others])]], {
            branch: "main",
            sha: `${i}`.padStart(40, "d")
          })
        )
      }
      const b = await byName("broken", "b")
      expect(b.status.value).toBe("broken")
      const unhealthy = await run((f) =>
        f.listUnhealthyTests(org, { ...scope("broken"), status: "broken", page_query: page() })
      )
      expect(unhealthy.tests.map((t) => t.name)).toEqual(["b"])
      const flakyList = await run((f) =>
        f.listUnhealthyTests(org, { ...scope("rate-main"), status: "flaky", page_query: page() })
      )
      expect(flakyList.tests.map((t) => t.name)).toEqual(["fr"])
    })

    test("an infrastructure-failure upload is stored but not used for detection", async () => {
      if (skipped) return
      const sha = "e".repeat(40)
      const all = ["i1", "i2", "i3", "i4", "i5"]
      const s = await run(
        upload("infra", [["a.xml", junit(all.map((name) => ({ name, status: "failed" as const })))]], { sha })
      )
      expect(s.failed).toBe(5)
      expect(s.unquarantined_failures).toBe(5)
      expect(s.all_failures_quarantined).toBe(false)
      await run(upload("infra", [["a.xml", junit(all.map((name) => ({ name })))]], { sha }))
      const tests = await failing("infra")
      expect(tests.length).toBe(5)
      for (const t of tests) expect(t.status.value).toBe("healthy")
    })

    test("quarantine: settings, auto-quarantine of flaky tests (never broken), overrides, the upload answer", async () => {
      if (skipped) return
      const others = [{ name: "o1" }, { name: "o2" }, { name: "o3" }, { name: "o4" }, { name: "o5" }, { name: "o6" }]
      expect(await run((f) => f.getSettings(org, scope("q")).pipe(Effect.catchAll(Effect.succeed)))).toMatchObject({
        _tag: "RepositoryNotFound"
      })
      // make q1 flaky
      await run(upload("q", [["a.xml", junit([{ name: "q1", status: "failed" }, { name: "q1" }, ...others])]]))
      expect(await run((f) => f.getSettings(org, scope("q")))).toEqual({
        quarantining_enabled: false,
        auto_quarantine: false,
        auto_release_clean_runs: 20
      })
      let n = 0
      // a failure and a pass on each commit: flaky, never broken
      const failQ1 = () =>
        run(
          upload("q", [["a.xml", junit([{ name: "q1", status: "failed" }, { name: "q1" }, ...others])]], {
            sha: `${n++}`.padStart(40, "f")
          })
        )
      let s = await failQ1()
      expect(s).toMatchObject({
        failed: 1,
        passed: 7,
        quarantined_failures: 0,
        unquarantined_failures: 1,
        all_failures_quarantined: false
      })

      expect(await run((f) => f.updateSettings(org, { ...scope("q"), quarantining_enabled: true }))).toEqual({
        quarantining_enabled: true,
        auto_quarantine: false,
        auto_release_clean_runs: 20
      })
      s = await failQ1()
      expect(s.all_failures_quarantined).toBe(false)
      expect(await run((f) => f.updateSettings(org, { ...scope("q"), auto_quarantine: true }))).toEqual({
        quarantining_enabled: true,
        auto_quarantine: true,
        auto_release_clean_runs: 20
      })
      s = await failQ1()
      expect(s).toMatchObject({ quarantined_failures: 1, unquarantined_failures: 0, all_failures_quarantined: true })
      const q1 = await byName("q", "q1")
      expect(q1.quarantined).toBe(true)
      let listed = await run((f) => f.listQuarantinedTests(org, { ...scope("q"), page_query: page() }))
      expect(listed.quarantined_tests.map((t) => [t.name, t.quarantine_setting])).toEqual([["q1", "auto_quarantine"]])
      expect(listed.page.total_rows).toBe(1)

      await run((f) =>
        f.setQuarantineOverride(org, { ...scope("q"), test_case_id: q1.id, override: "never_quarantine" })
      )
      s = await failQ1()
      expect(s.all_failures_quarantined).toBe(false)

      // always_quarantine on a healthy test
      const o1 = await run(
        upload("q", [["a.xml", junit([{ name: "o1", status: "failed" }, { name: "o2" }, { name: "o3" }])]], {
          sha: "9".repeat(40)
        })
      )
      expect(o1.unquarantined_failures).toBe(1)
      const o1Id = (await byName("q", "o1")).id
      await run((f) =>
        f.setQuarantineOverride(org, { ...scope("q"), test_case_id: o1Id, override: "always_quarantine" })
      )
      listed = await run((f) => f.listQuarantinedTests(org, { ...scope("q"), page_query: page() }))
      expect(listed.quarantined_tests.map((t) => [t.name, t.quarantine_setting])).toEqual([["o1", "always_quarantine"]])
      // turning quarantining off un-quarantines everything
      await run((f) => f.updateSettings(org, { ...scope("q"), quarantining_enabled: false }))
      listed = await run((f) => f.listQuarantinedTests(org, { ...scope("q"), page_query: page() }))
      expect(listed.quarantined_tests.length).toBe(0)
      await run((f) => f.updateSettings(org, { ...scope("q"), quarantining_enabled: true }))
      await run((f) => f.setQuarantineOverride(org, { ...scope("q"), test_case_id: q1.id, override: "unspecified" }))
      listed = await run((f) => f.listQuarantinedTests(org, { ...scope("q"), page_query: page() }))
      expect(listed.quarantined_tests.map((t) => t.name)).toEqual(["o1", "q1"])

      // broken tests are never auto-quarantined
      for (let i = 0; i < 5; i++) {
        await run(
          upload("q", [["a.xml", junit([{ name: "qb", status: "failed" }, ...others])]], {
            branch: "main",
            sha: `${i}`.padStart(40, "7")
          })
        )
      }
      const qb = await byName("q", "qb")
      expect(qb.status.value).toBe("broken")
      expect(qb.quarantined).toBe(false)

      const missing = await fail((f) =>
        f.setQuarantineOverride(org, {
          ...scope("q"),
          test_case_id: crypto.randomUUID(),
          override: "always_quarantine"
        })
      )
      expect(missing.code).toBe("TEST_CASE_NOT_FOUND")
    })

    test("list-failing-tests: the window, TIME_RANGE_INVALID", async () => {
      if (skipped) return
      const others = [{ name: "o1" }, { name: "o2" }, { name: "o3" }, { name: "o4" }]
      const t0 = Date.now() - 5 * DAY
      await run(
        upload("window", [["a.xml", junit([{ name: "old", status: "failed" }, ...others])]], {
          run_at: new Date(t0).toISOString()
        })
      )
      await run(
        upload("window", [["a.xml", junit([{ name: "new", status: "failed" }, ...others])]], {
          run_at: new Date(t0 + 2 * DAY).toISOString()
        })
      )
      const list = (start: number, end: number) =>
        run((f) =>
          f.listFailingTests(org, {
            ...scope("window"),
            start_time: new Date(start).toISOString(),
            end_time: new Date(end).toISOString(),
            page_query: page()
          })
        ).then((r) => r.tests.map((t) => t.name))
      expect(await list(t0, t0 + 3 * DAY)).toEqual(["new", "old"])
      expect(await list(t0 + 1, t0 + 3 * DAY)).toEqual(["new"])
      expect(await list(t0 - DAY, t0)).toEqual([]) // end is exclusive
      expect(await list(t0, t0 + 1)).toEqual(["old"]) // start is inclusive
      for (const [start, end] of [
        [t0, t0],
        [t0 + 1, t0],
        [t0, t0 + 7 * DAY + 1]
      ] as const) {
        const e = await fail((f) =>
          f.listFailingTests(org, {
            ...scope("window"),
            start_time: new Date(start).toISOString(),
            end_time: new Date(end).toISOString(),
            page_query: page()
          })
        )
        expect(e.code).toBe("TIME_RANGE_INVALID")
        expect(e.status).toBe(400)
      }
      expect(await list(t0, t0 + 7 * DAY)).toEqual(["new", "old"])
    })

    test("pagination: stable order, tokens, INVALID_PAGE_TOKEN", async () => {
      if (skipped) return
      const cases: Case[] = []
      for (let i = 0; i < 25; i++) cases.push({ name: `t${String(i).padStart(2, "0")}`, status: "failed" })
      for (let i = 0; i < 100; i++) cases.push({ name: `pass${i}` })
      await run(upload("pages", [["a.xml", junit(cases)]]))
      const w = window()
      const get = (token: string) =>
        run((f) => f.listFailingTests(org, { ...scope("pages"), ...w, page_query: page(10, token) }))
      const p0 = await get("")
      expect(p0.tests.map((t) => t.name)).toEqual(cases.slice(0, 10).map((c) => c.name))
      expect(p0.page).toMatchObject({ total_rows: 25, total_pages: 3, page_index: 0, prev_page_token: "" })
      expect(p0.page.next_page_token).not.toBe("")
      const p1 = await get(p0.page.next_page_token)
      expect(p1.tests.map((t) => t.name)).toEqual(cases.slice(10, 20).map((c) => c.name))
      expect(p1.page.page_index).toBe(1)
      const p2 = await get(p1.page.next_page_token)
      expect(p2.tests.map((t) => t.name)).toEqual(cases.slice(20, 25).map((c) => c.name))
      expect(p2.page).toMatchObject({ page_index: 2, next_page_token: "", last_page_token: p0.page.last_page_token })
      expect((await get(p2.page.prev_page_token)).page.page_index).toBe(1)
      expect((await get(p0.page.last_page_token)).page.page_index).toBe(2)
      // same query, same tokens
      expect((await get("")).page).toEqual(p0.page)

      for (const token of ["garbage", "eyJxIjoieCIsIm8iOjB9", Buffer.from("{").toString("base64url")]) {
        const e = await fail((f) => f.listFailingTests(org, { ...scope("pages"), ...w, page_query: page(10, token) }))
        expect(e.code).toBe("INVALID_PAGE_TOKEN")
      }
      // a token of another query
      const e = await fail((f) =>
        f.listUnhealthyTests(org, { ...scope("pages"), status: "flaky", page_query: page(10, p0.page.next_page_token) })
      )
      expect(e.code).toBe("INVALID_PAGE_TOKEN")
      const e2 = await fail((f) =>
        f.listFailingTests(org, { ...scope("retry"), ...w, page_query: page(10, p0.page.next_page_token) })
      )
      expect(e2.code).toBe("INVALID_PAGE_TOKEN")
      // empty result
      const none = await run((f) => f.listQuarantinedTests(org, { ...scope("pages"), page_query: page(10) }))
      expect(none.page).toEqual({
        total_rows: 0,
        total_pages: 0,
        next_page_token: "",
        prev_page_token: "",
        last_page_token: "",
        page_index: 0
      })
    })

    test("tenancy: another organization's repository or slug is a 404", async () => {
      if (skipped) return
      const theirs = { repo: { host: "github.com", owner: "other", name: "theirs" }, org_url_slug: "acme" }
      expect((await fail((f) => f.getSettings(org, theirs))).code).toBe("NOT_FOUND")
      expect((await fail((f) => f.getSettings(org, { ...theirs, org_url_slug: "other" }))).code).toBe("NOT_FOUND")
      expect((await fail((f) => f.getSettings(other, scope("retry")))).code).toBe("NOT_FOUND")
      const up = await fail((f) =>
        f.upload(org, JSON.stringify({ ...theirs, sha: "a", branch: "main" }), [
          { filename: "a.xml", bytes: new TextEncoder().encode(junit([{ name: "x" }])) }
        ])
      )
      expect(up.code).toBe("NOT_FOUND")
      // the other org cannot see acme's test case
      const t1 = await byName("retry", "t1")
      const e = await fail((f) =>
        f.getTestDetails(other, { repo: repoRef("retry"), org_url_slug: "other", test_id: t1.id })
      )
      expect(e.code).toBe("NOT_FOUND")
      expect((await fail((f) => f.getTestDetails(org, { ...scope("retry"), test_id: crypto.randomUUID() }))).code).toBe(
        "TEST_CASE_NOT_FOUND"
      )
      // wrong org slug in the upload
      const wrong = await fail((f) =>
        f.upload(org, JSON.stringify({ repo: repoRef("retry"), org_url_slug: "other", sha: "a", branch: "main" }), [
          { filename: "a.xml", bytes: new TextEncoder().encode(junit([{ name: "x" }])) }
        ])
      )
      expect(wrong.code).toBe("NOT_FOUND")
      // bad metadata
      const bad = await fail((f) => f.upload(org, "{", []))
      expect(bad.code).toBe("INVALID_REQUEST")
      const missing = await fail((f) => f.upload(org, JSON.stringify({ repo: repoRef("retry") }), []))
      expect(missing.code).toBe("INVALID_REQUEST")
    })

    test("ticket links, code owners, test case ids", async () => {
      if (skipped) return
      await run(
        upload(
          "coded",
          [
            [
              "a.xml",
              junit([
                { name: "c1", status: "failed", file: "src/lib/x.test.ts" },
                { name: "c2", status: "failed", file: "test/y.ts" },
                { name: "c3" },
                { name: "c4" },
                { name: "c5" }
              ])
            ]
          ],
          { variant: "linux" }
        )
      )
      const c1 = await byName("coded", "c1")
      expect(c1.codeowners).toEqual(["@acme/lib"])
      expect((await byName("coded", "c2")).codeowners).toEqual(["@acme/all"])
      expect(c1.variant).toBe("linux")
      expect(c1.file_path).toBe("src/lib/x.test.ts")
      expect(c1.parent).toBe("suite")
      expect(c1.classname).toBe("pkg.C")
      await run((f) =>
        f.linkTicket(org, {
          repo: repoRef("coded"),
          test_case_id: c1.id,
          external_ticket_id: "ENG-1",
          html_url: "https://t/ENG-1"
        })
      )
      expect((await details("coded", c1.id)).ticket).toEqual({
        html_url: "https://t/ENG-1",
        external_ticket_id: "ENG-1"
      })
      expect(
        (
          await fail((f) =>
            f.linkTicket(org, { repo: repoRef("coded"), test_case_id: crypto.randomUUID(), external_ticket_id: "X" })
          )
        ).code
      ).toBe("TEST_CASE_NOT_FOUND")
    })

    test("CLI upload through the HTTP routes: summary, exit codes, errors", async () => {
      if (skipped) return
      const TOKEN = "glt_test_token_0123456789"
      const who = { org, principal: { actor: { kind: "token", id: "t1", name: "ci" }, role: "write" } } as const
      const runtime = await rt.runtime()
      const app = makeApp({
        routes: flakyRoutes,
        runtime,
        authenticator: {
          authenticate: async (t) => (t === TOKEN ? Option.some(who) : Option.none())
        },
        permissions: PERMISSIONS,
        rateLimiter: new RateLimiter(10_000, () => Date.now()),
        observer: { observe: () => {} },
        logError: () => {},
        extra: () => undefined
      })
      const dir = mkdtempSync(nodePath.join(tmpdir(), "gl-cli-"))
      try {
        writeFileSync(nodePath.join(dir, "pass.xml"), junit([{ name: "c1" }, { name: "c2" }, { name: "c3" }]))
        writeFileSync(
          nodePath.join(dir, "fail.xml"),
          junit([{ name: "c4", status: "failed" }, { name: "c5" }, { name: "c6" }])
        )
        writeFileSync(nodePath.join(dir, "bad.txt"), '<testsuite><testcase name="x">')
        const lines: string[] = []
        const io: UploadIo = {
          out: (l) => lines.push(l),
          err: (l) => lines.push(l),
          request: fetchTransport((input, init) => app(new Request(input, init))),
          sleep: async () => {},
          cwd: dir
        }
        const base = ["--org", "acme", "--repo", "github.com/acme/cli", "--sha", "abc123", "--branch", "main"]
        const env = { GREENLINE_URL: "http://gl.test/", GREENLINE_TOKEN: TOKEN }
        expect(await runUpload([...base, "pass.xml"], env, io)).toBe(0)
        expect(lines.join("\n")).toContain("3 tests, 3 passed, 0 failed")
        expect(await runUpload([...base, "*.xml"], env, io)).toBe(1)
        expect(lines.join("\n")).toContain("6 tests, 5 passed, 1 failed")
        expect(await runUpload([...base, "--exit-code", "3", "fail.xml"], env, io)).toBe(3)
        // quarantine the failing test: the job may pass
        const c4 = await byName("cli", "c4")
        await run((f) => f.updateSettings(org, { ...scope("cli"), quarantining_enabled: true }))
        await run((f) =>
          f.setQuarantineOverride(org, { ...scope("cli"), test_case_id: c4.id, override: "always_quarantine" })
        )
        expect(await runUpload([...base, "--pr", "7", "--variant", "", "--job", "unit", "fail.xml"], env, io)).toBe(0)
        expect(lines.join("\n")).toContain("1 quarantined, 0 not quarantined")
        // errors
        lines.length = 0
        // an error answer: 4 (io.ts EXIT); a wrong command line: 2; no server: 3
        expect(await runUpload([...base, "bad.txt"], env, io)).toBe(4)
        expect(lines.join("\n")).toContain("INVALID_JUNIT")
        expect(lines.join("\n")).toContain("bad.txt")
        lines.length = 0
        expect(
          await runUpload([...base, "pass.xml"], { ...env, GREENLINE_TOKEN: "glt_wrong_token_0123456789" }, io)
        ).toBe(4)
        expect(lines.join("\n")).toContain("401")
        expect(await runUpload(["--org", "acme", "pass.xml"], env, io)).toBe(2)
        expect(await runUpload([...base, "missing.xml"], env, io)).toBe(2)
        expect(await runUpload([...base, "nothing-*.xml"], env, io)).toBe(2)
        expect(await runUpload([...base, "--bogus", "1", "pass.xml"], env, io)).toBe(2)
        expect(await runUpload([...base, "pass.xml"], {}, io)).toBe(2)
        lines.length = 0
        const down: UploadIo = { ...io, request: fetchTransport(() => Promise.reject(new Error("connection refused"))) }
        expect(await runUpload([...base, "pass.xml"], env, down)).toBe(3)
        expect(lines.join("\n")).toContain("was refused")
        // the HTTP route itself: no metadata part
        const form = new FormData()
        form.append("junit", new File([junit([{ name: "x" }])], "a.xml"))
        const res = await app(
          new Request("http://gl.test/v1/flaky-tests/upload", {
            method: "POST",
            headers: { "x-api-token": TOKEN },
            body: form
          })
        )
        expect(res.status).toBe(400)
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe("INVALID_REQUEST")
        // a JSON route through the router
        const settings = await app(
          new Request("http://gl.test/v1/flaky-tests/get-settings", {
            method: "POST",
            headers: { "x-api-token": TOKEN, "content-type": "application/json" },
            body: JSON.stringify(scope("cli"))
          })
        )
        expect(await settings.json()).toEqual({
          quarantining_enabled: true,
          auto_quarantine: false,
          auto_release_clean_runs: 20
        })
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })

    test("a large upload goes in several COPY segments; an error late in a part stores nothing", async () => {
      if (skipped) return
      // ~40,000 new test cases with long names: more staged test cases than one COPY segment takes (2 MiB)
      const cases: Case[] = []
      const pad = "x".repeat(60)
      for (let i = 0; i < 40_000; i++) cases.push({ name: `${pad} ${i}`, status: i % 10 === 0 ? "failed" : "passed" })
      const xml = junit(cases)
      const repoId = async (name: string) =>
        rt
          .runPromise(
            Effect.flatMap(
              SqlClient.SqlClient,
              (sql) => sql<{ id: string }>`select id from repositories where name = ${name}`
            )
          )
          .then((r) => r[0]?.id)
      const countIn = (table: string, id: string) => count(`${table} where repo_id = '${id}'`)
      const summary = await run(upload("segments", [["big.xml", Bun.gzipSync(xml)]]))
      expect(summary.tests).toBe(40_000)
      expect(summary.failed).toBe(4_000)
      const id = (await repoId("segments")) ?? ""
      expect(await countIn("test_cases", id)).toBe(40_000)
      expect(await countIn("test_results", id)).toBe(40_000)
      expect((await failing("segments")).length).toBe(100) // the first page of 4,000 failing tests

      // as many other tests, cut short: refused once most of it was streamed and its new test cases were merged;
      // neither results nor test cases stay
      const cut = junit(cases.map((c) => ({ ...c, name: `${c.name} b` }))).slice(0, -200)
      const before = await count("test_results")
      const casesBefore = await count("test_cases")
      const error = await fail(
        upload("segments-cut", [
          ["ok.xml", junit([{ name: "fine" }])],
          ["cut.xml", cut]
        ])
      )
      expect(error.code).toBe("INVALID_JUNIT")
      expect(error.message).toContain("cut.xml")
      expect(await repoId("segments-cut")).toBeUndefined()
      const again = await fail(upload("segments", [["cut.xml", Bun.gzipSync(cut)]]))
      expect(again.code).toBe("INVALID_JUNIT")
      expect(await count("test_results")).toBe(before)
      expect(await count("test_cases")).toBe(casesBefore)
      expect(await countIn("test_results", id)).toBe(40_000)
    }, 60_000)

    test("COPY text round-trips tabs, carriage returns, backslashes and \\N in failure messages", async () => {
      if (skipped) return
      // [as written in the XML attribute, as stored]
      const messages: ReadonlyArray<readonly [string, string]> = [
        ["tab&#9;here", "tab\there"],
        ["back\\slash \\N \\t", "back\\slash \\N \\t"],
        ["cr&#13;here", "cr\rhere"],
        ["\\N", "\\N"],
        ["ünïcødé 😀 {a,b} &quot;q&quot;", 'ünïcødé 😀 {a,b} "q"']
      ]
      const xml = `<testsuite name="s">${messages
        .map(([m], i) => `<testcase name="m${i}"><failure message="${m}"/></testcase>`)
        .join("")}${Array.from({ length: 20 }, (_, i) => `<testcase name="p${i}"/>`).join("")}</testsuite>`
      await run(upload("copytext", [["a.xml", xml]]))
      for (let i = 0; i < messages.length; i++) {
        const t = await byName("copytext", `m${i}`)
        expect(t.most_common_failures[0]?.summary).toBe(messages[i]?.[1] ?? "")
      }
    })

    test("upload ids (testCaseIds) equal ids.ts, also for JUnit ids and variants", () => {
      const repo = repoRef("x")
      for (const variant of ["", "linux"]) {
        const idOf = testCaseIds("acme", repo, variant)
        const base = {
          name: "n",
          classname: "c",
          file: "f",
          parent: "p",
          suitePath: ["p"],
          status: "passed" as const,
          retry: false,
          attempts: 1,
          attempt: 1,
          message: "",
          type: "",
          text: "",
          durationMs: 0,
          ignored: false,
          index: 0
        }
        const key = { orgUrlSlug: "acme", repo, file: "f", classname: "c", parent: "p", name: "n", variant }
        expect(idOf(base)).toBe(testCaseId(key))
        expect(idOf({ ...base, retry: true })).toBe(testCaseId(key))
        expect(idOf({ ...base, name: "ü 😀" })).toBe(testCaseId({ ...key, name: "ü 😀" }))
        const given = "06CB6DB5-F807-5198-B072-AF67A0636F8A"
        expect(idOf({ ...base, id: given })).toBe(testCaseId({ ...key, id: given }))
        expect(idOf({ ...base, id: "not-a-uuid" })).toBe(testCaseId({ ...key, id: "not-a-uuid" }))
      }
    })

    test("fast test case ids equal ids.ts", () => {
      const repo = repoRef("x")
      for (const name of ["a", "ü 😀 & <x>", ""]) {
        for (const variant of ["", "linux"]) {
          const key = { orgUrlSlug: "acme", repo, file: "f", classname: "c", parent: "p", name, variant }
          expect(fastTestCaseId(key)).toBe(testCaseId(key))
          const withId = { ...key, id: "06cb6db5-f807-5198-b072-af67a0636f8a" }
          expect(fastTestCaseId(withId)).toBe(testCaseId(withId))
        }
      }
    })

    test("storage: statusOf, history, prune", async () => {
      if (skipped) return
      const repoId = await rt
        .runPromise(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql<{ id: string }>`select id from repositories where name = 'rates'`
          )
        )
        .then((r) => r[0]?.id ?? "")
      const r = await byName("rates", "r")
      const history = await rt.runPromise(
        Effect.flatMap(FlakyRepo, (repo) => repo.history(repoId, [r.id], new Date(Date.now() - 7 * DAY)))
      )
      expect(history.map((h) => h.status)).toEqual(["failed", "failed", "passed"])
      const statuses = await rt.runPromise(Effect.flatMap(FlakyRepo, (repo) => repo.statusOf(repoId, [r.id])))
      expect(statuses[0]?.status).toBe("healthy")
      const before = await count("test_results")
      const pruned = await rt.runPromise(Effect.flatMap(Flaky, (f) => f.prune(1)))
      expect(pruned).toBeGreaterThan(0)
      expect(await count("test_results")).toBe(before - pruned)
      const after = await byName("rates", "r")
      expect(after.failure_rate_last_7d).toBeCloseTo(1 / 2)
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
    console.warn(
      `PostgreSQL at ${BASE_URL} is not reachable: skipping the PostgreSQL suite (set TEST_DATABASE_URL to require it)`
    )
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
