import type { PrAction } from "../kernel/EventLog.ts"
import type { EntryState, RunRecord, Transition } from "./planner/index.ts"

/**
 * The batch events `pull_request_batch.*` (contract.md §8) of one runner round. A batch is the set of pull requests
 * one run tests together (more than one). Greenline forms batches when it starts testing them, so `submitted`,
 * `queued` and `testing` are told together when the run starts (its test branch is pushed: `test_branch_sha` is
 * known); `pending_failure` when every pull request of the batch is pending failure or failed; and the batch ends
 * once when every one of its pull requests has ended:
 * - `merged` when at least one merged: `pr_numbers` the ones that merged, `pr_numbers_in_batch` all of them (Trunk:
 *   "may be a superset of pr_numbers if some PRs in the batch failed to merge");
 * - else `failed` when at least one failed (`pr_numbers` the failed ones);
 * - else `canceled`.
 * A pull request belongs to every batch that tested it: a batch bisected into smaller runs still ends, when the last
 * of its pull requests ends, whichever run tested that one last.
 */

export interface BatchEvent {
  readonly type: `pull_request_batch.${PrAction}`
  readonly action: PrAction
  readonly at: number
  readonly run: RunRecord
  /** the reason field of the action (`submitted_reason`, `failure_reason`, ...) as the pull request events name it */
  readonly reason: string
  /** the batch's pull requests the event is about (`pr_numbers`): all of them, or those that merged (failed) */
  readonly entryIds: ReadonlyArray<string>
}

export const isBatch = (run: RunRecord): boolean => run.testedEntryIds.length > 1

/** The entry states in which each action counts as reached by a pull request of the batch. */
const REACHED: Partial<Record<PrAction, ReadonlySet<EntryState>>> = {
  pending_failure: new Set<EntryState>(["pending_failure", "failed"]),
  failed: new Set<EntryState>(["failed"]),
  canceled: new Set<EntryState>(["cancelled"]),
  merged: new Set<EntryState>(["merged"])
}

const ENDED = new Set<EntryState>(["merged", "failed", "cancelled"])

/** Whether a transition's action is one a batch may reach or end with when its last pull request does. */
export const endsBatch = (action: PrAction): boolean => REACHED[action] !== undefined

/** The batch events of a run that started: `submitted`, `queued` and `testing`, at its start. */
export const batchStartEvents = (run: RunRecord): ReadonlyArray<BatchEvent> => {
  if (!isBatch(run) || run.startedAt === null) return []
  const at = run.startedAt
  const queued = run.queueType === "bisection" ? "BISECTION_REQUIRED" : "MERGE_ITEM_NOW_READY"
  const entryIds = run.testedEntryIds
  return [
    { type: "pull_request_batch.submitted", action: "submitted", at, run, reason: "API_REQUESTED", entryIds },
    { type: "pull_request_batch.queued", action: "queued", at, run, reason: queued, entryIds },
    { type: "pull_request_batch.testing", action: "testing", at, run, reason: "", entryIds }
  ]
}

/** The batch runs among `runs`, by each entry they tested. */
export const batchesByEntry = (runs: Iterable<RunRecord>): Map<string, Array<RunRecord>> => {
  const out = new Map<string, Array<RunRecord>>()
  const seen = new Set<string>()
  for (const run of runs) {
    if (!isBatch(run) || seen.has(run.id)) continue
    seen.add(run.id)
    for (const id of run.testedEntryIds) {
      const list = out.get(id) ?? []
      list.push(run)
      out.set(id, list)
    }
  }
  return out
}

export interface BatchRound {
  readonly transitions: ReadonlyArray<Transition>
  /** the action(s) a transition is told as */
  readonly actionsOf: (t: Transition) => ReadonlyArray<PrAction>
  /** entry id → every batch run that tested it */
  readonly batchesOf: ReadonlyMap<string, ReadonlyArray<RunRecord>>
  /** entry id → its state after the round (for every entry of the batches the round touched) */
  readonly stateOf: ReadonlyMap<string, EntryState>
}

/** Default reasons of a batch's end when no transition of the round tells the action (its last PR ended otherwise). */
const END_REASON: Partial<Record<PrAction, string>> = {
  merged: "MERGE_GRAPH_MERGE",
  failed: "TEST_RUN_REQUIRED_STATUS_FAILED",
  canceled: "USER_REQUESTED"
}

/** The batch events of a round's transitions, in order: a batch's `pending_failure`, and its end. */
export const batchEventsOf = (round: BatchRound): ReadonlyArray<BatchEvent> => {
  const events: Array<BatchEvent> = []
  const seen = new Set<string>()
  const stateOf = (id: string) => round.stateOf.get(id) ?? "pending"
  for (const t of round.transitions) {
    const actions = round.actionsOf(t).filter(endsBatch)
    if (actions.length === 0) continue
    for (const run of round.batchesOf.get(t.entryId) ?? []) {
      const tested = run.testedEntryIds
      if (actions.includes("pending_failure") || actions.includes("failed")) {
        const key = `${run.id}:pending_failure`
        const reached = REACHED.pending_failure as ReadonlySet<EntryState>
        if (!seen.has(key) && tested.every((id) => reached.has(stateOf(id)))) {
          seen.add(key)
          events.push({
            type: "pull_request_batch.pending_failure",
            action: "pending_failure",
            at: t.at,
            run,
            reason: t.reason,
            entryIds: tested
          })
        }
      }
      const endKey = `${run.id}:end`
      if (seen.has(endKey) || !tested.every((id) => ENDED.has(stateOf(id)))) continue
      seen.add(endKey)
      const merged = tested.filter((id) => stateOf(id) === "merged")
      const failed = tested.filter((id) => stateOf(id) === "failed")
      const [action, entryIds]: [PrAction, ReadonlyArray<string>] =
        merged.length > 0 ? ["merged", merged] : failed.length > 0 ? ["failed", failed] : ["canceled", tested]
      // the reason of the round's last transition told as that action, of one of the batch's pull requests
      const told = round.transitions.filter((x) => tested.includes(x.entryId) && round.actionsOf(x).includes(action))
      const reason = told[told.length - 1]?.reason ?? END_REASON[action] ?? ""
      events.push({ type: `pull_request_batch.${action}`, action, at: t.at, run, reason, entryIds })
    }
  }
  return events
}
