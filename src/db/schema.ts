import * as os from "node:os"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import pkg from "../../package.json" with { type: "json" }
import { migrations as allMigrations, knownMigrations, type MigrationEntry, runOf } from "./migrations.ts"

/**
 * Migrating the database, and what a server checks first (issue 38):
 * - Migrations run under a lock (a transaction-scoped advisory lock, then the table's own lock, which older
 *   versions take), in one transaction: instances starting together apply each migration once, and a failure
 *   leaves the schema as it was.
 * - A server older than its database's schema (a migration it does not know was applied) refuses to start, and
 *   names the Greenline version that applied it.
 * - A migration that is not safe while older instances still run (migrations.ts) is not applied while other
 *   instances are running on the database (`greenline_instances`, fresh within 30 s): stop them first.
 * - Every known migration not applied yet is applied, in order, also one whose id is below the newest applied one
 *   (a migration merged after a newer one was applied somewhere).
 */

export const APP_VERSION: string = pkg.version

/** The advisory lock of migrations (7070 is the first run's, tenancy/Tenancy.ts). */
const MIGRATION_LOCK = 7071

/** An instance whose heartbeat is older than this is taken as gone (instances.ts beats every 10 s). */
export const INSTANCE_STALE_SECONDS = 30

export class SchemaTooNew extends Error {
  override readonly name = "SchemaTooNew"
}

export class MigrationFailed extends Error {
  override readonly name = "MigrationFailed"
}

export class UnsafeWithRunningInstances extends Error {
  override readonly name = "UnsafeWithRunningInstances"
}

export interface RunningInstance {
  readonly id: string
  readonly appVersion: string
  readonly host: string
  readonly pid: number
  readonly seenSecondsAgo: number
}

export interface SchemaPlan {
  /** Migrations applied, by id. */
  readonly applied: ReadonlyArray<{ readonly id: number; readonly name: string }>
  /** Applied migrations this version does not know: a newer Greenline applied them. */
  readonly unknown: ReadonlyArray<{ readonly id: number; readonly name: string; readonly appVersion?: string }>
  /** Known migrations not applied yet, in order. */
  readonly pending: ReadonlyArray<{
    readonly key: string
    readonly safeWithOlderInstances: boolean
    readonly declared: boolean
  }>
  /** Other servers on the database (PostgreSQL), by their heartbeat. */
  readonly running: ReadonlyArray<RunningInstance>
}

const tableExists = (name: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ t: string | null }>`select to_regclass(${name})::text as t`, (rows) => rows[0]?.t != null)
  )

/**
 * What the database holds and what this version would do to it; reads only. `migrations`: the migrations of this
 * version (tests give others).
 */
export const schemaPlan = (
  migrations: Record<string, MigrationEntry> = allMigrations
): Effect.Effect<SchemaPlan, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const knownList = knownMigrations(migrations)
    const applied = (yield* tableExists("greenline_migrations"))
      ? (yield* sql<{ id: number; name: string }>`select migration_id as id, name from greenline_migrations
                                                 order by migration_id`).map((r) => ({
          id: Number(r.id),
          name: r.name
        }))
      : []
    const known = new Set(knownList.map((m) => m.id))
    const done = new Set(applied.map((m) => m.id))
    let unknown: SchemaPlan["unknown"] = applied.filter((m) => !known.has(m.id))
    if (unknown.length > 0 && (yield* tableExists("greenline_schema"))) {
      const versions = yield* sql<{ id: number; version: string }>`select migration_id as id, app_version as version
                                                                  from greenline_schema`
      const versionOf = new Map(versions.map((v) => [Number(v.id), v.version]))
      unknown = unknown.map((m) => {
        const appVersion = versionOf.get(m.id)
        return appVersion === undefined ? m : { ...m, appVersion }
      })
    }
    const pending = knownList
      .filter((m) => !done.has(m.id))
      .map(({ key, safeWithOlderInstances, declared }) => ({ key, safeWithOlderInstances, declared }))
    const running = (yield* tableExists("greenline_instances"))
      ? (yield* sql<{ id: string; app_version: string; host: string; pid: number; age: number }>`
        select id, app_version, host, pid, extract(epoch from now() - seen_at)::float8 as age
        from greenline_instances where seen_at > now() - make_interval(secs => ${INSTANCE_STALE_SECONDS})
        order by started_at`).map((r) => ({
          id: r.id,
          appVersion: r.app_version,
          host: r.host,
          pid: Number(r.pid),
          seenSecondsAgo: Math.max(0, Math.round(Number(r.age)))
        }))
      : []
    return { applied, unknown, pending, running }
  })

const pad = (id: number) => String(id).padStart(4, "0")

/** The refusal of a server older than the database's schema. */
export const tooNewMessage = (
  unknown: SchemaPlan["unknown"],
  migrations: Record<string, MigrationEntry> = allMigrations
): string => {
  const newest = unknown.reduce((a, b) => (b.id > a.id ? b : a))
  const knownUpTo = knownMigrations(migrations).at(-1)?.key ?? "none"
  const needed = unknown.map((m) => m.appVersion).filter((v): v is string => v !== undefined)
  const version = needed.length > 0 ? needed.sort(compareVersions).at(-1) : undefined
  return (
    `the database's schema is newer than this server: migration ${pad(newest.id)}_${newest.name} was applied` +
    `${version === undefined ? " by a newer Greenline" : ` by Greenline ${version}`}, and this is Greenline ${APP_VERSION}, ` +
    `which knows migrations up to ${knownUpTo}: run Greenline ${version ?? "of that version"} or later ` +
    "(or restore a backup made before the upgrade; docs/operations.md)"
  )
}

