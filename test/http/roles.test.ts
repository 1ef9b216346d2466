/**
 * The role matrix (issue #30), over HTTP against the real server: every operation of the API called by a token of
 * every role. Where the role is below what the operation needs, the answer is 403 `PERMISSION_DENIED` in the
 * contract's envelope, nothing in the database changed, and the refusal is in the audit log with its actor; where it
 * is not, the operation ran (its answer is not a 403) and, for a change, the audit log holds it with its actor.
 *
 * Each case names the role the issue gives the operation, independently of the server's table (src/http/roles.ts),
 * and the test checks that the two agree: an operation without a case does not compile.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { OpName } from "../../src/http/Api.ts"
import { ops } from "../../src/http/Api.ts"
import { PERMISSIONS } from "../../src/http/roles.ts"
import { ROLES, type Role, roleAllows } from "../../src/tenancy/principal.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const SLUG = "acme-org"
const repo = { host: "local", owner: "acme", name: "app" }
const key = { repo, targetBranch: "main" }
const scope = { repo, org_url_slug: SLUG }
const page = { page_size: 10, page_token: "" }
const HOOK = "http://127.0.0.1:9/hook"

/** What one call sends: a JSON body, a query string (GET), or a multipart form (the upload). */
type Call =
  | { readonly json: unknown }
  | { readonly query: Readonly<Record<string, string>> }
  | { readonly form: () => FormData }

interface Fixture {
  readonly tokens: Readonly<Record<Role, { readonly id: string; readonly token: string }>>
  readonly headSha: string
  readonly testId: string
  readonly uploadId: string
  /** per role: a webhook endpoint to update, rotate and replay; one to delete */
  readonly endpoint: Readonly<Record<Role, string>>
  readonly endpointToDelete: Readonly<Record<Role, string>>
  /** per role: a token it may revoke (its own below admin) through revokeApiToken, and one for adminRevokeToken */
  readonly revocable: Readonly<Record<Role, string>>
  readonly adminRevocable: Readonly<Record<Role, string>>
}

interface Case {
  /** the role the issue gives the operation */
  readonly role: Role
  readonly call: (as: Role, f: Fixture) => Call
  /** what an allowed call answers (default 200) */
  readonly allowed?: ReadonlyArray<number>
}

const ROLE_INDEX: Readonly<Record<Role, number>> = { read: 0, write: 1, maintain: 2, admin: 3 }
const junit = (failed: boolean) =>
  `<?xml version="1.0"?><testsuite name="s"><testcase classname="pkg.C" name="t_flaky" file="a.test.ts">${
    failed ? `<failure message="boom">trace</failure>` : ""
  }</testcase><testcase classname="pkg.C" name="t_ok" file="a.test.ts"/></testsuite>`
const uploadForm = (failed: boolean) => () => {
  const form = new FormData()
  form.append("metadata", JSON.stringify({ ...scope, sha: "b".repeat(40), branch: "feature" }))
  form.append("junit", new File([junit(failed)], "junit.xml", { type: "application/xml" }))
  return form
}

