import * as os from "node:os"
import { Cause, Clock, type Context, Effect, FiberMap, Option, Queue, Stream } from "effect"
import { Database, RESUMED } from "../../kernel/Database.ts"
import type { makeEngineRepo } from "../engineRepo.ts"
import { RunnerMetrics } from "../RunnerMetrics.ts"
import { WAKE_CHANNEL } from "../Statuses.ts"
import type { Store } from "../store.ts"
import { RunnerHealth } from "./health.ts"
import { RunnerProbe } from "./probe.ts"
import { runQueue } from "./runQueue.ts"
import { supervise } from "./supervise.ts"

/** An error's message for users: the first line of it and of each cause under it, bounded. */
const errorMessage = (error: unknown): string => {
  const parts: Array<string> = []
  let e: unknown = error
  for (let depth = 0; depth < 4 && e !== undefined && e !== null; depth++) {
    const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e)
    parts.push(text.split("\n")[0] ?? text)
    e = e instanceof Error ? e.cause : undefined
  }
  const line = parts.join(": caused by ")
  return line.length > 500 ? `${line.slice(0, 497)}...` : line
}

/**
 * A queue's lease, renewed every LEASE_LOOP_MS: another instance takes a dead owner's queues over within
 * LEASE_SECONDS + LEASE_LOOP_MS. Short is safe: a stale owner cannot save a round (its fencing token is old) and its
 * Git commands are idempotent or compare-and-swap (see docs/decisions.md, "Lease takeover").
 */
const LEASE_SECONDS = 6
const LEASE_LOOP_MS = 2000

/**
 * Instances share the queues (#37): each takes at most its fair share, ceil(queues / live instances), and SHARE_SLACK
 * more; one that holds more than its fair share lets idle queues it held MOVE_AFTER_SECONDS at least go, between their
 * rounds, to instances that have less. A busy queue (a run in flight, a merge) moves only when its owner dies.
 */
const SHARE_SLACK = 2
const MOVE_AFTER_SECONDS = 60

/**
 * The runners of this instance and their leases: a loop takes (and renews) the leases of the queues this instance
 * may run, starts a supervised runner under each lease's fencing token, stops those whose lease went to another
 * instance, takes over dead owners' queues, and routes wake-ups (to a queue's runner, or to the lease loop when this
 * instance runs no runner for it). The leases are released when the scope closes.
 */