const describeInstance = (i: RunningInstance) =>
  `Greenline ${i.appVersion} on ${i.host} (pid ${i.pid}, seen ${i.seenSecondsAgo} s ago)`

/** The refusal of a migration that is not safe while the instances `running` run. */
export const unsafeMessage = (
  unsafe: ReadonlyArray<SchemaPlan["pending"][number]>,
  running: ReadonlyArray<RunningInstance>
): string =>
  `${unsafe.map((m) => `migration ${m.key}${m.declared ? "" : " (which does not say)"}`).join(", ")} ` +
  `${unsafe.length === 1 ? "is" : "are"} not safe while older instances run, and ${running.length} ` +
  `${running.length === 1 ? "instance is" : "instances are"} running on this database: ` +
  `${running.map(describeInstance).join("; ")}. Stop every instance, then start this version ` +
  `(an instance killed without a clean stop counts for ${INSTANCE_STALE_SECONDS} s after its last heartbeat; docs/operations.md, Upgrading)`

/** Compares two semver versions (major.minor.patch; a pre-release sorts before its release). */
export const compareVersions = (a: string, b: string): number => {
  const parse = (v: string) => {
    const [core = "", pre] = v.split("-", 2)
    return { nums: core.split(".").map((n) => Number(n) || 0), pre }
  }
  const x = parse(a)
  const y = parse(b)
  for (let i = 0; i < 3; i++) {
    const d = (x.nums[i] ?? 0) - (y.nums[i] ?? 0)
    if (d !== 0) return d
  }
  if (x.pre === y.pre) return 0
  if (x.pre === undefined) return 1
  if (y.pre === undefined) return -1
  return x.pre < y.pre ? -1 : 1
}

/**
 * Checks, then applies every pending migration, under the lock, in one transaction; answers the keys applied.
 * `guardInstances`: refuse a migration that is not safe with older instances while others run (PostgreSQL; the
 * embedded database has one process by its lock).
 */
export const migrate = (options: {
  readonly guardInstances: boolean
  /** The migrations of this version (tests give others). */
  readonly migrations?: Record<string, MigrationEntry>
}): Effect.Effect<
  ReadonlyArray<string>,
  SqlError | SchemaTooNew | UnsafeWithRunningInstances | MigrationFailed,
  SqlClient.SqlClient
> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`select pg_advisory_xact_lock(${MIGRATION_LOCK})`
        yield* sql`create table if not exists greenline_migrations (
                     migration_id integer primary key,
                     created_at timestamptz not null default now(),
                     name text not null
                   )`
        // what versions before this one take (@effect/sql's Migrator), so that they wait for this one too
        yield* sql`lock table greenline_migrations in access exclusive mode`
        const migrations = options.migrations ?? allMigrations
        const plan = yield* schemaPlan(migrations)
        if (plan.unknown.length > 0) {
          return yield* Effect.fail(new SchemaTooNew(tooNewMessage(plan.unknown, migrations)))
        }
        const unsafe = plan.pending.filter((m) => !m.safeWithOlderInstances)
        if (options.guardInstances && unsafe.length > 0 && plan.running.length > 0) {
          return yield* Effect.fail(new UnsafeWithRunningInstances(unsafeMessage(unsafe, plan.running)))
        }
        const recorded = yield* tableExists("greenline_schema")
        for (const { key, safeWithOlderInstances } of plan.pending) {
          const entry = migrations[key]
          if (entry === undefined) continue
          const id = Number(key.slice(0, key.indexOf("_")))
          const name = key.slice(key.indexOf("_") + 1)
          yield* runOf(entry).pipe(
            Effect.mapError((cause) => new MigrationFailed(`migration ${key} failed: ${describe(cause)}`, { cause }))
          )
          yield* sql`insert into greenline_migrations (migration_id, name) values (${id}, ${name})`
          if (recorded || (yield* tableExists("greenline_schema"))) {
            yield* sql`insert into greenline_schema (migration_id, name, app_version, safe_with_older_instances)
                       values (${id}, ${name}, ${APP_VERSION}, ${safeWithOlderInstances})
                       on conflict (migration_id) do nothing`
          }
          yield* Effect.logDebug(`applied migration ${key}`).pipe(Effect.annotateLogs({ safeWithOlderInstances }))
        }
        const applied = plan.pending.map((m) => m.key)
        if (applied.length > 0) {
          yield* Effect.logInfo(`applied ${applied.length} migrations, up to ${applied.at(-1)}`).pipe(
            Effect.annotateLogs({ appVersion: APP_VERSION })
          )
        }
        return applied
      })
    )
  )

const describe = (cause: unknown): string =>
  cause instanceof Error
    ? `${cause.message}${cause.cause instanceof Error ? `: ${cause.cause.message}` : ""}`
    : typeof cause === "object" && cause !== null && "message" in cause
      ? String(cause.message)
      : String(cause)

/** Identifies this process among the instances (instances.ts). */
export const instanceHost = () => os.hostname()
