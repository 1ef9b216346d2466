import { Clock, Effect, Option } from "effect"
import { type FreezeChange, freezeAt, sameFreeze } from "../freezes.ts"
import {
  activePrNumbers,
  type Command,
  joinsSubmissions,
  type NewId,
  type PlannerEvent,
  type RunRecord,
  type StepResult,
  step,
  stepMany,
  type Transition
} from "../planner/index.ts"
import { plannerConfig } from "../plannerConfig.ts"
import { type InboxEvent, stateJson } from "../store.ts"
import { executeAll, RETRY_MS } from "./commands.ts"
import { type RunnerCtx, reloadQueue } from "./context.ts"
import { laneEvent } from "./lanes.ts"
import { headsMoved, mergedHeads } from "./merge.ts"
import { evaluate, reevaluate } from "./verdict.ts"

/** Events read from the inbox per round at most. */
export const INBOX_BATCH = 1000

/** The ids of the runs the planner creates: a random UUID each (the planner takes them from its input). */
const newRunId: NewId = () => crypto.randomUUID()

export interface RunnerHooks {
  readonly observeLag: (seconds: number) => void
  /** Wall time of one planner step (a measurement of the shell, not an input of the planner). */
  readonly observeStep: (seconds: number) => void
  /** The round could not be saved: the queue is under another token (`fencing` is this runner's); it stops. */
  readonly lostLease: (queueId: string, fencing: number) => Effect.Effect<void>
  /** A round was saved and its commands ran (the runner is healthy). */
  readonly roundDone: (queueId: string) => void
  /** The runner is in a round (true) or waits between rounds (false): a queue moves between rounds only (#37). */
  readonly inRound?: (queueId: string, running: boolean) => void
}

/** This runner's hold on its queue: a round is saved only under this owner and fencing token. */
export interface Lease {
  readonly owner: string
  readonly fencing: number
}

/** An inbox event as planner events, read against the state it arrives in. */
const translate = (ctx: RunnerCtx, event: InboxEvent): Effect.Effect<ReadonlyArray<PlannerEvent>, unknown> => {
  switch (event._tag) {
    case "Planner":
      // an event stored before lanes carried the target list itself: reduce it as a TargetsSet
      if (event.event._tag === "ImpactedTargetsSet" && event.event.lane === undefined) {
        return laneEvent(ctx, event.event.prNumber, event.event.sha)
      }
      return Effect.succeed([event.event])
    case "ConfigChanged":
      return Effect.map(reloadQueue(ctx), (queue) => [{ _tag: "ConfigChanged", config: plannerConfig(queue.config) }])
    case "GitChanged":
      // the Git host said a branch or pull request moved (a webhook): look in this round
      ctx.lastPoll = 0
      return Effect.succeed([])
    case "TargetsSet":
      return laneEvent(ctx, event.prNumber, event.sha)
    case "StatusReported":
      return Effect.gen(function* () {
        const out: Array<PlannerEvent> = []
        for (const run of ctx.state.runs) {
          if (run.testBranchSha !== event.sha) continue
          out.push(...Option.toArray(yield* evaluate(ctx, run)))
        }
        return out
      })
  }
}

/** What moved on the Git host, and the verdicts of runs in progress from their stored statuses. */
const poll = (ctx: RunnerCtx) =>
  Effect.gen(function* () {
    const { state } = ctx
    const out: Array<PlannerEvent> = [...(yield* reevaluate(ctx))]
    const tip = yield* ctx.git.getBranchSha(ctx.repo, ctx.queue.branch).pipe(Effect.orElseSucceed(() => null))
    if (tip !== null && tip !== state.targetSha && state.merging === null) out.push({ _tag: "TargetMoved", sha: tip })
    // the target moved not by the queue's own merge: PRs whose heads it now contains were merged outside the queue
    if (tip !== null && tip !== ctx.scannedTip && state.merging === null) {
      out.push(...(yield* mergedHeads(ctx, tip)))
      ctx.scannedTip = tip
    }
    if (state.entries.length > 0) {
      const prs = state.entries.map((e) => e.prNumber)
      out.push(...(yield* headsMoved(ctx, prs).pipe(Effect.orElseSucceed(() => []))))
    }
    return out
  })

/**
 * Steps the planner through events at `now`, collecting what the round saves. A run of new submissions is stepped
 * together (stepMany): one reconciliation of the queue, not one each.
 */
const makeStepper = (ctx: RunnerCtx, now: number, hooks: RunnerHooks) => {
  const transitions: Array<Transition> = []
  const runChanges = new Map<string, RunRecord>()
  const commands: Array<Command> = [...ctx.pendingCommands]
  let group: Array<PlannerEvent> = []
  let groupActive: Set<number> | null = null
  const record = (run: () => StepResult) => {
    const started = performance.now()
    const result = run()
    hooks.observeStep((performance.now() - started) / 1000)
    ctx.state = result.state
    transitions.push(...result.transitions)
    for (const r of result.runChanges) runChanges.set(r.id, r)
    commands.push(...result.commands)
  }
  const flush = () => {
    if (group.length === 0) return
    const events = group
    record(() =>
      events.length === 1
        ? step(ctx.state, events[0]!, now, newRunId, ctx.plannerMemo)
        : stepMany(ctx.state, events, now, newRunId, ctx.plannerMemo)
    )
    group = []
    groupActive = null
  }
  const apply = (event: PlannerEvent) => {
    if (event._tag === "Submitted") {
      groupActive ??= activePrNumbers(ctx.state)
      if (joinsSubmissions(groupActive, group, event)) {
        group.push(event)
        return
      }
    }
    flush()
    record(() => step(ctx.state, event, now, newRunId, ctx.plannerMemo))
  }
  return { apply, flush, transitions, runChanges, commands }
}

