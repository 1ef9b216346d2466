import { Context, type Effect } from "effect"

/**
 * Points where a test can watch or interrupt a queue's runner (never provided in production): the scenario tests
 * step the runner with them instead of sleeping, and inject a crash at an exact point.
 */
export interface RunnerProbeShape {
  /** a run's test branch was pushed; its build is not recorded yet (a failure here is a crash at that point) */
  readonly afterPush: (runId: string, sha: string) => Effect.Effect<void>
  /** a round of the queue was saved and its commands ran */
  readonly roundDone: (queueId: string) => Effect.Effect<void>
}

export class RunnerProbe extends Context.Tag("greenline/RunnerProbe")<RunnerProbe, RunnerProbeShape>() {}
