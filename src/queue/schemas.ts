import { ParseResult, Schema } from "effect"

/** Request and answer schemas of the merge-queue endpoints (contract.md §2, §4). */

const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
/** Why PostgreSQL cannot store `s` (NUL in text and jsonb; a lone surrogate in jsonb), or undefined when it can. */
export const unstorableReason = (s: string): string | undefined => {
  if (s.includes("\u0000")) return "must not contain NUL (\\u0000)"
  if (loneSurrogate.test(s)) return "must not contain a lone UTF-16 surrogate"
  return undefined
}

/**
 * A string of at most `max` characters that PostgreSQL can store (`min` 1: non-empty). The bounds follow GitHub's
 * own where it has one (a label: 50, a ref: 255), generous elsewhere: they keep a mistaken megabyte out of the
 * database and the logs, not real names out.
 */
export const Text = (max: number, min = 0) =>
  Schema.String.pipe(
    Schema.minLength(min, { message: () => "must be a non-empty string" }),
    Schema.maxLength(max, { message: () => `must be at most ${max} characters` }),
    Schema.filter((s) => unstorableReason(s) ?? true, { jsonSchema: {} })
  )
/** Lengths of the API's strings (characters). */
export const MAX_LEN = {
  host: 253,
  owner: 100,
  name: 100,
  branch: 255,
  sha: 255,
  context: 255,
  label: 50,
  login: 100,
  id: 255,
  url: 2048,
  description: 1024,
  target: 1024
} as const

/**
 * A link the dashboard shows (a status's target, a ticket): an absolute http or https URL of at most MAX_LEN.url
 * characters. Anything else (`javascript:`, `data:`, a relative path) is refused: a link is followed by people.
 */
export const HttpUrl = Text(MAX_LEN.url).pipe(
  Schema.filter(
    (s) => {
      try {
        const u = new URL(s)
        return u.protocol === "http:" || u.protocol === "https:"
      } catch {
        return false
      }
    },
    {
      message: () => "must be an http or https URL",
      jsonSchema: { format: "uri", pattern: "^[Hh][Tt][Tt][Pp][Ss]?://" }
    }
  )
)

export const RepoRef = Schema.Struct({
  host: Text(MAX_LEN.host, 1),
  owner: Text(MAX_LEN.owner, 1),
  name: Text(MAX_LEN.name, 1)
}).annotations({ identifier: "Repo" })
export type RepoRef = typeof RepoRef.Type

export const MAX_U32 = 4294967295

/** Integer settings: 1..4294967295. */
export const U32 = Schema.Int.pipe(
  Schema.between(1, MAX_U32, { message: () => `must be an integer from 1 to ${MAX_U32}` })
).annotations({ identifier: "PositiveInt32" })

/** `pr.number`: an integer, or a decimal string some CI scripts send. */
export const PrNumber = Schema.Union(
  U32,
  Schema.compose(Schema.String.pipe(Schema.pattern(/^[0-9]{1,10}$/)), Schema.NumberFromString).pipe(Schema.compose(U32))
).annotations({ identifier: "PrNumber", message: () => `must be an integer from 1 to ${MAX_U32}` })

/** An enum accepted in any letter case, documented and read as `values` spell it. */
export const CaseInsensitive = <const L extends ReadonlyArray<string>>(...values: L) => {
  const message = `must be one of ${values.join(", ")}`
  // documented as the enum it is (any letter case is accepted)
  const encoded = Schema.String.annotations({ message: () => message, jsonSchema: { type: "string", enum: values } })
  return Schema.transformOrFail(encoded, Schema.Literal(...values), {
    strict: true,
    decode: (s, _, ast) => {
      const lower = s.toLowerCase()
      const found = values.find((v) => v.toLowerCase() === lower)
      return found === undefined
        ? ParseResult.fail(new ParseResult.Type(ast, s, `${message}, not ${JSON.stringify(s)}`))
        : ParseResult.succeed(found as L[number])
    },
    encode: (s) => ParseResult.succeed(s)
  })
}

