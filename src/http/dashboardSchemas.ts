import { Schema } from "effect"
import { CiOutputView, CommentView, RunView } from "../queue/activity.ts"
import { opt, PrNumber, RepoRef, SubmittedPullRequest } from "../queue/schemas.ts"

/** Request and answer schemas of the dashboard's extension endpoints (the queue's and flaky tests' are beside them). */

export const PullRequestActivityRequest = Schema.Struct({
  repo: RepoRef,
  pr: Schema.Struct({ number: PrNumber }),
  /** the queue; without it, the queue the PR was last submitted to */
  targetBranch: opt(Schema.String.pipe(Schema.minLength(1, { message: () => "must be a non-empty string" })))
}).annotations({ identifier: "PullRequestActivityRequest" })

export const PullRequestActivity = Schema.Struct({
  targetBranch: Schema.String,
  /** every queue of the repository this PR was submitted to */
  targetBranches: Schema.Array(Schema.String),
  pullRequest: SubmittedPullRequest,
  runs: Schema.Array(RunView),
  ciOutputs: Schema.Array(CiOutputView),
  comments: Schema.Array(CommentView)
}).annotations({ identifier: "PullRequestActivity" })
export type PullRequestActivity = typeof PullRequestActivity.Type

export const ApiTokenView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  createdAt: Schema.String,
  revokedAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "ApiToken" })

export const ListApiTokensResponse = Schema.Struct({ tokens: Schema.Array(ApiTokenView) }).annotations({
  identifier: "ListApiTokensResponse"
})

export const CreateApiTokenRequest = Schema.Struct({
  name: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must be a non-empty string" }),
    Schema.maxLength(100, { message: () => "must be at most 100 characters" })
  )
}).annotations({ identifier: "CreateApiTokenRequest" })

export const CreatedApiToken = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** shown only in this answer */
  token: Schema.String
}).annotations({ identifier: "CreatedApiToken" })

export const RevokeApiTokenRequest = Schema.Struct({
  id: Schema.UUID.annotations({ message: () => "must be a UUID" })
}).annotations({ identifier: "RevokeApiTokenRequest" })
