// deep imports: the package's index loads every module of @effect/platform (tens of MB of resident memory)
import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import * as AU from "../audit/schemas.ts"
import * as W from "../events/schemas.ts"
import * as FH from "../flaky/history.ts"
import * as F from "../flaky/schemas.ts"
import * as QA from "../queue/activity.ts"
import * as FZ from "../queue/freezeSchemas.ts"
import * as PV from "../queue/previewSchemas.ts"
import * as Q from "../queue/schemas.ts"
import * as TR from "../triage/schemas.ts"
import * as T from "./adminSchemas.ts"
import * as D from "./dashboardSchemas.ts"
import { Authentication, EmptyObject, endpointOf, type Op, post } from "./operation.ts"

/** Every operation of the v1 API (contract.md), grouped as the OpenAPI document shows them. */
export const ops = {
  createQueue: post("createQueue", "/createQueue", Q.CreateQueueRequest, Q.QueueConfig),
  deleteQueue: post("deleteQueue", "/deleteQueue", Q.QueueKeyRequest, EmptyObject),
  getQueue: post("getQueue", "/getQueue", Q.QueueKeyRequest, Q.QueueWithEntries),
  updateQueue: post("updateQueue", "/updateQueue", Q.UpdateQueueRequest, Q.QueueConfig),

  submitPullRequest: post("submitPullRequest", "/submitPullRequest", Q.SubmitRequest, EmptyObject),
  cancelPullRequest: post("cancelPullRequest", "/cancelPullRequest", Q.PrRequest, EmptyObject),
  restartTestsOnPullRequest: post("restartTestsOnPullRequest", "/restartTestsOnPullRequest", Q.PrRequest, EmptyObject),
  getSubmittedPullRequest: post(
    "getSubmittedPullRequest",
    "/getSubmittedPullRequest",
    Q.GetSubmittedRequest,
    Q.SubmittedPullRequest
  ),

  getMergeQueueTestingDetails: post(
    "getMergeQueueTestingDetails",
    "/getMergeQueueTestingDetails",
    Q.TestingDetailsRequest,
    Q.TestingDetails
  ),
  setImpactedTargets: post("setImpactedTargets", "/setImpactedTargets", Q.SetImpactedTargetsRequest, EmptyObject),

  getMergeQueueMetrics: {
    name: "getMergeQueueMetrics",
    method: "GET",
    path: "/getMergeQueueMetrics",
    payload: Q.MetricsQuery,
    success: Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/plain" })),
    source: "query",
    contentType: "text/plain; version=0.0.4; charset=utf-8"
  } satisfies Op<"getMergeQueueMetrics", typeof Q.MetricsQuery.Type, typeof Q.MetricsQuery.Encoded, string, string>,

  listFailingTests: post(
    "listFailingTests",
    "/flaky-tests/list-failing-tests",
    F.ListFailingTestsRequest,
    F.ListFailingTestsResponse
  ),
  listQuarantinedTests: post(
    "listQuarantinedTests",
    "/flaky-tests/list-quarantined-tests",
    F.ListQuarantinedRequest,
    F.ListQuarantinedResponse
  ),
  getTestDetails: post(
    "getTestDetails",
    "/flaky-tests/get-test-details",
    F.GetTestDetailsRequest,
    F.GetTestDetailsResponse
  ),
  listUnhealthyTests: post(
    "listUnhealthyTests",
    "/flaky-tests/list-unhealthy-tests",
    F.ListUnhealthyRequest,
    F.ListUnhealthyResponse
  ),
  linkTicketToTestCase: post(
    "linkTicketToTestCase",
    "/flaky-tests/link-ticket-to-test-case",
    F.LinkTicketRequest,
    EmptyObject
  ),
  setQuarantineOverride: post(
    "setQuarantineOverride",
    "/flaky-tests/set-quarantine-override",
    F.SetQuarantineOverrideRequest,
    EmptyObject
  ),
  getFlakySettings: post("getFlakySettings", "/flaky-tests/get-settings", F.SettingsRequest, F.Settings),
  updateFlakySettings: post("updateFlakySettings", "/flaky-tests/update-settings", F.UpdateSettingsRequest, F.Settings),

  uploadTestResults: {
    name: "uploadTestResults",
    method: "POST",
    path: "/flaky-tests/upload",
    payload: F.UploadForm,
    success: F.UploadSummary,
    source: "raw"
  } satisfies Op<
    "uploadTestResults",
    typeof F.UploadForm.Type,
    typeof F.UploadForm.Encoded,
    F.UploadSummary,
    typeof F.UploadSummary.Encoded
  >,

  reportStatus: post("reportStatus", "/reportStatus", Q.ReportStatusRequest, EmptyObject),

  createWebhookEndpoint: post(
    "createWebhookEndpoint",
    "/createWebhookEndpoint",
    W.CreateWebhookEndpointRequest,
    W.CreatedWebhookEndpoint
  ),
  listWebhookEndpoints: post(
    "listWebhookEndpoints",
    "/listWebhookEndpoints",
    W.ListWebhookEndpointsRequest,
    W.ListWebhookEndpointsResponse
  ),
  updateWebhookEndpoint: post(
    "updateWebhookEndpoint",
    "/updateWebhookEndpoint",
    W.UpdateWebhookEndpointRequest,
    W.WebhookEndpoint
  ),
  deleteWebhookEndpoint: post(
    "deleteWebhookEndpoint",
    "/deleteWebhookEndpoint",
    W.WebhookEndpointIdRequest,
    EmptyObject
  ),
  rotateWebhookSecret: post(
    "rotateWebhookSecret",
    "/rotateWebhookSecret",
    W.WebhookEndpointIdRequest,
    W.RotatedWebhookSecret
  ),
  listWebhookDeliveries: post(
    "listWebhookDeliveries",
    "/listWebhookDeliveries",
    W.ListWebhookDeliveriesRequest,
    W.ListWebhookDeliveriesResponse
  ),
  replayWebhookMessages: post(
    "replayWebhookMessages",
    "/replayWebhookMessages",
    W.ReplayWebhookMessagesRequest,
    W.ReplayWebhookMessagesResponse
  ),
  // extensions the dashboard reads (each also usable with an API token)
  listQueues: post("listQueues", "/listQueues", EmptyObject, QA.ListQueuesResponse),
  getQueueActivity: post("getQueueActivity", "/getQueueActivity", Q.QueueKeyRequest, QA.QueueActivity),
  getPullRequestActivity: post(
    "getPullRequestActivity",
    "/getPullRequestActivity",
    D.PullRequestActivityRequest,
    D.PullRequestActivity
  ),
  getTestHistory: post("getTestHistory", "/flaky-tests/get-test-history", FH.TestHistoryRequest, FH.TestHistory),
  getUpload: post("getUpload", "/flaky-tests/get-upload", FH.UploadRequest, FH.UploadView),
  listApiTokens: post("listApiTokens", "/listApiTokens", EmptyObject, D.ListApiTokensResponse),
  createApiToken: post("createApiToken", "/createApiToken", D.CreateApiTokenRequest, D.CreatedApiToken),
  revokeApiToken: post("revokeApiToken", "/revokeApiToken", D.RevokeApiTokenRequest, EmptyObject),
  getQueueHealth: post("getQueueHealth", "/getQueueHealth", QA.HealthRequest, QA.QueueHealth),
  listQueueFailures: post("listQueueFailures", "/listQueueFailures", TR.QueueFailuresRequest, TR.QueueFailures),
  listAuditEvents: post("listAuditEvents", "/listAuditEvents", AU.ListAuditEventsRequest, AU.ListAuditEventsResponse),

  // the admin API (admin tokens only): what the CLI uses while the server holds the embedded database
  adminCreateOrganization: post(
    "adminCreateOrganization",
    "/admin/createOrganization",
    T.CreateOrganizationRequest,
    T.Organization
  ),
  adminCreateToken: post("adminCreateToken", "/admin/createToken", T.CreateTokenRequest, T.CreatedToken),
  adminListTokens: post("adminListTokens", "/admin/listTokens", T.OrgRequest, T.TokenList),
  adminRevokeToken: post("adminRevokeToken", "/admin/revokeToken", T.RevokeTokenRequest, EmptyObject),
  adminAddRepository: post("adminAddRepository", "/admin/addRepository", T.AddRepositoryRequest, T.AddedRepository),
  exportQuarantine: {
    name: "exportQuarantine",
    method: "GET",
    path: "/flaky-tests/export",
    payload: F.QuarantineExportQuery,
    success: F.QuarantineExport,
    source: "query"
  } satisfies Op<
    "exportQuarantine",
    typeof F.QuarantineExportQuery.Type,
    typeof F.QuarantineExportQuery.Encoded,
    typeof F.QuarantineExport.Type,
    typeof F.QuarantineExport.Encoded
  >,
  exportQuarantineCsv: {
    name: "exportQuarantineCsv",
    method: "GET",
    path: "/flaky-tests/export.csv",
    payload: F.QuarantineExportQuery,
    success: Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/csv" })),
    source: "query",
    contentType: "text/csv; charset=utf-8"
  } satisfies Op<
    "exportQuarantineCsv",
    typeof F.QuarantineExportQuery.Type,
    typeof F.QuarantineExportQuery.Encoded,
    string,
    string
  >,
  importQuarantine: post(
    "importQuarantine",
    "/flaky-tests/import",
    F.QuarantineImportRequest,
    F.QuarantineImportResponse
  ),

  // extension (#31): freezes
  createFreeze: post("createFreeze", "/createFreeze", FZ.CreateFreezeRequest, FZ.Freeze),
  listFreezes: post("listFreezes", "/listFreezes", FZ.ListFreezesRequest, FZ.ListFreezesResponse),
  updateFreeze: post("updateFreeze", "/updateFreeze", FZ.UpdateFreezeRequest, FZ.Freeze),
  deleteFreeze: post("deleteFreeze", "/deleteFreeze", FZ.FreezeKeyRequest, EmptyObject),
  setMergeSchedule: post("setMergeSchedule", "/setMergeSchedule", FZ.SetMergeScheduleRequest, FZ.MergeScheduleAnswer),
  // extension (#31): impact previews
  previewCancelPullRequest: post(
    "previewCancelPullRequest",
    "/previewCancelPullRequest",
    Q.PrRequest,
    PV.ImpactPreview
  ),
  previewSubmitPullRequest: post(
    "previewSubmitPullRequest",
    "/previewSubmitPullRequest",
    PV.PreviewPriorityRequest,
    PV.ImpactPreview
  ),
  previewRestartTests: post("previewRestartTests", "/previewRestartTests", Q.PrRequest, PV.ImpactPreview)
} as const

