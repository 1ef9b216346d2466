import { describe, expect, test } from "bun:test"
import { Effect, Fiber, Ref, TestClock, TestContext } from "effect"
import { backoffDelay, RUNNER_BACKOFF, supervise } from "../../src/queue/runner/supervise.ts"

const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(Effect.provide(effect, TestContext.TestContext))

describe("runner supervision", () => {
  test("the backoff doubles from 200 ms up to a minute; jitter only shortens it, by at most half", () => {
    const delays = Array.from({ length: 12 }, (_, k) => backoffDelay(RUNNER_BACKOFF, k, 0))
    expect(delays).toEqual([200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 60000, 60000, 60000])
    expect(backoffDelay(RUNNER_BACKOFF, 20, 0.999)).toBeGreaterThanOrEqual(30_000)
    expect(backoffDelay(RUNNER_BACKOFF, 1_000_000, 0.5)).toBe(45_000)
  })

  test("a runner that keeps dying restarts with growing delays, not at once; interruption ends it during a delay", () =>
    run(
      Effect.gen(function* () {
        const starts = yield* Ref.make(0)
        const failures: Array<number> = []
        const dying = Ref.update(starts, (n) => n + 1).pipe(Effect.zipRight(Effect.sync(() => new Array(-1))))
        const fiber = yield* Effect.fork(
          supervise(dying, { failed: (_cause, _attempt, delayMs) => Effect.sync(() => failures.push(delayMs)) })
        )
        // without any time passing, it ran once and waits
        yield* TestClock.adjust("0 millis")
        expect(yield* Ref.get(starts)).toBe(1)
        // ten minutes: 200 ms .. 60 s doubling (jitter at most halves each), not thousands of restarts
        yield* TestClock.adjust("10 minutes")
        const n = yield* Ref.get(starts)
        expect(n).toBeGreaterThan(8)
        expect(n).toBeLessThan(40)
        for (let k = 1; k < failures.length; k++) expect(failures[k]!).toBeGreaterThanOrEqual(failures[k - 1]! / 2)
        expect(Math.max(...failures)).toBeLessThanOrEqual(60_000)
        // an instance stopping interrupts it while it waits
        yield* Fiber.interrupt(fiber)
        expect(fiber.unsafePoll()?._tag).toBe("Failure")
      })
    ))

  test("a runner that lost its lease (interrupted itself) is not restarted", () =>
    run(
      Effect.gen(function* () {
        const starts = yield* Ref.make(0)
        yield* supervise(Ref.update(starts, (n) => n + 1).pipe(Effect.zipRight(Effect.interrupt)), {
          failed: () => Effect.void
        })
        expect(yield* Ref.get(starts)).toBe(1)
      })
    ))
})
