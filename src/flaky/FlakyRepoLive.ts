import { Effect, Layer } from "effect"
import { FlakyRepo, type FlakyRepoShape } from "./FlakyRepo.ts"
import { quarantineRepo } from "./quarantineRepo.ts"
import { statusRepo } from "./statusRepo.ts"
import { testCasesRepo } from "./testCasesRepo.ts"
import { uploadsRepo } from "./uploadsRepo.ts"

/** The flaky repository over SQL (PostgreSQL or PGlite): its parts, one per group of tables and uses. */
export const FlakyRepoLive = Layer.effect(
  FlakyRepo,
  Effect.gen(function* () {
    const shape: FlakyRepoShape = {
      ...(yield* uploadsRepo),
      ...(yield* statusRepo),
      ...(yield* testCasesRepo),
      ...(yield* quarantineRepo)
    }
    return shape
  })
)