/** An optional field: absent is fine, `undefined` is not a JSON value anyway. */
export const opt = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

export const QueueStateValue = Schema.Literal("running", "paused", "draining", "switching_modes")
export type QueueStateValue = typeof QueueStateValue.Type
export const RequestedQueueState = CaseInsensitive("running", "paused", "draining")
export const Mode = Schema.Literal("single", "parallel")
export const DirectMergeMode = Schema.Literal("off", "always")
export const OptimizationMode = Schema.Literal("off", "bisection_skip_redundant_tests")
export const MergeMethod = Schema.Literal("merge_commit", "squash", "rebase")
export type MergeMethod = typeof MergeMethod.Type

/** The full configuration of a queue, as updateQueue and getQueue answer it. */
export const QueueConfig = Schema.Struct({
  state: QueueStateValue,
  branch: Schema.String,
  mode: Mode,
  concurrency: Schema.Number,
  bisectionConcurrency: Schema.Number,
  testingTimeoutMinutes: Schema.Number,
  pendingFailureDepth: Schema.Number,
  canOptimisticallyMerge: Schema.Boolean,
  batch: Schema.Boolean,
  batchingMaxWaitTimeMinutes: Schema.Number,
  batchingMinSize: Schema.Number,
  commentsEnabled: Schema.Boolean,
  commandsEnabled: Schema.Boolean,
  createPrsForTestingBranches: Schema.Boolean,
  statusCheckEnabled: Schema.Boolean,
  requiredStatuses: Schema.Array(Schema.String),
  directMergeMode: DirectMergeMode,
  optimizationMode: OptimizationMode,
  mergeMethod: MergeMethod,
  extensionEnabled: Schema.Boolean,
  enqueueingLabel: Schema.NullOr(Schema.String),
  labelCommandsEnabled: Schema.Boolean,
  stateLabelsEnabled: Schema.Boolean,
  allowedBotSubmitters: Schema.Array(Schema.String),
  batchingRules: Schema.Array(Schema.Unknown),
  testBranchConstructionMode: Schema.String,
  notReadyTimeoutHours: Schema.Number,
  /** extension: adaptive mode (planner/adaptive.ts) */
  adaptive: Schema.Boolean,
  /** extension (#20), off by default: a run that failed only in quarantined tests counts as passed */
  quarantinedFailuresPass: opt(Schema.Boolean),
  /** extension (#20), 0 by default: retries of an entry's run whose failures include known-flaky tests */
  flakyRetryBudget: opt(Schema.Number)
}).annotations({ identifier: "QueueConfig" })
export type QueueConfig = typeof QueueConfig.Type

/** The state a queue held before it entered `switching_modes`, and the mode it switches to (not on the wire). */
export interface StoredQueueConfig extends QueueConfig {
  readonly previousState?: "running" | "paused" | "draining" | undefined
  readonly pendingMode?: "single" | "parallel" | undefined
}

export const defaultQueueConfig = (branch: string): QueueConfig => ({
  state: "running",
  branch,
  mode: "single",
  concurrency: 1,
  bisectionConcurrency: 1,
  testingTimeoutMinutes: 300,
  pendingFailureDepth: 0,
  canOptimisticallyMerge: false,
  batch: false,
  batchingMaxWaitTimeMinutes: 5,
  batchingMinSize: 4,
  commentsEnabled: true,
  commandsEnabled: true,
  createPrsForTestingBranches: true,
  statusCheckEnabled: true,
  requiredStatuses: [],
  directMergeMode: "off",
  optimizationMode: "off",
  mergeMethod: "squash",
  extensionEnabled: true,
  enqueueingLabel: null,
  labelCommandsEnabled: true,
  stateLabelsEnabled: false,
  allowedBotSubmitters: [],
  batchingRules: [],
  testBranchConstructionMode: "rename_temp_branch",
  notReadyTimeoutHours: 24,
  adaptive: false
})

const QueueKey = { repo: RepoRef, targetBranch: Text(MAX_LEN.branch, 1) }

