/**
 * The payload keys of Trunk's pull request webhooks (../shared/spec/trunk-v1-openapi-condensed.md, contract.md §8),
 * pinned once for the tests of every event family: a pull_request.* payload per action, and a pull_request_batch.*
 * payload, which adds the batch's pull request numbers.
 */
const PR_COMMON = [
  "type",
  "action",
  "status",
  "author",
  "http_details_url",
  "pr_number",
  "repository",
  "target_branch",
  "timestamp"
]
const TEST_FIELDS = ["test_branch", "test_branch_sha", "test_pr_number", "batched", "is_bisection"]
const ACTION_FIELDS: Record<string, ReadonlyArray<string>> = {
  submitted: ["submitted_reason"],
  queued: ["queued_reason"],
  testing: TEST_FIELDS,
  pending_failure: ["failure_reason"],
  failed: ["failure_reason", ...TEST_FIELDS],
  merged: ["merged_reason"],
  canceled: ["cancellation_reason", ...TEST_FIELDS]
}
const BATCH = ["pr_numbers", "pr_numbers_in_batch"]

/** pull_request.<action>: its keys */
export const PR_KEYS: Record<string, ReadonlyArray<string>> = Object.fromEntries(
  Object.entries(ACTION_FIELDS).map(([action, fields]) => [action, [...PR_COMMON, ...fields]])
)

/** pull_request_batch.<action>: its keys */
export const BATCH_KEYS: Record<string, ReadonlyArray<string>> = Object.fromEntries(
  Object.entries(ACTION_FIELDS).map(([action, fields]) => [action, [...PR_COMMON, ...BATCH, ...fields]])
)

export const sorted = (keys: Iterable<string>) => [...keys].sort()
