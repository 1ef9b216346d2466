/**
 * Migration 0103 (one model, issue #17): the timeline rows written before it (`entry_timeline`) become records of
 * the event log, each entry's in its order, dated when they happened, never delivered (no type); the table goes.
 */
import { describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, type Layer, Redacted } from "effect"
import { migrations, runOf } from "../../src/db/migrations.ts"
import { layerPglite } from "../../src/db/pglite.ts"
import { databases, freshPostgres } from "../support/server.ts"

const MIGRATION = "0103_timeline_in_event_log"

/** Runs the migrations before 0103, writes two entries' timelines the old way, then runs 0103; what the log holds. */
const migrate = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const ids = Object.keys(migrations).sort()
  for (const id of ids.filter((i) => i < MIGRATION)) {
    const entry = migrations[id]
    if (entry !== undefined) yield* runOf(entry)
  }
  const org = crypto.randomUUID()
  const repo = crypto.randomUUID()
  const queue = crypto.randomUUID()
  const [a, b] = [crypto.randomUUID(), crypto.randomUUID()]
  yield* sql`insert into organizations (id, slug) values (${org}, 'old')`
  yield* sql`insert into repositories (id, org_id, host, owner, name) values (${repo}, ${org}, 'local', 'acme', 'old')`
  yield* sql`insert into queues (id, repo_id, branch, config) values (${queue}, ${repo}, 'main', '{}'::jsonb)`
  for (const [id, pr] of [
    [a, 1],
    [b, 2]
  ] as const) {
    yield* sql`insert into entries (id, queue_id, pr_number, state, state_changed_at, submitted_at, priority, head_sha)
               values (${id}, ${queue}, ${pr}, 'merged', now(), now(), 100, 'abc')`
  }
  // interleaved, and one entry's rows not in time order: the order is the rows' (their id), as the timeline read it
  const rows: ReadonlyArray<readonly [string, string, string, string]> = [
    [a, "2026-01-01T00:00:00.000Z", "pending", "SUBMITTED"],
    [b, "2026-01-01T00:00:01.000Z", "not_ready", "SUBMITTED"],
    [a, "2026-01-01T00:00:02.000Z", "testing", "TEST_STARTED"],
    [b, "2026-01-01T00:00:03.000Z", "pending", "READY"],
    [a, "2026-01-01T00:00:04.000Z", "tests_passed", "TESTS_PASSED"],
    [a, "2026-01-01T00:00:04.000Z", "merged", "MERGED"],
    [b, "2026-01-01T00:00:02.500Z", "cancelled", "API_REQUESTED"]
  ]
  for (const [id, at, state, reason] of rows) {
    yield* sql`insert into entry_timeline (entry_id, at, state, reason) values (${id}, ${at}, ${state}, ${reason})`
  }
  const events = yield* sql<{ n: number }>`select count(*)::int as n from event_log`
  const migration = migrations[MIGRATION]
  yield* migration === undefined ? Effect.die("no migration 0103") : runOf(migration)
  const logged = yield* sql<{
    entry_id: string
    occurred_at: Date | string
    created_at: Date | string
    state: string
    reason: string
    type: string | null
    body: string | null
    org_id: string
    repo_id: string
    branch: string
    ordering_key: string
  }>`select entry_id, occurred_at, created_at, state, reason, type, body, org_id, repo_id, branch, ordering_key
     from event_log order by seq`
  const table = yield* sql<{ t: string | null }>`select to_regclass('entry_timeline')::text as t`
  return { a, b, org, repo, rows, before: events[0]?.n, logged, table: table[0]?.t ?? null }
})

const check = async (layer: Layer.Layer<SqlClient.SqlClient, unknown>) => {
  const { a, b, org, repo, rows, before, logged, table } = await Effect.runPromise(
    Effect.scoped(Effect.provide(migrate, layer))
  )
  expect(before).toBe(0)
  expect(table).toBeNull()
  const of = (id: string) =>
    logged
      .filter((r) => r.entry_id === id)
      .map((r) => ({ at: new Date(r.occurred_at).toISOString(), state: r.state, reason: r.reason }))
  const expected = (id: string) =>
    rows.filter(([e]) => e === id).map(([, at, state, reason]) => ({ at, state, reason }))
  expect(of(a)).toEqual(expected(a))
  expect(of(b)).toEqual(expected(b))
  for (const r of logged) {
    expect({ type: r.type, body: r.body, org: r.org_id, repo: r.repo_id, branch: r.branch }).toEqual({
      type: null,
      body: null,
      org,
      repo,
      branch: "main"
    })
    expect(new Date(r.created_at).getTime()).toBe(new Date(r.occurred_at).getTime())
    expect(r.ordering_key).toBe(`pr:${repo}:main:${r.entry_id === a ? 1 : 2}`)
  }
}

describe("migration 0103: entry_timeline into the event log", () => {
  for (const db of databases) {
    test(`existing timeline rows become the log's records, in order (${db})`, async () => {
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
