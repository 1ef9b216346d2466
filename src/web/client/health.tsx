import { useMemo, useState } from "preact/hooks"
import type uPlot from "uplot"
import { call } from "./api.ts"
import { Chart } from "./chart.tsx"
import { useLive } from "./hooks.ts"
import { Crumbs, duration, ErrorView, Loading, prPath, queuePath, type RepoKey, repoPath, StateBadge } from "./ui.tsx"

/** A queue's health over a chosen range: charts, and every bucket's PRs below them (the drill-down). */

const RANGES = [
  [1, "hour", "24 hours, hourly"],
  [7, "hour", "7 days, hourly"],
  [7, "day", "7 days, daily"],
  [30, "day", "30 days, daily"],
  [90, "day", "90 days, daily"]
] as const

const COLORS = ["#1a7f37", "#c62828", "#9a6700", "#0b5cad", "#8250df", "#bf3989", "#57606a"]
const FAILED = ["#c62828", "#e57373", "#b71c1c", "#ef9a9a"]
const CANCELLED = ["#57606a", "#8c959f", "#9a6700", "#d29922"]

/** Merged green, failures in reds, cancellations in greys (one shade per reason). */
const outcomeColor = (reason: string, i: number) =>
  reason === "merged"
    ? COLORS[0]!
    : reason.startsWith("failed")
      ? FAILED[i % FAILED.length]!
      : CANCELLED[i % CANCELLED.length]!

export const HealthPage = ({ repo, branch }: { repo: RepoKey; branch: string }) => {
  const [range, setRange] = useState(2)
  const [days, bucket] = [RANGES[range]![0], RANGES[range]![1]]
  const live = useLive(
    () => call("getQueueHealth", { repo, targetBranch: branch, days, bucket }),
    `${queuePath(repo, branch)}/health/${days}/${bucket}`,
    30_000
  )
  const charts = useMemo(() => {
    const points = live.data?.points ?? []
    const x = points.map((p) => Date.parse(p.start) / 1000)
    const num = (v: number | null) => (v === null ? null : Math.round(v * 100) / 100) as number
    const reasons = [...new Set(points.flatMap((p) => Object.keys(p.reasons)))].sort()
    // stacked: each series adds the ones before it
    const stacked = reasons.map((_, i) =>
      points.map((p) => reasons.slice(0, i + 1).reduce((n, r) => n + (p.reasons[r] ?? 0), 0))
    )
    return {
      reasons,
      conclusions: [x, ...stacked.reverse()] as uPlot.AlignedData,
      wait: [
        x,
        ...(["timeInQueueP50", "timeInQueueP95", "timeInQueueP99"] as const).map((k) =>
          points.map((p) => num(p[k] === null ? null : p[k]! / 60))
        )
      ] as uPlot.AlignedData,
      perMerge: [
        x,
        points.map((p) => num(p.ciRunsPerMerge)),
        points.map((p) => num(p.restartsPerMerge))
      ] as uPlot.AlignedData,
      depth: [x, points.map((p) => p.depth), points.map((p) => num(p.depthMean ?? null))] as uPlot.AlignedData,
      batch: [
        x,
        points.map((p) => num(p.averageBatchSize)),
        points.map(() => live.data?.batchSize ?? 1)
      ] as uPlot.AlignedData,
      slots: [
        x,
        points.map((p) => p.slotsUsed),
        points.map((p) => num(p.slotsMean ?? null)),
        points.map(() => live.data?.concurrency ?? 1)
      ] as uPlot.AlignedData
    }
  }, [live.data])
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          [branch, queuePath(repo, branch)],
          ["Health", undefined]
        ]}
      />
      <h1>Health of {branch}</h1>
      <label>
        Range{" "}
        <select value={String(range)} onChange={(e) => setRange(Number((e.currentTarget as HTMLSelectElement).value))}>
          {RANGES.map(([, , label], i) => (
            <option key={label} value={String(i)}>
              {label}
            </option>
          ))}
        </select>
      </label>
      {live.data === undefined ? (
        <Loading />
      ) : (
        <>
          <div class="charts">
            <Chart
              title="Conclusions by reason (stacked)"
              data={charts.conclusions}
              series={[...charts.reasons].reverse().map((r, i) => ({ label: r, stroke: outcomeColor(r, i) }))}
              bars={true}
            />
            <Chart
              title="Time in queue (minutes)"
              data={charts.wait}
              series={[
                { label: "p50", stroke: COLORS[0]! },
                { label: "p95", stroke: COLORS[2]! },
                { label: "p99", stroke: COLORS[1]! }
              ]}
            />
            <Chart
              title="Per merged PR"
              data={charts.perMerge}
              series={[
                { label: "CI runs", stroke: COLORS[3]! },
                { label: "restarts", stroke: COLORS[1]! }
              ]}
            />
            <Chart
              title="Queue depth"
              data={charts.depth}
              series={[
                { label: "most", stroke: COLORS[3]! },
                { label: "mean", stroke: COLORS[0]! }
              ]}
            />
            <Chart
              title="Batch size"
              data={charts.batch}
              series={[
                { label: "average", stroke: COLORS[4]! },
                { label: "configured", stroke: COLORS[6]! }
              ]}
            />
            <Chart
              title="Testing slots"
              data={charts.slots}
              series={[
                { label: "most used", stroke: COLORS[0]! },
                { label: "mean used", stroke: COLORS[3]! },
                { label: "concurrency", stroke: COLORS[6]! }
              ]}
            />
          </div>
          <section aria-labelledby="buckets-h">
            <h2 id="buckets-h">By {bucket}</h2>
            <table class="list">
              <thead>
                <tr>
                  <th scope="col">From</th>
                  <th scope="col">Merged</th>
                  <th scope="col">Failed</th>
                  <th scope="col">Cancelled</th>
                  <th scope="col">p50 in queue</th>
                  <th scope="col">Restarts by cause</th>
                  <th scope="col">PRs</th>
                </tr>
              </thead>
              <tbody>
                {[...live.data.points]
                  .reverse()
                  .filter((p) => p.prs.length > 0)
                  .map((p) => (
                    <tr key={p.start}>
                      <td>{new Date(p.start).toLocaleString()}</td>
                      <td>{p.merged}</td>
                      <td>{p.failed}</td>
                      <td>{p.cancelled}</td>
                      <td>{duration(p.timeInQueueP50)}</td>
                      <td class="restart-causes">
                        {Object.entries(p.restartsByCause ?? {})
                          .map(([cause, n]) => `${cause} ${n}`)
                          .join(", ") || "none"}
                      </td>
                      <td>
                        <details>
                          <summary>{p.prs.length} PRs</summary>
                          <ul class="plain">
                            {p.prs.map((pr) => (
                              <li key={pr.prNumber}>
                                <a href={prPath(repo, pr.prNumber, branch)}>#{pr.prNumber}</a>{" "}
                                <StateBadge state={pr.state} /> <span class="muted">{pr.reason}</span>
                              </li>
                            ))}
                          </ul>
                        </details>
                      </td>
                    </tr>
                  ))}
              </tbody>
            </table>
          </section>
        </>
      )}
    </>
  )
}
