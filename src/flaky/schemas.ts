import { Schema } from "effect"
import { CaseInsensitive, HttpUrl, MAX_LEN, opt, RepoRef, Text } from "../queue/schemas.ts"

/** Request and answer schemas of the flaky-test endpoints (contract.md §3). */

const NonEmptyString = Schema.String.pipe(Schema.minLength(1, { message: () => "must be a non-empty string" }))

export const PageQuery = Schema.Struct({
  page_size: Schema.Int.pipe(Schema.between(1, 100, { message: () => "must be an integer from 1 to 100" })),
  page_token: Text(MAX_LEN.description)
}).annotations({ identifier: "PageQuery" })
export type PageQuery = typeof PageQuery.Type

export const Page = Schema.Struct({
  total_rows: Schema.Number,
  total_pages: Schema.Number,
  next_page_token: Schema.String,
  prev_page_token: Schema.String,
  last_page_token: Schema.String,
  page_index: Schema.Number
}).annotations({ identifier: "Page" })
export type Page = typeof Page.Type

const RepoScope = { repo: RepoRef, org_url_slug: Text(MAX_LEN.owner, 1) }

/** Years 1 to 9999: what PostgreSQL's timestamptz and an ISO 8601 date-time without an expanded year both hold. */
const inDateRange = (ms: number) =>
  ms >= Date.parse("0001-01-01T00:00:00Z") && ms <= Date.parse("9999-12-31T23:59:59.999Z")
export const DateTimeString = Schema.String.pipe(
  Schema.maxLength(64, { message: () => "must be an ISO 8601 date-time" }),
  Schema.filter((s) => !Number.isNaN(Date.parse(s)), { message: () => "must be an ISO 8601 date-time" }),
  Schema.filter((s) => inDateRange(Date.parse(s)), { message: () => "must be a date-time from year 1 to 9999" })
)

export const TestStatusValue = Schema.Literal("healthy", "flaky", "broken")

export const TestStatus = Schema.Struct({
  value: TestStatusValue,
  reason: Schema.String,
  timestamp: Schema.String
})

export const TestCase = Schema.Struct({
  id: Schema.String,
  repository: Schema.Struct({ html_url: Schema.String }),
  html_url: Schema.String,
  name: Schema.String,
  variant: Schema.String,
  status: TestStatus,
  most_common_failures: Schema.Array(
    Schema.Struct({ summary: Schema.String, occurrence_count: Schema.Number, last_occurrence: Schema.String })
  ),
  failure_rate_last_7d: Schema.Number,
  failure_rate_last_24h: Schema.Number,
  codeowners: Schema.Array(Schema.String),
  pull_requests_impacted_last_7d: Schema.Number,
  quarantined: Schema.Boolean,
  file_path: Schema.String,
  parent: Schema.String,
  classname: Schema.String,
  ticket: Schema.NullOr(Schema.Struct({ html_url: Schema.String, external_ticket_id: opt(Schema.String) }))
}).annotations({ identifier: "TestCase" })
export type TestCase = typeof TestCase.Type

export const QuarantinedTest = Schema.Struct({
  name: Schema.String,
  parent: Schema.String,
  file: Schema.String,
  classname: Schema.String,
  codeowners: Schema.Array(Schema.String),
  quarantined_at: Schema.String,
  status_last_updated_at: Schema.String,
  test_case_id: Schema.String,
  variant: Schema.String,
  status: TestStatus,
  quarantine_setting: Schema.Literal("always_quarantine", "auto_quarantine")
}).annotations({ identifier: "QuarantinedTest" })
export type QuarantinedTest = typeof QuarantinedTest.Type

export const ListFailingTestsRequest = Schema.Struct({
  ...RepoScope,
  start_time: DateTimeString,
  end_time: DateTimeString,
  page_query: PageQuery
}).annotations({ identifier: "ListFailingTestsRequest" })

