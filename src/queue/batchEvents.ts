import type { PrAction } from "../kernel/EventLog.ts"
import type { EntryState, RunRecord, Transition } from "./planner/index.ts"

/**
 * The batch events `pull_request_batch.*` (contract.md §8) of one runner round. A batch is the set of pull requests
 * one run tests together (more than one). Greenline forms batches when it starts testing them, so `submitted`,
 * `queued` and `testing` are told together when the run starts; `pending_failure`, `failed`, `canceled` and
 * `merged` when the last pull request of the batch reaches that state (a pull request that already failed has gone
 * through `pending_failure`). A pull request's batch is the latest run that tested it with others, so a batch
 * bisected into single runs still reaches its end.
 */

export interface BatchEvent {
  readonly type: `pull_request_batch.${PrAction}`
  readonly action: PrAction
  readonly at: number
  readonly run: RunRecord
  /** the reason field of the action (`submitted_reason`, `failure_reason`, ...) as the pull request events name it */
  readonly reason: string
}

export const isBatch = (run: RunRecord): boolean => run.testedEntryIds.length > 1

/** The entry states in which each action counts as reached by a pull request of the batch. */
const REACHED: Partial<Record<PrAction, ReadonlySet<EntryState>>> = {
  pending_failure: new Set<EntryState>(["pending_failure", "failed"]),
  failed: new Set<EntryState>(["failed"]),
  canceled: new Set<EntryState>(["cancelled"]),
  merged: new Set<EntryState>(["merged"])
}

/** Whether a transition's action is one a batch reaches when its last pull request does. */
export const endsBatch = (action: PrAction): boolean => REACHED[action] !== undefined

const isEnded = (run: RunRecord) => run.status === "succeeded" || run.status === "failed" || run.status === "cancelled"

/** The latest batch run of each entry among `runs` (runs that tested it with others). */
export const latestBatches = (runs: Iterable<RunRecord>): Map<string, RunRecord> => {
  const out = new Map<string, RunRecord>()
  for (const run of runs) {
    if (!isBatch(run)) continue
    for (const id of run.testedEntryIds) {
      const known = out.get(id)
      if (known === undefined || known.createdAt < run.createdAt) out.set(id, run)
    }
  }
  return out
}

export interface BatchRound {
  readonly transitions: ReadonlyArray<Transition>
  readonly runChanges: ReadonlyArray<RunRecord>
  /** entry id → the action(s) its transitions of the round are told as */
  readonly actionsOf: (t: Transition) => ReadonlyArray<PrAction>
  /** entry id → its latest batch run */
  readonly batchOf: ReadonlyMap<string, RunRecord>
  /** entry id → its state after the round (for every entry of the batches the round touched) */
  readonly stateOf: ReadonlyMap<string, EntryState>
}

/** The batch events of a round, in order: batches that started, then batches whose last pull request moved. */
export const batchEventsOf = (round: BatchRound): ReadonlyArray<BatchEvent> => {
  const events: Array<BatchEvent> = []
  for (const run of round.runChanges) {
    if (!isBatch(run) || isEnded(run)) continue
    const at = run.startedAt ?? run.createdAt
    const queued = run.queueType === "bisection" ? "BISECTION_REQUIRED" : "MERGE_ITEM_NOW_READY"
    events.push({ type: "pull_request_batch.submitted", action: "submitted", at, run, reason: "API_REQUESTED" })
    events.push({ type: "pull_request_batch.queued", action: "queued", at, run, reason: queued })
    events.push({ type: "pull_request_batch.testing", action: "testing", at, run, reason: "" })
  }
  const seen = new Set<string>()
  for (const t of round.transitions) {
    const run = round.batchOf.get(t.entryId)
    if (run === undefined) continue
    for (const action of round.actionsOf(t)) {
      const reached = REACHED[action]
      const key = `${run.id}:${action}`
      if (reached === undefined || seen.has(key)) continue
      if (!run.testedEntryIds.every((id) => reached.has(round.stateOf.get(id) ?? "pending"))) continue
      seen.add(key)
      events.push({ type: `pull_request_batch.${action}`, action, at: t.at, run, reason: t.reason })
    }
  }
  return events
}
