import * as path from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect, Layer, Option, PubSub, Redacted, Stream } from "effect"
import Pg from "pg"
import { Database, type PoolUse, RESUMED } from "../kernel/Database.ts"
import { serveControlSocket } from "./backup.ts"
import { DatabaseEnv, DEFAULT_POOL_MAX } from "./DatabaseEnv.ts"
import { DatabaseLocked, lockDataDir } from "./dataDirLock.ts"
import { openPglite, type PgliteUse } from "./pglite.ts"
import { makeStatementNamer, prepareStatements } from "./prepare.ts"
import { migrate } from "./schema.ts"

export { DatabaseLocked } from "./dataDirLock.ts"

/** The embedded database belongs to one process: the data directory's lock (dataDirLock.ts), held while in use. */
const holdDataDir = (dir: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => lockDataDir(dir),
      // the message says what happened; the cause (DatabaseLocked: held by whom, and what to do) is logged after it
      catch: (e) =>
        new SqlError({
          cause: e,
          message:
            e instanceof DatabaseLocked
              ? "The embedded database is held by another process"
              : "Failed to lock the data directory"
        })
    }),
    (lock) => Effect.sync(() => lock.release())
  )

const localChannels = Effect.map(PubSub.unbounded<readonly [string, string]>(), (hub) => ({
  notify: (channel: string, payload: string) => PubSub.publish(hub, [channel, payload] as const).pipe(Effect.asVoid),
  listen: (channel: string) =>
    Stream.fromPubSub(hub).pipe(
      Stream.filter(([c]) => c === channel),
      Stream.map(([, p]) => p)
    )
}))

/**
 * The embedded database under `dataDir` (its `pg` folder; in memory without one), locked for this process, with the
 * control socket that lets `greenline backup` dump it while this process serves (backup.ts).
 */
const pgliteLayer = (dataDir: string | undefined, seed?: Blob) =>
  Layer.unwrapScoped(
    Effect.gen(function* () {
      if (dataDir !== undefined) yield* holdDataDir(dataDir)
      const channels = yield* localChannels
      const use: PgliteUse = { inUse: 0, waiting: 0 }
      const pool = (): PoolUse => ({ open: 1, idle: 1 - use.inUse, inUse: use.inUse, waiting: use.waiting, max: 1 })
      const info = Layer.succeed(Database, { kind: "pglite", ...channels, pool })
      const embedded = yield* openPglite(dataDir === undefined ? undefined : path.join(dataDir, "pg"), use, seed).pipe(
        Effect.provide(Reactivity.layer)
      )
      if (dataDir !== undefined) yield* serveControlSocket(dataDir, embedded)
      return Layer.merge(Layer.succeed(SqlClient.SqlClient, embedded.client), info)
    })
  )

/** How long a statement waits to connect, or for a free connection of the pool, before it fails. */
const CONNECT_TIMEOUT_MS = 10_000

/**
 * LISTEN on a connection of its own that comes back: when the connection is lost (the database stopped or
 * restarted) it connects again, with a back-off of 0.25 s doubling up to 5 s, listens to every channel again and
 * emits `RESUMED` to each listener (what was notified meanwhile is lost). `@effect/sql-pg`'s own listen stays on a
 * dead connection for good.
 */
