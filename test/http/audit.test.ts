/**
 * Tokens with roles and the audit log (issue #30), over HTTP: a `write` token cannot create, list or revoke other
 * tokens and an `admin` can; below `admin` a token makes tokens of its role or below and manages only its own; the
 * audit log shows allowed and refused changes with their actor, role, target and address, filtered and paged as the
 * flaky-test lists are, written in the change's own transaction; a dashboard session acts in its token's role.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { AuditLog } from "../../src/audit/AuditLog.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const SLUG = "acme-org"

interface AuditEvent {
  readonly id: string
  readonly at: string
  readonly actor: { readonly kind: string; readonly id: string; readonly name: string }
  readonly role: string
  readonly action: string
  readonly target: string
  readonly outcome: string
  readonly sourceIp: string | null
}
interface AuditPage {
  readonly events: ReadonlyArray<AuditEvent>
  readonly page: {
    readonly total_rows: number
    readonly total_pages: number
    readonly next_page_token: string
    readonly prev_page_token: string
    readonly last_page_token: string
    readonly page_index: number
  }
}
interface Token {
  readonly id: string
  readonly name: string
  readonly role: string
  readonly revokedAt: string | null
}

for (const db of databases) {
  describe(`tokens with roles and the audit log (${db})`, () => {
    let server: TestServer
    let write: { id: string; token: string }
    let maintain: { id: string; token: string }
    let adminId: string
    const as = (token: string) => ({ "x-api-token": token })
    const call = (op: string, body: unknown, token = server.token) => server.post(op, body, as(token))
    const ok = async <A>(op: string, body: unknown, token = server.token): Promise<A> => {
      const r = await call(op, body, token)
      if (r.status !== 200) throw new Error(`${op} answered ${r.status}: ${JSON.stringify(r.body)}`)
      return r.body as A
    }
    const denied = (r: { status: number; body: unknown }) => {
      expect(r.status).toBe(403)
      expect((r.body as { error: { code: string } }).error.code).toBe("PERMISSION_DENIED")
    }
    const audit = (query: Record<string, unknown> = {}) => ok<AuditPage>("listAuditEvents", query)

    beforeAll(async () => {
      server = await startTestServer({ db })
      ;[write, maintain] = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          return [
            yield* tenancy.createToken(SLUG, "ci", "write"),
            yield* tenancy.createToken(SLUG, "release manager", "maintain")
          ] as const
        })
      )
      const tokens = await ok<{ tokens: ReadonlyArray<Token> }>("listApiTokens", {})
      adminId = tokens.tokens.find((t) => t.name === "bootstrap")?.id ?? ""
      expect(tokens.tokens.find((t) => t.name === "bootstrap")?.role).toBe("admin")
    })
    afterAll(async () => {
      await server?.close()
    })

    test("a write token cannot create, list or revoke tokens; the admin token still works", async () => {
      denied(await call("createApiToken", { name: "mine" }, write.token))
      denied(await call("createApiToken", { name: "mine", role: "read" }, write.token))
      denied(await call("listApiTokens", {}, write.token))
      denied(await call("revokeApiToken", { id: adminId }, write.token))
      denied(await call("revokeApiToken", { id: write.id }, write.token))
      // the attack: a CI token revoking the admin token
      expect(
        (await call("getQueue", { repo: { host: "local", owner: "a", name: "b" }, targetBranch: "main" })).status
      ).toBe(404)
      expect(
        (await ok<{ tokens: ReadonlyArray<Token> }>("listApiTokens", {})).tokens.every((t) => t.revokedAt === null)
      ).toBe(true)
    })

    test("an admin token creates tokens of every role, lists them all and revokes any", async () => {
      const made: Array<{ id: string; role: string; token: string }> = []
      for (const role of ["read", "write", "maintain", "admin"]) {
        const created = await ok<{ id: string; role: string; token: string; name: string }>("createApiToken", {
          name: `by admin ${role}`,
          role: role.toUpperCase()
        })
        expect(created.role).toBe(role)
        made.push(created)
      }
      // the default role is write
      expect((await ok<{ role: string }>("createApiToken", { name: "default" })).role).toBe("write")
      const listed = (await ok<{ tokens: ReadonlyArray<Token> }>("listApiTokens", {})).tokens
      for (const m of made) expect(listed.find((t) => t.id === m.id)?.role).toBe(m.role)
      expect(listed.map((t) => t.id)).toContain(write.id)
      expect(listed.map((t) => t.id)).toContain(maintain.id)
      // the new admin token revokes another admin's token
      const [, , , newAdmin] = made
      await ok("revokeApiToken", { id: made[0]!.id }, newAdmin!.token)
      expect((await call("getQueue", {}, made[0]!.token)).status).toBe(401)
    })

    test("below admin: tokens of its own role or below, and only its own to list and revoke", async () => {
      // above its role: refused by the tenancy service, and recorded
      denied(await call("createApiToken", { name: "escalate", role: "admin" }, maintain.token))
      const mine = await ok<{ id: string; role: string }>(
        "createApiToken",
        { name: "deploy bot", role: "maintain" },
        maintain.token
      )
      const reader = await ok<{ id: string; role: string; token: string }>(
        "createApiToken",
        { name: "grafana", role: "read" },
        maintain.token
      )
      expect(reader.role).toBe("read")
      // the read token can read, not change
      expect((await call("listQueues", {}, reader.token)).status).toBe(200)
      denied(
        await call(
          "createQueue",
          { repo: { host: "local", owner: "acme", name: "x" }, targetBranch: "main" },
          reader.token
        )
      )
      // it sees itself and the tokens it made, nobody else's
      const seen = (await ok<{ tokens: ReadonlyArray<Token> }>("listApiTokens", {}, maintain.token)).tokens.map(
        (t) => t.id
      )
      expect(seen.sort()).toEqual([maintain.id, mine.id, reader.id].sort())
      // another's token (the admin's, the CI's) cannot be revoked; its own can
      denied(await call("revokeApiToken", { id: adminId }, maintain.token))
      denied(await call("revokeApiToken", { id: write.id }, maintain.token))
      await ok("revokeApiToken", { id: reader.id }, maintain.token)
      expect((await call("listQueues", {}, reader.token)).status).toBe(401)
      expect((await call("listQueues", {}, write.token)).status).toBe(200)
      expect((await call("listQueues", {})).status).toBe(200)
      // a token of another organization is not found, whatever the role
      expect((await call("revokeApiToken", { id: crypto.randomUUID() }, maintain.token)).status).toBe(404)
    })

    test("the audit log: allowed and refused changes with actor, role, target and address; reads are not in it", async () => {
      const key = { repo: { host: "local", owner: "acme", name: "audited" }, targetBranch: "main" }
      await ok("createQueue", key)
      denied(await call("updateQueue", { ...key, state: "paused" }, write.token))
      await ok("updateQueue", { ...key, state: "paused" }, maintain.token)
      await ok("getQueue", key, write.token)

      const events = (await audit({ target: "acme/audited" })).events
      expect(events.map((e) => `${e.action} ${e.outcome} ${e.actor.name} ${e.role}`)).toEqual([
        "updateQueue allowed release manager maintain",
        "updateQueue refused ci write",
        "createQueue allowed bootstrap admin"
      ])
      const [allowed, refused] = events
      expect(refused?.actor).toEqual({ kind: "token", id: write.id, name: "ci" })
      expect(refused?.target).toBe("local/acme/audited@main (state)")
      expect(allowed?.sourceIp).toBe("127.0.0.1")
      expect(Date.now() - Date.parse(allowed?.at ?? "")).toBeLessThan(60_000)

      // the token operations are in it too, refused (router or tenancy rule) and allowed
      const tokens = (await audit({ action: "createApiToken", outcome: "refused" })).events
      expect(tokens.map((e) => `${e.actor.name} ${e.target}`)).toContain('release manager name "escalate" role admin')
      expect(tokens.map((e) => `${e.actor.name} ${e.target}`)).toContain('ci name "mine" role read')
      const revokes = (await audit({ action: "revokeApiToken" })).events
      expect(revokes.filter((e) => e.outcome === "refused").map((e) => e.target)).toContain(`id ${adminId}`)
      expect(revokes.some((e) => e.outcome === "allowed" && e.actor.id === maintain.id)).toBe(true)
    })

    test("filters: actor (id or name), action, outcome, target, time; only admin reads it", async () => {
      const byName = (await audit({ actor: "ci" })).events
      expect(byName.length).toBeGreaterThan(0)
      expect(byName.every((e) => e.actor.id === write.id)).toBe(true)
      expect((await audit({ actor: write.id })).events).toEqual(byName)
      expect((await audit({ outcome: "REFUSED" })).events.every((e) => e.outcome === "refused")).toBe(true)
      expect((await audit({ target: "ACME/AUDITED", action: "createQueue" })).events).toHaveLength(1)
      const future = new Date(Date.now() + 3_600_000).toISOString()
      expect((await audit({ start_time: future })).events).toHaveLength(0)
      expect((await audit({ end_time: future })).page.total_rows).toBeGreaterThan(5)
      denied(await call("listAuditEvents", {}, maintain.token))
      denied(await call("listAuditEvents", {}, write.token))
      const bad = await call("listAuditEvents", { outcome: "maybe" })
      expect(bad.status).toBe(400)
    })

    test("paging as the flaky-test lists: next, previous, last; stable while events arrive; foreign tokens refused", async () => {
      const all = (await audit({ page_query: { page_size: 100, page_token: "" } })).events
      expect(all.length).toBeGreaterThan(6)
      const first = await audit({ page_query: { page_size: 3, page_token: "" } })
      expect(first.page.page_index).toBe(0)
      expect(first.page.total_rows).toBe(all.length)
      expect(first.page.total_pages).toBe(Math.ceil(all.length / 3))
      expect(first.page.prev_page_token).toBe("")
      // a change made meanwhile does not shift the pages of this listing
      await ok("createApiToken", { name: "meanwhile" })
      const seen: Array<string> = [...first.events.map((e) => e.id)]
      let page = first
      while (page.page.next_page_token !== "") {
        page = await audit({ page_query: { page_size: 3, page_token: page.page.next_page_token } })
        seen.push(...page.events.map((e) => e.id))
      }
      expect(seen).toEqual(all.map((e) => e.id))
      const last = await audit({ page_query: { page_size: 3, page_token: first.page.last_page_token } })
      expect(last.events.map((e) => e.id)).toEqual(page.events.map((e) => e.id))
      const back = await audit({ page_query: { page_size: 3, page_token: last.page.prev_page_token } })
      expect(back.page.page_index).toBe(last.page.page_index - 1)
      // newest first, and the new event on a new listing
      expect((await audit({ page_query: { page_size: 1, page_token: "" } })).events[0]?.target).toBe('name "meanwhile"')
      // a token of another query (or made up) is refused
      const other = await call("listAuditEvents", {
        outcome: "refused",
        page_query: { page_size: 3, page_token: first.page.next_page_token }
      })
      expect(other.status).toBe(400)
      expect((other.body as { error: { code: string } }).error.code).toBe("INVALID_PAGE_TOKEN")
    })

    test("a change and its record are one transaction; a change without one is recorded after it", async () => {
      const key = { repo: { host: "local", owner: "acme", name: "atomic" }, targetBranch: "main" }
      await ok("createQueue", key)
      const xids = await server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const [queue] = yield* sql<{ x: string }>`
            select q.xmin::text as x from queues q join repositories r on r.id = q.repo_id
            where r.name = 'atomic' and q.branch = 'main'`
          const [event] = yield* sql<{ x: string }>`
            select xmin::text as x from audit_events where target = 'local/acme/atomic@main' and action = 'createQueue'`
          return [queue?.x, event?.x]
        })
      )
      expect(xids[0]).toBeDefined()
      expect(xids[1]).toBe(xids[0])
      // a change that fails writes no record (409: the queue exists)
      expect((await call("createQueue", key)).status).toBe(409)
      expect((await audit({ target: "acme/atomic", action: "createQueue" })).events).toHaveLength(1)
    })

    test("a dashboard session acts as its token, in its role", async () => {
      const login = await fetch(`${server.url}/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token: write.token, next: "/" }).toString()
      })
      const cookie = /greenline_session=([^;]*)/.exec(login.headers.get("set-cookie") ?? "")?.[1] ?? ""
      const page = await (await fetch(`${server.url}/`, { headers: { cookie: `greenline_session=${cookie}` } })).text()
      expect(page).toContain('<meta name="greenline-role" content="write">')
      const csrf = /name="greenline-csrf" content="([^"]+)"/.exec(page)?.[1] ?? ""
      const session = {
        cookie: `greenline_session=${cookie}`,
        "x-csrf-token": csrf,
        "content-type": "application/json"
      }
      const key = { repo: { host: "local", owner: "acme", name: "by-session" }, targetBranch: "main" }
      const refused = await fetch(`${server.url}/v1/createQueue`, {
        method: "POST",
        headers: session,
        body: JSON.stringify(key)
      })
      expect(refused.status).toBe(403)
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("PERMISSION_DENIED")
      const read = await fetch(`${server.url}/v1/listQueues`, { method: "POST", headers: session, body: "{}" })
      expect(read.status).toBe(200)
      const [event] = (await audit({ target: "by-session" })).events
      expect(event?.actor).toEqual({ kind: "token", id: write.id, name: "ci" })
      expect(event?.outcome).toBe("refused")
    })

    test("retention: events older than the retention go, the others stay", async () => {
      const before = (await audit()).page.total_rows
      await server.run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const [org] = yield* sql<{ id: string }>`select id from organizations where slug = ${SLUG}`
          yield* sql`insert into audit_events (org_id, actor_kind, actor_id, actor_name, role, action, outcome, at)
                     values (${org?.id ?? ""}, 'token', 'old', 'old', 'write', 'createQueue', 'allowed',
                             now() - interval '400 days')`
        })
      )
      expect((await audit()).page.total_rows).toBe(before + 1)
      const pruned = await server.run(Effect.flatMap(AuditLog, (log) => log.prune()))
      expect(pruned).toBe(1)
      expect((await audit()).page.total_rows).toBe(before)
    })
  })
}
