import * as fs from "node:fs"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { makeCompiler } from "@effect/sql-pg/PgClient"
import type { PGlite } from "@electric-sql/pglite"
import { Effect, Layer, Stream } from "effect"
import { makeStatementNamer, type StatementNamer } from "./prepare.ts"

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

/**
 * A parameter as a quoted literal of EXECUTE: the text PGlite would bind for it (a string as it is, a boolean `t` or
 * `f`, a number in decimal), which PostgreSQL converts to the parameter's type with the same input function as a
 * bound text parameter. Undefined: a value that has no such text (bytes, a NUL character): sent unprepared.
 */
const literalOf = (value: unknown): string | undefined => {
  if (value === null || value === undefined) return "NULL"
  const text =
    typeof value === "string"
      ? value
      : typeof value === "boolean"
        ? value
          ? "t"
          : "f"
        : typeof value === "number" || typeof value === "bigint"
          ? String(value)
          : undefined
  if (text === undefined || text.includes("\0")) return undefined
  // standard_conforming_strings is on (checked when the database opens): a quote is the only character to double
  return `'${text.replaceAll("'", "''")}'`
}

/** Statements PREPARE accepts. */
const PREPARABLE = /^\s*(select|insert|update|delete|with|values)\b/i

/** Errors after which a prepared statement is run unprepared from then on: its plan changed shape, or it is gone. */
const UNPREPARABLE = new Set(["0A000", "26000"])

const codeOf = (error: unknown) =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined

/**
 * PGlite's `query` parses and plans every statement anew, which is most of the cost of a short read. A statement
 * sent again and again (the namer's rule, as on PostgreSQL: prepare.ts) is prepared once (`PREPARE`, which a rolled
 * back transaction does not undo) and then run by `EXECUTE` with its parameters as literals.
 */
const makePreparedQuery = (db: PGlite, namer: StatementNamer) => {
  const prepared = new Set<string>()
  return async <T>(
    sql: string,
    params: ReadonlyArray<unknown>,
    options?: { readonly rowMode: "array" }
  ): Promise<ReadonlyArray<T>> => {
    const unprepared = () => db.query<T>(sql, [...params], options).then((r) => r.rows)
    if (params.length === 0 || !PREPARABLE.test(sql)) return unprepared()
    const literals = params.map(literalOf)
    if (literals.some((l) => l === undefined)) return unprepared()
    const name = namer.nameOf(sql)
    if (name === undefined) return unprepared()
    if (!prepared.has(name)) {
      await db.query(`prepare ${name} as ${sql}`)
      prepared.add(name)
    }
    try {
      return (await db.query<T>(`execute ${name}(${literals.join(", ")})`, [], options)).rows
    } catch (error) {
      const code = codeOf(error)
      if (code === undefined || !UNPREPARABLE.has(code)) throw error
      namer.refuse(sql)
      prepared.delete(name)
      await db.query(`deallocate ${name}`).catch(() => undefined)
      return unprepared()
    }
  }
}

/** How the one connection is used right now (for `GET /metrics`): holders of the semaphore and fibers waiting. */
export interface PgliteUse {
  inUse: number
  waiting: number
}

export const makePglite = (
  db: PGlite,
  use: PgliteUse = { inUse: 0, waiting: 0 },
  semaphore: Effect.Semaphore = Effect.unsafeMakeSemaphore(1)
) =>
  Effect.gen(function* () {
    const conforming = yield* Effect.tryPromise({
      try: () => db.query<{ on: string }>("select current_setting('standard_conforming_strings') as on"),
      catch: toSqlError("Failed to read standard_conforming_strings")
    })
    const query = makePreparedQuery(
      db,
      makeStatementNamer({ minUses: 2, maxNames: conforming.rows[0]?.on === "on" ? 500 : 0 })
    )

    const run = (sql: string, params: ReadonlyArray<unknown>) =>
      Effect.tryPromise({
        try: () =>
          params.length === 0 && sql.includes(";")
            ? db.exec(sql).then((results) => results.at(-1)?.rows ?? [])
            : query<Record<string, unknown>>(sql, params.map(toParam)),
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
          try: () => query<ReadonlyArray<unknown>>(sql, params.map(toParam), { rowMode: "array" }),
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

/** How often a new embedded database is made before its start fails. */
const INITDB_ATTEMPTS = 3

/** The embedded database of a process, beside its `SqlClient`. */
export interface EmbeddedPglite {
  readonly client: SqlClient.SqlClient
  /**
   * Runs `f` on the database while no statement or transaction of the client runs (it holds the one connection):
   * what `f` sees is a state between transactions. Backups dump the data directory this way.
   */
  readonly exclusive: <A>(f: (db: PGlite) => Promise<A>) => Effect.Effect<A, SqlError>
}

/**
 * Opens (or creates) the embedded database in `dataDir`; `undefined` keeps it in memory, started from `seed` (a dumped
 * data directory) when given. Closed with the scope.
 */
export const openPglite = (dataDir: string | undefined, use?: PgliteUse, seed?: Blob) =>
  Effect.gen(function* () {
    // a new (absent or empty) data directory: PGlite's initdb under Bun now and then fails at random ("access to
    // a null reference"), leaving a partial directory; that one is removed and made again (docs/decisions.md)
    const isNew = dataDir !== undefined && (!fs.existsSync(dataDir) || fs.readdirSync(dataDir).length === 0)
    const open = Effect.tryPromise({
      // loaded only here: a process on PostgreSQL does not carry PGlite's modules
      try: () =>
        import("@electric-sql/pglite").then(({ PGlite }) =>
          dataDir === undefined && seed !== undefined ? PGlite.create({ loadDataDir: seed }) : PGlite.create(dataDir)
        ),
      catch: toSqlError(`Failed to open the embedded database${dataDir ? ` in ${dataDir}` : ""}`)
    })
    const openNew = Effect.tapError(open, () =>
      Effect.sync(() => {
        if (dataDir !== undefined) fs.rmSync(dataDir, { recursive: true, force: true })
      })
    ).pipe(Effect.retry({ times: INITDB_ATTEMPTS - 1 }))
    const db = yield* Effect.acquireRelease(isNew ? openNew : open, (db) =>
      Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    const semaphore = yield* Effect.makeSemaphore(1)
    const client = yield* makePglite(db, use, semaphore)
    const exclusive = <A>(f: (db: PGlite) => Promise<A>) =>
      semaphore.withPermits(1)(Effect.tryPromise({ try: () => f(db), catch: toSqlError("Failed to use the database") }))
    return { client, exclusive } satisfies EmbeddedPglite
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
    Effect.map(openPglite(dataDir, use, seed), (e) => e.client)
  ).pipe(Layer.provide(Reactivity.layer))
