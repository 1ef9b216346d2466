/**
 * Migrations (issue 38): they run under a lock, once each, also when two instances start together; each says whether
 * it is safe while older instances still run, and one that is not is refused while another instance runs; a server
 * older than its database's schema refuses, naming the version the database needs.
 */
import { describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, type Layer, Redacted } from "effect"
import { knownMigrations, type MigrationEntry, migrations } from "../../src/db/migrations.ts"
import { layerPglite } from "../../src/db/pglite.ts"
import { APP_VERSION, compareVersions, migrate, schemaPlan } from "../../src/db/schema.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"
import { databases, freshPostgres, pgUrl } from "../support/server.ts"

type Db = Layer.Layer<SqlClient.SqlClient, SqlError>

/** Runs `f` on an empty database of the kind (PGlite in memory, or a fresh PostgreSQL database). */
const onEmpty = async <A>(db: "pglite" | "postgres", f: (layer: Db) => Promise<A>): Promise<A> => {
  if (db === "pglite") return f(layerPglite(undefined))
  const pg = await freshPostgres({ empty: true })
  try {
    return await f(PgClient.layer({ url: Redacted.make(pg.url) }))
  } finally {
    await pg.drop()
  }
}

/** Runs `f` on a migrated database of the kind. */
const onMigrated = async <A>(db: "pglite" | "postgres", f: (layer: Db) => Promise<A>): Promise<A> => {
  if (db === "pglite") return f(layerPglite(undefined, undefined, await pgliteSeed()))
  const pg = await freshPostgres()
  try {
    const layer = PgClient.layer({ url: Redacted.make(pg.url) })
    // a copy of the suite's migrated template under `npm test`; migrated here otherwise
    await run(layer, migrate({ guardInstances: false }))
    return await f(layer)
  } finally {
    await pg.drop()
  }
}

const run = <A, E>(layer: Db, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(Effect.provide(effect, layer))

const failureOf = <A, E>(layer: Db, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(
    Effect.provide(
      Effect.flip(effect).pipe(Effect.map((e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e)))),
      layer
    )
  )

const count = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ n: number }>`select count(*)::int as n from ${sql(table)}`, (r) => Number(r[0]?.n))
  )

test("a plain effect is still a valid entry, and counts as not safe with older instances", () => {
  const plain: MigrationEntry = Effect.void
  const listed = knownMigrations({ "0001_a": { run: Effect.void, safeWithOlderInstances: true }, "0002_b": plain })
  expect(listed.map((m) => [m.key, m.safeWithOlderInstances, m.declared])).toEqual([
    ["0001_a", true, true],
    ["0002_b", false, false]
  ])
  // the ones that drop or retype what older servers use say so
  const breaking = knownMigrations().filter((m) => m.declared && !m.safeWithOlderInstances)
  expect(breaking.map((m) => m.key)).toEqual([
    "0006_targets_json",
    "0009_runtime_json",
    "0103_timeline_in_event_log",
    "0200_token_roles"
  ])
  expect(Object.keys(migrations).every((k) => /^\d{4}_[a-z0-9_]+$/.test(k))).toBe(true)
})

test("versions compare as semver", () => {
  expect(["0.10.0", "0.2.0", "1.0.0-rc.1", "1.0.0", "0.2.1"].sort(compareVersions)).toEqual([
    "0.2.0",
    "0.2.1",
    "0.10.0",
    "1.0.0-rc.1",
    "1.0.0"
  ])
})

