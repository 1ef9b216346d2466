import { Clock, Duration, Effect, Option, Queue, Random } from "effect"
import { rebuildMissingBranches } from "./build.ts"
import { restartCiJobs } from "./ci.ts"
import { makeRunnerCtx, type RunnerCtx } from "./context.ts"
import { type RunnerHooks, round } from "./round.ts"
import { reevaluate } from "./verdict.ts"

/**
 * Rounds shorter than MIN_SPACED_ROUND_MS are not spaced out; a longer one delays the next by ROUND_SPACING times
 * its own length, up to the maximum (the runner then spends at most a third of its time in rounds).
 */
const MIN_SPACED_ROUND_MS = 20
const ROUND_SPACING = 2
const MAX_ROUND_SPACING_MS = 250

/**
 * An idle queue (below) runs no rounds (#37): it waits for a wake-up (a submission, a status, a webhook, a command),
 * for a push its Git provider noticed (`watchRefs`), or for its own timers; and, as a reconciliation for what a
 * missed webhook did not tell, looks at the Git host after IDLE_RECONCILE_MS, drawn between half and one and a half
 * times it so that a thousand idle queues do not look at once.
 */
export const IDLE_RECONCILE_MS = 5 * 60_000

/** A queue with nothing to do: no entries, no runs, no merge or switch in flight, no command left to run. */
export const isIdle = (ctx: RunnerCtx): boolean =>
  ctx.state.entries.length === 0 &&
  ctx.state.runs.length === 0 &&
  (ctx.state.merging ?? null) === null &&
  (ctx.state.switching ?? null) === null &&
  ctx.pendingCommands.length === 0 &&
  ctx.memEvents.length === 0

/** The refs a queue's Git poll reads: its target branch and its entries' pull request heads. */
const watchedRefs = (ctx: RunnerCtx): ReadonlyArray<string> => [
  `refs/heads/${ctx.queue.branch}`,
  ...ctx.state.entries.map((e) => `refs/pull/${e.prNumber}/head`)
]

/**
 * The runner of one queue while this instance holds its lease (design: docs/architecture.md). It takes the queue
 * over (stored verdicts, missing test branches, built-in CI jobs), then runs rounds (round.ts) when woken by
 * `signal`, by a scheduled wake-up, by a push its provider noticed, or (a queue with work) by the Git poll interval.
 */
export const runQueue = (
  queueId: string,
  owner: string,
  fencing: number,
  signal: Queue.Queue<void>,
  hooks: RunnerHooks
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const loaded = yield* makeRunnerCtx(queueId)
      if (Option.isNone(loaded)) return
      const ctx = loaded.value
      const lease = { owner, fencing }
      // statuses of runs in progress may have come while no runner listened, and a test branch may be missing
      yield* rebuildMissingBranches(ctx)
      ctx.memEvents.push(...(yield* reevaluate(ctx)))
      yield* restartCiJobs(ctx)
      // a push the provider notices wakes the runner, whose next round looks at the Git host
      yield* ctx.git.watchRefs?.(
        ctx.repo,
        () => watchedRefs(ctx),
        () => {
          ctx.lastPoll = 0
          Queue.unsafeOffer(signal, undefined)
        }
      ) ?? Effect.void
      // a test's tick: a round asked for now (RunnerProbe.roundNow), raced with each of the runner's waits
      const roundNow = Option.flatMapNullable(ctx.probe, (probe) => probe.roundNow)
      const wait = (waiting: Effect.Effect<void>, spacing: boolean) =>
        Option.match(roundNow, {
          onNone: () => Effect.as(waiting, false),
          onSome: (now) => Effect.raceFirst(Effect.as(waiting, false), Effect.as(now(queueId, spacing), true))
        })
      for (;;) {
        const started = performance.now()
        hooks.inRound?.(queueId, true)
        const again = yield* round(ctx, lease, hooks).pipe(
          Effect.ensuring(Effect.sync(() => hooks.inRound?.(queueId, false)))
        )
        // a round costs about the queue's length (its state is written whole): under a stream of events the next
        // one waits twice as long as this one took, so that more events share it and the runner keeps up
        const took = performance.now() - started
        if (again) continue
        const now = yield* Clock.currentTimeMillis
        const pollMs = isIdle(ctx)
          ? Math.max(ctx.config.gitPollMs, IDLE_RECONCILE_MS * (yield* Random.nextRange(0.5, 1.5)))
          : ctx.config.gitPollMs
        const waitMs = Math.max(0, Math.min(ctx.nextWake, now + pollMs) - now)
        let ticked = yield* wait(Effect.raceFirst(Queue.take(signal), Effect.sleep(Duration.millis(waitMs))), false)
        if (!ticked && took >= MIN_SPACED_ROUND_MS) {
          ticked = yield* wait(
            Effect.sleep(Duration.millis(Math.min(took * ROUND_SPACING, MAX_ROUND_SPACING_MS))),
            true
          )
        }
        // a tick's round looks at the Git host now
        if (ticked) ctx.lastPoll = 0
        yield* Queue.takeAll(signal)
      }
    })
  ).pipe(Effect.onInterrupt(() => Effect.void))
