import { Context } from "effect"

/** What the runners report about themselves (`GET /metrics`): the port; the metrics adapter implements it. */
export interface RunnerMetricsShape {
  /** Seconds from a wake-up to the round that serves it. */
  readonly observeLag: (seconds: number) => void
  /** Seconds one planner step took. */
  readonly observeStep: (seconds: number) => void
  /** A runner failed and is restarted. */
  readonly restarted: () => void
}

export class RunnerMetrics extends Context.Tag("greenline/RunnerMetrics")<RunnerMetrics, RunnerMetricsShape>() {}