export const QueueKeyRequest = Schema.Struct(QueueKey).annotations({ identifier: "QueueKey" })

export const CreateQueueRequest = Schema.Struct({
  ...QueueKey,
  mode: opt(CaseInsensitive("single", "parallel")),
  concurrency: opt(U32)
}).annotations({ identifier: "CreateQueueRequest" })

export const UpdateQueueRequest = Schema.Struct({
  ...QueueKey,
  state: opt(RequestedQueueState),
  mode: opt(CaseInsensitive("single", "parallel")),
  concurrency: opt(U32),
  bisectionConcurrency: opt(U32),
  testingTimeoutMinutes: opt(U32),
  pendingFailureDepth: opt(U32),
  canOptimisticallyMerge: opt(Schema.Boolean),
  batch: opt(Schema.Boolean),
  batchingMaxWaitTimeMinutes: opt(U32),
  batchingMinSize: opt(U32),
  commentsEnabled: opt(Schema.Boolean),
  commandsEnabled: opt(Schema.Boolean),
  createPrsForTestingBranches: opt(Schema.Boolean),
  statusCheckEnabled: opt(Schema.Boolean),
  requiredStatuses: opt(Schema.Array(Text(MAX_LEN.context, 1))),
  deleteRequiredStatuses: opt(Schema.Boolean),
  directMergeMode: opt(CaseInsensitive("off", "always")),
  optimizationMode: opt(CaseInsensitive("off", "bisection_skip_redundant_tests")),
  mergeMethod: opt(CaseInsensitive("merge_commit", "squash", "rebase")),
  extensionEnabled: opt(Schema.Boolean),
  enqueueingLabel: opt(Schema.NullOr(Text(MAX_LEN.label))),
  labelCommandsEnabled: opt(Schema.Boolean),
  stateLabelsEnabled: opt(Schema.Boolean),
  allowedBotSubmitters: opt(Schema.Array(Text(MAX_LEN.login))),
  batchingRules: opt(Schema.Array(Schema.Unknown)),
  testBranchConstructionMode: opt(Text(MAX_LEN.login)),
  notReadyTimeoutHours: opt(U32),
  adaptive: opt(Schema.Boolean),
  quarantinedFailuresPass: opt(Schema.Boolean),
  flakyRetryBudget: opt(U32)
}).annotations({ identifier: "UpdateQueueRequest" })
export type UpdateQueueRequest = typeof UpdateQueueRequest.Type

export const PriorityName = Schema.Literal("urgent", "high", "medium", "low")
export type PriorityName = typeof PriorityName.Type
export const PRIORITY_VALUES: Record<PriorityName, number> = { urgent: 0, high: 10, medium: 100, low: 200 }
export const DEFAULT_PRIORITY = 100

export const Priority = Schema.NullOr(
  Schema.Union(Schema.Int.pipe(Schema.between(0, 255)), CaseInsensitive("urgent", "high", "medium", "low")).annotations(
    { message: () => "must be an integer from 0 to 255 or one of urgent, high, medium, low" }
  )
)

const PrRef = Schema.Struct({ number: PrNumber })

export const PrRequest = Schema.Struct({ ...QueueKey, pr: PrRef }).annotations({ identifier: "PullRequestKey" })
export type PrRequest = typeof PrRequest.Type

export const SubmitRequest = Schema.Struct({
  ...QueueKey,
  pr: PrRef,
  priority: opt(Priority),
  noBatch: opt(Schema.Boolean),
  ignoreFreeze: opt(Schema.Boolean).annotations({
    description:
      "Extension (#31): the pull request merges during a `merge` freeze (role maintain; recorded in the audit log)"
  })
}).annotations({ identifier: "SubmitPullRequestRequest" })

export const GetSubmittedRequest = Schema.Struct({
  ...QueueKey,
  pr: PrRef,
  includeTimeline: opt(Schema.Boolean)
}).annotations({ identifier: "GetSubmittedPullRequestRequest" })

