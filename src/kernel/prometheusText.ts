/** The Prometheus text exposition format: labels, numbers and families, shared by every metrics report. */

export type Labels = Readonly<Record<string, string>>

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')

export const formatLabels = (labels: Labels): string => {
  const keys = Object.keys(labels)
  if (keys.length === 0) return ""
  return `{${keys.map((k) => `${k}="${escapeLabel(labels[k] ?? "")}"`).join(",")}}`
}

export const formatNumber = (n: number): string =>
  Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : n < 0 ? "-Inf" : "NaN"

/** Histogram lines for precomputed series (also used by the queue metrics, which come from the database). */
export const renderHistogram = (
  name: string,
  series: ReadonlyArray<{ labels: Labels; counts: ReadonlyArray<number>; sum: number; count: number }>,
  buckets: ReadonlyArray<number>
): Array<string> => {
  const lines: Array<string> = []
  for (const s of series) {
    buckets.forEach((le, i) => {
      lines.push(`${name}_bucket${formatLabels({ ...s.labels, le: formatNumber(le) })} ${s.counts[i] ?? 0}`)
    })
    lines.push(`${name}_bucket${formatLabels({ ...s.labels, le: "+Inf" })} ${s.count}`)
    lines.push(`${name}_sum${formatLabels(s.labels)} ${formatNumber(s.sum)}`)
    lines.push(`${name}_count${formatLabels(s.labels)} ${s.count}`)
  }
  return lines
}

export const renderFamily = (family: { name: string; help: string; type: string }, lines: ReadonlyArray<string>) =>
  [`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`, ...lines].join("\n")
