import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Option } from "effect"
import type { PlannerEvent } from "./planner/types.ts"
import { Reasons } from "./planner/types.ts"

/**
 * The queue's port to the flaky-test results (issue #20, extension, off by default): why a test run's required
 * statuses failed, from the JUnit uploads for its test-branch sha. The flaky feature implements it
 * (`flaky/testVerdicts.ts`); the composition root wires it. Without it, a failed run is a failed run.
 */

/** What the JUnit uploads for a test-branch sha say about its failures. */
export interface FailureExplanation {
  /** uploads for the sha */
  readonly uploads: number
  /** tests that failed there (a test that passed on retry in the same upload did not) */
  readonly failedTests: number
  /** of those, quarantined now */
  readonly quarantined: number
  /** of those, known flaky (status `flaky`) but not quarantined */
  readonly knownFlaky: number
}

/** How a failed test of a run compares with what is known of it (issue #33, failure triage). */
export type FailedTestMark = "new" | "known_flaky" | "broken_on_target"

/** A test that failed in a test-branch sha's uploads (and did not pass on retry in the same upload). */
export interface FailedTest {
  readonly testCaseId: string
  readonly name: string
  readonly classname: string
  readonly file: string
  /** the failure's summary (its message), "" when the report had none */
  readonly message: string
  /** the normalized message and stack trace's key (flaky/normalize.ts): failures of one kind share it */
  readonly failureKey: string | null
  /**
   * `known_flaky`: the test's status is flaky, or it is quarantined; `broken_on_target`: its latest result on the
   * target branch failed; `new`: neither (it passes on the target branch, or never ran there)
   */
  readonly mark: FailedTestMark
  /** failed results / results of the last 7 days, 0..1 */
  readonly failureRate: number
  readonly quarantined: boolean
}

export interface TestVerdictsShape {
  readonly explainFailure: (repoId: string, sha: string) => Effect.Effect<FailureExplanation, SqlError>
  /**
   * The tests that failed in the uploads for `sha` (at most `limit`, by name), each marked against the target
   * branch `targetBranch` and the flaky-test data; `uploads` counts the sha's uploads.
   */
  readonly failedTests: (
    repoId: string,
    sha: string,
    targetBranch: string,
    limit: number
  ) => Effect.Effect<{ readonly uploads: number; readonly tests: ReadonlyArray<FailedTest> }, SqlError>
}

export class TestVerdicts extends Context.Tag("greenline/TestVerdicts")<TestVerdicts, TestVerdictsShape>() {}

/** The queue settings of this extension (both off by default). */
export interface FlakyQueueSettings {
  /** a run that failed only in quarantined tests counts as passed */
  readonly quarantinedFailuresPass?: boolean | undefined
  /** how many times an entry's failed run is retried when known-flaky tests are among its failures */
  readonly flakyRetryBudget?: number | undefined
}

/**
 * The runner's hook: the event for a run whose required statuses reached `verdict`. With the port wired and the
 * queue's settings on, a failure is explained by the test-branch sha's uploads: only quarantined failures count as
 * passed (`TEST_RUN_PASSED_QUARANTINED_FAILURES_ONLY` in the timeline); known-flaky failures not quarantined retry
 * the run while every entry in it has retries left of its budget (`retried` counts them, kept by the runner). An
 * error of the port leaves the failure as it is.
 */
export const runCompletion = (
  verdicts: Option.Option<TestVerdictsShape>,
  config: FlakyQueueSettings,
  retried: Map<string, number>,
  repoId: string,
  run: { readonly id: string; readonly testedEntryIds: ReadonlyArray<string> },
  sha: string,
  verdict: "success" | "failure"
): Effect.Effect<PlannerEvent> => {
  const runId = run.id
  const failed: PlannerEvent = { _tag: "RunCompleted", runId, outcome: "failed", reason: Reasons.requiredStatusFailed }
  if (verdict === "success")
    return Effect.succeed({ _tag: "RunCompleted", runId, outcome: "succeeded", reason: Reasons.testsPassed })
  const budget = config.flakyRetryBudget ?? 0
  if ((config.quarantinedFailuresPass !== true && budget <= 0) || Option.isNone(verdicts)) return Effect.succeed(failed)
  return verdicts.value.explainFailure(repoId, sha).pipe(
    Effect.map((e): PlannerEvent => {
      if (
        config.quarantinedFailuresPass === true &&
        e.uploads > 0 &&
        e.failedTests > 0 &&
        e.quarantined === e.failedTests
      )
        return { _tag: "RunCompleted", runId, outcome: "succeeded", reason: Reasons.testsPassedQuarantinedOnly }
      if (e.knownFlaky > 0 && run.testedEntryIds.every((id) => (retried.get(id) ?? 0) < budget)) {
        for (const id of run.testedEntryIds) retried.set(id, (retried.get(id) ?? 0) + 1)
        return { _tag: "RunRetryRequested", runId, reason: Reasons.retriedKnownFlaky }
      }
      return failed
    }),
    Effect.catchAll((error) =>
      Effect.as(Effect.logWarning("explaining a failed test run from its uploads failed", error), failed)
    )
  )
}

/** How many failed tests a comment or an event names (the rest are counted). */
export const FAILED_TESTS_TOLD = 10

/** A failed test's mark as a person reads it: "new", "known flaky, 4% of runs", "broken on the target branch". */
export const markText = (t: Pick<FailedTest, "mark" | "failureRate" | "quarantined">): string =>
  t.mark === "known_flaky"
    ? `known flaky, ${Math.round(t.failureRate * 100)}% of runs${t.quarantined ? ", quarantined" : ""}`
    : t.mark === "new"
      ? "new"
      : "broken on the target branch"

/**
 * The line a PR's comment gets when its run failed with failed tests in its uploads (issue #33):
 * "Failed tests: `test_x` (new), `test_y` (known flaky, 4% of runs)"; null when there are none.
 */
export const failedTestsLine = (tests: ReadonlyArray<FailedTest>): string | null => {
  if (tests.length === 0) return null
  const told = tests.slice(0, FAILED_TESTS_TOLD).map((t) => `\`${t.name.replace(/`/g, "'")}\` (${markText(t)})`)
  const more = tests.length > FAILED_TESTS_TOLD ? ` and ${tests.length - FAILED_TESTS_TOLD} more` : ""
  return `Failed tests: ${told.join(", ")}${more}`
}

/** The failed tests as an event tells them (`failed_tests` of `pull_request.failed`, issue #33). */
export const failedTestsData = (tests: ReadonlyArray<FailedTest>) =>
  tests.slice(0, 50).map((t) => ({
    name: t.name,
    classname: t.classname,
    mark: t.mark,
    failure_rate: t.failureRate,
    quarantined: t.quarantined,
    message: t.message
  }))