export const ImpactedTargetsValue = Schema.Union(
  Schema.Array(Text(MAX_LEN.target)),
  // documented as the contract spells them (contract.md: "ALL", "IMPACTS_ALL"), accepted in any letter case
  CaseInsensitive("ALL", "IMPACTS_ALL")
)
export const SetImpactedTargetsRequest = Schema.Struct({
  ...QueueKey,
  pr: Schema.Struct({ number: PrNumber, sha: Text(MAX_LEN.sha, 1) }),
  impactedTargets: ImpactedTargetsValue
}).annotations({ identifier: "SetImpactedTargetsRequest" })

export const TestingDetailsRequest = Schema.Struct({
  ...QueueKey,
  testRunId: Text(MAX_LEN.id, 1)
}).annotations({ identifier: "TestingDetailsRequest" })

export const EntryStateValue = Schema.Literal(
  "not_ready",
  "pending",
  "testing",
  "tests_passed",
  "pending_failure",
  "merged",
  "failed",
  "cancelled"
)
export type EntryStateValue = typeof EntryStateValue.Type

export const TimelineItem = Schema.Struct({ at: Schema.String, state: EntryStateValue, reason: Schema.String })

const entryFields = {
  id: Schema.String,
  state: EntryStateValue,
  stateChangedAt: Schema.String,
  priorityValue: Schema.Number,
  priorityName: Schema.String,
  usedDefaultPriorityName: Schema.String,
  skipTheLine: Schema.Boolean,
  noBatch: Schema.Boolean,
  prNumber: Schema.Number,
  prTitle: Schema.String,
  prSha: Schema.String,
  prBaseBranch: Schema.String,
  prAuthor: Schema.String,
  verifiedByTestRun: Schema.NullOr(Schema.String),
  testRunId: Schema.NullOr(Schema.String),
  position: Schema.NullOr(Schema.Number)
}

/** Extension (issue #35): a range of ISO times, the 10th to the 90th percentile of the sampled futures, widened. */
export const EstimateRange = Schema.Struct({ earliest: Schema.String, latest: Schema.String }).annotations({
  identifier: "EstimateRange"
})

/** Extension fields: when the PR is expected to start testing and to merge (planner/estimate.ts), ISO times. */
const estimateFields = {
  estimatedTestingStartAt: opt(Schema.NullOr(Schema.String)),
  estimatedMergeAt: opt(Schema.NullOr(Schema.String)),
  /** issue #35: where the merge (and the start of testing) falls 8 times in 10; null when the point estimate is */
  estimatedTestingStartRange: opt(Schema.NullOr(EstimateRange)),
  estimatedMergeRange: opt(Schema.NullOr(EstimateRange)),
  /** why both are null: FEWER_THAN_3_FINISHED_RUNS, QUEUE_PAUSED or NOT_READY */
  estimateUnavailableReason: opt(Schema.NullOr(Schema.String))
}

/** Extension field (#31): what the PR waits for besides its tests; `FREEZE`: a freeze or merge schedule in force. */
const waitFields = {
  waitReason: opt(Schema.NullOr(Schema.Literal("FREEZE"))).annotations({
    description:
      "Extension (#31): `FREEZE` when the pull request waits for the freeze in force (passed, waiting to merge; or, in an `all` freeze, waiting to start)"
  })
}

export const EnqueuedPullRequest = Schema.Struct({ ...entryFields, ...estimateFields, ...waitFields }).annotations({
  identifier: "EnqueuedPullRequest"
})
export type EnqueuedPullRequest = typeof EnqueuedPullRequest.Type

export const Readiness = Schema.Struct({
  hasImpactedTargets: Schema.Boolean,
  requiresImpactedTargets: Schema.Boolean,
  doesBaseBranchMatch: Schema.Boolean,
  gitHubMergeability: Schema.Literal("unspecified", "in_progress", "mergeable", "not_mergeable")
})

