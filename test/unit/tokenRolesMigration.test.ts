/**
 * Migrations 0200 and 0201 (roles and the audit log, issue #30): the tokens that exist become `admin` where they were
 * admin tokens (bootstrap, first run, `tokens create --admin`) and `write` otherwise, as the upgrade notes say; the
 * audit log refuses updates and deletes, but retention's.
 */
import { describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, type Layer, Redacted } from "effect"
import { migrations, runOf } from "../../src/db/migrations.ts"
import { layerPglite } from "../../src/db/pglite.ts"
import { databases, freshPostgres } from "../support/server.ts"

const MIGRATION = "0200_token_roles"

const migrate = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const ids = Object.keys(migrations).sort()
  for (const id of ids.filter((i) => i < MIGRATION)) {
    const entry = migrations[id]
    if (entry !== undefined) yield* runOf(entry)
  }
  const org = crypto.randomUUID()
  yield* sql`insert into organizations (id, slug) values (${org}, 'old')`
  const tokens = [
    ["bootstrap", true],
    ["first-run admin", true],
    ["made with --admin", true],
    ["ci", false],
    ["dashboard", false]
  ] as const
  for (const [name, admin] of tokens) {
    yield* sql`insert into api_tokens (id, org_id, name, token_hash, admin)
               values (${crypto.randomUUID()}, ${org}, ${name}, ${new TextEncoder().encode(name)}, ${admin})`
  }
  for (const id of ids.filter((i) => i >= MIGRATION)) {
    const entry = migrations[id]
    if (entry !== undefined) yield* runOf(entry)
  }
  const roles = yield* sql<{ name: string; role: string; created_by: string | null }>`
    select name, role, created_by from api_tokens order by name`
  const columns = yield* sql<{ column_name: string }>`
    select column_name from information_schema.columns where table_name = 'api_tokens' order by column_name`
  // the audit log: append-only
  yield* sql`insert into audit_events (org_id, actor_kind, actor_id, actor_name, role, action, outcome, at)
             values (${org}, 'token', 'x', 'ci', 'write', 'createQueue', 'refused', now() - interval '400 days')`
  const refusals: Array<string> = []
  for (const statement of [
    sql`update audit_events set action = 'nothing'`,
    sql`delete from audit_events`,
    sql`truncate audit_events`
  ]) {
    const outcome = yield* Effect.either(statement)
    refusals.push(outcome._tag === "Left" ? "refused" : "done")
  }
  // retention says so in its transaction
  const pruned = yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`select set_config('greenline.audit_prune', 'on', true)`
      return yield* sql`delete from audit_events where at < now() - interval '365 days' returning id`
    })
  )
  return { roles, columns: columns.map((c) => c.column_name), refusals, pruned: pruned.length }
})

const check = async (layer: Layer.Layer<SqlClient.SqlClient, unknown>) => {
  const { roles, columns, refusals, pruned } = await Effect.runPromise(Effect.scoped(Effect.provide(migrate, layer)))
  expect(roles).toEqual([
    { name: "bootstrap", role: "admin", created_by: null },
    { name: "ci", role: "write", created_by: null },
    { name: "dashboard", role: "write", created_by: null },
    { name: "first-run admin", role: "admin", created_by: null },
    { name: "made with --admin", role: "admin", created_by: null }
  ])
  expect(columns).toContain("role")
  expect(columns).not.toContain("admin")
  expect(refusals).toEqual(["refused", "refused", "refused"])
  expect(pruned).toBe(1)
}

describe("migrations 0200-0201: token roles, the audit log", () => {
  for (const db of databases) {
    test(`existing tokens become admin or write; the audit log is append-only (${db})`, async () => {
      if (db === "pglite") return check(layerPglite(undefined))
      const pg = await freshPostgres({ empty: true })
      try {
        await check(PgClient.layer({ url: Redacted.make(pg.url) }))
      } finally {
        await pg.drop()
      }
    }, 60_000)
  }
})