for (const db of databases) {
  describe(`migrations (${db})`, () => {
    test("an empty database gets every migration once, recorded with this version; a second run applies none", async () => {
      await onEmpty(db, (layer) =>
        run(
          layer,
          Effect.gen(function* () {
            const applied = yield* migrate({ guardInstances: true })
            expect(applied).toEqual(knownMigrations().map((m) => m.key))
            expect(yield* migrate({ guardInstances: true })).toEqual([])
            expect(yield* count("greenline_migrations")).toBe(applied.length)
            const sql = yield* SqlClient.SqlClient
            const recorded = yield* sql<{ name: string; app_version: string; safe: boolean }>`
              select name, app_version, safe_with_older_instances as safe from greenline_schema order by migration_id`
            // recorded from the migration that made the table on
            expect(recorded.map((r) => r.name)).toEqual([
              "schema_versions",
              "instances",
              "flaky_upload_keys",
              "webhook_delivery_records",
              "queue_freezes",
              "merge_schedules",
              "runner_shares"
            ])
            for (const r of recorded) expect(r).toMatchObject({ app_version: APP_VERSION, safe: true })
            const plan = yield* schemaPlan()
            expect(plan.pending).toEqual([])
            expect(plan.unknown).toEqual([])
          })
        )
      )
    }, 60_000)

    test("a schema newer than this version is refused, naming the migration and the version it needs", async () => {
      await onMigrated(db, (layer) =>
        Effect.runPromise(
          Effect.provide(
            Effect.gen(function* () {
              const sql = yield* SqlClient.SqlClient
              yield* sql`insert into greenline_migrations (migration_id, name) values (9999, 'from_the_future')`
              yield* sql`insert into greenline_schema (migration_id, name, app_version, safe_with_older_instances)
                         values (9999, 'from_the_future', '9.1.0', true)`
              const failure = yield* Effect.flip(migrate({ guardInstances: true }))
              expect(failure.name).toBe("SchemaTooNew")
              expect(failure.message).toContain("migration 9999_from_the_future was applied by Greenline 9.1.0")
              expect(failure.message).toContain(`this is Greenline ${APP_VERSION}`)
              expect(failure.message).toContain("run Greenline 9.1.0 or later")
              // nothing was changed
              expect(yield* count("greenline_migrations")).toBe(knownMigrations().length + 1)
            }),
            layer
          )
        )
      )
    }, 60_000)

    test("a known migration below the newest applied one (merged after it) is applied too", async () => {
      await onMigrated(db, async (layer) => {
        const late: Record<string, MigrationEntry> = {
          ...migrations,
          "0150_merged_late": {
            run: Effect.flatMap(SqlClient.SqlClient, (sql) => sql`create table merged_late (id int)`),
            safeWithOlderInstances: true
          }
        }
        const [applied, rows] = await run(
          layer,
          Effect.all([migrate({ guardInstances: true, migrations: late }), count("merged_late")])
        )
        expect(applied).toEqual(["0150_merged_late"])
        expect(rows).toBe(0)
      })
    }, 60_000)
  })
}

describe.if(pgUrl !== undefined)("migrations with several instances (postgres)", () => {
  test("two instances migrating at once: each migration is applied once, and both succeed", async () => {
    const pg = await freshPostgres({ empty: true })
    try {
      const layerOf = () => PgClient.layer({ url: Redacted.make(pg.url) })
      const [a, b] = await Promise.all([
        run(layerOf(), migrate({ guardInstances: true })),
        run(layerOf(), migrate({ guardInstances: true }))
      ])
      // one applied them all, the other waited for the lock and found nothing to do
      expect([a.length, b.length].sort()).toEqual([0, knownMigrations().length])
      expect(await run(layerOf(), count("greenline_migrations"))).toBe(knownMigrations().length)
    } finally {
      await pg.drop()
    }
  }, 60_000)

  test("a migration that is not safe while older instances run waits until none runs; a safe one does not", async () => {
    const pg = await freshPostgres()
    try {
      const layer = PgClient.layer({ url: Redacted.make(pg.url) })
      await run(layer, migrate({ guardInstances: true }))
      const make = (table: string) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`create table ${table} (id int)`))
      const safe = { ...migrations, "9000_safe": { run: make("t_safe"), safeWithOlderInstances: true } }
      // a plain effect says nothing: not safe
      const unsafe = { ...safe, "9001_plain": make("t_plain") }
      await run(
        layer,
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql`insert into greenline_instances (id, app_version, host, pid) values ('old-1', '0.0.9', 'box', 42)`
        )
      )
      expect(await run(layer, migrate({ guardInstances: true, migrations: safe }))).toEqual(["9000_safe"])
      const refused = await failureOf(layer, migrate({ guardInstances: true, migrations: unsafe }))
      expect(refused).toContain("UnsafeWithRunningInstances")
      expect(refused).toContain("migration 9001_plain (which does not say) is not safe while older instances run")
      expect(refused).toContain("Greenline 0.0.9 on box (pid 42")
      const plan = await run(layer, schemaPlan(unsafe))
      expect(plan.pending).toEqual([{ key: "9001_plain", safeWithOlderInstances: false, declared: false }])
      expect(plan.running.map((i) => i.id)).toEqual(["old-1"])
      // the old instance's heartbeat goes stale (or it stops cleanly): the migration is applied
      await run(
        layer,
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql`update greenline_instances set seen_at = now() - interval '31 seconds'`
        )
      )
      expect(await run(layer, migrate({ guardInstances: true, migrations: unsafe }))).toEqual(["9001_plain"])
    } finally {
      await pg.drop()
    }
  }, 60_000)
})