/** Every operation, with the role the issue names for it and a request that can succeed for each role. */
const CASES: { readonly [N in OpName]: Case } = {
  // read: every read of the API
  getQueue: { role: "read", call: () => ({ json: key }) },
  listQueues: { role: "read", call: () => ({ json: {} }) },
  getQueueActivity: { role: "read", call: () => ({ json: key }) },
  getQueueHealth: { role: "read", call: () => ({ json: key }) },
  listQueueFailures: { role: "read", call: () => ({ json: key }) },
  getSubmittedPullRequest: { role: "read", call: () => ({ json: { ...key, pr: { number: 1 } } }) },
  getPullRequestActivity: { role: "read", call: () => ({ json: { repo, pr: { number: 1 } } }) },
  getMergeQueueTestingDetails: {
    role: "read",
    call: () => ({ json: { ...key, testRunId: "00000000-0000-4000-8000-000000000000" } }),
    allowed: [404]
  },
  getMergeQueueMetrics: { role: "read", call: () => ({ query: { repo: "acme/app", repoHost: "local" } }) },
  listFailingTests: {
    role: "read",
    call: () => ({
      json: {
        ...scope,
        start_time: new Date(Date.now() - 86_400_000).toISOString(),
        end_time: new Date(Date.now() + 3_600_000).toISOString(),
        page_query: page
      }
    })
  },
  listQuarantinedTests: { role: "read", call: () => ({ json: { ...scope, page_query: page } }) },
  listUnhealthyTests: { role: "read", call: () => ({ json: { ...scope, page_query: page, status: "broken" } }) },
  getTestDetails: { role: "read", call: (_, f) => ({ json: { ...scope, test_id: f.testId } }) },
  getTestHistory: { role: "read", call: (_, f) => ({ json: { repo, test_id: f.testId } }) },
  getUpload: { role: "read", call: (_, f) => ({ json: { repo, upload_id: f.uploadId } }) },
  getFlakySettings: { role: "read", call: () => ({ json: scope }) },
  exportQuarantine: { role: "read", call: () => ({ query: { org_url_slug: SLUG, repo: "local/acme/app" } }) },
  exportQuarantineCsv: { role: "read", call: () => ({ query: { org_url_slug: SLUG, repo: "local/acme/app" } }) },

  // write: what CI does
  submitPullRequest: { role: "write", call: (as) => ({ json: { ...key, pr: { number: 20 + ROLE_INDEX[as] } } }) },
  cancelPullRequest: { role: "write", call: (as) => ({ json: { ...key, pr: { number: 10 + ROLE_INDEX[as] } } }) },
  // no test run yet (the queue is paused): the engine's answer, past the role
  restartTestsOnPullRequest: { role: "write", call: () => ({ json: { ...key, pr: { number: 1 } } }), allowed: [409] },
  setImpactedTargets: {
    role: "write",
    call: (_, f) => ({ json: { ...key, pr: { number: 1, sha: f.headSha }, impactedTargets: ["frontend"] } })
  },
  reportStatus: {
    role: "write",
    call: (as, f) => ({ json: { repo, sha: f.headSha, context: `ci-${as}`, state: "success" } })
  },
  uploadTestResults: { role: "write", call: () => ({ form: uploadForm(false) }) },

  // maintain: queue configuration, webhooks, flaky settings, quarantine overrides, tickets
  createQueue: { role: "maintain", call: (as) => ({ json: { repo, targetBranch: `new-${as}` } }) },
  updateQueue: { role: "maintain", call: (as) => ({ json: { ...key, concurrency: 1 + ROLE_INDEX[as] } }) },
  deleteQueue: { role: "maintain", call: (as) => ({ json: { repo, targetBranch: `old-${as}` } }) },
  updateFlakySettings: {
    role: "maintain",
    call: (as) => ({ json: { ...scope, auto_release_clean_runs: 10 + ROLE_INDEX[as] } })
  },
  setQuarantineOverride: {
    role: "maintain",
    call: (as, f) => ({
      json: { ...scope, test_case_id: f.testId, override: "never_quarantine", reason: `by ${as}` }
    })
  },
  linkTicketToTestCase: {
    role: "maintain",
    call: (as, f) => ({ json: { ...scope, test_case_id: f.testId, external_ticket_id: `T-${as}` } })
  },
  importQuarantine: { role: "maintain", call: () => ({ json: { ...scope, tests: [] } }) },
  listWebhookEndpoints: { role: "maintain", call: () => ({ json: {} }) },
  listWebhookDeliveries: { role: "maintain", call: (as, f) => ({ json: { endpointId: f.endpoint[as] } }) },
  createWebhookEndpoint: { role: "maintain", call: (as) => ({ json: { url: `${HOOK}/${as}` } }) },
  updateWebhookEndpoint: {
    role: "maintain",
    call: (as, f) => ({ json: { id: f.endpoint[as], description: `changed by ${as}` } })
  },
  deleteWebhookEndpoint: { role: "maintain", call: (as, f) => ({ json: { id: f.endpointToDelete[as] } }) },
  rotateWebhookSecret: { role: "maintain", call: (as, f) => ({ json: { id: f.endpoint[as] } }) },
  replayWebhookMessages: {
    role: "maintain",
    call: (as, f) => ({ json: { endpointId: f.endpoint[as], since: new Date(Date.now() - 60_000).toISOString() } })
  },
  // tokens: reached with maintain, narrowed by the tenancy service (test/http/audit.test.ts has the rules)
  listApiTokens: { role: "maintain", call: () => ({ json: {} }) },
  createApiToken: { role: "maintain", call: (as) => ({ json: { name: `made by ${as}`, role: as } }) },
  revokeApiToken: { role: "maintain", call: (as, f) => ({ json: { id: f.revocable[as] } }) },

  // admin: the audit log, the admin API
  listAuditEvents: { role: "admin", call: () => ({ json: {} }) },
  adminListTokens: { role: "admin", call: () => ({ json: { org: SLUG } }) },
  adminCreateOrganization: { role: "admin", call: (as) => ({ json: { slug: `org-${as}` } }) },
  adminCreateToken: { role: "admin", call: (as) => ({ json: { org: SLUG, name: `admin api ${as}` } }) },
  adminRevokeToken: { role: "admin", call: (as, f) => ({ json: { id: f.adminRevocable[as] } }) },
  adminAddRepository: {
    role: "admin",
    call: (as) => ({ json: { org: SLUG, repo: { host: "local", owner: "acme", name: `added-${as}` } } })
  },
  // #31: freezes (one far in the future, so the other cases' queue is not frozen); no such freeze to change
  listFreezes: { role: "read", call: () => ({ json: { repo } }) },
  createFreeze: {
    role: "maintain",
    call: (as) => ({
      json: { ...key, reason: `by ${as}`, startsAt: "2099-01-01T00:00:00Z", endsAt: "2099-01-02T00:00:00Z" }
    })
  },
  updateFreeze: {
    role: "maintain",
    call: () => ({ json: { repo, id: "00000000-0000-4000-8000-000000000000", reason: "x" } }),
    allowed: [404]
  },
  previewCancelPullRequest: { role: "read", call: () => ({ json: { ...key, pr: { number: 1 } } }) },
  previewRestartTests: { role: "read", call: () => ({ json: { ...key, pr: { number: 1 } } }) },
  previewSubmitPullRequest: { role: "read", call: () => ({ json: { ...key, pr: { number: 1 }, priority: "urgent" } }) },
  setMergeSchedule: { role: "maintain", call: () => ({ json: { ...key, schedule: null } }) },
  deleteFreeze: {
    role: "maintain",
    call: () => ({ json: { repo, id: "00000000-0000-4000-8000-000000000000" } }),
    allowed: [404]
  }
}

