import type { OpName } from "../Api.ts"
import { entry, key, type OpDoc, queueConfig } from "./examples.ts"

/** The merge queue's operations (contract §2) and status reports. */
export const QUEUE_DOCS = {
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
      "Adds a pull request to the queue. `priority`: 0-255 (lower goes first) or `urgent` (0, interrupts running tests), `high` (10), `medium` (100, the default), `low` (200). `noBatch` keeps it out of batches. 409 PR_ALREADY_MERGED when its head is in the target branch already (the queue merged it, or it was merged outside the queue): nothing is queued.",
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
      "State, priority, position and test run of a pull request, whether or not it is still in the queue; with `includeTimeline`, every state change with its time and reason. Extensions: the estimates, the time breakdown (with each restart's causing PR and its failed run), and for a failed PR the `failure` block: the failing run and test-branch SHA, its failed required statuses with their links, the PR whose failure took it out, and the failed tests of the JUnit uploads for that SHA, each marked new, known_flaky or broken_on_target (docs/api-extensions.md, #33).",
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
  }
} satisfies Partial<Record<OpName, OpDoc>>
