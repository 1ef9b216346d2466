import { Effect, Layer } from "effect"
import { TestVerdicts } from "../queue/TestVerdicts.ts"
import { FlakyRepo } from "./FlakyRepo.ts"

/**
 * The flaky feature's side of the queue's `TestVerdicts` port (issue #20): a test run's failure is explained by its
 * test-branch sha's uploads when every test that failed there (and did not pass on retry in the same upload) is
 * quarantined now. No upload, or no failed test in them (the build broke before the tests), explains nothing.
 */
export const FlakyTestVerdictsLive = Layer.effect(
  TestVerdicts,
  Effect.map(FlakyRepo, (repo) => ({
    explainFailure: (repoId: string, sha: string) =>
      Effect.map(repo.failuresAt(repoId, sha), (f) =>
        f.uploads > 0 && f.failed > 0 && f.quarantined === f.failed
          ? ({ _tag: "QuarantinedOnly", failedTests: f.failed } as const)
          : ({ _tag: "Unexplained" } as const)
      )
  }))
)
