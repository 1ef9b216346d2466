/**
 * `step`: apply one event to the queue state, then reconcile (resolve pending failures, drop runs whose content
 * is no longer right, start runs, merge), returning the new state and the commands for the shell.
 */
import { applyChoice, backlogOf, choose, emptyStats, record, restoreBounds, statsOf } from "./adaptive.ts"
import { type Ctx, isTerminal, makeCtx } from "./context.ts"
import { handle } from "./handle.ts"
import { finish, reconcile } from "./reconcile.ts"
import type { Entry, NewId, PlannerConfig, PlannerEvent, PlannerMemo, QueueState, StepResult } from "./types.ts"
import { Reasons } from "./types.ts"

export const initialState = (config: PlannerConfig, targetSha: string | null): QueueState => ({
  config,
  targetSha,
  entries: [],
  runs: [],
  nextSeq: 1,
  merging: null,
  switching: null,
  bisectionCounters: {}
})

/** A memo for a caller that steps one queue again and again (types.ts, `PlannerMemo`). */
export const makePlannerMemo = (): PlannerMemo => ({ index: new WeakMap(), observed: new WeakMap() })

/**
 * Apply one event at time `now` (epoch ms); the ids of the runs it creates come from `newId`. Pure given a
 * deterministic `newId`: the input state is not modified, and `memo` (the caller's) changes no result.
 */
export const step = (
  state: QueueState,
  event: PlannerEvent,
  now: number,
  newId: NewId,
  memo?: PlannerMemo
): StepResult => {
  const ctx = makeCtx(state, newId, now, Reasons.prerequisiteFailed, memo)
  handle(ctx, event)
  return plan(ctx, state)
}

/** Reconcile with adaptive mode's choice (adaptive.ts) when it is on, and add the step to the observations. */
const plan = (ctx: Ctx, state: QueueState): StepResult => {
  const bounds = ctx.config
  const stats = statsOf(state)
  const choice = bounds.adaptive === true ? choose(bounds, stats, backlogOf(ctx.entries), ctx.memo) : null
  if (choice !== null) ctx.config = applyChoice(bounds, choice)
  reconcile(ctx)
  if (choice !== null) ctx.config = restoreBounds(ctx.config, bounds)
  const result = finish(ctx)
  const next = record(stats, result.runChanges, result.transitions, choice)
  if (next === emptyStats && state.stats === undefined) return result
  return { ...result, state: { ...result.state, stats: next } }
}

/**
 * Apply events that arrived together at time `now`: each is handled in turn, then the queue is reconciled once, as
 * after one event. Only for events that give reconciliation no reason of their own — submissions of PRs not in the
 * queue, not urgent (`joinsSubmissions`) — where it equals the events arriving at the same instant: the runner folds
 * a flood of submissions this way instead of reconciling the whole queue after each. Pure, as `step`.
 */
export const stepMany = (
  state: QueueState,
  events: ReadonlyArray<PlannerEvent>,
  now: number,
  newId: NewId,
  memo?: PlannerMemo
): StepResult => {
  const ctx = makeCtx(state, newId, now, Reasons.prerequisiteFailed, memo)
  // a run of submissions only: each new entry of the same priority goes behind the one before (order.ts)
  if (events.every((e) => e._tag === "Submitted")) ctx.burst = { lastPos: -1, lastPriority: 0 }
  for (const event of events) handle(ctx, event)
  ctx.burst = null
  return plan(ctx, state)
}

/**
 * Whether `event` may join `group` (events for `stepMany`): a submission, not urgent, of a PR neither active
 * (`activePrs`, of the state the group applies to) nor submitted earlier in the group.
 */
export const joinsSubmissions = (
  activePrs: ReadonlySet<number>,
  group: ReadonlyArray<PlannerEvent>,
  event: PlannerEvent
): boolean =>
  event._tag === "Submitted" &&
  event.priority !== 0 &&
  !activePrs.has(event.prNumber) &&
  !group.some((g) => g._tag === "Submitted" && g.prNumber === event.prNumber)

/** PR numbers of the entries of `state` that are not terminal. */
export const activePrNumbers = (state: QueueState): Set<number> => {
  const out = new Set<number>()
  for (const e of state.entries) if (!isTerminal(e)) out.add(e.prNumber)
  return out
}

/** Entries of a state in testing order, with their 1-based position among enqueued ones (for getQueue). */
export const enqueued = (state: QueueState): Entry[] =>
  state.entries.filter((e) => e.state !== "not_ready" && !isTerminal(e))
