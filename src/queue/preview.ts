/**
 * Extension (#31): impact previews. What a cancel, a restart or a change of priority would do, computed by the planner
 * itself on a copy of the queue's state (the runner's, with the writes it has not stepped yet): the step the runner
 * will take for that request, at the same time, read-only. It answers the runs the step interrupts (their PRs and how
 * long they have run: CI time thrown away), the PRs tested again, and each PR's estimated merge time before and after.
 */
import { estimateWithFreeze } from "./freezeEstimate.ts"
import { type PlannerEvent, type QueueState, type QueueStats, step } from "./planner/index.ts"

export type PreviewAction =
  | { readonly _tag: "cancel"; readonly prNumber: number }
  | { readonly _tag: "restart"; readonly prNumber: number }
  | { readonly _tag: "priority"; readonly prNumber: number; readonly priority: number }

export interface Preview {
  readonly interruptedRuns: ReadonlyArray<{
    readonly testRunId: string
    readonly prNumbers: ReadonlyArray<number>
    readonly runningSeconds: number
  }>
  /** CI time thrown away: the interrupted runs' running time, summed (s) */
  readonly ciSecondsLost: number
  readonly retestedPrs: ReadonlyArray<number>
  readonly estimates: ReadonlyArray<{
    readonly prNumber: number
    readonly estimatedMergeAt: string | null
    /** null: it leaves the queue (a cancel) or has no estimate */
    readonly estimatedMergeAtAfter: string | null
  }>
}

const readIds = () => {
  let n = 0
  return () => `preview-${n++}`
}

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString())

/** The planner event of `action` on `state`, or null when the PR is not active there. */
const eventOf = (state: QueueState, action: PreviewAction): PlannerEvent | null => {
  const e = state.entries.find(
    (x) => x.prNumber === action.prNumber && x.state !== "merged" && x.state !== "failed" && x.state !== "cancelled"
  )
  if (e === undefined) return null
  switch (action._tag) {
    case "cancel":
      return { _tag: "Cancelled", prNumber: action.prNumber, reason: "API_REQUESTED" }
    case "restart":
      return { _tag: "RestartRequested", prNumber: action.prNumber }
    case "priority":
      return {
        _tag: "Submitted",
        entryId: e.id,
        prNumber: e.prNumber,
        headSha: e.headSha,
        priority: action.priority,
        noBatch: e.noBatch,
        ready: e.ready,
        update: true
      }
  }
}

/** The preview of `action` on `state` at `now`; null when its PR is not active. */
export const previewOf = (
  state: QueueState,
  action: PreviewAction,
  now: number,
  prior?: QueueStats
): Preview | null => {
  const event = eventOf(state, action)
  if (event === null) return null
  const after = step(state, event, now, readIds()).state
  const afterRuns = new Map(after.runs.map((r) => [r.id, r]))
  const prOf = new Map(state.entries.map((e) => [e.id, e.prNumber]))
  const interruptedRuns = state.runs
    .filter((r) => r.status === "building" || r.status === "in_progress")
    .filter((r) => {
      const next = afterRuns.get(r.id)
      return next === undefined || next.status === "cancelled"
    })
    .map((r) => ({
      testRunId: r.id,
      prNumbers: r.testedEntryIds.map((id) => prOf.get(id) ?? 0),
      runningSeconds: Math.max(0, Math.round((now - (r.startedAt ?? r.createdAt)) / 1000))
    }))
  const afterEntries = new Map(after.entries.map((e) => [e.id, e]))
  const retestedPrs = state.entries
    .filter((e) => e.runId !== null && (e.state === "testing" || e.state === "tests_passed"))
    .filter((e) => {
      const next = afterEntries.get(e.id)
      return next !== undefined && next.state !== "cancelled" && next.runId !== e.runId
    })
    .map((e) => e.prNumber)
  const before = estimateWithFreeze(state, now, prior)
  const later = estimateWithFreeze(after, now, prior)
  const estimates = state.entries
    .filter((e) => e.state !== "merged" && e.state !== "failed" && e.state !== "cancelled")
    .map((e) => ({
      prNumber: e.prNumber,
      estimatedMergeAt: iso(before.byEntry.get(e.id)?.mergeAt),
      estimatedMergeAtAfter: iso(later.byEntry.get(e.id)?.mergeAt)
    }))
  return {
    interruptedRuns,
    ciSecondsLost: interruptedRuns.reduce((sum, r) => sum + r.runningSeconds, 0),
    retestedPrs,
    estimates
  }
}
