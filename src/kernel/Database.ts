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
   * empty: `@effect/sql-pg`'s `listen` drops notifications without one.
   */
  readonly notify: (channel: string, payload: string) => Effect.Effect<void>
  readonly listen: (channel: string) => Stream.Stream<string>
  /** How the connections are used right now (`GET /metrics`). */
  readonly pool: () => PoolUse
}

export class Database extends Context.Tag("greenline/Database")<Database, DatabaseShape>() {}
