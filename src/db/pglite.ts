import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { makeCompiler } from "@effect/sql-pg/PgClient"
import type { PGlite } from "@electric-sql/pglite"
import { Effect, Layer, Stream } from "effect"

/**
 * An `SqlClient` over PGlite, the embedded PostgreSQL. PGlite has one connection, so a semaphore guards it: a plain
 * statement holds it for its own duration, a transaction for the whole transaction, so no statement of another fiber
 * can slip into an open transaction. Statements are compiled by the PostgreSQL compiler of `@effect/sql-pg`, so the
 * SQL is the same on both databases.
 */

// PGlite serialises parameters by their inferred type; objects must reach it as JSON text.
const toParam = (value: unknown): unknown => {
  if (value instanceof Date) return value.toISOString()
  if (value !== null && typeof value === "object" && !(value instanceof Uint8Array)) return JSON.stringify(value)
  return value
}

const toSqlError = (message: string) => (cause: unknown) => new SqlError({ cause, message })

/** How the one connection is used right now (for `GET /metrics`): holders of the semaphore and fibers waiting. */
export interface PgliteUse {
  inUse: number
  waiting: number
}

export const makePglite = (db: PGlite, use: PgliteUse = { inUse: 0, waiting: 0 }) =>
  Effect.gen(function* () {
    const semaphore = yield* Effect.makeSemaphore(1)

    const run = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.tryPromise({
        try: () =>
          params.length === 0 && sql.includes(";")
            ? db.exec(sql).then((results) => results.at(-1)?.rows ?? [])
            : db.query<Record<string, unknown>>(sql, params.map(toParam)).then((r) => r.rows),
        catch: toSqlError("Failed to execute statement")
      })

    const connection: Connection = {
      execute: (sql, params, transformRows) =>
        Effect.map(run(sql, params), (rows) => (transformRows ? transformRows(rows) : rows)),
      executeRaw: (sql, params) => run(sql, params),
      executeStream: (sql, params, transformRows) =>
        Stream.fromIterableEffect(Effect.map(run(sql, params), (rows) => (transformRows ? transformRows(rows) : rows))),
      executeValues: (sql, params) =>
        Effect.tryPromise({
          try: () =>
            db
              .query<unknown[]>(sql, params.map(toParam), { rowMode: "array" })
              .then((r) => r.rows as ReadonlyArray<ReadonlyArray<unknown>>),
          catch: toSqlError("Failed to execute statement")
        }),
      executeUnprepared: (sql, params, transformRows) =>
        Effect.map(run(sql, params), (rows) => (transformRows ? transformRows(rows) : rows))
    }

    const take = Effect.suspend(() => {
      use.waiting++
      return semaphore.take(1)
    }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          use.waiting--
        })
      ),
      Effect.zipRight(
        Effect.sync(() => {
          use.inUse++
        })
      )
    )
    const release = Effect.suspend(() => {
      use.inUse--
      return semaphore.release(1)
    })
    const acquire = Effect.acquireRelease(take, () => release).pipe(Effect.as(connection))

    return yield* SqlClient.make({
      acquirer: acquire,
      transactionAcquirer: acquire,
      compiler: makeCompiler(),
      spanAttributes: [["db.system.name", "postgresql"]]
    })
  })

/**
 * Opens (or creates) the embedded database in `dataDir`; `undefined` keeps it in memory, started from `seed` (a dumped
 * data directory) when given.
 */
export const layerPglite = (
  dataDir: string | undefined,
  use?: PgliteUse,
  seed?: Blob
): Layer.Layer<SqlClient.SqlClient, SqlError> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Effect.gen(function* () {
      const db = yield* Effect.acquireRelease(
        Effect.tryPromise({
          // loaded only here: a process on PostgreSQL does not carry PGlite's modules
          try: () =>
            import("@electric-sql/pglite").then(({ PGlite }) =>
              dataDir === undefined && seed !== undefined
                ? PGlite.create({ loadDataDir: seed })
                : PGlite.create(dataDir)
            ),
          catch: toSqlError(`Failed to open the embedded database${dataDir ? ` in ${dataDir}` : ""}`)
        }),
        (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
      )
      return yield* makePglite(db, use)
    })
  ).pipe(Layer.provide(Reactivity.layer))
