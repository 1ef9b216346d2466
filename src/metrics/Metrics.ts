import { Context, Effect, Layer } from "effect"
import { Database } from "../kernel/Database.ts"
import { RunnerMetrics } from "../queue/RunnerMetrics.ts"
import { Gauge, makeProcessMetrics, type ProcessMetrics } from "./registry.ts"

/** The process's own metrics (`GET /metrics`). */
export class Metrics extends Context.Tag("greenline/ProcessMetrics")<Metrics, ProcessMetrics>() {}

export const MetricsLive = Layer.sync(Metrics, makeProcessMetrics)

/**
 * Database pool use in `GET /metrics`, read at each scrape: the `pg` pool's connections with PostgreSQL; with
 * PGlite its one connection, which a semaphore hands to one statement or transaction at a time.
 */
export const DbPoolMetricsLive: Layer.Layer<never, never, Metrics | Database> = Layer.effectDiscard(
  Effect.gen(function* () {
    const { registry } = yield* Metrics
    const db = yield* Database
    const labels = { database: db.kind }
    const gauge = (name: string, help: string, read: (use: ReturnType<typeof db.pool>) => number) =>
      registry.register(new Gauge(name, help, () => [[labels, read(db.pool())]]))
    gauge("greenline_db_pool_connections", "Open database connections (in use and idle)", (u) => u.open)
    gauge(
      "greenline_db_pool_connections_in_use",
      "Database connections running a statement or transaction",
      (u) => u.inUse
    )
    gauge("greenline_db_pool_connections_idle", "Open database connections not in use", (u) => u.idle)
    gauge("greenline_db_pool_waiting", "Statements or transactions waiting for a database connection", (u) => u.waiting)
    gauge("greenline_db_pool_connections_max", "Most database connections the pool opens", (u) => u.max)
  })
)

/** The runners' metrics port (queue/RunnerMetrics.ts) over the process's registry. */
export const RunnerMetricsLive: Layer.Layer<RunnerMetrics, never, Metrics> = Layer.effect(
  RunnerMetrics,
  Effect.map(Metrics, (m) => ({
    observeLag: (seconds: number) => m.runnerLag.observe({}, seconds),
    observeStep: (seconds: number) => m.observeStep(seconds),
    restarted: () => m.runnerRestarts.inc()
  }))
)
