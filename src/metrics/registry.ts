import { heapStats } from "bun:jsc"

/**
 * A small in-process Prometheus registry for the operator metrics of `GET /metrics` (contract.md §5): counters,
 * gauges and histograms with labels, written in the text exposition format.
 */

import { formatLabels, formatNumber, type Labels, renderFamily, renderHistogram } from "../kernel/prometheusText.ts"
import { VERSION } from "../kernel/version.ts"

interface Family {
  readonly name: string
  readonly help: string
  readonly type: "counter" | "gauge" | "histogram"
  render(): Array<string>
}

export class Counter implements Family {
  readonly type = "counter" as const
  private readonly values = new Map<string, { labels: Labels; value: number }>()
  constructor(
    readonly name: string,
    readonly help: string
  ) {}
  inc(labels: Labels = {}, by = 1) {
    this.seriesOf(labels).value += by
  }
  /** The series of `labels`: hold on to it to count without formatting its labels again. */
  seriesOf(labels: Labels): { value: number } {
    const key = formatLabels(labels)
    let entry = this.values.get(key)
    if (entry === undefined) {
      entry = { labels, value: 0 }
      this.values.set(key, entry)
    }
    return entry
  }
  render() {
    return [...this.values.values()].map((e) => `${this.name}${formatLabels(e.labels)} ${formatNumber(e.value)}`)
  }
}

export class Gauge implements Family {
  readonly type = "gauge" as const
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly read: () => ReadonlyArray<readonly [Labels, number]>
  ) {}
  render() {
    return this.read().map(([labels, value]) => `${this.name}${formatLabels(labels)} ${formatNumber(value)}`)
  }
}

export class Histogram implements Family {
  readonly type = "histogram" as const
  private readonly series = new Map<string, { labels: Labels; counts: Array<number>; sum: number; count: number }>()
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: ReadonlyArray<number>
  ) {}
  observe(labels: Labels, value: number) {
    this.seriesOf(labels).observe(value)
  }
  /** The series of `labels`: hold on to it to observe without formatting its labels again. */
  seriesOf(labels: Labels): { readonly observe: (value: number) => void } {
    const key = formatLabels(labels)
    let s = this.series.get(key)
    if (!s) {
      s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 }
      this.series.set(key, s)
    }
    const series = s
    return {
      observe: (value) => {
        for (let i = 0; i < this.buckets.length; i++)
          if (value <= (this.buckets[i] ?? 0)) series.counts[i] = (series.counts[i] ?? 0) + 1
        series.sum += value
        series.count += 1
      }
    }
  }
  render() {
    return renderHistogram(this.name, [...this.series.values()], this.buckets)
  }
}

export class Registry {
  private readonly families: Array<Family> = []
  register<F extends Family>(family: F): F {
    this.families.push(family)
    return family
  }
  render(): string {
    return `${this.families.map((f) => renderFamily(f, f.render())).join("\n")}\n`
  }
}

/** The process's own metrics. */
export const makeProcessMetrics = () => {
  const registry = new Registry()
  const requests = registry.register(
    new Counter("greenline_http_requests_total", "HTTP requests answered, by route and status")
  )
  const durations = registry.register(
    new Histogram(
      "greenline_http_request_duration_seconds",
      "HTTP request duration by route",
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
    )
  )
  const runnerLag = registry.register(
    new Histogram(
      "greenline_queue_runner_lag_seconds",
      "Time from an event reaching a queue to the planner step that handled it",
      [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30]
    )
  )
  const plannerSteps = registry.register(
    new Histogram(
      "greenline_planner_step_seconds",
      "Wall time of one planner step",
      [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05]
    )
  )
  // the last steps' times, for exact percentiles in benchmarks
  const recentSteps = new Float64Array(65_536)
  let stepCount = 0
  const runnerRestarts = registry.register(
    new Counter("greenline_queue_runner_restarts_total", "Queue runner fibers restarted after a failure")
  )
  registry.register(
    new Gauge("greenline_build_info", "Greenline's version and the Bun that runs it (always 1)", () => [
      [{ version: VERSION, bun: Bun.version }, 1]
    ])
  )
  registry.register(
    new Gauge("greenline_process_memory_bytes", "Memory of the Bun process", () => {
      const m = process.memoryUsage()
      // Bun's memoryUsage() takes heapUsed and heapTotal from different accounts of JavaScriptCore's heap (heapUsed
      // was seen at 468 MB beside a heapTotal of 27 MB): both come from the heap's own statistics instead, the
      // capacity never below what is in use
      const heap = heapStats()
      return [
        [{ kind: "rss" }, m.rss],
        [{ kind: "heap_used" }, heap.heapSize],
        [{ kind: "heap_total" }, Math.max(heap.heapCapacity, heap.heapSize)],
        [{ kind: "external" }, m.external]
      ]
    })
  )
  // each route and status's two series, found once (formatting their labels on every request cost more than counting)
  const requestSeries = new Map<string, { count: { value: number }; duration: { observe: (s: number) => void } }>()
  return {
    registry,
    observeRequest: (route: string, status: number, seconds: number) => {
      const key = `${status} ${route}`
      let series = requestSeries.get(key)
      if (series === undefined) {
        series = {
          count: requests.seriesOf({ route, status: String(status) }),
          duration: durations.seriesOf({ route })
        }
        requestSeries.set(key, series)
      }
      series.count.value += 1
      series.duration.observe(seconds)
    },
    runnerLag,
    runnerRestarts,
    observeStep: (seconds: number) => {
      plannerSteps.observe({}, seconds)
      recentSteps[stepCount++ % recentSteps.length] = seconds
    },
    /** Percentiles (0..1) of the recent planner steps, in seconds. */
    stepPercentiles: (qs: ReadonlyArray<number>) => {
      const n = Math.min(stepCount, recentSteps.length)
      const sorted = Array.from(recentSteps.subarray(0, n)).sort((a, b) => a - b)
      return { count: stepCount, values: qs.map((q) => sorted[Math.min(n - 1, Math.floor(q * n))] ?? Number.NaN) }
    }
  }
}
export type ProcessMetrics = ReturnType<typeof makeProcessMetrics>