const makeListener = (url: Redacted.Redacted<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const listeners = new Map<string, Set<(payload: string) => void>>()
      let client: Pg.Client | undefined
      let closed = false
      let connected = false
      let everConnected = false
      let delay = 250
      let timer: ReturnType<typeof setTimeout> | undefined
      const quote = (channel: string) => Pg.escapeIdentifier(channel)
      const lost = (c: Pg.Client) => {
        if (client !== c) return
        client = undefined
        connected = false
        c.removeAllListeners("notification")
        c.end().catch(() => undefined)
        schedule()
      }
      const schedule = () => {
        if (closed || timer !== undefined || client !== undefined || listeners.size === 0) return
        timer = setTimeout(() => {
          timer = undefined
          void connect()
        }, delay)
        delay = Math.min(delay * 2, 5000)
      }
      const connect = async () => {
        if (closed || client !== undefined || listeners.size === 0) return
        const c = new Pg.Client({
          connectionString: Redacted.value(url),
          application_name: "greenline-listen",
          connectionTimeoutMillis: CONNECT_TIMEOUT_MS
        })
        client = c
        c.on("error", () => lost(c))
        c.on("end", () => lost(c))
        c.on("notification", (msg) => {
          if (msg.payload === undefined || msg.payload === "") return
          for (const emit of listeners.get(msg.channel) ?? []) emit(msg.payload)
        })
        try {
          await c.connect()
          for (const channel of listeners.keys()) await c.query(`LISTEN ${quote(channel)}`)
        } catch {
          lost(c)
          return
        }
        if (client !== c) return
        connected = true
        delay = 250
        if (everConnected) for (const set of listeners.values()) for (const emit of set) emit(RESUMED)
        everConnected = true
      }
      const subscribe = (channel: string, emit: (payload: string) => void) => {
        let set = listeners.get(channel)
        if (set === undefined) {
          set = new Set()
          listeners.set(channel, set)
          if (client !== undefined && connected) client.query(`LISTEN ${quote(channel)}`).catch(() => undefined)
        }
        set.add(emit)
        if (client === undefined) {
          if (timer === undefined) void connect()
        }
        return () => {
          set.delete(emit)
          if (set.size > 0) return
          listeners.delete(channel)
          if (client !== undefined && connected) client.query(`UNLISTEN ${quote(channel)}`).catch(() => undefined)
        }
      }
      const close = () => {
        closed = true
        if (timer !== undefined) clearTimeout(timer)
        const c = client
        client = undefined
        return c === undefined ? Promise.resolve() : c.end().catch(() => undefined)
      }
      return { subscribe, close }
    }),
    (listener) => Effect.promise(() => listener.close()).pipe(Effect.timeoutOption(1000))
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
        application_name: "greenline",
        // a database host that does not answer fails a request (503) instead of holding it: connecting, or waiting
        // for a free connection, gives up after this long
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS
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
      const info = Layer.scoped(
        Database,
        Effect.gen(function* () {
          const pg = yield* PgClient.PgClient
          const listener = yield* makeListener(url)
          return {
            kind: "postgres" as const,
            // pg_notify takes parameters; `NOTIFY channel, $1` (what the driver's notify sends) is a syntax error
            notify: (channel: string, payload: string) =>
              pg`select pg_notify(${channel}, ${payload})`.pipe(Effect.ignore),
            listen: (channel: string) =>
              Stream.asyncPush<string>((emit) =>
                Effect.acquireRelease(
                  Effect.sync(() => listener.subscribe(channel, (payload) => emit.single(payload))),
                  (unsubscribe) => Effect.sync(unsubscribe)
                )
              ),
            pool
          }
        })
      )
      return Layer.provideMerge(info, client)
    })
  )

/**
 * The database the configuration names, as it is: PostgreSQL with DATABASE_URL, else PGlite under DATA_DIR. For
 * what must not change the schema (`greenline migrate --dry-run`).
 */
export const DatabaseUnmigrated: Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error, DatabaseEnv> =
  Layer.unwrapEffect(
    Effect.map(DatabaseEnv, (config) =>
      Option.match(config.databaseUrl, {
        // DATA_DIR=":memory:" keeps the embedded database in memory (tests, throw-away trials)
        onNone: () =>
          config.dataDir === ":memory:" ? pgliteLayer(undefined, config.embeddedSeed) : pgliteLayer(config.dataDir),
        onSome: (url) => postgresLayer(url, config.databasePoolMax)
      })
    )
  )

/**
 * Runs the migrations once the layer is built, after the checks of schema.ts: a schema newer than this version, or
 * (PostgreSQL) a migration that is not safe while other instances run, fails the layer with what to do.
 */
export const migrated = <E, R>(
  layer: Layer.Layer<SqlClient.SqlClient | Database, E, R>
): Layer.Layer<SqlClient.SqlClient | Database, E | SqlError | Error, R> =>
  Layer.tap(layer, (ctx) =>
    Effect.flatMap(Database, (db) => migrate({ guardInstances: db.kind === "postgres" })).pipe(
      Effect.provide(ctx),
      Effect.mapError((e): SqlError | Error => (e instanceof SqlError || e instanceof Error ? e : new Error(String(e))))
    )
  )

/** The database the configuration names, migrated (schema.ts: a server older than the schema refuses). */
export const DatabaseLive: Layer.Layer<SqlClient.SqlClient | Database, SqlError | Error, DatabaseEnv> =
  migrated(DatabaseUnmigrated)

/** For tests: a fresh in-memory PGlite (started from `seed`, a dumped data directory, when given), migrated. */
export const layerPgliteMemory = (seed?: Blob) => migrated(pgliteLayer(undefined, seed))

/** For tests and tools: PGlite in `dataDir` (its `pg` folder), migrated. */
export const layerPgliteAt = (dataDir: string) => migrated(pgliteLayer(dataDir))

/** For tests and tools: PostgreSQL at `url`, migrated. */
export const layerPostgres = (url: string) => migrated(postgresLayer(Redacted.make(url)))
