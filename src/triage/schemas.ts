import { Schema } from "effect"
import { RepoRef } from "../queue/schemas.ts"

/** `listQueueFailures` (issue #33): a queue's last failures, grouped. */
export const QueueFailuresRequest = Schema.Struct({
  repo: RepoRef,
  targetBranch: Schema.String.pipe(Schema.minLength(1, { message: () => "must be a non-empty string" })),
  limit: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 200, { message: () => "must be an integer from 1 to 200" })),
    { exact: true }
  )
}).annotations({ identifier: "QueueFailuresRequest" })

const Prs = Schema.Array(Schema.Number)

export const QueueFailures = Schema.Struct({
  failures: Schema.Array(
    Schema.Struct({
      prNumber: Schema.Number,
      title: Schema.String,
      at: Schema.String,
      reason: Schema.String,
      testRunId: Schema.NullOr(Schema.String),
      causedByPr: Schema.NullOr(Schema.Number),
      failedTests: Schema.Number
    })
  ),
  byReason: Schema.Array(Schema.Struct({ reason: Schema.String, count: Schema.Number, prs: Prs })),
  byCausingPr: Schema.Array(Schema.Struct({ prNumber: Schema.Number, count: Schema.Number, prs: Prs })),
  byTest: Schema.Array(
    Schema.Struct({
      message: Schema.String.annotations({ description: 'the normalized failure message ("" when none)' }),
      tests: Schema.Array(Schema.String),
      count: Schema.Number.annotations({ description: "the failures (PRs) it is among" }),
      prs: Prs,
      marks: Schema.Array(Schema.Literal("new", "known_flaky", "broken_on_target"))
    })
  )
}).annotations({ identifier: "QueueFailures" })
export type QueueFailures = typeof QueueFailures.Type