/**
 * Every table's rows (as sorted JSON), but the audit log's and the sessions', and without what a queue's runner
 * writes on its own in a round that changes nothing (its state's version, its lease).
 */
const RUNNER_OWN: Readonly<Record<string, ReadonlyArray<string>>> = {
  queue_runtime: ["version", "owner", "lease_until", "fencing", "owned_since"],
  // the instance's heartbeats (greenline_instances every 10 s; runner_instances with each lease pass, #37)
  greenline_instances: ["seen_at"],
  runner_instances: ["alive_until"]
}
const snapshot = (server: TestServer) =>
  server.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const tables = yield* sql<{ table_name: string }>`
        select table_name from information_schema.tables
        where table_schema = current_schema() and table_type = 'BASE TABLE'
        order by table_name`
      const out: Record<string, string> = {}
      for (const { table_name } of tables) {
        if (["audit_events", "web_sessions", "greenline_migrations"].includes(table_name)) continue
        const rows = yield* sql.unsafe<Record<string, unknown>>(`select * from "${table_name}"`)
        const skip = RUNNER_OWN[table_name] ?? []
        out[table_name] = rows
          .map((r) =>
            JSON.stringify(r, (k, v) => (skip.includes(k) ? undefined : typeof v === "bigint" ? v.toString() : v))
          )
          .sort()
          .join("\n")
      }
      return out
    })
  )

/** A snapshot once nothing changes any more (the runners' last rounds of the setup have settled). */
const quietSnapshot = async (server: TestServer) => {
  let last = await snapshot(server)
  for (let i = 0; i < 50; i++) {
    await Bun.sleep(200)
    const next = await snapshot(server)
    if (JSON.stringify(next) === JSON.stringify(last)) return next
    last = next
  }
  throw new Error("the database never settled")
}

