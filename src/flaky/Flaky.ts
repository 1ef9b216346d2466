import type * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { RuntimeHost } from "../kernel/RuntimeHost.ts"
import type { GitHost } from "../queue/GitHost.ts"
import type { Tenancy } from "../tenancy/Tenancy.ts"
import { DAY } from "./classify.ts"
import { makeFlakyCommon } from "./common.ts"
import type { FlakyEnv } from "./FlakyEnv.ts"
import type { FlakyRepo } from "./FlakyRepo.ts"
import { FlakyRepoLive } from "./FlakyRepoLive.ts"
import type { FlakyShape } from "./FlakyShape.ts"
import { makeQuarantine } from "./quarantine.ts"
import { makeQueries } from "./queries.ts"
import { makeIdHasher } from "./testCaseIdsBinary.ts"
import { makeUpload } from "./upload.ts"

/**
 * The flaky-test service (semantics §8, contract §3): the upload pipeline and the queries.
 *
 * Upload: one transaction. The `junit` parts are parsed as streams (gunzip when needed) and their rows go to the
 * database while parsing goes on (`ingest.ts`): on PostgreSQL one streamed `COPY` (the server loads what was sent
 * while the next rows are made), on PGlite batches of multi-row inserts. Any unreadable part fails the whole upload
 * with `INVALID_JUNIT` (the COPY is aborted and the transaction rolls back: nothing is stored, not even a claimed
 * repository). Then the touched test cases that can be other than healthy (a failure in the last 7 days, or not
 * healthy now) are classified from their 7-day history and their quarantine recomputed, so the queries see the new
 * state as soon as the upload answers; the database finds them from the stored rows. Uploads where ≥ 80% of the
 * tests failed are stored with `infra` set and take no part in detection.
 */

export type { FlakyShape, UploadPart } from "./FlakyShape.ts"

export class Flaky extends Context.Tag("greenline/Flaky")<Flaky, FlakyShape>() {}

export const DEFAULT_RETENTION_DAYS = 30

export interface FlakyOptions {
  readonly retentionDays?: number
}

export const makeFlaky = (options: FlakyOptions = {}) =>
  Effect.gen(function* () {
    const common = yield* makeFlakyCommon
    const { repo, now } = common
    // the runtime's SHA-1 and collector (kernel/RuntimeHost.ts, wired by the composition root)
    const host = yield* RuntimeHost
    const ids = makeIdHasher(host.sha1Into)
    const shape: FlakyShape = {
      upload: makeUpload(common, host, ids),
      ...makeQueries(common),
      ...makeQuarantine(common, ids),
      prune: (retentionDays) =>
        Effect.gen(function* () {
          const at = yield* now
          const days = retentionDays ?? options.retentionDays ?? DEFAULT_RETENTION_DAYS
          return yield* repo.prune(new Date(at.getTime() - days * DAY))
        }).pipe(Effect.orDie)
    }
    return shape
  })
/** The service alone; needs `FlakyRepo` besides the database, tenancy, configuration, Git host and runtime. */
export const FlakyServiceLive = (options: FlakyOptions = {}) => Layer.effect(Flaky, makeFlaky(options))

/** The service with its storage: needs `SqlClient`, `Tenancy`, `FlakyEnv`, `GitHost` and `RuntimeHost`. */
export const FlakyLive: Layer.Layer<
  Flaky | FlakyRepo,
  never,
  SqlClient.SqlClient | Tenancy | FlakyEnv | GitHost | RuntimeHost
> = Layer.provideMerge(FlakyServiceLive(), FlakyRepoLive)
