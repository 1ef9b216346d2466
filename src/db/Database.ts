import * as fs from "node:fs"
import * as path from "node:path"
import type * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect, Layer, Option, PubSub, Redacted, Stream } from "effect"
import Pg from "pg"
import { Database, type PoolUse } from "../kernel/Database.ts"
import { DatabaseEnv, DEFAULT_POOL_MAX } from "./DatabaseEnv.ts"
import { runMigrations } from "./migrations.ts"
import { layerPglite, type PgliteUse } from "./pglite.ts"
import { makeStatementNamer, prepareStatements } from "./prepare.ts"

/** Raised when the embedded database is held by another process. */
export class DatabaseLocked extends Error {
  override readonly name = "DatabaseLocked"
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The embedded database belongs to one process: a lock file with its pid, taken exclusively. */
const lockDataDir = (dir: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        fs.mkdirSync(dir, { recursive: true })
        const file = path.join(dir, "greenline.lock")
        for (let attempt = 0; attempt < 2; attempt++) {
          try {
            fs.writeFileSync(file, String(process.pid), { flag: "wx" })
            return file
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
            const pid = Number(fs.readFileSync(file, "utf8").trim())
            if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
              throw new DatabaseLocked(
                `the embedded database in ${dir} is in use by process ${pid}: stop that server first, or set DATABASE_URL to use PostgreSQL`
              )
            }
            fs.rmSync(file, { force: true })
          }
        }
        throw new DatabaseLocked(`could not lock the embedded database in ${dir}`)
      },
      catch: (e) =>
        new SqlError({
          cause: e,
          message: e instanceof DatabaseLocked ? e.message : "Failed to lock the data directory"
        })
    }),
    (file) => Effect.sync(() => fs.rmSync(file, { force: true }))
  )

const localChannels = Effect.map(PubSub.unbounded<readonly [string, string]>(), (hub) => ({
  notify: (channel: string, payload: string) => PubSub.publish(hub, [channel, payload] as const).pipe(Effect.asVoid),
  listen: (channel: string) =>
    Stream.fromPubSub(hub).pipe(
      Stream.filter(([c]) => c === channel),
      Stream.map(([, p]) => p)
    )
}))

const pgliteLayer = (dataDir: string | undefined, seed?: Blob) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      if (dataDir !== undefined) yield* lockDataDir(dataDir)
      const channels = yield* localChannels
      const use: PgliteUse = { inUse: 0, waiting: 0 }
      const pool = (): PoolUse => ({ open: 1, idle: 1 - use.inUse, inUse: use.inUse, waiting: use.waiting, max: 1 })
      const info = Layer.succeed(Database, { kind: "pglite", ...channels, pool })
      return Layer.merge(layerPglite(dataDir === undefined ? undefined : path.join(dataDir, "pg"), use, seed), info)
    })
  )

/**
 * The `pg` pool, made here rather than inside `PgClient.layer` (the same settings and start-up check), so that its
 * counts can be read for `GET /metrics` and its connections prepare the statements they send repeatedly.
 */
const makePool = (url: Redacted.Redacted<string>, max: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const pool = new Pg.Pool({
        connectionString: Redacted.value(url),
        max,
        application_name: "greenline"
      })
      pool.on("error", () => {})
      // statements sent again and again are prepared once per connection (prepare.ts)
      const namer = makeStatementNamer({ minUses: 2, maxNames: 500 })
      pool.on("connect", (client) => prepareStatements(client, namer))
      return pool
    }),
    (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
  ).pipe(
    Effect.tap((pool) =>
      Effect.tryPromise({
        try: () => pool.query("select 1"),
        catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(
        Effect.timeoutFail({
          duration: Duration.seconds(5),
          onTimeout: () =>
            new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
        })
      )
    )
  )

const postgresLayer = (url: Redacted.Redacted<string>, max = DEFAULT_POOL_MAX) =>
  Layer.unwrapEffect(
    Effect.sync(() => {
      let current: Pg.Pool | undefined
      const client = PgClient.layerFromPool({
        acquire: Effect.tap(makePool(url, max), (pool) => {
          current = pool
        }),
        applicationName: "greenline"
      })
      const pool = (): PoolUse => {
        const open = current?.totalCount ?? 0
        const idle = current?.idleCount ?? 0
        return { open, idle, inUse: open - idle, waiting: current?.waitingCount ?? 0, max }
      }
      const info = Layer.effect(
        Database,
        Effect.gen(function* () {
          const pg = yield* PgClient.PgClient
          return {
            kind: "postgres" as const,
            // pg_notify takes parameters; `NOTIFY channel, $1` (what the driver's notify sends) is a syntax error
            notify: (channel: string, payload: string) =>
              pg`select pg_notify(${channel}, ${payload})`.pipe(Effect.ignore),
            listen: (channel: string) => pg.listen(channel).pipe(Stream.orDie),
            pool
          }
        })
      )
      return Layer.provideMerge(info, client)
    })
  )

/** The database the configuration names: PostgreSQL with DATABASE_URL, else PGlite under DATA_DIR, migrated. */
export const DatabaseLive: Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error, DatabaseEnv> =
  Layer.unwrapEffect(
    Effect.map(DatabaseEnv, (config) => {
      const base = Option.match(config.databaseUrl, {
        // DATA_DIR=":memory:" keeps the embedded database in memory (tests, throw-away trials)
        onNone: () =>
          config.dataDir === ":memory:" ? pgliteLayer(undefined, config.embeddedSeed) : pgliteLayer(config.dataDir),
        onSome: (url) => postgresLayer(url, config.databasePoolMax)
      })
      return migrated(base)
    })
  )

/** Runs the migrations once the layer is built. */
export const migrated = <E>(
  layer: Layer.Layer<SqlClient.SqlClient | Database, E>
): Layer.Layer<SqlClient.SqlClient | Database, E | SqlError | Error> =>
  Layer.tap(layer, (ctx) =>
    runMigrations.pipe(
      Effect.provide(ctx),
      Effect.mapError((e) => (e instanceof SqlError ? e : new Error(e.message)))
    )
  )

/** For tests: a fresh in-memory PGlite (started from `seed`, a dumped data directory, when given), migrated. */
export const layerPgliteMemory = (seed?: Blob) => migrated(pgliteLayer(undefined, seed))

/** For tests and tools: PGlite in `dataDir` (its `pg` folder), migrated. */
export const layerPgliteAt = (dataDir: string) => migrated(pgliteLayer(dataDir))

/** For tests and tools: PostgreSQL at `url`, migrated. */
export const layerPostgres = (url: string) => migrated(postgresLayer(Redacted.make(url)))
