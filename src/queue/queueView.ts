import { adaptiveChoiceOf, estimateFields, estimateOf } from "./estimates.ts"
import { makeCtx } from "./planner/context.ts"
import { type PlannerConfig, type PlannerEvent, step } from "./planner/index.ts"
import { insertEntry, isLocked } from "./planner/order.ts"
import type { Entry, QueueState, QueueStats } from "./planner/types.ts"
import { plannerConfig } from "./plannerConfig.ts"
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

const sameConfig = (a: PlannerConfig, b: PlannerConfig) => {
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof PlannerConfig>) {
    if ((a[key] ?? false) !== (b[key] ?? false)) return false
  }
  return true
}

/**
 * The writes the runner has not stepped yet, as the planner events it will step them as (docs/decisions.md,
 * "Read-your-writes"): a configuration the queue's row has and the runner's state not (updateQueue), entries a
 * request ended (cancelPullRequest), new submissions and new priorities, and restarts, in the order of their requests.
 * Empty when the state is up to date.
 */
export const pendingEvents = (
  queue: QueueRow,
  state: QueueState,
  rows: ReadonlyArray<EntryRow>
): ReadonlyArray<PlannerEvent> => {
  const events: Array<PlannerEvent> = []
  // a mode switch under way is the runner's: the configuration is compared with the one it is switching to
  const running =
    state.switching === null
      ? state.config
      : { ...state.config, mode: state.switching.mode, state: state.switching.resumeState }
  const wanted = plannerConfig(queue.config)
  if (!sameConfig(wanted, running)) events.push({ _tag: "ConfigChanged", config: wanted })
  const byId = new Map<string, EntryRow>()
  for (const r of rows) if (!TERMINAL.has(r.state)) byId.set(r.id, r)
  const inState = new Map<string, Entry>()
  for (const e of state.entries) {
    if (TERMINAL.has(e.state)) continue
    inState.set(e.id, e)
    const row = byId.get(e.id)
    // ended by a request (its row is not active any more), or submitted anew since (the runner holds the old one)
    if (row === undefined || row.request_new === true)
      events.push({ _tag: "Cancelled", prNumber: e.prNumber, reason: "API_REQUESTED" })
  }
  const requested = rows
    .filter((r) => r.request_seq !== null && !TERMINAL.has(r.state))
    .sort((a, b) => Number(a.request_seq) - Number(b.request_seq))
  for (const row of requested) {
    const e = row.request_new === true ? undefined : inState.get(row.id)
    const prNumber = Number(row.pr_number)
    if (e === undefined || e.priority !== row.priority || e.noBatch !== row.no_batch) {
      events.push({
        _tag: "Submitted",
        entryId: row.id,
        prNumber,
        headSha: e?.headSha ?? row.head_sha,
        priority: row.priority,
        noBatch: row.no_batch,
        ready: e?.ready ?? true,
        ...(e === undefined ? {} : { update: true })
      })
    }
    // restarted: the request took it out of its run (or out of pending_failure)
    if (e !== undefined && row.run_id === null && (e.runId !== null || e.state === "pending_failure"))
      events.push({ _tag: "RestartRequested", prNumber })
  }
  return events
}

/** Run ids of the planner's steps on a read (they are never shown). */
const readIds = () => {
  let n = 0
  return () => `read-${n++}`
}

/**
 * The runner's state with the writes it has not stepped yet stepped at `now`, as its next round will step them: what
 * the estimates (and their reasons) of a read are computed from, so that they reflect a write at once. The state
 * itself when nothing waits. `key` identifies the writes, for the estimate's cache.
 */
export const pendingState = (
  queue: QueueRow,
  state: QueueState,
  rows: ReadonlyArray<EntryRow>,
  now: number
): { readonly state: QueueState; readonly key: string } => {
  const events = pendingEvents(queue, state, rows)
  if (events.length === 0) return { state, key: "" }
  const ids = readIds()
  let next = state
  for (const event of events) next = step(next, event, now, ids).state
  return { state: next, key: JSON.stringify(events) }
}

/** The estimate cache's key for a runtime version and the writes pending on it (`pendingState`'s key). */
export const estimateKey = (version: number | null, key: string) =>
  version === null ? null : key === "" ? version : `${version}:${key}`

/** getQueue's answer from the runner's state and the active entries' rows, with the estimates (issue #18). */
export const viewOf = (
  queue: QueueRow,
  state: QueueState,
  rows: ReadonlyArray<EntryRow>,
  now: number,
  version: number | null = null,
  prior?: QueueStats
) => {
  // extension: estimates, cached per runtime version and the writes the runner has not stepped yet, which they
  // reflect; an entry the estimate does not know is estimated behind the placed ones, in its order among those
  const pending = pendingState(queue, state, rows, now)
  const estimate = estimateOf(queue.id, estimateKey(version, pending.key), pending.state, now, prior)
  let fresh = 0
  const enqueued = orderedEntries(state, rows).map(({ row }, i) => ({
    ...entryRecord(queue, row, i + 1),
    ...(estimate.byEntry.has(row.id)
      ? estimateFields(estimate, row.id)
      : estimateFields(estimate, row.id, { place: ++fresh, depth: pending.state.config.concurrency, now }))
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
