/**
 * The mutable working copy used inside one `step`. The input state is never mutated: arrays are copied once
 * per step and entries/runs are replaced (not modified) when they change.
 */
import type {
  Command,
  Entry,
  EntryState,
  FreezeInForce,
  MergeInFlight,
  ModeSwitch,
  NewId,
  PlannerConfig,
  PlannerMemo,
  PrStatusState,
  QueueState,
  Run,
  RunItem,
  RunStatus,
  Transition
} from "./types.ts"

export interface Ctx {
  readonly now: number
  /** the caller's memo (types.ts): the index of the entries arrays, keyed by the (immutable) array object */
  readonly memo: PlannerMemo | undefined
  /** the index belongs to the memo's entry of the input state; it must be taken over before it is changed */
  indexShared: boolean
  readonly sourceEntries: readonly Entry[]
  /** an entry reached a terminal state in this step */
  ended: boolean
  config: PlannerConfig
  targetSha: string | null
  entries: Entry[]
  index: Map<string, number> | null
  runs: Run[]
  nextSeq: number
  merging: MergeInFlight | null
  switching: ModeSwitch | null
  bisectionCounters: Record<string, number>
  /** extension (#31): the freeze in force */
  freeze: FreezeInForce | null
  readonly commands: Command[]
  readonly transitions: Transition[]
  readonly changedRuns: Map<string, Run>
  readonly newId: NewId
  /** reason given to entries whose runs are invalidated in this step */
  reason: string
  wakeAt: number | null
  /**
   * Set by stepMany for a run of new submissions: where the last one went, so that the next one of the same
   * priority goes right behind it without scanning the queue (nothing locks or moves in between). A position of -1:
   * unknown (any other change of the entries' order resets it).
   */
  burst: { lastPos: number; lastPriority: number } | null
}

export const makeCtx = (
  state: QueueState,
  newId: NewId,
  now: number,
  reason: string,
  memo: PlannerMemo | undefined
): Ctx => ({
  now,
  memo,
  config: state.config,
  targetSha: state.targetSha,
  entries: state.entries.slice(),
  index: memo?.index.get(state.entries) ?? null,
  indexShared: true,
  sourceEntries: state.entries,
  ended: false,
  runs: state.runs.slice(),
  nextSeq: state.nextSeq,
  merging: state.merging,
  switching: state.switching,
  bisectionCounters: state.bisectionCounters as Record<string, number>,
  freeze: state.freeze ?? null,
  commands: [],
  transitions: [],
  changedRuns: new Map(),
  newId,
  reason,
  wakeAt: null,
  burst: null
})

export const TERMINAL: ReadonlySet<EntryState> = new Set<EntryState>(["merged", "failed", "cancelled"])

export const isTerminal = (e: Entry): boolean => TERMINAL.has(e.state)

/** pending, testing or tests_passed: part of the chain */
export const isChainable = (e: Entry): boolean =>
  e.state === "pending" || e.state === "testing" || e.state === "tests_passed"

export const isRunActive = (r: Run): boolean => r.status === "building" || r.status === "in_progress"

export const entryIndex = (ctx: Ctx, id: string): number => {
  if (ctx.index === null) {
    const m = new Map<string, number>()
    for (let i = 0; i < ctx.entries.length; i++) m.set(ctx.entries[i]!.id, i)
    ctx.index = m
    ctx.indexShared = false
  }
  return ctx.index.get(id) ?? -1
}

/** Keep the index right after entries from position `from` on moved (insert/remove). */
export const reindexFrom = (ctx: Ctx, from: number, removedId: string | null): void => {
  if (ctx.index === null) return
  if (ctx.indexShared) {
    // take the memo's map over instead of copying it (a later step from the same old state rebuilds it)
    ctx.memo?.index.delete(ctx.sourceEntries)
    ctx.indexShared = false
  }
  const m = ctx.index
  if (removedId !== null) m.delete(removedId)
  for (let i = from; i < ctx.entries.length; i++) m.set(ctx.entries[i]!.id, i)
}

/** The entries array of the next state, with its index in the memo. */
export const finalEntries = (ctx: Ctx): Entry[] => {
  if (!ctx.ended) {
    const idx = ctx.index
    if (idx !== null) {
      // one owner at a time: the map moves to the new array
      if (ctx.indexShared) ctx.memo?.index.delete(ctx.sourceEntries)
      ctx.memo?.index.set(ctx.entries, idx)
    }
    return ctx.entries
  }
  const out: Entry[] = []
  let first = -1
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (TERMINAL.has(e.state)) {
      if (first < 0) first = i
      if (ctx.index !== null && !ctx.indexShared) ctx.index.delete(e.id)
    } else out.push(e)
  }
  if (ctx.index !== null && first >= 0) {
    if (ctx.indexShared) {
      ctx.memo?.index.delete(ctx.sourceEntries)
      ctx.indexShared = false
      for (const e of ctx.entries) if (TERMINAL.has(e.state)) ctx.index.delete(e.id)
    }
    const m = ctx.index
    for (let i = first; i < out.length; i++) m.set(out[i]!.id, i)
    ctx.memo?.index.set(out, m)
  }
  return out
}

export const findActiveByPr = (ctx: Ctx, prNumber: number): number => {
  for (let i = 0; i < ctx.entries.length; i++) {
    const e = ctx.entries[i]!
    if (e.prNumber === prNumber && !isTerminal(e)) return i
  }
  return -1
}

