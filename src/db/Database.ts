import * as fs from "node:fs"
import * as path from "node:path"
import type * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Context, Effect, Layer, Option, PubSub, Redacted, Stream } from "effect"
import { AppConfig } from "../config.ts"
import { runMigrations } from "./migrations.ts"
import { layerPglite } from "./pglite.ts"

/** What kind of database is behind the `SqlClient`, and a wake-up channel between instances sharing it. */
export interface DatabaseShape {
  readonly kind: "postgres" | "pglite"
  /** Tells every instance (with PostgreSQL: through NOTIFY) that something on `channel` changed. */
  readonly notify: (channel: string, payload: string) => Effect.Effect<void>
  readonly listen: (channel: string) => Stream.Stream<string>
}

export class Database extends Context.Tag("greenline/Database")<Database, DatabaseShape>() {}

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

const pgliteLayer = (dataDir: string | undefined) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      if (dataDir !== undefined) yield* lockDataDir(dataDir)
      const channels = yield* localChannels
      const info = Layer.succeed(Database, { kind: "pglite", ...channels })
      return Layer.merge(layerPglite(dataDir === undefined ? undefined : path.join(dataDir, "pg")), info)
    })
  )

const postgresLayer = (url: Redacted.Redacted<string>) =>
  Layer.unwrapEffect(
    Effect.sync(() => {
      const client = PgClient.layer({ url, maxConnections: 20, applicationName: "greenline" })
      const info = Layer.effect(
        Database,
        Effect.gen(function* () {
          const pg = yield* PgClient.PgClient
          return {
            kind: "postgres" as const,
            // pg_notify takes parameters; `NOTIFY channel, $1` (what the driver's notify sends) is a syntax error
            notify: (channel: string, payload: string) =>
              pg`select pg_notify(${channel}, ${payload})`.pipe(Effect.ignore),
            listen: (channel: string) => pg.listen(channel).pipe(Stream.orDie)
          }
        })
      )
      return Layer.provideMerge(info, client)
    })
  )

/** The database the configuration names: PostgreSQL with DATABASE_URL, else PGlite under DATA_DIR, migrated. */
export const DatabaseLive: Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error, AppConfig> =
  Layer.unwrapEffect(
    Effect.map(AppConfig, (config) => {
      const base = Option.match(config.databaseUrl, {
        // DATA_DIR=":memory:" keeps the embedded database in memory (tests, throw-away trials)
        onNone: () => pgliteLayer(config.dataDir === ":memory:" ? undefined : config.dataDir),
        onSome: (url) => postgresLayer(url)
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

/** For tests: a fresh in-memory PGlite, migrated. */
export const layerPgliteMemory = migrated(pgliteLayer(undefined))

/** For tests and tools: PostgreSQL at `url`, migrated. */
export const layerPostgres = (url: string) => migrated(postgresLayer(Redacted.make(url)))
