import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Option } from "effect"
import type { PlannerEvent } from "./planner/types.ts"
import { Reasons } from "./planner/types.ts"

/**
 * The queue's port to the flaky-test results (issue #20, extension, off by default): why a test run's required
 * statuses failed, from the JUnit uploads for its test-branch sha. The flaky feature implements it
 * (`flaky/testVerdicts.ts`); the composition root wires it. Without it, a failed run is a failed run.
 */

export type FailureExplanation =
  /** no upload for the sha, or its failures are not all quarantined (or there are none: the build failed) */
  | { readonly _tag: "Unexplained" }
  /** every failed test in the sha's uploads is quarantined */
  | { readonly _tag: "QuarantinedOnly"; readonly failedTests: number }

export interface TestVerdictsShape {
  readonly explainFailure: (repoId: string, sha: string) => Effect.Effect<FailureExplanation, SqlError>
}

export class TestVerdicts extends Context.Tag("greenline/TestVerdicts")<TestVerdicts, TestVerdictsShape>() {}

/** The reason a run's entries show in their timeline when it passed because its failures were all quarantined. */
export const QUARANTINED_FAILURES_ONLY = Reasons.testsPassedQuarantinedOnly

/**
 * The runner's hook: the completion event of a run whose required statuses reached `verdict` ("success" or
 * "failure"). With `quarantinedFailuresPass` set on the queue and the port wired, a failure whose uploads show only
 * quarantined failures counts as passed, with its own reason. An error of the port leaves the failure as it is.
 */
export const runCompletion = (
  verdicts: Option.Option<TestVerdictsShape>,
  config: { readonly quarantinedFailuresPass?: boolean | undefined },
  repoId: string,
  runId: string,
  sha: string,
  verdict: "success" | "failure"
): Effect.Effect<PlannerEvent> => {
  const failed: PlannerEvent = { _tag: "RunCompleted", runId, outcome: "failed", reason: Reasons.requiredStatusFailed }
  if (verdict === "success")
    return Effect.succeed({ _tag: "RunCompleted", runId, outcome: "succeeded", reason: Reasons.testsPassed })
  if (config.quarantinedFailuresPass !== true || Option.isNone(verdicts)) return Effect.succeed(failed)
  return verdicts.value.explainFailure(repoId, sha).pipe(
    Effect.map(
      (e): PlannerEvent =>
        e._tag === "QuarantinedOnly"
          ? { _tag: "RunCompleted", runId, outcome: "succeeded", reason: QUARANTINED_FAILURES_ONLY }
          : failed
    ),
    Effect.catchAll((error) =>
      Effect.as(Effect.logWarning("explaining a failed test run from its uploads failed", error), failed)
    )
  )
}
