import { adaptiveChoiceOf, estimateFields, estimateOf } from "./estimates.ts"
import { makeCtx } from "./planner/context.ts"
import { insertEntry, isLocked } from "./planner/order.ts"
import type { Entry, QueueState, QueueStats } from "./planner/types.ts"
import type { QueueRow } from "./QueueRepo.ts"
import type { EnqueuedPullRequest, StoredQueueConfig } from "./schemas.ts"
import { type EntryRow, iso, type RecordRow, TERMINAL } from "./store.ts"

/**
 * What getQueue and getSubmittedPullRequest show: the runner's order of the queue with the writes it has not stepped
 * yet applied the way it will step them (docs/decisions.md, "Read-your-writes").
 */

const PRIORITY_NAMES: Record<number, string> = { 0: "urgent", 10: "high", 100: "medium", 200: "low" }

export const entryRecord = (queue: QueueRow, row: RecordRow, position: number | null): EnqueuedPullRequest => {
  const active = !TERMINAL.has(row.state)
  return {
    id: row.id,
    state: row.state as EnqueuedPullRequest["state"],
    stateChangedAt: iso(new Date(row.state_changed_at)),
    priorityValue: row.priority,
    priorityName: PRIORITY_NAMES[row.priority] ?? String(row.priority),
    usedDefaultPriorityName: "medium",
    skipTheLine: row.priority === 0,
    noBatch: row.no_batch,
    prNumber: Number(row.pr_number),
    prTitle: row.title,
    prSha: row.head_sha,
    prBaseBranch: queue.branch,
    prAuthor: row.author,
    verifiedByTestRun: row.verified_by_test_run,
    // a failed PR keeps the run that failed it (the dashboard links to its output)
    testRunId: active || row.state === "failed" ? row.run_id : null,
    position
  }
}

const time = (at: Date | string) => new Date(at).getTime()

/** An entry the runner has not placed yet, as its Submitted event will make it (order.ts reads these fields). */
const unplaced = (row: EntryRow, seq: number): Entry => ({
  id: row.id,
  prNumber: Number(row.pr_number),
  headSha: row.head_sha,
  priority: row.priority,
  noBatch: row.no_batch,
  submittedAt: time(row.submitted_at),
  seq,
  state: "pending",
  stateChangedAt: time(row.state_changed_at),
  runId: null,
  verifiedByTestRun: null,
  lane: null,
  ready: true,
  eligibleAt: null,
  failure: null,
  segment: null,
  merging: false,
  cancelRequested: null,
  directMerge: "none"
})

/**
 * The active entries that have a place (not `not_ready`), in testing order, each with its row. The runner's order,
 * less the entries a request ended, plus the entries it has not placed yet, placed by the planner's own rule
 * (`insertEntry`), in the order their requests were made: new submissions, new priorities, and entries that became
 * eligible (impacted targets).
 */
export const orderedEntries = (
  state: QueueState,
  rows: ReadonlyArray<EntryRow>
): ReadonlyArray<{ readonly entry: Entry; readonly row: EntryRow }> => {
  const byId = new Map<string, EntryRow>()
  for (const r of rows) if (!TERMINAL.has(r.state)) byId.set(r.id, r)
  const kept: Array<Entry> = []
  const moved: Array<{ readonly entry: Entry; readonly row: EntryRow }> = []
  const seen = new Set<string>()
  for (const e of state.entries) {
    if (TERMINAL.has(e.state)) continue
    const row = byId.get(e.id)
    // submitted anew since: the runner's entry is the previous submission (its cancellation not stepped yet)
    if (row?.request_new === true) continue
    seen.add(e.id)
    if (row === undefined || row.state === "not_ready") continue
    const reprioritised = row.priority !== e.priority && (row.priority === 0 || !isLocked(e))
    if (e.state === "not_ready" || reprioritised) {
      moved.push({ entry: { ...e, priority: row.priority, state: "pending" }, row })
    } else kept.push(e)
  }
  let seq = state.nextSeq
  const fresh = rows
    .filter((r) => !seen.has(r.id) && !TERMINAL.has(r.state) && r.state !== "not_ready")
    .sort(
      (a, b) =>
        Number(a.request_seq ?? 0) - Number(b.request_seq ?? 0) ||
        time(a.submitted_at) - time(b.submitted_at) ||
        (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
    )
    .map((row) => ({ entry: unplaced(row, seq++), row }))
  const ctx = makeCtx({ ...state, entries: kept }, () => "", 0, "", undefined)
  const later = [...moved, ...fresh].sort((a, b) => Number(a.row.request_seq ?? 0) - Number(b.row.request_seq ?? 0))
  for (const { entry } of later) insertEntry(ctx, entry)
  const out: Array<{ readonly entry: Entry; readonly row: EntryRow }> = []
  for (const entry of ctx.entries) {
    const row = byId.get(entry.id)
    if (row !== undefined && row.state !== "not_ready") out.push({ entry, row })
  }
  return out
}

/** getQueue's answer from the runner's state and the active entries' rows, with the estimates (issue #18). */
export const viewOf = (
  queue: QueueRow,
  state: QueueState,
  rows: ReadonlyArray<EntryRow>,
  now: number,
  version: number | null = null,
  prior?: QueueStats
) => {
  // extension: estimates, cached per runtime version; an entry the runner has not placed is estimated behind the
  // placed ones, in its order among those not placed
  const estimate = estimateOf(queue.id, version, state, now, prior)
  const placed = new Set(state.entries.map((e) => e.id))
  let fresh = 0
  const enqueued = orderedEntries(state, rows).map(({ row }, i) => ({
    ...entryRecord(queue, row, i + 1),
    ...(placed.has(row.id) && row.request_new !== true
      ? estimateFields(estimate, row.id)
      : estimateFields(estimate, row.id, { place: ++fresh, depth: state.config.concurrency, now }))
  }))
  // a mode change the runner has not stepped yet, with runs in flight, is a switch too (semantics.md §6):
  // updateQueue and an immediate getQueue must not show the new mode as running
  const busy = state.merging !== null || state.runs.some((r) => r.status === "building" || r.status === "in_progress")
  const unseenSwitch = queue.config.mode !== (state.switching?.mode ?? state.config.mode) && busy
  const effective: StoredQueueConfig = {
    ...queue.config,
    state: state.switching !== null || unseenSwitch ? ("switching_modes" as const) : queue.config.state
  }
  return { config: effective, enqueued, adaptiveChoice: adaptiveChoiceOf(state) }
}

/** The place of entry `id` in `viewOf`'s order (null when it has none). */
export const positionOf = (state: QueueState, rows: ReadonlyArray<EntryRow>, id: string): number | null => {
  const i = orderedEntries(state, rows).findIndex(({ entry }) => entry.id === id)
  return i < 0 ? null : i + 1
}
