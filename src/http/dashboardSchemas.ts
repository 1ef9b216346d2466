import { Schema } from "effect"
import { CiOutputView, CommentView, RunView } from "../queue/activity.ts"
import { CaseInsensitive, opt, PrNumber, RepoRef, SubmittedPullRequest } from "../queue/schemas.ts"
import { ROLES } from "../tenancy/principal.ts"

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

/** A role, in any letter case on input (read < write < maintain < admin; each includes the ones below it). */
export const RoleValue = CaseInsensitive(...ROLES).annotations({
  description: "read < write < maintain < admin; each includes the ones below it"
})
const RoleOut = Schema.Literal(...ROLES)

export const ApiTokenView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** what the token may do */
  role: RoleOut,
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
  ),
  /** default `write`; at most the caller's own role */
  role: opt(RoleValue)
}).annotations({ identifier: "CreateApiTokenRequest" })

export const CreatedApiToken = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  role: RoleOut,
  /** shown only in this answer */
  token: Schema.String
}).annotations({ identifier: "CreatedApiToken" })

export const RevokeApiTokenRequest = Schema.Struct({
  id: Schema.UUID.annotations({ message: () => "must be a UUID" })
}).annotations({ identifier: "RevokeApiTokenRequest" })
