import { Effect } from "effect"
import { dieUnless } from "../../kernel/errors.ts"
import { isQueueError, type QueueError } from "../../queue/errors.ts"
import { Triage } from "../../triage/Triage.ts"
import { ops } from "../Api.ts"
import { ApiError } from "../errors.ts"
import { handle } from "../router.ts"
import { requireQueue } from "./queue.ts"

/** Handlers of failure triage (issue #33): a queue's failures view. The PR's `failure` block is in queue.ts. */

const orDie = dieUnless((e): e is ApiError | QueueError => e instanceof ApiError || isQueueError(e))

export const triageRoutes = [
  handle(ops.listQueueFailures, (req) =>
    Effect.gen(function* () {
      const queue = yield* requireQueue(req.repo, req.targetBranch)
      const triage = yield* Triage
      return yield* orDie(triage.failures(queue, req.limit ?? 50))
    })
  )
]
