import { Cause, Clock, Duration, Effect, Exit, Random } from "effect"

/**
 * Restarts a queue's runner that failed (an error or a defect), after an exponential backoff with jitter, until it
 * is interrupted: by its own lost lease, or by the instance stopping (the backoff's sleep is interruptible, so a
 * crash-looping runner never holds up a shutdown).
 */

export interface Backoff {
  /** the delay before the first restart */
  readonly baseMs: number
  /** the longest delay */
  readonly maxMs: number
  /** the part of each delay drawn at random (0..1): a delay d waits between d × (1 - jitter) and d */
  readonly jitter: number
}

export const RUNNER_BACKOFF: Backoff = { baseMs: 200, maxMs: 60_000, jitter: 0.5 }

/** The delay before restart number `attempt` (0-based), for a uniform draw `random` in [0, 1). */
export const backoffDelay = (backoff: Backoff, attempt: number, random: number): number => {
  const full = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(attempt, 40))
  return Math.round(full * (1 - backoff.jitter * random))
}

export interface SuperviseHooks {
  /** the runner failed with `cause`; it restarts in `delayMs` (restart number `attempt`, from 0) */
  readonly failed: (cause: Cause.Cause<unknown>, attempt: number, delayMs: number) => Effect.Effect<void>
}

export const supervise = <R>(
  runner: Effect.Effect<void, unknown, R>,
  hooks: SuperviseHooks,
  backoff: Backoff = RUNNER_BACKOFF
): Effect.Effect<void, never, R> =>
  Effect.gen(function* () {
    let attempt = 0
    for (;;) {
      const started = yield* Clock.currentTimeMillis
      const exit = yield* Effect.exit(runner)
      if (Exit.isSuccess(exit) || Cause.isInterruptedOnly(exit.cause)) return
      // a runner that ran longer than the longest delay before it failed starts the backoff again
      if ((yield* Clock.currentTimeMillis) - started > backoff.maxMs) attempt = 0
      const delayMs = backoffDelay(backoff, attempt, yield* Random.next)
      yield* hooks.failed(exit.cause, attempt, delayMs)
      attempt++
      yield* Effect.sleep(Duration.millis(delayMs))
    }
  })
