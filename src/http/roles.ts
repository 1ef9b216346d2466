import type { Role } from "../tenancy/principal.ts"
import type { OpName } from "./Api.ts"

/**
 * Who may call what (issue #30): the role every operation needs, and whether it changes anything (a change is
 * written to the audit log, allowed or refused). Roles are named as GitHub names repository roles and each includes
 * the ones below it: `read` < `write` < `maintain` < `admin` (tenancy/principal.ts).
 *
 * The router looks the operation up here after the token (or session) and before the body or the handler: a caller
 * whose role is below answers 403 `PERMISSION_DENIED` and nothing runs. No handler checks a role by hand; what the
 * table cannot say (a `maintain` token manages only the tokens it made, and none above its own role) is a rule of
 * the tenancy service, failing with its `PermissionDenied` error (also 403).
 */
export interface Permission {
  readonly role: Role
  /** The operation changes something: each call is recorded in the audit log (refused calls are, whatever this is). */
  readonly changes: boolean
}

/** An operation that only reads. */
const reads = (role: Role): Permission => ({ role, changes: false })
/** An operation that changes something: recorded in the audit log. */
const changes = (role: Role): Permission => ({ role, changes: true })

/**
 * THE table: every operation has a role; the compiler checks it (an operation of `Api.ts` missing here, or a name
 * here that is no operation, is a type error). A new operation: add one line, `name: reads("read")` or
 * `name: changes("<role>")`, in the group it belongs to.
 */
export const PERMISSIONS = {
  // the queue: CI submits, cancels and restarts; configuring queues is `maintain`
  getQueue: reads("read"),
  listQueues: reads("read"),
  getQueueActivity: reads("read"),
  getQueueHealth: reads("read"),
  listQueueFailures: reads("read"),
  getSubmittedPullRequest: reads("read"),
  getPullRequestActivity: reads("read"),
  getMergeQueueTestingDetails: reads("read"),
  getMergeQueueMetrics: reads("read"),
  submitPullRequest: changes("write"),
  cancelPullRequest: changes("write"),
  restartTestsOnPullRequest: changes("write"),
  setImpactedTargets: changes("write"),
  reportStatus: changes("write"),
  createQueue: changes("maintain"),
  updateQueue: changes("maintain"),
  deleteQueue: changes("maintain"),

  // flaky tests: CI uploads results; settings, quarantine overrides and tickets are `maintain`
  listFailingTests: reads("read"),
  listQuarantinedTests: reads("read"),
  listUnhealthyTests: reads("read"),
  getTestDetails: reads("read"),
  getTestHistory: reads("read"),
  getUpload: reads("read"),
  getFlakySettings: reads("read"),
  exportQuarantine: reads("read"),
  exportQuarantineCsv: reads("read"),
  uploadTestResults: changes("write"),
  linkTicketToTestCase: changes("maintain"),
  setQuarantineOverride: changes("maintain"),
  updateFlakySettings: changes("maintain"),
  importQuarantine: changes("maintain"),

  // webhooks: all `maintain`, their reads too (an endpoint's URL can be a credential, as Slack's are)
  listWebhookEndpoints: reads("maintain"),
  listWebhookDeliveries: reads("maintain"),
  createWebhookEndpoint: changes("maintain"),
  updateWebhookEndpoint: changes("maintain"),
  deleteWebhookEndpoint: changes("maintain"),
  rotateWebhookSecret: changes("maintain"),
  replayWebhookMessages: changes("maintain"),

  // API tokens: `maintain` reaches them, and the tenancy service narrows it: below `admin`, a caller creates tokens
  // of its own role or below and sees and revokes only the tokens it made (and itself); `admin` manages them all
  listApiTokens: reads("maintain"),
  createApiToken: changes("maintain"),
  revokeApiToken: changes("maintain"),

  // the organization's audit log, and the admin API (organizations, tokens and repositories of any organization)
  listAuditEvents: reads("admin"),
  adminListTokens: reads("admin"),
  adminCreateOrganization: changes("admin"),
  adminCreateToken: changes("admin"),
  adminRevokeToken: changes("admin"),
  adminAddRepository: changes("admin"),

  // extension (#31): freezes; submitting with ignoreFreeze also needs `maintain` (checked by the handler)
  listFreezes: reads("read"),
  createFreeze: changes("maintain"),
  updateFreeze: changes("maintain"),
  deleteFreeze: changes("maintain"),
  setMergeSchedule: changes("maintain"),
  // extension (#31): previews only read
  previewCancelPullRequest: reads("read"),
  previewSubmitPullRequest: reads("read"),
  previewRestartTests: reads("read")
} as const satisfies { readonly [N in OpName]: Permission }

export type Permissions = { readonly [N in OpName]: Permission }