/** Extension: where a PR's time in the queue went (src/queue/timeBreakdown.ts), in milliseconds. */
export const TimeBreakdown = Schema.Struct({
  waitingForSlotMs: Schema.Number,
  waitingForBatchMs: Schema.Number,
  testingMs: Schema.Number,
  restarts: Schema.Array(
    Schema.Struct({
      at: Schema.String,
      reason: Schema.String,
      causedByPr: Schema.NullOr(Schema.Number),
      /** extension (#33): the causing PR's run that failed */
      causedByTestRunId: opt(Schema.NullOr(Schema.String))
    })
  )
}).annotations({ identifier: "TimeBreakdown" })

/** Extension (#33): a failed test of the failing run, marked against the target branch and the flaky-test data. */
export const FailedTestView = Schema.Struct({
  testCaseId: Schema.String,
  name: Schema.String,
  classname: Schema.String,
  file: Schema.String,
  message: Schema.String,
  failureKey: Schema.NullOr(Schema.String).annotations({
    description: "the key of the normalized message and stack trace: failures of one kind share it"
  }),
  mark: Schema.Literal("new", "known_flaky", "broken_on_target").annotations({
    description:
      "new: it passes on the target branch (or never ran there); known_flaky: its status is flaky or it is quarantined; broken_on_target: its latest result on the target branch failed"
  }),
  failureRate: Schema.Number.annotations({ description: "failed results / results of the last 7 days, 0..1" }),
  quarantined: Schema.Boolean
}).annotations({ identifier: "FailedTest" })

/**
 * Extension (#33, failure triage): why the PR failed, read when asked (uploads that arrive later show at once): the
 * failing run, its failed required statuses with their links, the PR whose failure failed it (PREREQUISITE_*), and
 * the failed tests of the JUnit uploads whose commit is the run's test-branch sha.
 */
export const FailureBlock = Schema.Struct({
  at: Schema.String,
  reason: Schema.String,
  testRunId: Schema.NullOr(Schema.String),
  testBranchSha: Schema.NullOr(Schema.String),
  failedStatuses: Schema.Array(
    Schema.Struct({
      context: Schema.String,
      state: Schema.Literal("FAILURE", "ERROR"),
      url: Schema.NullOr(Schema.String)
    })
  ),
  causedBy: Schema.NullOr(Schema.Struct({ prNumber: Schema.Number, testRunId: Schema.NullOr(Schema.String) })),
  tests: Schema.Struct({
    uploads: Schema.Number,
    failed: Schema.Array(FailedTestView),
    truncated: Schema.Boolean
  })
}).annotations({ identifier: "FailureBlock" })
export type FailureBlock = typeof FailureBlock.Type

export const SubmittedPullRequest = Schema.Struct({
  ...entryFields,
  readiness: Readiness,
  forceEnqueued: Schema.Boolean,
  isCurrentlySubmittedToQueue: Schema.Boolean,
  timeline: opt(Schema.Array(TimelineItem)),
  ...estimateFields,
  timeBreakdown: opt(TimeBreakdown),
  /** extension (#33): present when the PR failed */
  failure: opt(FailureBlock)
}).annotations({ identifier: "SubmittedPullRequest" })
export type SubmittedPullRequest = typeof SubmittedPullRequest.Type

/** Extension: adaptive mode's current choice and why (planner/adaptive.ts); null when the mode is off. */
export const AdaptiveChoiceView = Schema.Struct({
  depth: Schema.Number,
  batchSize: Schema.Number,
  bisection: Schema.Number,
  observedFailureRate: Schema.Number,
  observedFlakyRate: Schema.Number,
  reason: Schema.String
}).annotations({ identifier: "AdaptiveChoice" })

/** Extension: the last failure of the queue's runner while it keeps failing (null while it runs). */
export const RunnerError = Schema.Struct({
  message: Schema.String,
  since: Schema.String.annotations({ description: "when the runner started failing (ISO 8601)" })
}).annotations({ identifier: "RunnerError" })
export type RunnerError = typeof RunnerError.Type

/** getQueue's extension field (#31): the freeze (or merge schedule) in force and when it ends. */
export const FreezeInForceView = Schema.Struct({
  source: Schema.Literal("freeze", "schedule"),
  id: Schema.NullOr(Schema.String),
  reason: Schema.String,
  mode: Schema.Literal("merge", "all"),
  endsAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "FreezeInForce" })