export const makeLeases = (
  repo: ReturnType<typeof makeEngineRepo>,
  store: Store,
  runnerContext: Context.Context<Effect.Effect.Context<ReturnType<typeof runQueue>>>
) =>
  Effect.gen(function* () {
    const db = yield* Database
    const metrics = yield* RunnerMetrics
    const health = yield* RunnerHealth
    // a test's probe: told when a runner lost its lease and when a pass of the loop ended; it may end the loop's wait
    const probe = Option.getOrUndefined(yield* Effect.serviceOption(RunnerProbe))

    const layerScope = yield* Effect.scope
    const owner = `${os.hostname()}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`
    const signals = new Map<string, Queue.Queue<void>>()
    const leaseWake = yield* Queue.sliding<void>(1)
    const runners = yield* FiberMap.make<string>()
    const fencings = new Map<string, number>()

    const signalOf = (queueId: string) => {
      let q = signals.get(queueId)
      if (q === undefined) {
        q = Effect.runSync(Queue.sliding<void>(1))
        signals.set(queueId, q)
      }
      return q
    }

    /**
     * Forgets the token of a runner that ends, unless the queue is already another runner's: the lease loop replaces a
     * runner found under a new token while the old one still runs, and the old one ends after the new one started.
     * Without its token the queue's wake-ups would go to the lease loop, which would replace the runner at each one.
     */
    const forget = (queueId: string, fencing: number) => {
      if (fencings.get(queueId) === fencing) fencings.delete(queueId)
    }

    /**
     * Queues whose stored runner error may be set: a runner new on this instance may find one another instance
     * recorded, and a failure records one; the next completed round clears it (one statement, not one per round).
     */
    const storedError = new Set<string>()

    /** Queues whose runner is in a round now: they do not move (a queue moves between rounds only). */
    const inRound = new Set<string>()

    const hooks = {
      inRound: (queueId: string, running: boolean) => {
        if (running) inRound.add(queueId)
        else inRound.delete(queueId)
      },
      observeLag: metrics.observeLag,
      observeStep: metrics.observeStep,
      roundDone: (queueId: string) => {
        health.recovered(queueId)
        // the stored error (getQueue's runnerError, any instance) is cleared once per runner start or failure
        if (storedError.delete(queueId)) Effect.runFork(store.clearRunnerError(queueId).pipe(Effect.ignore))
      },
      lostLease: (queueId: string, fencing: number) =>
        Effect.sync(() => forget(queueId, fencing)).pipe(
          Effect.zipRight(Effect.logWarning(`lost the lease of queue ${queueId}`)),
          Effect.zipRight(probe?.lostLease?.(queueId) ?? Effect.void)
        )
    }

    const supervised = (queueId: string, fencing: number) =>
      Effect.suspend(() => {
        storedError.add(queueId)
        return supervise(runQueue(queueId, owner, fencing, signalOf(queueId), hooks), {
          // a runner that lost its lease ends by interruption: that is no failure, and it is not restarted
          failed: (cause, attempt, delayMs) =>
            Effect.gen(function* () {
              const now = yield* Clock.currentTimeMillis
              const message = errorMessage(Cause.squash(cause))
              health.failed(queueId, message, now, now + delayMs)
              metrics.restarted()
              storedError.add(queueId)
              yield* store
                .recordRunnerError(queueId, message)
                .pipe(Effect.catchAllCause((c) => Effect.logWarning("could not record a runner's error", c)))
              yield* Effect.logError(
                `runner of queue ${queueId} failed (${attempt + 1} in a row); restarting in ${delayMs} ms`,
                cause
              )
            })
        })
      }).pipe(Effect.ensuring(Effect.sync(() => forget(queueId, fencing))), Effect.provide(runnerContext))

    const takeLeases = (force: boolean) =>
      Effect.gen(function* () {
        const pass = yield* repo.shareLeases(owner, LEASE_SECONDS, force, SHARE_SLACK)
        const held = new Map(pass.held.map((row) => [row.queue_id, Number(row.fencing)]))
        // more than the fair share (an instance joined): idle queues held long enough go, to be taken by those with less
        const excess = held.size - pass.fair
        if (excess > 0 && !force) {
          const movable = yield* repo.movableLeases(owner, excess + inRound.size, MOVE_AFTER_SECONDS)
          let moved = 0
          for (const row of movable) {
            if (moved >= excess) break
            const fencing = Number(row.fencing)
            if (inRound.has(row.queue_id) || held.get(row.queue_id) !== fencing) continue
            fencings.delete(row.queue_id)
            yield* FiberMap.remove(runners, row.queue_id)
            if (yield* repo.releaseLease(owner, row.queue_id, fencing)) {
              held.delete(row.queue_id)
              moved++
            }
          }
        }
        health.setShare({
          owner,
          owned: held.size,
          fair: pass.fair,
          most: pass.fair + SHARE_SLACK,
          live: pass.live,
          queues: pass.queues
        })
        for (const [queueId, fencing] of held) {
          if (fencings.get(queueId) === fencing && (yield* FiberMap.has(runners, queueId))) continue
          fencings.set(queueId, fencing)
          yield* FiberMap.run(runners, queueId, supervised(queueId, fencing))
        }
        for (const queueId of [...fencings.keys()]) {
          if (!held.has(queueId)) {
            fencings.delete(queueId)
            yield* FiberMap.remove(runners, queueId)
          }
        }
      })

    const start = Effect.gen(function* () {
      yield* takeLeases(db.kind === "pglite").pipe(Effect.orDie)
      const wait = Effect.raceAll([
        Queue.take(leaseWake),
        ...(probe?.leaseTimerOff ? [] : [Effect.sleep(LEASE_LOOP_MS)]),
        ...(probe?.leasePassNow ? [probe.leasePassNow] : [])
      ])
      yield* Effect.forkIn(
        Effect.forever(
          wait.pipe(
            Effect.zipRight(takeLeases(false)),
            Effect.catchAllCause((cause) => Effect.logError("lease loop failed", cause)),
            Effect.zipRight(probe?.leasePassDone ?? Effect.void)
          )
        ),
        layerScope
      )
      yield* Effect.forkIn(
        db.listen(WAKE_CHANNEL).pipe(
          Stream.runForEach((queueId) =>
            queueId === RESUMED
              ? // listening again after the database came back: wake-ups may have been missed, every runner looks
                Effect.forEach(
                  [...fencings.keys(), null],
                  (id) => Queue.offer(id === null ? leaseWake : signalOf(id), undefined),
                  { discard: true }
                )
              : fencings.has(queueId)
                ? Queue.offer(signalOf(queueId), undefined)
                : Queue.offer(leaseWake, undefined)
          )
        ),
        layerScope
      )
    })

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* FiberMap.clear(runners)
        yield* repo.releaseLeases(owner).pipe(Effect.ignore)
      })
    )

    return { start }
  })
