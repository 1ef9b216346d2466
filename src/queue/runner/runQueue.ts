import { Clock, Duration, Effect, Option, Queue } from "effect"
import { rebuildMissingBranches } from "./build.ts"
import { restartCiJobs } from "./ci.ts"
import { makeRunnerCtx } from "./context.ts"
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
 * The runner of one queue while this instance holds its lease (design: docs/architecture.md). It takes the queue
 * over (stored verdicts, missing test branches, built-in CI jobs), then runs rounds (round.ts) when woken by
 * `signal`, by a scheduled wake-up, or by the Git poll interval.
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
      // a test's tick: a round asked for now (RunnerProbe.roundNow), raced with each of the runner's waits
      const roundNow = Option.flatMapNullable(ctx.probe, (probe) => probe.roundNow)
      const wait = (waiting: Effect.Effect<void>, spacing: boolean) =>
        Option.match(roundNow, {
          onNone: () => Effect.as(waiting, false),
          onSome: (now) => Effect.raceFirst(Effect.as(waiting, false), Effect.as(now(queueId, spacing), true))
        })
      for (;;) {
        const started = performance.now()
        const again = yield* round(ctx, lease, hooks)
        // a round costs about the queue's length (its state is written whole): under a stream of events the next
        // one waits twice as long as this one took, so that more events share it and the runner keeps up
        const took = performance.now() - started
        if (again) continue
        const now = yield* Clock.currentTimeMillis
        const waitMs = Math.max(0, Math.min(ctx.nextWake, now + ctx.config.gitPollMs) - now)
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