export const patchEntry = (ctx: Ctx, i: number, patch: Partial<Entry>): Entry => {
  const next = { ...ctx.entries[i]!, ...patch }
  ctx.entries[i] = next
  return next
}

const statusOf = (s: EntryState): PrStatusState => {
  switch (s) {
    case "not_ready":
    case "pending":
      return "queued"
    case "testing":
    case "tests_passed":
    case "pending_failure":
      return "testing"
    case "merged":
      return "merged"
    case "failed":
      return "failed"
    case "cancelled":
      return "cancelled"
  }
}

/** Change an entry's state, recording the transition and the notifications. */
export const setState = (
  ctx: Ctx,
  i: number,
  to: EntryState,
  reason: string,
  patch: Partial<Entry> = {},
  transitionRunId?: string | null
): Entry => {
  const prev = ctx.entries[i]!
  const next: Entry = { ...prev, ...patch, state: to, stateChangedAt: ctx.now }
  ctx.entries[i] = next
  if (prev.state === to) return next
  if (TERMINAL.has(to)) ctx.ended = true
  ctx.transitions.push({
    entryId: next.id,
    prNumber: next.prNumber,
    from: prev.state,
    to,
    reason,
    at: ctx.now,
    runId: transitionRunId !== undefined ? transitionRunId : (next.runId ?? prev.runId),
    verifiedByTestRun: next.verifiedByTestRun
  })
  notify(ctx, next, statusOf(prev.state), to, reason)
  return next
}

export const notify = (ctx: Ctx, e: Entry, prevStatus: PrStatusState | null, to: EntryState, reason: string): void => {
  const st = statusOf(to)
  if (st !== prevStatus) {
    ctx.commands.push({
      _tag: "SetStatus",
      prNumber: e.prNumber,
      headSha: e.headSha,
      state: st,
      to,
      reason
    })
  }
  if (to === "merged" || to === "failed" || to === "cancelled") {
    ctx.commands.push({ _tag: "Comment", prNumber: e.prNumber, entryId: e.id, to, reason })
  }
}

export const runIndex = (ctx: Ctx, id: string): number => {
  for (let i = 0; i < ctx.runs.length; i++) if (ctx.runs[i]!.id === id) return i
  return -1
}

export const getRun = (ctx: Ctx, id: string | null): Run | undefined => {
  if (id === null) return undefined
  const i = runIndex(ctx, id)
  return i < 0 ? undefined : ctx.runs[i]
}

export const patchRun = (ctx: Ctx, i: number, patch: Partial<Run>): Run => {
  const prev = ctx.runs[i]!
  const next = { ...prev, ...patch }
  ctx.runs[i] = next
  if (patch.status !== undefined && patch.status !== prev.status) ctx.changedRuns.set(next.id, next)
  else if (ctx.changedRuns.has(next.id)) ctx.changedRuns.set(next.id, next)
  return next
}

export const addRun = (ctx: Ctx, run: Run): void => {
  ctx.runs.push(run)
  ctx.changedRuns.set(run.id, run)
  ctx.commands.push({ _tag: "BuildRun", run, mergeMethod: ctx.config.mergeMethod })
}

/** Remove a run from the active set, optionally with a final status; deletes its branch. */
export const endRun = (ctx: Ctx, i: number, status: RunStatus | null, failureReason: string | null = null): Run => {
  let run = ctx.runs[i]!
  if (status !== null && status !== run.status) {
    run = { ...run, status, endedAt: ctx.now, failureReason: failureReason ?? run.failureReason }
    ctx.changedRuns.set(run.id, run)
  }
  ctx.runs.splice(i, 1)
  ctx.commands.push({ _tag: "DeleteBranch", runId: run.id, branch: run.branch })
  return run
}

export const takeId = (ctx: Ctx): string => ctx.newId()

export const wakeAt = (ctx: Ctx, at: number): void => {
  if (ctx.wakeAt === null || at < ctx.wakeAt) ctx.wakeAt = at
}

export const itemOf = (e: Entry): RunItem => ({ entryId: e.id, prNumber: e.prNumber, headSha: e.headSha })

export const unmergedItems = (r: Run): RunItem[] =>
  r.mergedEntryIds.length === 0 ? r.items.slice() : r.items.filter((it) => !r.mergedEntryIds.includes(it.entryId))

export const mergeAllowed = (ctx: Ctx): boolean => ctx.config.state !== "paused" && ctx.targetSha !== null

/** Extension (#31): whether entries may merge under the freeze in force (all of them ignore a `merge` freeze). */
export const freezeLets = (ctx: Ctx, entries: ReadonlyArray<Entry>): boolean =>
  ctx.freeze === null || (ctx.freeze.mode === "merge" && entries.every((e) => e.ignoreFreeze === true))

export const runsAllowed = (ctx: Ctx): boolean =>
  ctx.config.state === "running" && ctx.switching === null && ctx.targetSha !== null && ctx.freeze?.mode !== "all"

/** An entry may be tested: ready, and in parallel mode its lane known. */
export const eligible = (ctx: Ctx, e: Entry): boolean => e.ready && (ctx.config.mode !== "parallel" || e.lane !== null)

/** When a not_ready entry's wait runs out (states stored before the setting existed use its default, 24 h). */
export const notReadyDeadline = (ctx: Ctx, e: Entry): number =>
  e.stateChangedAt + (ctx.config.notReadyTimeoutHours ?? 24) * 3_600_000