export const ListFailingTestsResponse = Schema.Struct({ tests: Schema.Array(TestCase), page: Page })

export const ListQuarantinedRequest = Schema.Struct({ ...RepoScope, page_query: PageQuery }).annotations({
  identifier: "ListQuarantinedTestsRequest"
})
export const ListQuarantinedResponse = Schema.Struct({ quarantined_tests: Schema.Array(QuarantinedTest), page: Page })

export const GetTestDetailsRequest = Schema.Struct({
  ...RepoScope,
  test_id: Schema.UUID.annotations({ message: () => "must be a UUID" })
}).annotations({ identifier: "GetTestDetailsRequest" })
export const GetTestDetailsResponse = Schema.Struct({ test: TestCase })

export const ListUnhealthyRequest = Schema.Struct({
  ...RepoScope,
  page_query: PageQuery,
  status: CaseInsensitive("flaky", "broken")
}).annotations({ identifier: "ListUnhealthyTestsRequest" })
export const ListUnhealthyResponse = Schema.Struct({ tests: Schema.Array(TestCase), page: Page })

export const LinkTicketRequest = Schema.Struct({
  repo: RepoRef,
  org_url_slug: opt(Text(MAX_LEN.owner)),
  test_case_id: Schema.UUID.annotations({ message: () => "must be a UUID" }),
  external_ticket_id: Text(MAX_LEN.id, 1),
  html_url: opt(HttpUrl)
}).annotations({ identifier: "LinkTicketRequest" })

export const QuarantineOverride = CaseInsensitive("always_quarantine", "never_quarantine", "unspecified")

/** A CODEOWNERS owner: `@org/team`, `@user`, or an e-mail address. */
export const Owner = Schema.String.pipe(
  Schema.pattern(/^(@[A-Za-z0-9][A-Za-z0-9_.-]*(\/[A-Za-z0-9][A-Za-z0-9_.-]*)?|[^@\s]+@[^@\s]+\.[^@\s]+)$/, {
    message: () => "must be a CODEOWNERS owner: @org/team, @user or an e-mail address"
  })
)
const OverrideReason = Schema.String.pipe(Schema.maxLength(2000, { message: () => "must be at most 2000 characters" }))

/** Extension: what an override carries besides its value (semantics §8 revised, quarantine). */
const OverrideFields = {
  owner: opt(Schema.NullOr(Owner)),
  reason: opt(Schema.NullOr(OverrideReason)),
  ticket_url: opt(Schema.NullOr(HttpUrl)),
  expires_at: opt(Schema.NullOr(DateTimeString))
}

export const SetQuarantineOverrideRequest = Schema.Struct({
  ...RepoScope,
  test_case_id: Schema.UUID.annotations({ message: () => "must be a UUID" }),
  override: QuarantineOverride,
  ...OverrideFields
}).annotations({ identifier: "SetQuarantineOverrideRequest" })

export const SettingsRequest = Schema.Struct(RepoScope).annotations({ identifier: "FlakySettingsRequest" })
export const UpdateSettingsRequest = Schema.Struct({
  ...RepoScope,
  quarantining_enabled: opt(Schema.Boolean),
  auto_quarantine: opt(Schema.Boolean),
  /** extension: an auto-quarantined test leaves quarantine after this many clean runs in a row (default 20) */
  auto_release_clean_runs: opt(
    Schema.Int.pipe(Schema.between(1, 100_000, { message: () => "must be an integer from 1 to 100000" }))
  )
}).annotations({ identifier: "UpdateFlakySettingsRequest" })
export const Settings = Schema.Struct({
  quarantining_enabled: Schema.Boolean,
  auto_quarantine: Schema.Boolean,
  auto_release_clean_runs: Schema.Int
}).annotations({ identifier: "FlakySettings" })

// ---- quarantine export and import (extension)

