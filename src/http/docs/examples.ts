import { defaultQueueConfig } from "../../queue/schemas.ts"

/** What the operations' documentation shares: its type and the examples several operations use. */

export const repo = { host: "github.com", owner: "acme", name: "web" }
export const key = { repo, targetBranch: "main" }
// the defaults, as a new queue has them, with two testing slots and a required status
export const queueConfig = { ...defaultQueueConfig("main"), concurrency: 2, requiredStatuses: ["ci"] }
export const entry = {
  id: "9b552e33-134c-459b-99d4-d8673e0f7db5",
  state: "testing",
  stateChangedAt: "2026-11-26T13:42:54.130Z",
  priorityValue: 100,
  priorityName: "medium",
  usedDefaultPriorityName: "medium",
  skipTheLine: false,
  noBatch: false,
  prNumber: 1,
  prTitle: "Add one",
  prSha: "6064d390e179c0e84933c9c347fee37cb993705d",
  prBaseBranch: "main",
  prAuthor: "octocat",
  verifiedByTestRun: null,
  testRunId: "07491a2f-e25e-459a-a138-6a85a845c5e8",
  position: 1
}
export const page = {
  total_rows: 1,
  total_pages: 1,
  next_page_token: "",
  prev_page_token: "",
  last_page_token: "",
  page_index: 0
}
export const scope = { repo, org_url_slug: "acme" }
export const RUN_EXAMPLE = {
  id: "3f0c2a6e-8b1d-4c5e-9a7f-1e2d3c4b5a69",
  branch: "trunk-merge/pr-8/3f0c2a6e",
  status: "in_progress",
  queueType: "main",
  parentRunId: null,
  baseSha: "1e4c2f6a8b0d2e4f6a8c0e2f4a6c8e0a2c4e6f80",
  testBranchSha: "6064d390e179c0e84933c9c347fee37cb993705d",
  prNumbers: [8],
  testedPrNumbers: [8],
  dependentPrs: [],
  failureReason: null,
  createdAt: "2026-11-26T12:00:00.000Z",
  endedAt: null
}
export const ENTRY_VIEW_EXAMPLE = {
  prNumber: 8,
  title: "Add the checkout page",
  author: "alice",
  state: "testing",
  priorityValue: 100,
  submittedAt: "2026-11-26T11:58:00.000Z",
  stateChangedAt: "2026-11-26T12:00:00.000Z",
  endedAt: null,
  reason: "",
  runId: "3f0c2a6e-8b1d-4c5e-9a7f-1e2d3c4b5a69"
}
export const testCase = {
  id: "1a6f3ac1-6b1f-5a0e-9d3c-1d0f1b3f6a2e",
  repository: { html_url: "https://github.com/acme/web" },
  html_url: "https://greenline.example/flaky/tests/1a6f3ac1-6b1f-5a0e-9d3c-1d0f1b3f6a2e",
  name: "divides sometimes",
  variant: "",
  status: { value: "flaky", reason: "passed and failed on the same commit", timestamp: "2026-11-26T12:00:00Z" },
  most_common_failures: [
    { summary: "expected 2, got 3", occurrence_count: 4, last_occurrence: "2026-11-26T12:00:00Z" }
  ],
  failure_rate_last_7d: 0.12,
  failure_rate_last_24h: 0.2,
  codeowners: ["@acme/math"],
  pull_requests_impacted_last_7d: 3,
  quarantined: true,
  file_path: "test/math.test.js",
  parent: "math",
  classname: "math",
  ticket: null
}

export interface OpDoc {
  readonly summary: string
  readonly description: string
  readonly request?: unknown
  readonly response?: unknown
}

export const WEBHOOK_ENDPOINT_EXAMPLE = {
  id: "5d1c9a62-7a3e-4f0b-9a84-0c2b7e1d6f35",
  url: "https://hooks.example/greenline",
  description: "deploys",
  eventTypes: ["pull_request.merged"],
  repo: null,
  disabled: false,
  disabledReason: null,
  createdAt: "2026-11-26T12:00:00.000Z",
  updatedAt: "2026-11-26T12:00:00.000Z",
  health: {
    state: "healthy",
    failingSince: null,
    nextProbeAt: null,
    lastSuccessAt: "2026-11-26T12:05:05.000Z",
    pending: 0,
    failed: 0
  }
}

export const QUARANTINE_EXAMPLE = {
  test_case_id: "d3b07384-d9a0-5c1b-8f3e-2a4b6c8d0e1f",
  name: "adds two numbers",
  classname: "math",
  file: "test/math.test.js",
  parent: "math",
  variant: "",
  quarantine_setting: "always_quarantine",
  quarantined: true,
  status: "flaky",
  owner: "@acme/web",
  reason: "times out on the shared runners",
  ticket_url: "https://issues.example/WEB-12",
  expires_at: "2026-12-31T00:00:00.000Z",
  set_at: "2026-11-26T12:00:00.000Z"
}
