import { Context, Layer } from "effect"
import { makeProcessMetrics, type ProcessMetrics } from "./registry.ts"

/** The process's own metrics (`GET /metrics`). */
export class Metrics extends Context.Tag("greenline/ProcessMetrics")<Metrics, ProcessMetrics>() {}

export const MetricsLive = Layer.sync(Metrics, makeProcessMetrics)
