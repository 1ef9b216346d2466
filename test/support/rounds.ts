import { Effect } from "effect"
import type { RunnerProbeShape } from "../../src/queue/runner/probe.ts"

/**
 * The runners' signal for tests (a RunnerProbe), so that a test steps with the queue instead of sleeping in a loop:
 *
 * - `tick(queueId)` runs a round of the queue's runner now and resolves once a round that began after the call has
 *   settled (the runner waits again): everything written before the call (submissions, statuses, cancellations, a
 *   push the Git host shows) has been read and acted on, and the commands it gave ran. What is still on its way
 *   elsewhere (a built-in CI job, a webhook) is not waited for: `until` ticks again.
 * - `settled(queueId)` resolves when the runner next settles, whatever ran its round (a wake-up: a status, a webhook,
 *   a CI job's result; one of its timers; a tick), without asking for a round itself.
 * - `until(queueId, what, check)` steps the queue until `check` gives a value (not `undefined` nor `false`), and
 *   returns it: after the first check that fails it ticks
 *   (what the test wrote is read now), after the others it waits for the runner to settle again (what it waits for
 *   comes from elsewhere, and wakes the runner when it comes). At most `maxSteps` steps; `tick: false` never
 *   ticks (what the test is about is what wakes the runner).
 * - `nextRound(maxMs)` resolves when the next round of any queue settles (or after `maxMs`).
 * - `leasePass()` runs the lease loop's next pass now and resolves when it ended; `lostLease()` resolves when a runner
 *   next finds its lease gone.
 *
 * A tick's own limit (`TICK_LIMIT_MS`, wall time) is a guard against a runner that never settles, so that the test
 * fails with a message instead of at its own timeout; the waits themselves are counted in rounds, not in time.
 */
export const TICK_LIMIT_MS = 30_000

interface TickState {
  /** tests that asked for a round not begun yet */
  asked: Array<() => void>
  /** tests whose round runs */
  inRound: Array<() => void>
  /** tests waiting for the runner to settle (the round under way, if any) */
  idle: Array<() => void>
  /** the runner's wait, to end when a test asks */
  waiting: (() => void) | undefined
  /** the runner waits only to space its rounds out: it has news, and its next round is due */
  spacing: boolean
}

export interface UntilOptions {
  /** at most this many steps (default 200) */
  readonly maxSteps?: number
  /** false: never tick, only wait for the rounds something else runs (a test of what wakes the runner) */
  readonly tick?: boolean
}

export interface RunnerSignal {
  readonly probe: RunnerProbeShape
  readonly tick: (queueId: string) => Promise<void>
  readonly settled: (queueId: string) => Promise<void>
  readonly until: <A>(
    queueId: string,
    what: string,
    check: () => Promise<A | undefined | false>,
    options?: UntilOptions
  ) => Promise<A>
  readonly nextRound: (maxMs: number) => Promise<void>
  readonly leasePass: () => Promise<void>
  readonly lostLease: () => Promise<string>
}

