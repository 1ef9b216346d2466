import type * as OpenApi from "@effect/platform/OpenApi"
import { defaultQueueConfig } from "../queue/schemas.ts"
import type { OpName } from "./Api.ts"
import type { ErrorCode } from "./errors.ts"

/**
 * The OpenAPI document as users read it: the document `OpenApi.fromApi` generates from the schemas, completed with
 * what schemas cannot say: a summary, a description and request/answer examples for every operation (the examples
 * are the contract's: shared/spec/contract.md), the query parameters of getMergeQueueMetrics, the server from
 * PUBLIC_URL, and the error envelope as a component, in place of Effect's internal decode error (the router never
 * answers with it). Unknown request fields are ignored (and named in `Greenline-Ignored-Fields`), so no schema says
 * `additionalProperties: false`.
 */

const repo = { host: "github.com", owner: "acme", name: "web" }
const key = { repo, targetBranch: "main" }
// the defaults, as a new queue has them, with two testing slots and a required status
const queueConfig = { ...defaultQueueConfig("main"), concurrency: 2, requiredStatuses: ["ci"] }
const entry = {
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
const page = {
  total_rows: 1,
  total_pages: 1,
  next_page_token: "",
  prev_page_token: "",
  last_page_token: "",
  page_index: 0
}
const scope = { repo, org_url_slug: "acme" }
const RUN_EXAMPLE = {
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
const ENTRY_VIEW_EXAMPLE = {
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
const testCase = {
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

interface OpDoc {
  readonly summary: string
  readonly description: string
  readonly request?: unknown
  readonly response?: unknown
}

const WEBHOOK_ENDPOINT_EXAMPLE = {
  id: "5d1c9a62-7a3e-4f0b-9a84-0c2b7e1d6f35",
  url: "https://hooks.example/greenline",
  description: "deploys",
  eventTypes: ["pull_request.merged"],
  repo: null,
  disabled: false,
  disabledReason: null,
  createdAt: "2026-11-26T12:00:00.000Z",
  updatedAt: "2026-11-26T12:00:00.000Z"
}

const QUARANTINE_EXAMPLE = {
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

/** Every operation's documentation: an operation without it does not compile. */
export const OP_DOCS: Record<OpName, OpDoc> = {
  createQueue: {
    summary: "Create a merge queue",
    description:
      "Creates the queue of a repository's target branch, with the settings given (the others take their defaults). The repository must belong to the token's organization (an organization with claim-on-first-use takes an unclaimed one). 409 QUEUE_ALREADY_EXISTS when it exists.",
    request: { ...key, concurrency: 2 },
    response: queueConfig
  },
  deleteQueue: {
    summary: "Delete a merge queue",
    description:
      "Deletes an empty queue. 409 QUEUE_NOT_EMPTY while pull requests are in it: cancel them, or drain it first.",
    request: key,
    response: {}
  },
  getQueue: {
    summary: "Read a merge queue and its pull requests",
    description:
      "The queue's settings and every pull request in it, in queue order (`position` 1 is the head). Answers what the previous write changed.",
    request: key,
    response: { ...queueConfig, enqueuedPullRequests: [entry], runnerError: null }
  },
  updateQueue: {
    summary: "Change a merge queue's settings",
    description:
      "Changes only the fields given. `state`: `running`, `paused` (nothing starts or merges, submissions wait) or `draining` (passing runs still merge, nothing new starts).",
    request: { ...key, state: "paused", requiredStatuses: ["ci"] },
    response: { ...queueConfig, state: "paused" }
  },
  submitPullRequest: {
    summary: "Submit a pull request",
    description:
      "Adds a pull request to the queue. `priority`: 0-255 (lower goes first) or `urgent` (0, interrupts running tests), `high` (10), `medium` (100, the default), `low` (200). `noBatch` keeps it out of batches.",
    request: { ...key, pr: { number: 42 }, priority: "high" },
    response: {}
  },
  cancelPullRequest: {
    summary: "Cancel a pull request",
    description:
      "Takes a pull request out of the queue; its test runs stop. 409 PR_NOT_ACTIVE when it is not in the queue.",
    request: { ...key, pr: { number: 42 } },
    response: {}
  },
  restartTestsOnPullRequest: {
    summary: "Restart a pull request's tests",
    description: "Builds and tests the pull request's test branch again (reason RESTART_REQUESTED).",
    request: { ...key, pr: { number: 42 } },
    response: {}
  },
  getSubmittedPullRequest: {
    summary: "Read a submitted pull request",
    description:
      "State, priority, position and test run of a pull request, whether or not it is still in the queue; with `includeTimeline`, every state change with its time and reason.",
    request: { ...key, pr: { number: 1 }, includeTimeline: true },
    response: {
      ...entry,
      state: "merged",
      position: null,
      testRunId: null,
      verifiedByTestRun: "4f1fa8d3-5a42-431a-8d9f-4962ec71b18a",
      readiness: {
        hasImpactedTargets: false,
        requiresImpactedTargets: false,
        doesBaseBranchMatch: true,
        gitHubMergeability: "unspecified"
      },
      forceEnqueued: false,
      isCurrentlySubmittedToQueue: false,
      timeline: [
        { at: "2026-11-26T13:42:55.585Z", state: "pending", reason: "SUBMITTED" },
        { at: "2026-11-26T13:42:55.585Z", state: "testing", reason: "TEST_RUN_STARTED" },
        { at: "2026-11-26T13:42:57.966Z", state: "tests_passed", reason: "TEST_RUN_PASSED" },
        { at: "2026-11-26T13:42:58.571Z", state: "merged", reason: "MERGED" }
      ]
    }
  },
  getMergeQueueTestingDetails: {
    summary: "Read a test run",
    description:
      "The test branch and its SHA, the required statuses (and where they came from), the statuses reported so far, and the pull requests the run tests.",
    request: { ...key, testRunId: "07491a2f-e25e-459a-a138-6a85a845c5e8" }
  },
  setImpactedTargets: {
    summary: "Declare a pull request's impacted targets",
    description:
      'Parallel queues: the targets a pull request\'s head SHA touches, or `"ALL"`. Pull requests whose targets intersect are tested one on top of the other; disjoint ones in independent lanes.',
    request: {
      ...key,
      pr: { number: 42, sha: "6064d390e179c0e84933c9c347fee37cb993705d" },
      impactedTargets: ["frontend"]
    },
    response: {}
  },
  getMergeQueueMetrics: {
    summary: "Queue metrics in the Prometheus text format",
    description:
      "The hosted product's `mq_*` series for the organization's queues (or one repository's): gauges of the current depth and test slots, and one-hour snapshots (`*_1h_*`: what happened in the last hour, as gauges and histograms; read them as they are, never with `rate()`).",
    response:
      '# HELP mq_depth_current Active pull requests in the queue, not counting those waiting for readiness\n# TYPE mq_depth_current gauge\nmq_depth_current{repo="acme/web",branch="main",queue_type="main"} 3\n'
  },
  listFailingTests: {
    summary: "List the tests that failed in a time range",
    description: "Tests with at least one failure between `start_time` and `end_time`, by name, a page at a time.",
    request: {
      ...scope,
      start_time: "2026-11-25T00:00:00Z",
      end_time: "2026-11-26T00:00:00Z",
      page_query: { page_size: 20, page_token: "" }
    },
    response: { tests: [testCase], page }
  },
  listQuarantinedTests: {
    summary: "List the quarantined tests",
    description:
      "Tests whose failures do not fail CI: quarantined by an override (`always_quarantine`) or automatically.",
    request: { ...scope, page_query: { page_size: 20, page_token: "" } }
  },
  getTestDetails: {
    summary: "Read one test",
    description: "A test case's status, failure rates, most common failures, code owners and ticket.",
    request: { ...scope, test_id: testCase.id },
    response: { test: testCase }
  },
  listUnhealthyTests: {
    summary: "List flaky or broken tests",
    description: "Tests classified `flaky` (passed and failed on the same code) or `broken` (failing every time).",
    request: { ...scope, status: "flaky", page_query: { page_size: 20, page_token: "" } },
    response: { tests: [testCase], page }
  },
  linkTicketToTestCase: {
    summary: "Link a ticket to a test",
    description: "Records the issue tracking a test's repair; shown with the test.",
    request: {
      ...scope,
      test_case_id: testCase.id,
      external_ticket_id: "ACME-123",
      html_url: "https://tracker.example/ACME-123"
    },
    response: {}
  },
  setQuarantineOverride: {
    summary: "Override quarantine for one test",
    description:
      "`always_quarantine`, `never_quarantine`, or `unspecified` (the repository's settings and the test's status decide).",
    request: { ...scope, test_case_id: testCase.id, override: "always_quarantine" },
    response: {}
  },
  getFlakySettings: {
    summary: "Read a repository's flaky-test settings",
    description: "Whether quarantining is on, and whether flaky tests are quarantined automatically.",
    request: scope,
    response: { quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 20 }
  },
  updateFlakySettings: {
    summary: "Change a repository's flaky-test settings",
    description: "Changes only the fields given.",
    request: { ...scope, quarantining_enabled: true, auto_quarantine: true },
    response: { quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 20 }
  },
  uploadTestResults: {
    summary: "Upload JUnit results",
    description:
      "A multipart body: a `metadata` part (JSON: repo, org_url_slug, sha, branch, optional pr_number, variant, job_name) and one or more `junit` parts (XML, gzip allowed). The answer says whether every failure is quarantined: the CI job may pass then. The `greenline` CI client (`GET /cli/greenline.mjs`) sends it for you.",
    response: {
      upload_id: "5c0b8f0e-8d6c-4f7e-9a51-2f7b6e1d9c3a",
      tests: 120,
      passed: 118,
      failed: 1,
      skipped: 1,
      ignored: 0,
      quarantined_failures: 1,
      unquarantined_failures: 0,
      all_failures_quarantined: true
    }
  },
  reportStatus: {
    summary: "Report a commit status (extension)",
    description:
      "For CI that is not the built-in one and not GitHub: reports a status on a test branch's SHA; the queue's required statuses decide when the run passed.",
    request: {
      repo: { host: "local", owner: "acme", name: "app" },
      sha: "6064d390e179c0e84933c9c347fee37cb993705d",
      context: "ci",
      state: "success",
      targetUrl: "https://ci.example/123"
    },
    response: {}
  },
  adminCreateOrganization: {
    summary: "Create an organization (admin)",
    description: "Admin tokens only. Nothing happens when it exists.",
    request: { slug: "acme" },
    response: { id: "0b9c8a8e-3f3a-4d55-9a57-0e4f8d7a2c11", slug: "acme" }
  },
  adminCreateToken: {
    summary: "Create an API token (admin)",
    description: "Admin tokens only. The answer is the only place the token is shown: it is stored as a hash.",
    request: { org: "acme", name: "ci", admin: false },
    response: { id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f", token: "glt_2b7Q0c1v1l8Zf3x9J0u2m8Qk6V4y5T7w1r3e5t7y9u0" }
  },
  adminListTokens: {
    summary: "List an organization's tokens (admin)",
    description: "Admin tokens only. Ids, names, creation and revocation times; never the tokens.",
    request: { org: "acme" },
    response: {
      tokens: [
        {
          id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f",
          name: "ci",
          admin: false,
          createdAt: "2026-11-26T12:00:00.000Z",
          revokedAt: null
        }
      ]
    }
  },
  adminRevokeToken: {
    summary: "Revoke a token (admin)",
    description:
      "Admin tokens only. Every instance stops accepting the token at once. 404 when there is no such token.",
    request: { id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f" },
    response: {}
  },
  listQueues: {
    summary: "List the organization's queues with their figures (extension)",
    description:
      "Every queue of the caller's organization: state, mode, concurrency, entries waiting, testing and not ready, merged, failed and cancelled in 24 h, the success rate and the p50 time from submission to merge. The dashboard's home page.",
    request: {},
    response: {
      queues: [
        {
          repo,
          targetBranch: "main",
          state: "running",
          mode: "single",
          concurrency: 2,
          waiting: 3,
          testing: 2,
          notReady: 1,
          merged24h: 41,
          failed24h: 3,
          cancelled24h: 2,
          successRate24h: 0.93,
          p50TimeInQueueSeconds: 1260
        }
      ]
    }
  },
  getQueueActivity: {
    summary: "Read a queue's runs in flight, active entries and recent conclusions (extension)",
    description:
      "The runs being built or tested (what each is built on, which PRs it tests, bisection halves), the active entries with their submission time, and the last 30 merged, failed or cancelled entries with their reason and (failed) the run that failed them. A not_ready entry also says what it waits for (`readiness`): in a parallel queue, the impacted targets of its current head, and when it is cancelled if it stays not ready (notReadyTimeoutHours).",
    request: key,
    response: {
      runs: [RUN_EXAMPLE],
      active: [
        ENTRY_VIEW_EXAMPLE,
        {
          ...ENTRY_VIEW_EXAMPLE,
          prNumber: 43,
          state: "not_ready",
          runId: null,
          reason: "NOT_READY",
          readiness: {
            headSha: "6064d390e179c0e84933c9c347fee37cb993705d",
            impactedTargetsRequired: true,
            impactedTargetsUploaded: false,
            cancelsAt: "2026-11-27T12:00:00.000Z"
          }
        }
      ],
      recent: [
        { ...ENTRY_VIEW_EXAMPLE, prNumber: 7, state: "merged", endedAt: "2026-11-26T12:00:00.000Z", reason: "MERGED" }
      ]
    }
  },
  getQueueHealth: {
    summary: "Read a queue's health over time (extension)",
    description:
      "Per hour or day over 1 to 90 days (default 7, daily past 2 days): conclusions by reason, time in queue p50/p95/p99, CI runs and restarts per merged PR, queue depth, average batch size, testing slots used, and the PRs that concluded in each bucket.",
    request: { ...key, days: 7, bucket: "day" },
    response: {
      bucketSeconds: 86400,
      concurrency: 2,
      batchSize: 4,
      points: [
        {
          start: "2026-11-25T00:00:00.000Z",
          merged: 12,
          failed: 1,
          cancelled: 0,
          reasons: { merged: 12, TEST_RUN_FAILED: 1 },
          timeInQueueP50: 1260,
          timeInQueueP95: 3400,
          timeInQueueP99: 4100,
          ciRunsPerMerge: 1.2,
          restartsPerMerge: 0.1,
          depth: 3,
          averageBatchSize: 1,
          slotsUsed: 2,
          prs: [{ prNumber: 7, state: "merged", reason: "MERGED" }]
        }
      ]
    }
  },
  getPullRequestActivity: {
    summary: "Read a pull request's runs, CI output and comments (extension)",
    description:
      "The PR as getSubmittedPullRequest answers it with its timeline, every test run it was part of (newest first), the built-in CI's output of those runs (the last 64 KiB each) and the comments the queue recorded. Without targetBranch, the queue it was last submitted to.",
    request: { repo, pr: { number: 42 } },
    response: {
      targetBranch: "main",
      targetBranches: ["main"],
      pullRequest: {
        ...entry,
        state: "testing",
        readiness: {
          hasImpactedTargets: false,
          requiresImpactedTargets: false,
          doesBaseBranchMatch: true,
          gitHubMergeability: "unspecified"
        },
        forceEnqueued: false,
        isCurrentlySubmittedToQueue: true
      },
      runs: [RUN_EXAMPLE],
      ciOutputs: [
        {
          id: "1d6f3e0a-5c2b-4a8e-9f7d-2b3c4d5e6f70",
          runId: RUN_EXAMPLE.id,
          sha: "6064d390e179c0e84933c9c347fee37cb993705d",
          exitCode: 0,
          createdAt: "2026-11-26T12:00:00.000Z",
          output: "npm test\n42 passed\n",
          truncated: false
        }
      ],
      comments: [{ id: "c1", body: "Queued: waiting for a testing slot", createdAt: "2026-11-26T12:00:00.000Z" }]
    }
  },
  getTestHistory: {
    summary: "Read a test's daily failure rate, recent results and status history (extension)",
    description:
      "Runs, failures and the failure rate per day (UTC) over `days` (1 to 90, default 30), the 30 latest results with commit, branch, PR, outcome and upload id, and its status history: the last 100 changes of its status (healthy, flaky, broken, with the classification's reason), of its quarantine (quarantined, released) and of its quarantine override (with owner and reason, or `expired`), newest first.",
    request: { repo, test_id: "3f1d2c4b-5a69-4e8f-9b0a-1c2d3e4f5a6b", days: 30 },
    response: {
      daily: [{ day: "2026-11-25", runs: 40, failures: 2, failureRate: 0.05 }],
      recent: [
        {
          runAt: "2026-11-26T12:00:00.000Z",
          sha: "6064d390e179c0e84933c9c347fee37cb993705d",
          branch: "main",
          prNumber: null,
          status: "failed",
          failureSummary: "expected 2, got 3",
          uploadId: "9b2e4c1a-7d3f-4e5a-8b6c-0d1e2f3a4b5c"
        }
      ],
      statusHistory: [
        {
          at: "2026-11-26T12:00:00.000Z",
          kind: "quarantine",
          previous: "released",
          current: "quarantined",
          reason: "",
          actor: null
        },
        {
          at: "2026-11-26T12:00:00.000Z",
          kind: "status",
          previous: "healthy",
          current: "flaky",
          reason: "passed and failed on the same commit",
          actor: null
        }
      ]
    }
  },
  listApiTokens: {
    summary: "List the organization's API tokens (extension)",
    description: "Ids, names, creation and revocation times of the caller's organization's tokens; never the tokens.",
    request: {},
    response: {
      tokens: [
        {
          id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f",
          name: "ci",
          createdAt: "2026-11-26T12:00:00.000Z",
          revokedAt: null
        }
      ]
    }
  },
  createApiToken: {
    summary: "Create an API token for the organization (extension)",
    description: "The answer is the only place the token is shown: it is stored as a hash.",
    request: { name: "ci" },
    response: {
      id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f",
      name: "ci",
      token: "glt_2b7Q0c1v1l8Zf3x9J0u2m8Qk6V4y5T7w1r3e5t7y9u0"
    }
  },
  revokeApiToken: {
    summary: "Revoke one of the organization's API tokens (extension)",
    description:
      "Every instance stops accepting the token at once, and the dashboard sessions opened with it end. 404 for a token of another organization.",
    request: { id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f" },
    response: {}
  },
  adminAddRepository: {
    summary: "Give a repository to an organization (admin)",
    description: "Admin tokens only. 400 when the repository belongs to another organization.",
    request: { org: "acme", repo },
    response: { id: "2f1e0d9c-8b7a-4c6d-9e8f-7a6b5c4d3e2f", repo }
  },
  exportQuarantine: {
    summary: "Export a repository's quarantine state (extension)",
    description:
      "The repository's flaky-test settings and every test with a quarantine override or in quarantine, with the " +
      "override's owner, reason, ticket and expiry. `repo` is `host/owner/name` (or `owner/name` on github.com). " +
      "The same document is accepted by importQuarantine.",
    request: { org_url_slug: "acme", repo: "github.com/acme/web" },
    response: {
      repo,
      exported_at: "2026-11-26T12:00:00.000Z",
      settings: { quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 20 },
      tests: [QUARANTINE_EXAMPLE]
    }
  },
  exportQuarantineCsv: {
    summary: "Export a repository's quarantine state as CSV (extension)",
    description: "exportQuarantine as CSV, one test a row with a header row; importQuarantine takes it in `csv`.",
    request: { org_url_slug: "acme", repo: "github.com/acme/web" },
    response:
      "test_case_id,name,classname,file,parent,variant,quarantine_setting,quarantined,status,owner,reason,ticket_url,expires_at,set_at\n" +
      "d3b07384-d9a0-5c1b-8f3e-2a4b6c8d0e1f,adds two numbers,math,test/math.test.js,math,,always_quarantine,true,flaky,@acme/web,times out on the shared runners,https://issues.example/WEB-12,2026-12-31T00:00:00.000Z,2026-11-26T12:00:00.000Z\n"
  },
  createWebhookEndpoint: {
    summary: "Register a webhook endpoint (extension)",
    description:
      "Events are signed by Standard Webhooks 1.0 (`webhook-id`, `webhook-timestamp`, `webhook-signature`, and the " +
      "same under `svix-*`), retried for days, and delivered in order per pull request. `eventTypes` limits the " +
      "types (all when left out); `repo` limits the repository. The secret is shown only in this answer.",
    request: { url: "https://hooks.example/greenline", description: "deploys", eventTypes: ["pull_request.merged"] },
    response: { ...WEBHOOK_ENDPOINT_EXAMPLE, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }
  },
  listWebhookEndpoints: {
    summary: "List the organization's webhook endpoints (extension)",
    description: "Every endpoint with its filters and whether it is disabled (and why); never the secrets.",
    request: {},
    response: { endpoints: [WEBHOOK_ENDPOINT_EXAMPLE] }
  },
  updateWebhookEndpoint: {
    summary: "Change a webhook endpoint (extension)",
    description:
      "Changes the address, description or event types, or disables and enables it again (`disabled`). " +
      "`eventTypes: null` means every type.",
    request: { id: WEBHOOK_ENDPOINT_EXAMPLE.id, disabled: true },
    response: { ...WEBHOOK_ENDPOINT_EXAMPLE, disabled: true, disabledReason: "disabled through the API" }
  },
  deleteWebhookEndpoint: {
    summary: "Delete a webhook endpoint (extension)",
    description: "The endpoint and its delivery log; messages not yet delivered are dropped.",
    request: { id: WEBHOOK_ENDPOINT_EXAMPLE.id },
    response: {}
  },
  rotateWebhookSecret: {
    summary: "Rotate a webhook endpoint's secret (extension)",
    description:
      "A new secret, shown only here. For 24 hours both the old and the new signature are sent, space-separated, " +
      "so a receiver can switch without losing a message.",
    request: { id: WEBHOOK_ENDPOINT_EXAMPLE.id },
    response: { id: WEBHOOK_ENDPOINT_EXAMPLE.id, secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD" }
  },
  listWebhookDeliveries: {
    summary: "An endpoint's delivery log (extension)",
    description: "Each message with its attempts (time, the receiver's status, duration, error), newest first, paged.",
    request: { endpointId: WEBHOOK_ENDPOINT_EXAMPLE.id, page_query: { page_size: 20, page_token: "" } },
    response: {
      messages: [
        {
          id: "msg_2f1e0d9c8b7a4c6d9e8f7a6b5c4d3e2f",
          eventType: "pull_request.merged",
          timestamp: "2026-11-26T12:00:00.000Z",
          status: "delivered",
          nextAttemptAt: null,
          attempts: [
            { at: "2026-11-26T12:00:05.000Z", status: 500, durationMs: 41, error: "HTTP 500" },
            { at: "2026-11-26T12:05:05.000Z", status: 200, durationMs: 12, error: null }
          ]
        }
      ],
      page: { next_page_token: "" }
    }
  },
  replayWebhookMessages: {
    summary: "Deliver messages again (extension)",
    description:
      "Sends the endpoint's messages since a time, or the listed ones, again, with their original ids so a " +
      "receiver can tell a replay from a new event.",
    request: { endpointId: WEBHOOK_ENDPOINT_EXAMPLE.id, since: "2026-11-26T00:00:00.000Z" },
    response: { replayed: 12 }
  },
  importQuarantine: {
    summary: "Import a quarantine state (extension)",
    description:
      "Sets the quarantine overrides of the listed tests (by `test_case_id`, or by name with classname, file, " +
      "parent and variant), from exportQuarantine's `tests` or its CSV text in `csv`: one of the two. All or nothing.",
    request: {
      org_url_slug: "acme",
      repo,
      tests: [
        {
          name: "adds two numbers",
          classname: "math",
          file: "test/math.test.js",
          quarantine_setting: "always_quarantine"
        }
      ]
    },
    response: { imported: 1, created: 1, cleared: 0 }
  }
}

export const ERROR_CODES: ReadonlyArray<ErrorCode> = [
  "INVALID_REQUEST",
  "TIME_RANGE_INVALID",
  "INVALID_PAGE_TOKEN",
  "INVALID_JUNIT",
  "UNAUTHORIZED",
  "NOT_FOUND",
  "QUEUE_NOT_FOUND",
  "PR_NOT_FOUND",
  "TEST_RUN_NOT_FOUND",
  "TEST_CASE_NOT_FOUND",
  "QUEUE_ALREADY_EXISTS",
  "QUEUE_NOT_EMPTY",
  "PR_NOT_ACTIVE",
  "PR_TESTS_NOT_RESTARTABLE",
  "PAYLOAD_TOO_LARGE",
  "UNSUPPORTED_MEDIA_TYPE",
  "RATE_LIMITED",
  "NOT_IMPLEMENTED",
  "INTERNAL"
]

const errorEnvelope = {
  type: "object",
  description:
    "Every error answer (contract.md §1): a stable code, a message for people, and for INVALID_REQUEST one detail per field (`path` dotted, e.g. `pr.number`).",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", enum: ERROR_CODES },
        message: { type: "string" },
        details: {
          type: "array",
          items: {
            type: "object",
            required: ["path", "message"],
            properties: { path: { type: "string" }, message: { type: "string" } }
          }
        }
      }
    }
  },
  example: {
    error: {
      code: "INVALID_REQUEST",
      message: "invalid request: concurrency Expected an integer, actual 1.5",
      details: [{ path: "concurrency", message: "Expected an integer, actual 1.5" }]
    }
  }
}

const ERROR_DESCRIPTIONS: Record<string, string> = {
  "400": "Invalid request (INVALID_REQUEST, with a detail per field; or a feature's own code)",
  "401": "No valid API token (UNAUTHORIZED)",
  "404": "Not found, or another organization's (QUEUE_NOT_FOUND, PR_NOT_FOUND, ...)",
  "409": "Conflicts with the current state (QUEUE_ALREADY_EXISTS, QUEUE_NOT_EMPTY, PR_NOT_ACTIVE, ...)",
  "413": "The body is over 20 MiB (PAYLOAD_TOO_LARGE)",
  "415": "The body is not JSON (UNSUPPORTED_MEDIA_TYPE)",
  "429": "Over the token's rate limit (RATE_LIMITED, with Retry-After)",
  "500": "The server failed (INTERNAL)"
}

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** Drops `additionalProperties: false` everywhere (unknown fields are ignored, not refused). */
const openObjects = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(openObjects)
  if (!isObject(value)) return value
  const out: Json = {}
  for (const [k, v] of Object.entries(value)) {
    if (k === "additionalProperties" && v === false) continue
    out[k] = openObjects(v)
  }
  return out
}

/** The document for readers: see the module's comment. `publicUrl` is the server's address (PUBLIC_URL). */
export const refineDocument = (generated: OpenApi.OpenAPISpec, publicUrl: string): OpenApi.OpenAPISpec => {
  const doc = openObjects(structuredClone(generated)) as Json & {
    paths: Record<string, Record<string, Json>>
    components: Json & { schemas: Record<string, unknown> }
  }
  doc.servers = [{ url: publicUrl, description: "this server (PUBLIC_URL)" }]
  const schemas = doc.components.schemas
  delete schemas.HttpApiDecodeError
  delete schemas.Issue
  delete schemas.PropertyKey
  delete schemas.MetricsQuery
  schemas.ErrorEnvelope = errorEnvelope
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      if (!isObject(op) || !isObject(op.responses)) continue
      const name = String(op.operationId ?? "").replace(/^[^.]*\./, "")
      const about: OpDoc | undefined = name in OP_DOCS ? OP_DOCS[name as OpName] : undefined
      if (about !== undefined) {
        op.summary = about.summary
        op.description = about.description
      }
      op.operationId = name
      const body = isObject(op.requestBody) && isObject(op.requestBody.content) ? op.requestBody.content : undefined
      const json = body !== undefined && isObject(body["application/json"]) ? body["application/json"] : undefined
      if (json !== undefined && about?.request !== undefined) json.example = about.request
      for (const [status, response] of Object.entries(op.responses as Json)) {
        if (!isObject(response)) continue
        if (status === "200") {
          const content = isObject(response.content) ? response.content : {}
          const media = Object.values(content)[0]
          if (isObject(media) && about?.response !== undefined) media.example = about.response
          response.description = about?.summary ?? "OK"
          continue
        }
        ;(op.responses as Json)[status] = {
          description: ERROR_DESCRIPTIONS[status] ?? "Error",
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } }
        }
      }
      if (name === "getMergeQueueMetrics") {
        op.parameters = [
          {
            name: "repo",
            in: "query",
            required: false,
            description: "Only this repository's queues: `owner/name` (default: every queue of the organization)",
            schema: { type: "string", example: "acme/web" }
          },
          {
            name: "repoHost",
            in: "query",
            required: false,
            description: "The repository's host, with `repo` (default `github.com`)",
            schema: { type: "string", example: "github.com" }
          }
        ]
      }
    }
  }
  return doc as unknown as OpenApi.OpenAPISpec
}
