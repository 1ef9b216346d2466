import { Effect, Layer } from "effect"
import { TestVerdicts } from "../queue/TestVerdicts.ts"
import { FlakyRepo } from "./FlakyRepo.ts"

/**
 * The flaky feature's side of the queue's `TestVerdicts` port (issue #20): the tests that failed in a test-branch
 * sha's uploads (and did not pass on retry in the same upload), how many are quarantined now, and how many are known
 * flaky without being quarantined. The queue decides what that means for its run.
 */
export const FlakyTestVerdictsLive = Layer.effect(
  TestVerdicts,
  Effect.map(FlakyRepo, (repo) => ({
    explainFailure: (repoId: string, sha: string) =>
      Effect.map(repo.failuresAt(repoId, sha), (f) => ({
        uploads: f.uploads,
        failedTests: f.failed,
        quarantined: f.quarantined,
        knownFlaky: f.flaky
      }))
  }))
)