export const makeRunnerSignal = (
  options: {
    /** a test's own probe, told first */
    readonly inner?: RunnerProbeShape | undefined
    /** false: the lease loop's timer is off, its passes run only at `leasePass` (or a wake-up); default true */
    readonly leaseTimer?: boolean
  } = {}
): RunnerSignal => {
  const { inner } = options
  let waiters: Array<() => void> = []
  let lost: Array<(queueId: string) => void> = []
  const ticks = new Map<string, TickState>()
  const tickState = (queueId: string) => {
    let t = ticks.get(queueId)
    if (t === undefined) {
      t = { asked: [], inRound: [], idle: [], waiting: undefined, spacing: false }
      ticks.set(queueId, t)
    }
    return t
  }
  // the lease loop: tests that asked for a pass not begun yet, tests whose pass runs, and the loop's wait to end
  let asked: Array<() => void> = []
  let inPass: Array<() => void> = []
  let loopWaiting: (() => void) | undefined
  const probe: RunnerProbeShape = {
    leaseTimerOff: options.leaseTimer === false,
    afterPush: (runId, sha) => inner?.afterPush(runId, sha) ?? Effect.void,
    roundDone: (queueId) =>
      Effect.zipRight(
        inner?.roundDone(queueId) ?? Effect.void,
        Effect.sync(() => {
          const woken = waiters
          waiters = []
          for (const wake of woken) wake()
        })
      ),
    roundNow: (queueId, spacing) =>
      Effect.async<void>((resume) => {
        const t = tickState(queueId)
        t.spacing = spacing
        // the runner waits: the round the waiting tests asked for has settled
        const settled = [...t.inRound, ...t.idle]
        t.inRound = []
        t.idle = []
        for (const resolve of settled) resolve()
        const begin = () => {
          t.waiting = undefined
          t.inRound = t.asked
          t.asked = []
          resume(Effect.void)
        }
        if (t.asked.length > 0) return begin()
        t.waiting = begin
        return Effect.sync(() => {
          if (t.waiting === begin) t.waiting = undefined
        })
      }),
    lostLease: (queueId) =>
      Effect.zipRight(
        inner?.lostLease?.(queueId) ?? Effect.void,
        Effect.sync(() => {
          const woken = lost
          lost = []
          for (const wake of woken) wake(queueId)
        })
      ),
    leasePassNow: Effect.async<void>((resume) => {
      const begin = () => {
        loopWaiting = undefined
        inPass = asked
        asked = []
        resume(Effect.void)
      }
      if (asked.length > 0) return begin()
      loopWaiting = begin
      return Effect.sync(() => {
        if (loopWaiting === begin) loopWaiting = undefined
      })
    }),
    leasePassDone: Effect.sync(() => {
      const done = inPass
      inPass = []
      for (const resolve of done) resolve()
    })
  }
  const tick = (queueId: string) =>
    new Promise<void>((resolve, reject) => {
      const guard = setTimeout(
        () => reject(new Error(`tick(${queueId}): no round of the queue settled within ${TICK_LIMIT_MS} ms`)),
        TICK_LIMIT_MS
      )
      const t = tickState(queueId)
      t.asked.push(() => {
        clearTimeout(guard)
        resolve()
      })
      t.waiting?.()
    })
  const settled = (queueId: string) => {
    const t = tickState(queueId)
    // a round is due, and waits only for the runner's spacing (a timer): it runs now
    if (t.waiting !== undefined && t.spacing) return tick(queueId)
    return new Promise<void>((resolve, reject) => {
      const guard = setTimeout(
        () => reject(new Error(`queue ${queueId}: its runner did not settle within ${TICK_LIMIT_MS} ms`)),
        TICK_LIMIT_MS
      )
      t.idle.push(() => {
        clearTimeout(guard)
        resolve()
      })
    })
  }
  const until = async <A>(
    queueId: string,
    what: string,
    check: () => Promise<A | undefined | false>,
    options: UntilOptions = {}
  ): Promise<A> => {
    const maxSteps = options.maxSteps ?? 200
    for (let i = 0; ; i++) {
      const value = await check()
      if (value !== undefined && value !== false) return value
      if (i === maxSteps) throw new Error(`${what}: not reached after ${maxSteps} rounds`)
      await (i === 0 && options.tick !== false ? tick(queueId) : settled(queueId))
    }
  }
  /** Resolves when the next round settles, or after `maxMs` (what the test waits for may come from elsewhere). */
  const nextRound = (maxMs: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, maxMs)
      waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  const leasePass = () =>
    new Promise<void>((resolve) => {
      asked.push(resolve)
      loopWaiting?.()
    })
  const lostLease = () => new Promise<string>((resolve) => lost.push(resolve))
  return { probe, tick, settled, until, nextRound, leasePass, lostLease }
}
