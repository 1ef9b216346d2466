import { Context, type Effect, type Stream } from "effect"

/** Connections of the pool right now (PGlite: its one connection, guarded by a semaphore). */
export interface PoolUse {
  readonly open: number
  readonly idle: number
  readonly inUse: number
  /** Statements or transactions waiting for a connection. */
  readonly waiting: number
  readonly max: number
}

/** What kind of database is behind the `SqlClient`, and a wake-up channel between instances sharing it. */
export interface DatabaseShape {
  readonly kind: "postgres" | "pglite"
  /**
   * Tells every instance (with PostgreSQL: through NOTIFY) that something on `channel` changed. `payload` must not be
   * empty: notifications without one are dropped (the empty payload is `RESUMED`'s).
   */
  readonly notify: (channel: string, payload: string) => Effect.Effect<void>
  /**
   * The payloads notified on `channel`. It never ends: when the connection it listens on is lost (the database
   * stopped), it listens again as soon as the database answers, and then emits `RESUMED`: notifications may have been
   * missed meanwhile, so whatever they would have woken should look again.
   */
  readonly listen: (channel: string) => Stream.Stream<string>
  /** How the connections are used right now (`GET /metrics`). */
  readonly pool: () => PoolUse
}

export class Database extends Context.Tag("greenline/Database")<Database, DatabaseShape>() {}

/** What `listen` emits after it listens again on a new connection (notifications may have been missed). */
export const RESUMED = ""

/** Node's and the driver's codes of a connection that failed, and PostgreSQL's SQLSTATEs of a server that is away. */
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ERR_SOCKET_CLOSED",
  // connection_exception (class 08)
  "08000",
  "08001",
  "08003",
  "08004",
  "08006",
  "08007",
  // admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting down, in recovery)
  "57P01",
  "57P02",
  "57P03",
  // too_many_connections
  "53300"
])
/** The driver's messages for a connection lost or never made (they carry no code). */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|is not queryable|Connection ended|server closed the connection|Failed to connect|database system is (starting up|shutting down|in recovery)/i

/**
 * Whether `error` (or an error it was caused by) says the database cannot be reached right now: refused, lost, timed
 * out, shutting down or starting up. Such a failure is the database's, not the request's: the HTTP edge answers 503
 * SERVICE_UNAVAILABLE with Retry-After, and the transaction it interrupted wrote nothing. Only a database error
 * counts (an `SqlError` and what caused it, or the PostgreSQL driver's own): a Git host that cannot be reached is
 * not the database.
 */
export const isDatabaseUnavailable = (error: unknown): boolean => {
  const seen = new Set<unknown>()
  const walk = (e: unknown, depth: number, inSql: boolean): boolean => {
    if (e === null || e === undefined || typeof e !== "object" || depth > 8 || seen.has(e)) return false
    seen.add(e)
    const { _tag, code, message, cause, errors, severity } = e as {
      readonly _tag?: unknown
      readonly code?: unknown
      readonly message?: unknown
      readonly cause?: unknown
      readonly errors?: unknown
      readonly severity?: unknown
    }
    const sql = inSql || _tag === "SqlError" || typeof severity === "string"
    if (sql && typeof code === "string" && UNAVAILABLE_CODES.has(code)) return true
    if (sql && typeof message === "string" && UNAVAILABLE_MESSAGES.test(message)) return true
    if (Array.isArray(errors) && errors.some((x) => walk(x, depth + 1, sql))) return true
    return walk(cause, depth + 1, sql)
  }
  return walk(error, 0, false)
}
