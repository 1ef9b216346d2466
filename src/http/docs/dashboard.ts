import type { OpName } from "../Api.ts"
import { ENTRY_VIEW_EXAMPLE, entry, key, type OpDoc, RUN_EXAMPLE, repo } from "./examples.ts"

/** What the dashboard reads: queues, their activity and health, a PR's activity, a test's history. */
export const DASHBOARD_DOCS = {
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
      "Per hour or day over 1 to 90 days (default 7, daily past 2 days): conclusions by reason, time in queue p50/p95/p99 (nearest rank, as listQueues' p50), CI runs and restarts per merged PR (every restart, automatic or requested, with `restartsByCause`), queue depth and testing slots used (the most at once in the bucket, and `depthMean`/`slotsMean`, time-weighted), average batch size, and the PRs that concluded in each bucket.",
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
          restartsByCause: { PREREQUISITE_MERGE_ITEM_FAILED: 1 },
          depth: 3,
          depthMean: 1.4,
          averageBatchSize: 1,
          slotsUsed: 2,
          slotsMean: 1.1,
          prs: [{ prNumber: 7, state: "merged", reason: "MERGED" }]
        }
      ]
    }
  },
  listQueueFailures: {
    summary: "List a queue's last failures, grouped (extension, #33)",
    description:
      "The queue's last `limit` failures (default 50, at most 200), newest first, each with its reason, failing run and causing PR, grouped by reason, by the PR whose failure took others out, and by test failure kind (the normalized message and stack trace of the failed tests in the JUnit uploads of the failing run's test-branch SHA, with each test's mark: new, known_flaky, broken_on_target).",
    request: { ...key, limit: 50 },
    response: {
      failures: [
        {
          prNumber: 6,
          title: "Add the checkout page",
          at: "2026-11-26T12:00:00.000Z",
          reason: "PREREQUISITE_MERGE_ITEM_FAILED",
          testRunId: "07491a2f-e25e-459a-a138-6a85a845c5e8",
          causedByPr: 5,
          failedTests: 1
        }
      ],
      byReason: [{ reason: "PREREQUISITE_MERGE_ITEM_FAILED", count: 1, prs: [6] }],
      byCausingPr: [{ prNumber: 5, count: 1, prs: [6] }],
      byTest: [
        {
          message: "TimeoutError: payment mock did not answer in <duration>",
          tests: ["app.checkout.test_pay"],
          count: 1,
          prs: [5],
          marks: ["known_flaky"]
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
  getUpload: {
    summary: "Read one upload of test results: its commit, counts and failed tests (extension)",
    description:
      "What CI sent in one upload (`uploadTestResults`): commit, branch, PR, job, variant, when the tests ran and when the upload arrived, its counts, whether it reported an infrastructure failure, and its failed test cases by name with their failure summaries (at most 200). The `uploadId` of a test's recent results names it; an id the repository does not have (or an upload removed by retention) is a 404.",
    request: { repo, upload_id: "9b2e4c1a-7d3f-4e5a-8b6c-0d1e2f3a4b5c" },
    response: {
      id: "9b2e4c1a-7d3f-4e5a-8b6c-0d1e2f3a4b5c",
      sha: "6064d390e179c0e84933c9c347fee37cb993705d",
      branch: "main",
      prNumber: 42,
      jobName: "unit",
      variant: "",
      runAt: "2026-11-26T12:00:00.000Z",
      receivedAt: "2026-11-26T12:00:05.000Z",
      tests: 120,
      passed: 118,
      failed: 1,
      skipped: 1,
      ignored: 0,
      infra: false,
      failures: [
        {
          testId: "3f1d2c4b-5a69-4e8f-9b0a-1c2d3e4f5a6b",
          name: "cart adds an item",
          failureSummary: "expected 2, got 3"
        }
      ]
    }
  }
} satisfies Partial<Record<OpName, OpDoc>>
