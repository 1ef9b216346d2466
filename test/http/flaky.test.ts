import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

/**
 * The flaky-test endpoints (contract.md §3, semantics.md §8) through the real server: multipart uploads, every query,
 * the errors, tenancy, and quarantine end to end through the CLI's exit code.
 */

const FIXTURES = new URL("../fixtures/junit/", import.meta.url)
const fixturePath = (name: string) => fileURLToPath(new URL(name, FIXTURES))
const fixture = (name: string) => new Uint8Array(readFileSync(fixturePath(name)))
const ROOT = fileURLToPath(new URL("../../", import.meta.url))

const HOUR = 3_600_000
const DAY = 24 * HOUR
const SLUG = "acme-org"
const OTHER_SLUG = "other-org"

interface ErrorBody {
  readonly error: {
    readonly code: string
    readonly message: string
    readonly details?: ReadonlyArray<{ readonly path: string; readonly message: string }>
  }
}
interface Page {
  readonly total_rows: number
  readonly total_pages: number
  readonly next_page_token: string
  readonly prev_page_token: string
  readonly last_page_token: string
  readonly page_index: number
}
interface TestCase {
  readonly id: string
  readonly name: string
  readonly variant: string
  readonly status: { readonly value: string; readonly reason: string; readonly timestamp: string }
  readonly most_common_failures: ReadonlyArray<{ summary: string; occurrence_count: number; last_occurrence: string }>
  readonly failure_rate_last_7d: number
  readonly failure_rate_last_24h: number
  readonly pull_requests_impacted_last_7d: number
  readonly quarantined: boolean
  readonly file_path: string
  readonly parent: string
  readonly classname: string
  readonly codeowners: ReadonlyArray<string>
  readonly html_url: string
  readonly repository: { readonly html_url: string }
  readonly ticket: { readonly html_url: string; readonly external_ticket_id?: string } | null
}
interface TestList {
  readonly tests: ReadonlyArray<TestCase>
  readonly page: Page
}
interface QuarantinedList {
  readonly quarantined_tests: ReadonlyArray<{
    readonly name: string
    readonly test_case_id: string
    readonly quarantine_setting: string
    readonly status: { readonly value: string }
  }>
  readonly page: Page
}
interface Summary {
  readonly upload_id: string
  readonly tests: number
  readonly passed: number
  readonly failed: number
  readonly skipped: number
  readonly ignored: number
  readonly quarantined_failures: number
  readonly unquarantined_failures: number
  readonly all_failures_quarantined: boolean
}

// ---- JUnit builder
interface Case {
  readonly name: string
  readonly status?: "passed" | "failed" | "skipped"
  readonly message?: string
}
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/"/g, "&quot;")
const junit = (cases: ReadonlyArray<Case>) =>
  `<?xml version="1.0"?>\n<testsuites><testsuite name="suite">\n${cases
    .map((c) => {
      const attrs = `name="${esc(c.name)}" classname="pkg.C" file="src/a.test.ts"`
      if (c.status === "failed")
        return `<testcase ${attrs}><failure message="${esc(c.message ?? "boom 42")}">trace</failure></testcase>`
      if (c.status === "skipped") return `<testcase ${attrs}><skipped/></testcase>`
      return `<testcase ${attrs}/>`
    })
    .join("\n")}\n</testsuite></testsuites>\n`
const passing = (n: number, prefix = "ok") => Array.from({ length: n }, (_, i): Case => ({ name: `${prefix}${i}` }))

const repoOf = (name: string) => ({ host: "local", owner: "acme", name })
const scope = (name: string, slug = SLUG) => ({ repo: repoOf(name), org_url_slug: slug })
const page = (page_size = 100, page_token = "") => ({ page_size, page_token })