export type Ops = typeof ops
export type OpName = keyof Ops

// The groups only feed the OpenAPI document (the router serves `ops` directly), so their endpoint types are erased.
type AnyGroup = HttpApiGroup.HttpApiGroup<string, HttpApiEndpoint.HttpApiEndpoint.Any>
const group = (id: string, description: string, ...names: ReadonlyArray<OpName>): AnyGroup => {
  let g = HttpApiGroup.make(id).annotate(OpenApi.Description, description) as unknown as AnyGroup
  for (const name of names) {
    g = g.add(
      endpointOf(ops[name] as Op<string, unknown, unknown, unknown, unknown>) as HttpApiEndpoint.HttpApiEndpoint.Any
    )
  }
  return g.prefix("/v1").middleware(Authentication) as unknown as AnyGroup
}

/** The whole HTTP contract as one `HttpApi`; the OpenAPI document is generated from it. */
export const Api = HttpApi.make("greenline")
  .add(
    group(
      "queues",
      "Create, configure, pause, drain and delete merge queues",
      "createQueue",
      "deleteQueue",
      "getQueue",
      "updateQueue"
    )
  )
  .add(
    group(
      "pullRequests",
      "Submit, cancel and restart pull requests, and read their state",
      "submitPullRequest",
      "cancelPullRequest",
      "restartTestsOnPullRequest",
      "getSubmittedPullRequest"
    )
  )
  .add(group("testingDetails", "Test runs", "getMergeQueueTestingDetails"))
  .add(group("impactedTargets", "Impacted targets for parallel queues", "setImpactedTargets"))
  .add(group("metrics", "Queue metrics in Prometheus text format", "getMergeQueueMetrics"))
  .add(
    group(
      "flakyTests",
      "Flaky-test queries, quarantine and settings",
      "listFailingTests",
      "listQuarantinedTests",
      "getTestDetails",
      "listUnhealthyTests",
      "linkTicketToTestCase",
      "setQuarantineOverride",
      "getFlakySettings",
      "updateFlakySettings"
    )
  )
  .add(group("uploads", "JUnit result uploads", "uploadTestResults"))
  .add(group("ciStatus", "Commit statuses reported by CI", "reportStatus"))
  .add(
    group(
      "webhooks",
      "Outgoing webhooks (Standard Webhooks 1.0 signatures): endpoints, secrets, deliveries and replay",
      "createWebhookEndpoint",
      "listWebhookEndpoints",
      "updateWebhookEndpoint",
      "deleteWebhookEndpoint",
      "rotateWebhookSecret",
      "listWebhookDeliveries",
      "replayWebhookMessages"
    )
  )
  .add(
    group(
      "dashboard",
      "Extensions the dashboard reads: queues with their figures, a queue's runs and entries, a PR's runs, CI output and comments, a test's history, API tokens, a queue's health over time",
      "listQueues",
      "getQueueActivity",
      "getPullRequestActivity",
      "getTestHistory",
      "getUpload",
      "listApiTokens",
      "createApiToken",
      "revokeApiToken",
      "getQueueHealth",
      "listQueueFailures"
    )
  )
  .add(
    group(
      "audit",
      "The organization's audit log: every change through the API or the dashboard, allowed or refused, with its actor (role admin)",
      "listAuditEvents"
    )
  )
  .add(
    group(
      "admin",
      "Organizations, API tokens and repositories of any organization (role admin)",
      "adminCreateOrganization",
      "adminCreateToken",
      "adminListTokens",
      "adminRevokeToken",
      "adminAddRepository"
    )
  )
  .add(
    group(
      "flakyQuarantineTransfer",
      "Extension: a repository's quarantine state as JSON or CSV, and its import",
      "exportQuarantine",
      "exportQuarantineCsv",
      "importQuarantine"
    )
  )
  .add(
    group(
      "freezes",
      "Extension (#31): freezes of a queue or of every queue of a repository, once or recurring, and merge schedules (role maintain to change them)",
      "createFreeze",
      "listFreezes",
      "updateFreeze",
      "deleteFreeze",
      "setMergeSchedule"
    )
  )
  .add(
    group(
      "previews",
      "Extension (#31): what a cancel, a restart or a change of priority would do, computed by the planner, read-only",
      "previewCancelPullRequest",
      "previewSubmitPullRequest",
      "previewRestartTests"
    )
  )
  .annotate(OpenApi.Title, "Greenline merge queue API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "A self-hosted merge queue and flaky-test service, compatible with the Trunk merge-queue API v1."
  )

let openApiCache: OpenApi.OpenAPISpec | undefined
export const openApiDocument = (): OpenApi.OpenAPISpec => {
  openApiCache ??= OpenApi.fromApi(Api)
  return openApiCache
}
