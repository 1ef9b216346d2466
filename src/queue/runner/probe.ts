import { Context, type Effect } from "effect"

/**
 * Points where a test can watch or interrupt a queue's runner and the lease loop (never provided in production): the
 * scenario tests step them instead of sleeping, and inject a crash at an exact point.
 */
export interface RunnerProbeShape {
  /** a run's test branch was pushed; its build is not recorded yet (a failure here is a crash at that point) */
  readonly afterPush: (runId: string, sha: string) => Effect.Effect<void>
  /** a round of the queue was saved and its commands ran */
  readonly roundDone: (queueId: string) => Effect.Effect<void>
  /**
   * the queue's runner settled (its last round asked for no other at once) and waits for its next round: this ends
   * when a test asks for one now (a `tick`). The runner's timers and wake-ups still run; a round a tick asked for
   * looks at the Git host whatever the poll interval says. `spacing`: the runner was woken and only spaces its
   * rounds out (after a long round, runQueue.ts), the next round is due
   */
  readonly roundNow?: (queueId: string, spacing: boolean) => Effect.Effect<void>
  /** the queue's runner found its lease gone (its round was refused: another instance holds the queue) and stops */
  readonly lostLease?: (queueId: string) => Effect.Effect<void>
  /** ends the lease loop's wait at once: the test asks for its next pass now (the loop's timer still runs, unless `leaseTimerOff`) */
  readonly leasePassNow?: Effect.Effect<void>
  /** the lease loop's timer is off: its passes run only when a test asks or a wake-up comes */
  readonly leaseTimerOff?: boolean
  /** a pass of the lease loop ended: leases taken or renewed, runners started or stopped (or the pass failed) */
  readonly leasePassDone?: Effect.Effect<void>
}

export class RunnerProbe extends Context.Tag("greenline/RunnerProbe")<RunnerProbe, RunnerProbeShape>() {}
