import { useEffect, useRef } from "preact/hooks"
import uPlot from "uplot"

/** A uPlot chart that follows its data without being rebuilt (no flicker when live data arrives). */
export interface ChartProps {
  readonly title: string
  /** x values in seconds since the epoch, then one array per series */
  readonly data: uPlot.AlignedData
  readonly series: ReadonlyArray<{ readonly label: string; readonly stroke: string; readonly fill?: string }>
  readonly yLabel?: string
  readonly bars?: boolean
  readonly height?: number
}

export const Chart = ({ title, data, series, yLabel, bars, height }: ChartProps) => {
  const box = useRef<HTMLDivElement>(null)
  const plot = useRef<uPlot | null>(null)
  useEffect(() => {
    if (box.current === null) return
    const width = Math.max(300, Math.min(900, box.current.clientWidth || 600))
    const opts: uPlot.Options = {
      title,
      width,
      height: height ?? 220,
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: s.stroke,
          fill: s.fill ?? (bars === true ? s.stroke : undefined),
          ...(bars === true ? { paths: uPlot.paths.bars?.({ size: [0.6, 40] }), points: { show: false } } : {})
        }))
      ],
      axes: [{}, { label: yLabel ?? "" }],
      scales: { x: { time: true } }
    }
    plot.current = new uPlot(opts, data, box.current)
    return () => {
      plot.current?.destroy()
      plot.current = null
    }
    // the chart is rebuilt only when its shape changes; data changes go through setData below
  }, [title, series.length, bars, height, yLabel])
  useEffect(() => {
    plot.current?.setData(data)
  }, [data])
  return <div class="chart" ref={box} role="img" aria-label={title} />
}