/** Extension (#31): a queue's merge schedule: it merges only within these weekly hours, in `timeZone`. */
export const MergeScheduleSchema = Schema.Struct({
  timeZone: Text(64, 1).annotations({ description: "IANA time zone" }),
  windows: Schema.Array(
    Schema.Struct({
      days: Schema.Array(Schema.Int).annotations({ description: "weekdays, 0 (Sunday) to 6 (Saturday)" }),
      from: Text(5, 5).annotations({ description: "HH:MM, opening" }),
      to: Text(5, 5).annotations({ description: "HH:MM, closing (after from, the same day)" })
    })
  ).pipe(Schema.maxItems(50, { message: () => "at most 50 windows" }))
}).annotations({ identifier: "MergeSchedule" })

export const QueueWithEntries = Schema.Struct({
  ...QueueConfig.fields,
  mergeSchedule: opt(Schema.NullOr(MergeScheduleSchema)).annotations({
    description: "Extension (#31): the queue's merge schedule; outside it the queue behaves as in a `merge` freeze"
  }),
  freeze: opt(Schema.NullOr(FreezeInForceView)).annotations({
    description: "Extension (#31): the freeze or merge schedule in force now and when it ends; null when none holds"
  }),
  enqueuedPullRequests: Schema.Array(EnqueuedPullRequest),
  adaptiveChoice: opt(Schema.NullOr(AdaptiveChoiceView)),
  runnerError: Schema.NullOr(RunnerError).annotations({
    description:
      "Extension: the last error of the queue's runner while it cannot run (it is restarted with a backoff); null when it runs"
  })
}).annotations({ identifier: "Queue" })

export const TestingDetails = Schema.Struct({
  requiredStatuses: Schema.Array(Schema.String),
  requiredStatusesSource: Schema.NullOr(
    Schema.Literal("trunk_config", "repo_provider_branch_protection", "merge_instance")
  ),
  testBranch: Schema.String,
  testBranchSha: Schema.String,
  checkSuites: Schema.Array(
    Schema.Struct({
      checkRuns: Schema.Array(
        Schema.Struct({
          name: Schema.String,
          url: Schema.String,
          status: opt(Schema.String),
          conclusion: opt(Schema.NullOr(Schema.String))
        })
      )
    })
  ),
  statusChecks: Schema.Array(
    Schema.Struct({
      context: Schema.String,
      url: Schema.String,
      state: Schema.Literal("SUCCESS", "FAILURE", "ERROR", "PENDING")
    })
  ),
  testedPullRequests: Schema.Array(
    Schema.Struct({ prNumber: Schema.Number, prUrl: Schema.String, title: Schema.String })
  ),
  createdAt: Schema.String,
  status: Schema.Literal("in_progress", "succeeded", "failed", "cancelled"),
  impactedTargets: opt(Schema.Array(Schema.String)),
  impactedTargetsForTestedPrs: opt(Schema.Array(Schema.String)),
  dependentPrs: Schema.Array(Schema.Number)
}).annotations({ identifier: "TestingDetails" })
export type TestingDetails = typeof TestingDetails.Type

export const MetricsQuery = Schema.Struct({
  repo: opt(Text(MAX_LEN.owner + 1 + MAX_LEN.name)),
  repoHost: opt(Text(MAX_LEN.host))
}).annotations({ identifier: "MetricsQuery" })

export const ReportStatusRequest = Schema.Struct({
  repo: RepoRef,
  sha: Text(MAX_LEN.sha, 1),
  context: Text(MAX_LEN.context, 1),
  state: CaseInsensitive("pending", "success", "failure", "error"),
  targetUrl: opt(Schema.NullOr(HttpUrl)),
  description: opt(Schema.NullOr(Text(MAX_LEN.description)))
}).annotations({ identifier: "ReportStatusRequest" })
export type ReportStatusRequest = typeof ReportStatusRequest.Type
