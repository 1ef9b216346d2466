import { Schema } from "effect"
import { Priority, PrRequest } from "./schemas.ts"

/** Extension (#31): the impact previews' schemas (docs/api-extensions.md). */

export const PreviewPriorityRequest = Schema.Struct({
  ...PrRequest.fields,
  priority: Priority
}).annotations({ identifier: "PreviewSubmitPullRequestRequest" })

export const ImpactPreview = Schema.Struct({
  interruptedRuns: Schema.Array(
    Schema.Struct({
      testRunId: Schema.String,
      prNumbers: Schema.Array(Schema.Number),
      runningSeconds: Schema.Number
    })
  ),
  ciSecondsLost: Schema.Number,
  retestedPrs: Schema.Array(Schema.Number),
  estimates: Schema.Array(
    Schema.Struct({
      prNumber: Schema.Number,
      estimatedMergeAt: Schema.NullOr(Schema.String),
      estimatedMergeAtAfter: Schema.NullOr(Schema.String)
    })
  )
}).annotations({ identifier: "ImpactPreview" })