for (const db of databases) {
  describe(`flaky-test endpoints over HTTP (${db})`, () => {
    let server: TestServer
    let otherToken: string

    beforeAll(async () => {
      server = await startTestServer({ db })
      otherToken = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          yield* tenancy.createOrg(OTHER_SLUG)
          yield* tenancy.addRepo(OTHER_SLUG, { host: "local", owner: "other", name: "theirs" })
          return (yield* tenancy.createToken(OTHER_SLUG, "test", "admin")).token
        })
      )
    })
    afterAll(async () => {
      await server.close()
    })

    type Part = readonly [name: string, body: string | Uint8Array]
    const uploadForm = async (
      metadata: string | undefined,
      parts: ReadonlyArray<Part>,
      token = server.token
    ): Promise<{ status: number; body: unknown }> => {
      const form = new FormData()
      if (metadata !== undefined) form.append("metadata", metadata)
      for (const [name, body] of parts) {
        const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body
        form.append("junit", new File([bytes], name, { type: "application/xml" }))
      }
      const response = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": token },
        body: form
      })
      const text = await response.text()
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {}
      return { status: response.status, body }
    }
    const upload = async (
      name: string,
      parts: ReadonlyArray<Part>,
      meta: Record<string, unknown> = {}
    ): Promise<Summary> => {
      const res = await uploadForm(
        JSON.stringify({ ...scope(name), sha: "a".repeat(40), branch: "feature", ...meta }),
        parts
      )
      if (res.status !== 200) throw new Error(`upload answered ${res.status}: ${JSON.stringify(res.body)}`)
      return res.body as Summary
    }
    const ok = async <A = unknown>(op: string, body: unknown, headers?: Record<string, string>): Promise<A> => {
      const res = await server.post(`flaky-tests/${op}`, body, headers)
      if (res.status !== 200) throw new Error(`${op} answered ${res.status}: ${JSON.stringify(res.body)}`)
      return res.body as A
    }
    const err = async (op: string, body: unknown, status: number, headers?: Record<string, string>) => {
      const res = await server.post(`flaky-tests/${op}`, body, headers)
      expect(res.status).toBe(status)
      return (res.body as ErrorBody).error
    }
    const window = () => ({
      start_time: new Date(Date.now() - 6 * DAY).toISOString(),
      end_time: new Date(Date.now() + HOUR).toISOString()
    })
    const failing = (name: string, size = 100, token = "") =>
      ok<TestList>("list-failing-tests", { ...scope(name), ...window(), page_query: page(size, token) })
    const byName = async (repo: string, name: string) => {
      const found = (await failing(repo)).tests.find((t) => t.name === name)
      if (found === undefined) throw new Error(`no failing test ${name} in ${repo}`)
      return found
    }

    test("upload: a plain part and a gzip part; the summary counts every part", async () => {
      const summary = await upload("up", [
        ["pytest-basic.xml", fixture("pytest-basic.xml")],
        ["go.xml.gz", Bun.gzipSync(fixture("go-junit-report-pass-fail-skip.xml"))],
        ["no-attributes.xml", fixture("no-attributes.xml")]
      ])
      expect(summary.upload_id).toMatch(/^[0-9a-f-]{36}$/)
      expect(summary).toMatchObject({
        tests: 9,
        passed: 4,
        failed: 3,
        skipped: 2,
        ignored: 4,
        quarantined_failures: 0,
        unquarantined_failures: 3,
        all_failures_quarantined: false
      })
      const listed = await failing("up")
      expect(listed.page.total_rows).toBe(3)
      expect(listed.tests.length).toBe(3)
      for (const t of listed.tests) {
        expect(t.failure_rate_last_7d).toBe(1)
        expect(t.most_common_failures.length).toBeGreaterThan(0)
        expect(t.html_url).toContain(`/repos/local/acme/up/tests/${t.id}`)
      }
    })

    test("upload: the malformed fixtures are 400 INVALID_JUNIT naming the part and the line; nothing is stored", async () => {
      await upload("malformed", [["first.xml", junit([{ name: "before", status: "failed" }, ...passing(5)])]])
      const before = await failing("malformed")
      expect(before.tests.map((t) => t.name)).toEqual(["before"])
      const expected: ReadonlyArray<readonly [string, number]> = [
        ["corrupt-truncated.xml", 11],
        ["web-test-runner-retries-duplicate-testcase.xml", 9]
      ]
      for (const [name, line] of expected) {
        for (const body of [fixture(name), Bun.gzipSync(fixture(name))]) {
          const res = await uploadForm(JSON.stringify({ ...scope("malformed"), sha: "b".repeat(40), branch: "main" }), [
            ["good.xml", junit([{ name: "never-stored", status: "failed" }, ...passing(5, "new")])],
            [name, body]
          ])
          expect(res.status).toBe(400)
          const error = (res.body as ErrorBody).error
          expect(error.code).toBe("INVALID_JUNIT")
          expect(error.message).toContain(name)
          expect(error.message).toContain("part 2")
          expect(error.message).toContain(`line ${line}`)
          expect(error.details?.[0]?.path).toBe("junit[1]")
        }
      }
      // nothing of those uploads: the failing list is the same, and the new tests do not exist
      const after = await failing("malformed")
      expect(after.tests.map((t) => t.name)).toEqual(["before"])
      expect(after.page.total_rows).toBe(1)
      // a malformed upload to a repository nobody claimed yet does not claim it
      const fresh = await uploadForm(JSON.stringify({ ...scope("malformed-fresh"), sha: "b", branch: "main" }), [
        ["corrupt-truncated.xml", fixture("corrupt-truncated.xml")]
      ])
      expect(fresh.status).toBe(400)
      const missing = await err(
        "list-failing-tests",
        { ...scope("malformed-fresh"), ...window(), page_query: page() },
        404
      )
      expect(missing.code).toBe("NOT_FOUND")
    })

    test("upload: 415 for a body that is not multipart, 400 for a missing or bad metadata part", async () => {
      const meta = { ...scope("bad-upload"), sha: "abc", branch: "main" }
      const json = await server.post("flaky-tests/upload", meta)
      expect(json.status).toBe(415)
      expect((json.body as ErrorBody).error.code).toBe("UNSUPPORTED_MEDIA_TYPE")
      const xml = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": server.token, "content-type": "application/xml" },
        body: junit([{ name: "x" }])
      })
      expect(xml.status).toBe(415)

      const noMeta = await uploadForm(undefined, [["a.xml", junit([{ name: "x" }])]])
      expect(noMeta.status).toBe(400)
      expect((noMeta.body as ErrorBody).error.code).toBe("INVALID_REQUEST")
      expect((noMeta.body as ErrorBody).error.details).toEqual([{ path: "metadata", message: "is required" }])

      const noJunit = await uploadForm(JSON.stringify(meta), [])
      expect(noJunit.status).toBe(400)
      expect((noJunit.body as ErrorBody).error.code).toBe("INVALID_REQUEST")

      const notJson = await uploadForm("{not json", [["a.xml", junit([{ name: "x" }])]])
      expect(notJson.status).toBe(400)
      expect((notJson.body as ErrorBody).error.code).toBe("INVALID_REQUEST")

      const badField = await uploadForm(JSON.stringify({ ...meta, pr_number: -3, run_at: "yesterday" }), [
        ["a.xml", junit([{ name: "x" }])]
      ])
      expect(badField.status).toBe(400)
      const e = (badField.body as ErrorBody).error
      expect(e.code).toBe("INVALID_REQUEST")
      const paths = (e.details ?? []).map((d) => d.path)
      expect(paths).toContain("pr_number")
      expect(paths).toContain("run_at")
      for (const d of e.details ?? []) expect(d.message).not.toBe("")

      const missingSha = await uploadForm(JSON.stringify({ ...scope("bad-upload"), branch: "main" }), [
        ["a.xml", junit([{ name: "x" }])]
      ])
      expect(missingSha.status).toBe(400)
      expect((missingSha.body as ErrorBody).error.details).toContainEqual({ path: "sha", message: "is required" })

      // none of these claimed the repository
      expect((await err("get-settings", scope("bad-upload"), 404)).code).toBe("NOT_FOUND")
      // no token: 401
      const anonymous = await fetch(`${server.url}/v1/flaky-tests/upload`, { method: "POST", body: new FormData() })
      expect(anonymous.status).toBe(401)
    })

    test("list-failing-tests: start inclusive, end exclusive; TIME_RANGE_INVALID", async () => {
      const t0 = Date.now() - 5 * DAY
      await upload("window", [["a.xml", junit([{ name: "old", status: "failed" }, ...passing(4)])]], {
        run_at: new Date(t0).toISOString()
      })
      await upload("window", [["a.xml", junit([{ name: "new", status: "failed" }, ...passing(4)])]], {
        run_at: new Date(t0 + 2 * DAY).toISOString()
      })
      const body = (start: number, end: number) => ({
        ...scope("window"),
        start_time: new Date(start).toISOString(),
        end_time: new Date(end).toISOString(),
        page_query: page()
      })
      const names = async (start: number, end: number) =>
        (await ok<TestList>("list-failing-tests", body(start, end))).tests.map((t) => t.name)
      expect(await names(t0, t0 + 3 * DAY)).toEqual(["new", "old"])
      expect(await names(t0 + 1, t0 + 3 * DAY)).toEqual(["new"])
      expect(await names(t0 - DAY, t0)).toEqual([])
      expect(await names(t0, t0 + 1)).toEqual(["old"])
      expect(await names(t0, t0 + 7 * DAY)).toEqual(["new", "old"])
      for (const [start, end] of [
        [t0, t0],
        [t0 + 1, t0],
        [t0, t0 + 7 * DAY + 1],
        [t0 - 30 * DAY, t0]
      ] as const) {
        const e = await err("list-failing-tests", body(start, end), 400)
        expect(e.code).toBe("TIME_RANGE_INVALID")
      }
      // a date that is not a date is a request error, not a range error
      const notDate = await err("list-failing-tests", { ...body(t0, t0 + DAY), start_time: "soon" }, 400)
      expect(notDate.code).toBe("INVALID_REQUEST")
      expect(notDate.details?.map((d) => d.path)).toContain("start_time")
      const badSize = await err("list-failing-tests", { ...body(t0, t0 + DAY), page_query: page(101) }, 400)
      expect(badSize.code).toBe("INVALID_REQUEST")
    })

    test("pagination: page tokens across pages; INVALID_PAGE_TOKEN for garbage and for another query's token", async () => {
      const cases: Case[] = []
      for (let i = 0; i < 25; i++) cases.push({ name: `t${String(i).padStart(2, "0")}`, status: "failed" })
      await upload("pages", [["a.xml", junit([...cases, ...passing(100)])]])
      const w = window()
      const get = (token: string) =>
        ok<TestList>("list-failing-tests", { ...scope("pages"), ...w, page_query: page(10, token) })
      const seen: string[] = []
      let token = ""
      const pages: Page[] = []
      do {
        const p = await get(token)
        pages.push(p.page)
        seen.push(...p.tests.map((t) => t.name))
        token = p.page.next_page_token
      } while (token !== "")
      expect(seen).toEqual(cases.map((c) => c.name))
      expect(pages.map((p) => p.page_index)).toEqual([0, 1, 2])
      expect(pages[0]).toMatchObject({ total_rows: 25, total_pages: 3, prev_page_token: "" })
      expect(pages[2]?.next_page_token).toBe("")
      const last = await get(pages[0]?.last_page_token ?? "")
      expect(last.tests.map((t) => t.name)).toEqual(["t20", "t21", "t22", "t23", "t24"])
      const back = await get(last.page.prev_page_token)
      expect(back.page.page_index).toBe(1)
      expect(back.tests[0]?.name).toBe("t10")
      // stable while the data does not change
      expect((await get("")).page).toEqual(pages[0] as Page)

      for (const garbage of ["garbage", "!!!", "eyJxIjoieCIsIm8iOjB9", Buffer.from("{").toString("base64url")]) {
        const e = await err("list-failing-tests", { ...scope("pages"), ...w, page_query: page(10, garbage) }, 400)
        expect(e.code).toBe("INVALID_PAGE_TOKEN")
      }
      const next = pages[0]?.next_page_token ?? ""
      // the same kind of query with another window, another repository, or another list
      const otherWindow = { start_time: w.start_time, end_time: new Date(Date.now() + 2 * HOUR).toISOString() }
      for (const [op, body] of [
        ["list-failing-tests", { ...scope("pages"), ...otherWindow, page_query: page(10, next) }],
        ["list-failing-tests", { ...scope("window"), ...w, page_query: page(10, next) }],
        ["list-unhealthy-tests", { ...scope("pages"), status: "flaky", page_query: page(10, next) }],
        ["list-quarantined-tests", { ...scope("pages"), page_query: page(10, next) }]
      ] as const) {
        expect((await err(op, body, 400)).code).toBe("INVALID_PAGE_TOKEN")
      }
      // an empty list
      const none = await ok<QuarantinedList>("list-quarantined-tests", { ...scope("pages"), page_query: page(10) })
      expect(none).toEqual({
        quarantined_tests: [],
        page: {
          total_rows: 0,
          total_pages: 0,
          next_page_token: "",
          prev_page_token: "",
          last_page_token: "",
          page_index: 0
        }
      })
    })

    test("get-test-details: the test case, 404 TEST_CASE_NOT_FOUND, 400 for a non-UUID", async () => {
      await upload(
        "details",
        [["a.xml", junit([{ name: "d1", status: "failed", message: "took 1234 ms" }, ...passing(4)])]],
        {
          variant: "linux",
          pr_number: 12
        }
      )
      const listed = await byName("details", "d1")
      const { test: d1 } = await ok<{ test: TestCase }>("get-test-details", { ...scope("details"), test_id: listed.id })
      expect(d1).toEqual(listed)
      expect(d1).toMatchObject({
        name: "d1",
        variant: "linux",
        classname: "pkg.C",
        file_path: "src/a.test.ts",
        parent: "suite",
        quarantined: false,
        ticket: null,
        pull_requests_impacted_last_7d: 1,
        failure_rate_last_7d: 1,
        failure_rate_last_24h: 1
      })
      expect(d1.status.value).toBe("healthy")
      expect(d1.most_common_failures).toEqual([
        { summary: "took 1234 ms", occurrence_count: 1, last_occurrence: expect.any(String) }
      ])
      // upper-case UUIDs are the same test
      const upper = await ok<{ test: TestCase }>("get-test-details", {
        ...scope("details"),
        test_id: listed.id.toUpperCase()
      })
      expect(upper.test.id).toBe(listed.id)
      const missing = await err("get-test-details", { ...scope("details"), test_id: crypto.randomUUID() }, 404)
      expect(missing.code).toBe("TEST_CASE_NOT_FOUND")
      const bad = await err("get-test-details", { ...scope("details"), test_id: "not-a-uuid" }, 400)
      expect(bad.code).toBe("INVALID_REQUEST")
      expect(bad.details?.[0]?.path).toBe("test_id")
      const noRepo = await err("get-test-details", { ...scope("nowhere"), test_id: listed.id }, 404)
      expect(noRepo.code).toBe("NOT_FOUND")
    })

    test("list-unhealthy-tests: flaky by pass-on-retry, broken after failing on main", async () => {
      // pass on retry in one upload
      await upload("health", [
        ["a.xml", junit([{ name: "flappy", status: "failed" }, { name: "flappy" }, ...passing(6)])]
      ])
      // five failures in a row on main
      for (let i = 0; i < 5; i++) {
        await upload("health", [["a.xml", junit([{ name: "dead", status: "failed" }, ...passing(6)])]], {
          branch: "main",
          sha: `${i}`.padStart(40, "d")
        })
      }
      const flaky = await ok<TestList>("list-unhealthy-tests", {
        ...scope("health"),
        status: "flaky",
        page_query: page()
      })
      expect(flaky.tests.map((t) => t.name)).toEqual(["flappy"])
      expect(flaky.tests[0]?.status.value).toBe("flaky")
      expect(flaky.tests[0]?.status.reason).toContain("failed and passed on commit aaaaaaa")
      expect(flaky.page.total_rows).toBe(1)
      const broken = await ok<TestList>("list-unhealthy-tests", {
        ...scope("health"),
        status: "BROKEN",
        page_query: page()
      })
      expect(broken.tests.map((t) => t.name)).toEqual(["dead"])
      expect(broken.tests[0]?.status.value).toBe("broken")
      expect(broken.tests[0]?.status.reason).not.toBe("")
      const bad = await err("list-unhealthy-tests", { ...scope("health"), status: "healthy", page_query: page() }, 400)
      expect(bad.code).toBe("INVALID_REQUEST")
      expect(bad.details?.[0]?.path).toBe("status")
      // the test details agree
      const dead = await byName("health", "dead")
      expect(dead.status.value).toBe("broken")
    })

    test("same-commit evidence across CI runs (#36): a failure and a pass on one commit from two uploads are pass on retry", async () => {
      const sha = "c".repeat(40)
      // the merge queue's test branch fails the test, main passes it on the same commit (no retries in either)
      await upload("same-commit", [["q.xml", junit([{ name: "queue_then_main", status: "failed" }, ...passing(6)])]], {
        branch: "trunk-merge/main/1",
        sha
      })
      // a re-run of a red build on main: failed, then passed, on the same commit
      const rerun = "e".repeat(40)
      await upload("same-commit", [["r1.xml", junit([{ name: "rerun", status: "failed" }, ...passing(6)])]], {
        branch: "main",
        sha: rerun
      })
      // not yet: one failure alone is no evidence
      const before = await ok<TestList>("list-unhealthy-tests", {
        ...scope("same-commit"),
        status: "flaky",
        page_query: page()
      })
      expect(before.tests.map((t) => t.name)).toEqual([])
      await upload("same-commit", [["m.xml", junit([{ name: "queue_then_main" }, ...passing(6)])]], {
        branch: "main",
        sha
      })
      await upload("same-commit", [["r2.xml", junit([{ name: "rerun" }, ...passing(6)])]], {
        branch: "main",
        sha: rerun
      })
      // and a failure and a pass on two different commits are not
      await upload("same-commit", [["d1.xml", junit([{ name: "two_commits", status: "failed" }, ...passing(6)])]], {
        branch: "main",
        sha: "1".repeat(40)
      })
      await upload("same-commit", [["d2.xml", junit([{ name: "two_commits" }, ...passing(6)])]], {
        branch: "main",
        sha: "2".repeat(40)
      })
      const flaky = await ok<TestList>("list-unhealthy-tests", {
        ...scope("same-commit"),
        status: "flaky",
        page_query: page()
      })
      expect(flaky.tests.map((t) => t.name).sort()).toEqual(["queue_then_main", "rerun"])
      const reasons = new Map(flaky.tests.map((t) => [t.name, t.status.reason]))
      expect(reasons.get("queue_then_main")).toBe("failed and passed on commit ccccccc")
      expect(reasons.get("rerun")).toBe("failed and passed on commit eeeeeee")
      expect((await byName("same-commit", "two_commits")).status.value).toBe("healthy")
    })

    test("link-ticket-to-test-case", async () => {
      await upload("tickets", [["a.xml", junit([{ name: "tk", status: "failed" }, ...passing(4)])]])
      const tk = await byName("tickets", "tk")
      expect(
        await ok<unknown>("link-ticket-to-test-case", {
          repo: repoOf("tickets"),
          test_case_id: tk.id,
          external_ticket_id: "ENG-42",
          html_url: "https://tickets.example/ENG-42"
        })
      ).toEqual({})
      const { test: linked } = await ok<{ test: TestCase }>("get-test-details", { ...scope("tickets"), test_id: tk.id })
      expect(linked.ticket).toEqual({ html_url: "https://tickets.example/ENG-42", external_ticket_id: "ENG-42" })
      // with the org slug too, and without html_url
      await ok("link-ticket-to-test-case", { ...scope("tickets"), test_case_id: tk.id, external_ticket_id: "ENG-43" })
      expect((await byName("tickets", "tk")).ticket).toEqual({ html_url: "", external_ticket_id: "ENG-43" })
      const missing = await err(
        "link-ticket-to-test-case",
        { repo: repoOf("tickets"), test_case_id: crypto.randomUUID(), external_ticket_id: "X" },
        404
      )
      expect(missing.code).toBe("TEST_CASE_NOT_FOUND")
      const bad = await err(
        "link-ticket-to-test-case",
        { repo: repoOf("tickets"), test_case_id: "nope", external_ticket_id: "" },
        400
      )
      expect(bad.code).toBe("INVALID_REQUEST")
      const paths = bad.details?.map((d) => d.path) ?? []
      expect(paths).toContain("test_case_id")
      expect(paths).toContain("external_ticket_id")
    })

    test("settings, quarantine overrides and list-quarantined-tests", async () => {
      // a repository nobody uploaded to: get-settings is a 404, update-settings claims it
      expect((await err("get-settings", scope("fresh-settings"), 404)).code).toBe("NOT_FOUND")
      expect(await ok<unknown>("update-settings", { ...scope("fresh-settings"), auto_quarantine: true })).toEqual({
        quarantining_enabled: false,
        auto_quarantine: true,
        auto_release_clean_runs: 20
      })
      expect(await ok<unknown>("get-settings", scope("fresh-settings"))).toEqual({
        quarantining_enabled: false,
        auto_quarantine: true,
        auto_release_clean_runs: 20
      })

      await upload("quar", [
        [
          "a.xml",
          junit([{ name: "qf", status: "failed" }, { name: "qf" }, { name: "qh", status: "failed" }, ...passing(6)])
        ]
      ])
      expect(await ok<unknown>("get-settings", scope("quar"))).toEqual({
        quarantining_enabled: false,
        auto_quarantine: false,
        auto_release_clean_runs: 20
      })
      const qf = await byName("quar", "qf")
      const qh = await byName("quar", "qh")
      expect(qf.status.value).toBe("flaky")
      expect(qh.status.value).toBe("healthy")
      const quarantined = async () =>
        (
          await ok<QuarantinedList>("list-quarantined-tests", { ...scope("quar"), page_query: page() })
        ).quarantined_tests.map((t) => [t.name, t.quarantine_setting])
      // overrides do nothing while quarantining is off
      expect(
        await ok<unknown>("set-quarantine-override", {
          ...scope("quar"),
          test_case_id: qh.id,
          override: "ALWAYS_QUARANTINE"
        })
      ).toEqual({})
      expect(await quarantined()).toEqual([])
      expect(await ok<unknown>("update-settings", { ...scope("quar"), quarantining_enabled: true })).toEqual({
        quarantining_enabled: true,
        auto_quarantine: false,
        auto_release_clean_runs: 20
      })
      expect(await quarantined()).toEqual([["qh", "always_quarantine"]])
      expect(await ok<unknown>("update-settings", { ...scope("quar"), auto_quarantine: true })).toEqual({
        quarantining_enabled: true,
        auto_quarantine: true,
        auto_release_clean_runs: 20
      })
      expect(await quarantined()).toEqual([
        ["qf", "auto_quarantine"],
        ["qh", "always_quarantine"]
      ])
      const list = await ok<QuarantinedList>("list-quarantined-tests", { ...scope("quar"), page_query: page(1) })
      expect(list.page).toMatchObject({ total_rows: 2, total_pages: 2, page_index: 0 })
      expect(list.quarantined_tests[0]?.test_case_id).toBe(qf.id)
      expect(list.quarantined_tests[0]?.status.value).toBe("flaky")
      expect((await byName("quar", "qf")).quarantined).toBe(true)
      // the upload answer tells whether every failure is quarantined
      const s = await upload("quar", [
        ["a.xml", junit([{ name: "qf", status: "failed" }, { name: "qh", status: "failed" }, ...passing(6)])]
      ])
      expect(s).toMatchObject({
        failed: 2,
        quarantined_failures: 2,
        unquarantined_failures: 0,
        all_failures_quarantined: true
      })
      await ok("set-quarantine-override", { ...scope("quar"), test_case_id: qf.id, override: "never_quarantine" })
      expect(await quarantined()).toEqual([["qh", "always_quarantine"]])
      await ok("set-quarantine-override", { ...scope("quar"), test_case_id: qh.id, override: "unspecified" })
      await ok("set-quarantine-override", { ...scope("quar"), test_case_id: qf.id, override: "unspecified" })
      expect(await quarantined()).toEqual([["qf", "auto_quarantine"]])
      await ok("update-settings", { ...scope("quar"), quarantining_enabled: false })
      expect(await quarantined()).toEqual([])

      const missing = await err(
        "set-quarantine-override",
        { ...scope("quar"), test_case_id: crypto.randomUUID(), override: "always_quarantine" },
        404
      )
      expect(missing.code).toBe("TEST_CASE_NOT_FOUND")
      const badValue = await err(
        "set-quarantine-override",
        { ...scope("quar"), test_case_id: qf.id, override: "sometimes" },
        400
      )
      expect(badValue.code).toBe("INVALID_REQUEST")
      expect(badValue.details?.[0]?.path).toBe("override")
      const badType = await err("update-settings", { ...scope("quar"), quarantining_enabled: "yes" }, 400)
      expect(badType.code).toBe("INVALID_REQUEST")
      expect(badType.details?.[0]?.path).toBe("quarantining_enabled")
    })

    test("tenancy: another organization's repository or slug is a 404", async () => {
      await upload("mine", [["a.xml", junit([{ name: "m1", status: "failed" }, ...passing(4)])]])
      const m1 = await byName("mine", "m1")
      const other = { "x-api-token": otherToken }
      const theirs = { repo: { host: "local", owner: "other", name: "theirs" }, org_url_slug: OTHER_SLUG }
      const calls: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
        ["list-failing-tests", { ...window(), page_query: page() }],
        ["list-quarantined-tests", { page_query: page() }],
        ["list-unhealthy-tests", { status: "flaky", page_query: page() }],
        ["get-test-details", { test_id: m1.id }],
        ["link-ticket-to-test-case", { test_case_id: m1.id, external_ticket_id: "X" }],
        ["set-quarantine-override", { test_case_id: m1.id, override: "always_quarantine" }],
        ["get-settings", {}],
        ["update-settings", { quarantining_enabled: true }]
      ]
      for (const [op, rest] of calls) {
        // the other organization, on acme's repository, with either slug
        expect((await err(op, { ...scope("mine", OTHER_SLUG), ...rest }, 404, other)).code).toBe("NOT_FOUND")
        expect((await err(op, { ...scope("mine", SLUG), ...rest }, 404, other)).code).toBe("NOT_FOUND")
        // acme on the other organization's repository, or with the other organization's slug
        expect((await err(op, { ...theirs, ...rest, org_url_slug: SLUG }, 404)).code).toBe("NOT_FOUND")
        expect((await err(op, { ...scope("mine", OTHER_SLUG), ...rest }, 404)).code).toBe("NOT_FOUND")
      }
      // uploads too
      const meta = (s: Record<string, unknown>) => JSON.stringify({ ...s, sha: "a", branch: "main" })
      const parts: ReadonlyArray<Part> = [["a.xml", junit([{ name: "x", status: "failed" }])]]
      const steal = await uploadForm(meta(scope("mine", OTHER_SLUG)), parts, otherToken)
      expect(steal.status).toBe(404)
      expect((steal.body as ErrorBody).error.code).toBe("NOT_FOUND")
      const wrongSlug = await uploadForm(meta(scope("mine", OTHER_SLUG)), parts)
      expect(wrongSlug.status).toBe(404)
      const intoTheirs = await uploadForm(meta({ ...theirs, org_url_slug: SLUG }), parts)
      expect(intoTheirs.status).toBe(404)
      // the other organization cannot claim a new repository (no claim on first use) but uses its own
      const claim = await uploadForm(meta(scope("unclaimed", OTHER_SLUG)), parts, otherToken)
      expect(claim.status).toBe(404)
      const own = await uploadForm(meta(theirs), [["a.xml", junit(passing(3))]], otherToken)
      expect(own.status).toBe(200)
      // nothing changed for acme
      expect((await failing("mine")).tests.map((t) => t.name)).toEqual(["m1"])
      expect((await byName("mine", "m1")).ticket).toBeNull()
    })

    test("quarantine end to end: the CLI's exit code", async () => {
      const cli = async (args: ReadonlyArray<string>, url = server.url) => {
        const proc = Bun.spawn(
          [
            process.execPath,
            "src/cli.ts",
            "upload",
            "--url",
            url,
            "--token",
            server.token,
            "--org",
            SLUG,
            "--repo",
            "local/acme/cli",
            "--branch",
            "main",
            ...args
          ],
          { cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, GREENLINE_URL: "", GREENLINE_TOKEN: "" } }
        )
        const [code, out, errText] = await Promise.all([
          proc.exited,
          new Response(proc.stdout).text(),
          new Response(proc.stderr).text()
        ])
        return { code, out: out + errText }
      }
      const file = fixturePath("pytest-basic.xml")
      let r = await cli(["--sha", "1".repeat(40), file])
      expect(r.out).toContain("4 tests, 2 passed, 2 failed")
      expect(r.code).toBe(1)
      r = await cli(["--sha", "2".repeat(40), "--exit-code", "3", file])
      expect(r.code).toBe(3)
      expect(r.out).toContain("0 quarantined, 2 not quarantined")

      const failures = (await failing("cli")).tests
      expect(failures.length).toBe(2)
      await ok("update-settings", { ...scope("cli"), quarantining_enabled: true })
      // one of the two quarantined is not enough
      await ok("set-quarantine-override", {
        ...scope("cli"),
        test_case_id: failures[0]?.id,
        override: "always_quarantine"
      })
      r = await cli(["--sha", "3".repeat(40), "--exit-code", "3", file])
      expect(r.code).toBe(3)
      expect(r.out).toContain("1 quarantined, 1 not quarantined")
      await ok("set-quarantine-override", {
        ...scope("cli"),
        test_case_id: failures[1]?.id,
        override: "always_quarantine"
      })
      r = await cli(["--sha", "4".repeat(40), file])
      expect(r.code).toBe(0)
      expect(r.out).toContain("2 quarantined, 0 not quarantined")
      r = await cli(["--sha", "5".repeat(40), "--exit-code", "3", file])
      expect(r.code).toBe(0)

      // an error answer (unreadable file): 4; a server that is not running: 3 (the client's exit codes)
      r = await cli(["--sha", "6".repeat(40), fixturePath("corrupt-truncated.xml")])
      expect(r.code).toBe(4)
      expect(r.out).toContain("INVALID_JUNIT")
      const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") })
      const deadUrl = `http://127.0.0.1:${closed.port}`
      await closed.stop(true)
      r = await cli(["--sha", "7".repeat(40), "--retries", "0", file], deadUrl)
      expect(r.code).toBe(3)
      expect(r.out).toContain("was refused")
    })
  })
}