export const QuarantineExportQuery = Schema.Struct({
  org_url_slug: NonEmptyString,
  /** `host/owner/name`, or `owner/name` on github.com */
  repo: NonEmptyString
})

export const QuarantineSetting = CaseInsensitive(
  "always_quarantine",
  "never_quarantine",
  "auto_quarantine",
  "unspecified"
)

/** One test in the export: identity, the setting with its owner, reason, ticket and expiry, and the current state. */
export const QuarantineEntry = Schema.Struct({
  test_case_id: Schema.String,
  name: Schema.String,
  classname: Schema.String,
  file: Schema.String,
  parent: Schema.String,
  variant: Schema.String,
  quarantine_setting: QuarantineSetting,
  quarantined: Schema.Boolean,
  status: TestStatusValue,
  owner: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  ticket_url: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  set_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "QuarantineEntry" })
export type QuarantineEntry = typeof QuarantineEntry.Type

export const QuarantineExport = Schema.Struct({
  repo: RepoRef,
  exported_at: Schema.String,
  settings: Settings,
  tests: Schema.Array(QuarantineEntry)
}).annotations({ identifier: "QuarantineExport" })
export type QuarantineExport = typeof QuarantineExport.Type

/** An entry to import: the export's fields; either `test_case_id` or `name` (with classname, file, parent, variant). */
export const QuarantineImportEntry = Schema.Struct({
  test_case_id: opt(Schema.UUID.annotations({ message: () => "must be a UUID" })),
  name: opt(NonEmptyString),
  classname: opt(Schema.String),
  file: opt(Schema.String),
  parent: opt(Schema.String),
  variant: opt(Schema.String),
  quarantine_setting: QuarantineSetting,
  ...OverrideFields
}).annotations({ identifier: "QuarantineImportEntry" })
export type QuarantineImportEntry = typeof QuarantineImportEntry.Type

/** The export's `tests` (JSON), or its CSV text in `csv`: one of the two. */
export const QuarantineImportRequest = Schema.Struct({
  ...RepoScope,
  tests: opt(Schema.Array(QuarantineImportEntry)),
  csv: opt(Schema.String)
}).annotations({ identifier: "QuarantineImportRequest" })

export const QuarantineImportResponse = Schema.Struct({
  imported: Schema.Int,
  created: Schema.Int,
  cleared: Schema.Int
}).annotations({ identifier: "QuarantineImportResponse" })

export const UploadMetadata = Schema.Struct({
  repo: RepoRef,
  org_url_slug: Text(MAX_LEN.owner, 1),
  sha: Text(MAX_LEN.sha, 1),
  branch: Text(MAX_LEN.branch, 1),
  pr_number: opt(Schema.NullOr(Schema.Int.pipe(Schema.between(1, 4294967295)))),
  job_name: opt(Schema.NullOr(Text(MAX_LEN.id))),
  variant: opt(Schema.NullOr(Text(MAX_LEN.id))),
  run_at: opt(Schema.NullOr(DateTimeString))
}).annotations({ identifier: "UploadMetadata" })
export type UploadMetadata = typeof UploadMetadata.Type

/** The multipart form, for the OpenAPI document: a `metadata` JSON part and one or more `junit` files. */
export const UploadForm = Schema.Struct({
  metadata: Schema.String.annotations({ description: "UploadMetadata as JSON" }),
  junit: Schema.Array(Schema.String).annotations({ description: "JUnit XML files, plain or gzip" })
}).annotations({ identifier: "UploadForm" })

export const UploadSummary = Schema.Struct({
  upload_id: Schema.String,
  tests: Schema.Number,
  passed: Schema.Number,
  failed: Schema.Number,
  skipped: Schema.Number,
  ignored: Schema.Number,
  quarantined_failures: Schema.Number,
  unquarantined_failures: Schema.Number,
  all_failures_quarantined: Schema.Boolean
}).annotations({ identifier: "UploadSummary" })
export type UploadSummary = typeof UploadSummary.Type
