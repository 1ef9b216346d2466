/**
 * The reduction of impacted-target lists to lanes (`Lane` in types.ts), in memory. The service does the same in
 * SQL over the stored lists (src/queue/runner/lanes.ts); the queue simulator and the planner tests use this one.
 */
import type { ImpactedTargets, Lane, QueueState } from "./types.ts"

const overlap = (a: readonly string[], b: readonly string[]): boolean => {
  if (a.length > b.length) return overlap(b, a)
  if (a.length < 16) return a.some((x) => b.includes(x))
  const set = new Set(b)
  return a.some((x) => set.has(x))
}

/**
 * The lane of `targets` set for PR `prNumber`: the ids of the other active entries with known targets whose lists
 * (`targetsOf(entryId)`, the lists last set for them) share a name with it.
 */
export const laneOf = (
  state: QueueState,
  prNumber: number,
  targets: ImpactedTargets,
  targetsOf: (entryId: string) => ImpactedTargets | undefined
): Lane => {
  if (targets === "ALL") return "ALL"
  if (targets.length === 0) return "NONE"
  const overlaps: string[] = []
  for (const e of state.entries) {
    if (e.prNumber === prNumber || e.lane === null || typeof e.lane === "string") continue
    const other = targetsOf(e.id)
    if (other !== undefined && other !== "ALL" && overlap(targets, other)) overlaps.push(e.id)
  }
  return { overlaps }
}