/**
 * Extension (#31): applies the freeze in force at `now` when it is not the state's (`FreezeChanged`), and asks for a
 * wake-up when it may change next; `change` is the round's change from its first freeze to its last, if any.
 */
const freezeCheck = (ctx: RunnerCtx, now: number, apply: (event: PlannerEvent) => void) => {
  const first = ctx.state.freeze ?? null
  return {
    check: () => {
      const frozen = freezeAt(ctx.freezeRules, now, ctx.mergeSchedule)
      if (!sameFreeze(frozen.inForce, ctx.state.freeze)) apply({ _tag: "FreezeChanged", freeze: frozen.inForce })
      if (frozen.nextChange !== null) ctx.nextWake = Math.min(ctx.nextWake, frozen.nextChange)
    },
    change: (): FreezeChange | undefined =>
      sameFreeze(first, ctx.state.freeze) ? undefined : { previous: first, next: ctx.state.freeze ?? null, at: now }
  }
}

/**
 * One round: the results of the last commands, then the inbox (translated against the state they arrive in), then
 * what moved on the Git host, then a Tick; the state, outbox and projections saved in one transaction; then the
 * commands run. True when another round should follow at once.
 */
export const round = (ctx: RunnerCtx, lease: Lease, hooks: RunnerHooks) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const inbox = yield* ctx.store.readInbox(ctx.queueId, INBOX_BATCH)
    const stepper = makeStepper(ctx, now, hooks)
    const freezes = freezeCheck(ctx, now, stepper.apply)
    // extension (#31): the freeze in force applies before anything of the round starts or merges
    freezes.check()
    const results = ctx.memEvents
    ctx.memEvents = []
    for (const event of results) stepper.apply(event)
    for (const item of inbox) {
      hooks.observeLag(Math.max(0, (now - item.createdAt) / 1000))
      const event = item.event
      if (event._tag === "Planner" && event.event._tag === "Submitted") {
        stepper.apply(event.event)
        continue
      }
      // what translation reads (the entries, for lanes) includes the submissions before it
      stepper.flush()
      for (const translated of yield* translate(ctx, event)) stepper.apply(translated)
      // the freezes are read again at a configuration change
      if (event._tag === "ConfigChanged") freezes.check()
    }
    stepper.flush()
    if (now - ctx.lastPoll >= ctx.config.gitPollMs) {
      ctx.lastPoll = now
      for (const event of yield* poll(ctx)) stepper.apply(event)
    }
    if (now >= ctx.nextWake) ctx.nextWake = Number.POSITIVE_INFINITY
    freezes.check()
    stepper.apply({ _tag: "Tick" })
    const freezeChange = freezes.change()
    const { commands } = stepper
    // an idle queue still has a round every GIT_POLL_MS: one that read nothing, changed nothing and has nothing to
    // do saves nothing either (the state is compared as it is stored)
    const idle =
      inbox.length === 0 &&
      results.length === 0 &&
      commands.length === 0 &&
      stepper.transitions.length === 0 &&
      stepper.runChanges.size === 0 &&
      freezeChange === undefined
    const json = idle ? stateJson(ctx.state) : undefined
    if (json !== undefined && json === ctx.savedStateJson) return yield* settled(ctx, hooks, false)
    ctx.savedStateJson = json
    const saved = yield* ctx.store.persistStep(ctx.queueId, lease.owner, lease.fencing, {
      state: ctx.state,
      outbox: commands,
      transitions: stepper.transitions,
      runChanges: [...stepper.runChanges.values()],
      processed: inbox.map((item) => item.seq),
      ...(freezeChange !== undefined ? { freezeChange } : {})
    })
    if (!saved) return yield* hooks.lostLease(ctx.queueId, lease.fencing).pipe(Effect.zipRight(Effect.interrupt))
    yield* runCommands(ctx, lease, commands, now)
    return yield* settled(ctx, hooks, inbox.length === INBOX_BATCH || ctx.memEvents.length > 0)
  })

/** The end of a round: it tells the hooks and the probe; `again` when another round should follow at once. */
const settled = (ctx: RunnerCtx, hooks: RunnerHooks, again: boolean) =>
  Effect.gen(function* () {
    hooks.roundDone(ctx.queueId)
    if (Option.isSome(ctx.probe)) yield* ctx.probe.value.roundDone(ctx.queueId)
    return again
  })

/** Runs the commands of a saved round; failed ones stay in the outbox and run again after RETRY_MS. */
const runCommands = (ctx: RunnerCtx, lease: Lease, commands: ReadonlyArray<Command>, now: number) =>
  Effect.gen(function* () {
    ctx.pendingCommands = []
    ctx.failed = []
    ctx.memEvents = [...(yield* executeAll(ctx, commands))]
    // the queue's own merges move the target: nothing merged outside to look for there
    for (const event of ctx.memEvents) {
      if (event._tag === "MergeSucceeded") ctx.scannedTip = event.newSha
      else if (event._tag === "DirectMergeResult" && event.merged && event.newSha !== null)
        ctx.scannedTip = event.newSha
    }
    if (ctx.failed.length > 0) {
      ctx.pendingCommands = ctx.failed
      ctx.nextWake = Math.min(ctx.nextWake, now + RETRY_MS)
    }
    if (ctx.memEvents.length === 0 && commands.length > 0) {
      // clear the outbox once every command ran (but the failed ones), so a restart does not repeat them (the
      // state is the one just saved: only the outbox is written)
      yield* ctx.store.saveOutbox(ctx.queueId, lease.owner, lease.fencing, ctx.pendingCommands)
    }
  })