for (const db of databases) {
  describe(`the role matrix over HTTP (${db})`, () => {
    let server: TestServer
    let root: string
    let git: TestRepo
    let fixture: Fixture
    const results: Array<{ op: OpName; as: Role; status: number }> = []

    const send = async (op: OpName, token: string, call: Call) => {
      const path = `/v1${ops[op].path}`
      const headers = { "x-api-token": token }
      const response =
        "query" in call
          ? await fetch(`${server.url}${path}?${new URLSearchParams(call.query)}`, { headers })
          : "form" in call
            ? await fetch(`${server.url}${path}`, { method: "POST", headers, body: call.form() })
            : await fetch(`${server.url}${path}`, {
                method: "POST",
                headers: { ...headers, "content-type": "application/json" },
                body: JSON.stringify(call.json)
              })
      const text = await response.text()
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {}
      return { status: response.status, body }
    }
    const ok = async <A>(op: OpName, body: unknown, token = server.token): Promise<A> => {
      const r = await send(op, token, { json: body })
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }

    beforeAll(async () => {
      root = tempDir("greenline-roles-git-")
      git = createTestRepo({ root, repo })
      for (const n of [1, 10, 11, 12, 13, 20, 21, 22, 23]) git.createPr(n, { files: { [`pr${n}.txt`]: `${n}` } })
      server = await startTestServer({
        db,
        gitRoot: root,
        leaseTimer: false,
        gitPollMs: 60_000,
        config: { webhookAllowPrivate: true, webhookWorker: false }
      })
      const tokens = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          const out: Partial<Record<Role, { id: string; token: string }>> = {}
          for (const role of ROLES) out[role] = yield* tenancy.createToken(SLUG, `${role} token`, role)
          return out as Record<Role, { id: string; token: string }>
        })
      )
      await ok("createQueue", key)
      await ok("updateQueue", { ...key, state: "paused" })
      for (const role of ROLES) await ok("createQueue", { repo, targetBranch: `old-${role}` })
      for (const n of [1, 10, 11, 12, 13]) await ok("submitPullRequest", { ...key, pr: { number: n } })
      const upload = await send("uploadTestResults", server.token, { form: uploadForm(true) })
      expect(upload.status).toBe(200)
      const uploadId = (upload.body as { upload_id: string }).upload_id
      const failing = await ok<{ tests: Array<{ id: string }> }>(
        "listFailingTests",
        (CASES.listFailingTests.call("admin", {} as Fixture) as { json: unknown }).json
      )
      const testId = failing.tests[0]?.id ?? ""
      const endpoint: Partial<Record<Role, string>> = {}
      const endpointToDelete: Partial<Record<Role, string>> = {}
      const revocable: Partial<Record<Role, string>> = {}
      const adminRevocable: Partial<Record<Role, string>> = {}
      for (const role of ROLES) {
        endpoint[role] = (await ok<{ id: string }>("createWebhookEndpoint", { url: `${HOOK}/keep-${role}` })).id
        endpointToDelete[role] = (await ok<{ id: string }>("createWebhookEndpoint", { url: `${HOOK}/del-${role}` })).id
        // below admin a token revokes only its own: the maintain token makes the one it revokes; the others try one
        // the admin made
        const maker = role === "maintain" ? tokens.maintain.token : server.token
        const made = await ok<{ id: string }>("createApiToken", { name: `to revoke (${role})`, role: "read" }, maker)
        revocable[role] = made.id
        adminRevocable[role] = (await ok<{ id: string }>("createApiToken", { name: `admin api (${role})` })).id
      }
      fixture = {
        tokens,
        headSha: git.git("rev-parse", "refs/pull/1/head"),
        testId,
        uploadId,
        endpoint: endpoint as Record<Role, string>,
        endpointToDelete: endpointToDelete as Record<Role, string>,
        revocable: revocable as Record<Role, string>,
        adminRevocable: adminRevocable as Record<Role, string>
      }
    })
    afterAll(async () => {
      await server?.close()
      git?.cleanup()
      fs.rmSync(root, { recursive: true, force: true })
    })

    test("each case's role is the server's (http/roles.ts), and every operation has a case", () => {
      const names = Object.keys(ops).sort()
      expect(Object.keys(CASES).sort()).toEqual(names)
      expect(Object.keys(PERMISSIONS).sort()).toEqual(names)
      for (const name of names as Array<OpName>)
        expect(`${name}: ${PERMISSIONS[name].role}`).toBe(`${name}: ${CASES[name].role}`)
      // a role's operations are those of the roles below it and more
      const allowed = (role: Role) => names.filter((n) => roleAllows(role, PERMISSIONS[n as OpName].role))
      expect(allowed("read").length).toBeLessThan(allowed("write").length)
      expect(allowed("write").length).toBeLessThan(allowed("maintain").length)
      expect(allowed("maintain").length).toBeLessThan(allowed("admin").length)
      expect(allowed("admin")).toEqual(names)
    })

    test("below the operation's role: 403 PERMISSION_DENIED in the envelope, nothing changed, the refusal recorded", async () => {
      const before = await quietSnapshot(server)
      const refused: Array<{ op: OpName; as: Role }> = []
      for (const op of Object.keys(CASES) as Array<OpName>) {
        for (const as of ROLES) {
          if (roleAllows(as, CASES[op].role)) continue
          const r = await send(op, fixture.tokens[as].token, CASES[op].call(as, fixture))
          results.push({ op, as, status: r.status })
          expect(`${op} as ${as}: ${r.status}`).toBe(`${op} as ${as}: 403`)
          const error = (r.body as { error: { code: string; message: string; details?: unknown } }).error
          expect(Object.keys(r.body as object)).toEqual(["error"])
          expect(error.code).toBe("PERMISSION_DENIED")
          expect(error.message).toContain(op)
          expect(error.message).toContain(CASES[op].role)
          refused.push({ op, as })
        }
      }
      const after = await snapshot(server)
      for (const table of Object.keys(before)) expect(`${table}: ${after[table]}`).toBe(`${table}: ${before[table]}`)
      expect(refused.length).toBeGreaterThan(40)

      // each refusal is in the audit log with its actor, in the order made
      const log = await ok<{ events: Array<{ actor: { id: string }; action: string; outcome: string; role: string }> }>(
        "listAuditEvents",
        { outcome: "refused", page_query: { page_size: 100, page_token: "" } }
      )
      const recorded = log.events.map((e) => `${e.action} ${e.actor.id} ${e.role}`).reverse()
      expect(recorded).toEqual(refused.map((r) => `${r.op} ${fixture.tokens[r.as].id} ${r.as}`))
    })

    test("at the operation's role or above, it runs; each change is in the audit log with its actor", async () => {
      const changed: Array<string> = []
      for (const op of Object.keys(CASES) as Array<OpName>) {
        for (const as of ROLES) {
          if (!roleAllows(as, CASES[op].role)) continue
          const r = await send(op, fixture.tokens[as].token, CASES[op].call(as, fixture))
          results.push({ op, as, status: r.status })
          const expected = CASES[op].allowed ?? [200]
          expect(
            `${op} as ${as}: ${expected.includes(r.status) ? "expected" : `${r.status} ${JSON.stringify(r.body)}`}`
          ).toBe(`${op} as ${as}: expected`)
          if (PERMISSIONS[op].changes && r.status === 200) changed.push(`${op} ${fixture.tokens[as].id} ${as}`)
        }
      }
      const events: Array<string> = []
      let token = ""
      do {
        const got = await ok<{
          events: Array<{ actor: { id: string; kind: string }; action: string; role: string }>
          page: { next_page_token: string }
        }>("listAuditEvents", { outcome: "allowed", page_query: { page_size: 100, page_token: token } })
        events.push(...got.events.map((e) => `${e.action} ${e.actor.id} ${e.role}`))
        token = got.page.next_page_token
      } while (token !== "")
      for (const c of changed) expect(events).toContain(c)
    })

    test("every operation was called by every role", () => {
      expect(results.length).toBe(Object.keys(ops).length * ROLES.length)
      for (const op of Object.keys(ops)) {
        expect(
          results
            .filter((r) => r.op === op)
            .map((r) => r.as)
            .sort()
        ).toEqual([...ROLES].sort())
      }
    })
  })
}
