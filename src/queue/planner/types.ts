/**
 * Types of the pure queue planner. Everything here is plain, JSON-serialisable data: the shell stores a
 * `QueueState` as one JSON document per queue and feeds `PlannerEvent`s to `step`.
 */

export type EntryState =
  | "not_ready"
  | "pending"
  | "testing"
  | "tests_passed"
  | "pending_failure"
  | "merged"
  | "failed"
  | "cancelled"

export type QueueRunState = "running" | "paused" | "draining" | "switching_modes"

export type QueueMode = "single" | "parallel"

export interface PlannerConfig {
  readonly state: QueueRunState
  readonly mode: QueueMode
  readonly concurrency: number
  readonly bisectionConcurrency: number
  readonly testingTimeoutMinutes: number
  /** a `not_ready` entry is cancelled (`NOT_READY_TIMEOUT_EXPIRED`) after this many hours in that state */
  readonly notReadyTimeoutHours: number
  readonly pendingFailureDepth: number
  readonly canOptimisticallyMerge: boolean
  readonly batch: boolean
  readonly batchingMaxWaitTimeMinutes: number
  readonly batchingMinSize: number
  readonly directMergeMode: "off" | "always"
  readonly optimizationMode: "off" | "bisection_skip_redundant_tests"
  readonly mergeMethod: "merge_commit" | "squash" | "rebase"
  /** adaptive mode (extension, adaptive.ts): the settings above become upper bounds; absent = off */
  readonly adaptive?: boolean
}

/** What adaptive mode chose, and why (adaptive.ts). */
export interface AdaptiveChoice {
  readonly depth: number
  readonly batchSize: number
  /** bisection slots; 0 = bisection shares the main slots */
  readonly bisection: number
  readonly observedFailureRate: number
  readonly observedFlakyRate: number
  readonly reason: string
}

/** The observation windows of a queue (adaptive.ts): kept whether adaptive mode is on or not (estimates use them). */
export interface QueueStats {
  /** the last finished runs: [testing time in ms, failed 1 / passed 0, PRs tested, 1 for a bisection run (absent in
   * states stored before it was kept)] */
  readonly runs: ReadonlyArray<readonly [number, 0 | 1, number, (0 | 1)?]>
  /** the last PRs that ended: 1 failed, 0 merged */
  readonly prs: ReadonlyArray<0 | 1>
  /** finished runs ever */
  readonly finishedRuns: number
  /** adaptive mode's current choice (absent when it is off) */
  readonly choice?: AdaptiveChoice | null
}

/** A PR's impacted targets as uploaded: target names, or everything. */
export type ImpactedTargets = readonly string[] | "ALL"

/**
 * What the planner knows of an entry's impacted targets (parallel mode). The target lists themselves stay in the
 * database (they may hold hundreds of thousands of names); the shell reduces them to this when they are set:
 * - `"ALL"` intersects every entry that impacts something;
 * - `"NONE"` (an empty list) intersects nothing, not even `"ALL"`;
 * - `{ overlaps }`: the ids of the entries (active, with targets for their current head, when the targets were set)
 *   whose lists share a target with this one. Two such entries intersect when either lists the other, so the
 *   relation stays complete when the later of two uploads sees the earlier one.
 */
export type Lane = "ALL" | "NONE" | { readonly overlaps: readonly string[] }

/** One pull request applied on top of a run's base, in order. */
export interface RunItem {
  readonly entryId: string
  readonly prNumber: number
  readonly headSha: string
}

/** The content of a run that is known to fail (used by `bisection_skip_redundant_tests`). */
export interface KnownFailure {
  readonly baseSha: string
  /** commits[i] = sha after items[i] (may be empty when the run never built) */
  readonly commits: readonly string[]
  readonly items: readonly RunItem[]
  readonly reason: string
  readonly runId: string
}

/** Bisection bookkeeping: entries of one segment are tested together in one bisection run. */
export interface Segment {
  /** id of the main run whose failure started the bisection */
  readonly root: string
  readonly id: string
  readonly knownFailure: KnownFailure | null
  /** its run failed while entries ahead of it were still undecided: it waits for them before running again */
  readonly blocked: boolean
}

export interface EntryFailure {
  readonly reason: string
  readonly runId: string | null
  /** entries ahead in the failed run's chain that are not resolved yet */
  readonly waitingOn: readonly string[]
  /** runs behind that keep running because of pendingFailureDepth */
  readonly holdRunIds: readonly string[]
}

export interface Entry {
  readonly id: string
  readonly prNumber: number
  readonly headSha: string
  readonly priority: number
  readonly noBatch: boolean
  readonly submittedAt: number
  /** monotonic submission order */
  readonly seq: number
  readonly state: EntryState
  readonly stateChangedAt: number
  /** the run it is tested in now */
  readonly runId: string | null
  readonly verifiedByTestRun: string | null
  /** impacted targets for `headSha`, reduced to their lane (parallel mode); null until they are set */
  readonly lane: Lane | null
  /** the shell's readiness (mergeability); false keeps the entry not_ready */
  readonly ready: boolean
  /** when it first became pending (batch wait) */
  readonly eligibleAt: number | null
  readonly failure: EntryFailure | null
  readonly segment: Segment | null
  /** part of an outstanding Merge command */
  readonly merging: boolean
  /** a cancel that arrived while merging, applied if the merge fails */
  readonly cancelRequested: string | null
  /** direct merge: none yet, in flight, or already tried for this head */
  readonly directMerge: "none" | "trying" | "tried"
  /** extension (#31): submitted with ignoreFreeze (absent = false) */
  readonly ignoreFreeze?: boolean
}

export type RunStatus = "building" | "in_progress" | "succeeded" | "failed" | "cancelled"

export interface Run {
  /** UUID, or `<parent uuid>-bisection-<k>` */
  readonly id: string
  /** `trunk-merge/pr-<N>/<id>`, N = first tested PR */
  readonly branch: string
  readonly queueType: "main" | "bisection"
  /** for bisection runs: the main run whose failure started the bisection */
  readonly parentRunId: string | null
  readonly baseSha: string
  /** applied in order on baseSha: first the chain ahead, then the tested entries */
  readonly items: readonly RunItem[]
  readonly testedEntryIds: readonly string[]
  /** parallel mode: prNumbers of the untested items (the dependencies); [] in single mode */
  readonly dependentPrs: readonly number[]
  readonly status: RunStatus
  readonly createdAt: number
  readonly startedAt: number | null
  readonly endedAt: number | null
  readonly testBranchSha: string | null
  /** sha after each item, once built */
  readonly commits: readonly string[]
  readonly failureReason: string | null
  /** the sha the run's unmerged items apply onto (moves when a prefix of its items merges fast-forward) */
  readonly effectiveBase: string
  /** items of this run that were merged since it was created */
  readonly mergedEntryIds: readonly string[]
}

export type RunRecord = Run

export interface MergeInFlight {
  readonly kind: "run" | "direct"
  readonly runId: string | null
  readonly entryIds: readonly string[]
  readonly expectedSha: string
  readonly newSha: string | null
  readonly rebaseOnto: boolean
  /** entry id -> the run that verified it, when it is not `runId` */
  readonly verifiedBy?: Readonly<Record<string, string>>
}

export interface ModeSwitch {
  readonly mode: QueueMode
  readonly resumeState: QueueRunState
}

export interface QueueState {
  readonly config: PlannerConfig
  readonly targetSha: string | null
  /** active entries, in queue (testing) order */
  readonly entries: readonly Entry[]
  /** active runs */
  readonly runs: readonly Run[]
  readonly nextSeq: number
  readonly merging: MergeInFlight | null
  readonly switching: ModeSwitch | null
  /** next bisection number per parent run */
  readonly bisectionCounters: Readonly<Record<string, number>>
  /** observation windows (adaptive.ts); absent in states stored before they existed */
  readonly stats?: QueueStats
  /** extension (#31): the freeze or merge schedule in force, as the shell computed it; absent = none */
  readonly freeze?: FreezeInForce | null
}

/**
 * Extension (#31): a freeze (or the closed hours of a merge schedule) in force. `merge`: runs go on, nothing merges
 * (passed runs wait at the head); `all`: nothing new starts either. An entry submitted with `ignoreFreeze` merges
 * in a `merge` freeze when every entry of its merge ignores it.
 */
export interface FreezeInForce {
  readonly mode: "merge" | "all"
  /** when it ends (epoch ms), null when no end is known */
  readonly until: number | null
  /** a freeze's id, or `schedule` for a merge schedule's closed hours */
  readonly source: string
  readonly reason: string
}

// ---------------------------------------------------------------- events

// biome-ignore lint/suspicious/noEmptyInterface: the common base of the events (none of their fields is shared)
interface EventBase {}

/**
 * Where the planner takes the id of each run it creates (a UUID, contract.md), an input of every step: the shell
 * passes a generator (the runner: `crypto.randomUUID`), tests and the estimate's simulation a deterministic one. One
 * id per run created, never more, whatever the configuration. The planner draws none itself.
 */
export type NewId = () => string

/** What the statistics windows say (adaptive.ts `observe`). */
export interface Observed {
  /** PR failure rate (failed / ended), with the prior */
  readonly failureRate: number
  /** PRs the failure rate is taken over (those since the last detected change), without the prior */
  readonly regimePrs: number
  /** failure rate of finished runs, with the prior */
  readonly runFailureRate: number
  /** spurious failures per run, estimated */
  readonly flakyRate: number
  /**
   * the PR failure rate the last batches say, when they fail far more often than `failureRate` explains (a jump the
   * PR window has not seen yet: a failed batch's PRs end only after its bisection), else null
   */
  readonly batchFailureRate: number | null
  /** median and p90 testing time of finished runs (ms), with the prior when there are none */
  readonly ciMedianMs: number
  readonly ciP90Ms: number
}

/**
 * What the planner may remember from one call to the next, held by its caller (the planner keeps no state of its
 * own): a queue's runner keeps one, the estimate's simulation its own. Each memo is keyed by an object the planner
 * never changes, so a memo changes no result; without one, the planner computes again what it needs.
 */
export interface PlannerMemo {
  /** the position of every entry id in an entries array: a state `step` produced need not be indexed again */
  readonly index: WeakMap<readonly Entry[], Map<string, number>>
  /** what a statistics object says (a step that observes nothing new keeps the object) */
  readonly observed: WeakMap<QueueStats, Observed>
}

export interface Submitted extends EventBase {
  readonly _tag: "Submitted"
  readonly entryId: string
  readonly prNumber: number
  readonly headSha: string
  readonly priority: number
  readonly noBatch: boolean
  readonly ready: boolean
  /**
   * A new priority (or batching choice) for an entry the request found in the queue: it changes that entry, and
   * never makes a new one (the entry may have merged or ended since: it is not queued again)
   */
  readonly update?: boolean
  /** extension (#31): the entry merges in a `merge` freeze (absent = false) */
  readonly ignoreFreeze?: boolean
}
export interface Cancelled extends EventBase {
  readonly _tag: "Cancelled"
  readonly prNumber: number
  readonly reason: string
}
export interface RestartRequested extends EventBase {
  readonly _tag: "RestartRequested"
  readonly prNumber: number
}
export interface RunBuilt extends EventBase {
  readonly _tag: "RunBuilt"
  readonly runId: string
  readonly testBranchSha: string
  readonly commits: readonly string[]
}
export interface RunBuildFailed extends EventBase {
  readonly _tag: "RunBuildFailed"
  readonly runId: string
  readonly entryId: string | null
  readonly reason: string
}
export interface RunCompleted extends EventBase {
  readonly _tag: "RunCompleted"
  readonly runId: string
  readonly outcome: "succeeded" | "failed"
  readonly reason: string
}
/** extension (#20): the runner retries an in-progress run (its failures include known-flaky tests) */
export interface RunRetryRequested extends EventBase {
  readonly _tag: "RunRetryRequested"
  readonly runId: string
  readonly reason: string
}
export interface Tick extends EventBase {
  readonly _tag: "Tick"
}
export interface TargetMoved extends EventBase {
  readonly _tag: "TargetMoved"
  readonly sha: string
}
export interface PrHeadMoved extends EventBase {
  readonly _tag: "PrHeadMoved"
  readonly prNumber: number
  readonly sha: string
}
export interface ConfigChanged extends EventBase {
  readonly _tag: "ConfigChanged"
  readonly config: PlannerConfig
}
export interface MergeSucceeded extends EventBase {
  readonly _tag: "MergeSucceeded"
  readonly runId: string
  readonly entryIds: readonly string[]
  readonly newSha: string
}
export interface MergeFailed extends EventBase {
  readonly _tag: "MergeFailed"
  readonly runId: string
  readonly entryIds: readonly string[]
  readonly reason: string
  readonly actualTargetSha: string
}
export interface ImpactedTargetsSet extends EventBase {
  readonly _tag: "ImpactedTargetsSet"
  readonly prNumber: number
  readonly sha: string
  readonly lane: Lane
}
export interface DirectMergeResult extends EventBase {
  readonly _tag: "DirectMergeResult"
  readonly entryId: string
  readonly merged: boolean
  readonly newSha: string | null
}
/**
 * The pull request was merged outside the queue (its head is in the target branch, or the Git host says it merged):
 * its entry leaves the queue as merged (MANUAL_MERGE), not to be merged again; the runs that held it are rebuilt
 * without it. An entry the queue is merging itself is left to that merge.
 */
export interface MergedOutside extends EventBase {
  readonly _tag: "MergedOutside"
  readonly prNumber: number
  readonly sha: string
}
/** The shell's readiness of an active PR changed (mergeability known, conflicts with the base, ...). */
export interface ReadinessChanged extends EventBase {
  readonly _tag: "ReadinessChanged"
  readonly prNumber: number
  readonly ready: boolean
}

/** Extension (#31): the freeze in force changed (the shell computes it from the freezes and schedule). */
export interface FreezeChanged extends EventBase {
  readonly _tag: "FreezeChanged"
  readonly freeze: FreezeInForce | null
}

export type PlannerEvent =
  | FreezeChanged
  | Submitted
  | Cancelled
  | RestartRequested
  | RunBuilt
  | RunBuildFailed
  | RunCompleted
  | Tick
  | TargetMoved
  | PrHeadMoved
  | ConfigChanged
  | MergeSucceeded
  | MergeFailed
  | ImpactedTargetsSet
  | DirectMergeResult
  | ReadinessChanged
  | RunRetryRequested
  | MergedOutside

// ---------------------------------------------------------------- commands

export interface BuildRun {
  readonly _tag: "BuildRun"
  readonly run: RunRecord
  readonly mergeMethod: PlannerConfig["mergeMethod"]
}
export interface DeleteBranch {
  readonly _tag: "DeleteBranch"
  readonly runId: string
  readonly branch: string
}
export interface Merge {
  readonly _tag: "Merge"
  readonly runId: string
  readonly entryIds: readonly string[]
  readonly prNumbers: readonly number[]
  readonly expectedSha: string
  /** the run's commit after the last merged item */
  readonly newSha: string
  /** parallel mode: the run's base is not the tip; combine the run's change with the tip */
  readonly rebaseOnto: boolean
  readonly mergeMethod: PlannerConfig["mergeMethod"]
}
export interface TryDirectMerge {
  readonly _tag: "TryDirectMerge"
  readonly entryId: string
  readonly prNumber: number
  readonly headSha: string
  readonly expectedSha: string
}
/**
 * What a PR's author is told when its entry ended: the entry's state and why, as data (the feedback adapters write
 * the text: runner/feedback.ts for the local records, github/feedback.ts for GitHub's comment).
 */
export interface Comment {
  readonly _tag: "Comment"
  readonly prNumber: number
  readonly entryId: string
  /** the entry's new state: merged, failed or cancelled */
  readonly to: EntryState
  /** the transition's reason (Reasons) */
  readonly reason: string
}
export type PrStatusState = "queued" | "testing" | "merged" | "failed" | "cancelled"
/** The queue's status on a PR's head: its state there, and the entry's state and reason it stands for (data). */
export interface SetStatus {
  readonly _tag: "SetStatus"
  readonly prNumber: number
  readonly headSha: string
  readonly state: PrStatusState
  /** the entry's new state */
  readonly to: EntryState
  /** the transition's reason (Reasons) */
  readonly reason: string
}
export interface ScheduleWake {
  readonly _tag: "ScheduleWake"
  readonly at: number
}
export interface Wake {
  readonly _tag: "Wake"
}

export type Command = BuildRun | DeleteBranch | Merge | TryDirectMerge | Comment | SetStatus | ScheduleWake | Wake

export interface Transition {
  readonly entryId: string
  readonly prNumber: number
  /** null for the first state of a new entry */
  readonly from: EntryState | null
  readonly to: EntryState
  readonly reason: string
  readonly at: number
  readonly runId: string | null
  readonly verifiedByTestRun: string | null
}

export interface StepResult {
  readonly state: QueueState
  readonly commands: readonly Command[]
  readonly transitions: readonly Transition[]
  readonly runChanges: readonly RunRecord[]
}

export const Reasons = {
  submitted: "SUBMITTED",
  ready: "READY",
  notReady: "NOT_READY",
  testRunStarted: "TEST_RUN_STARTED",
  testsPassed: "TEST_RUN_PASSED",
  /** extension (#20): the run failed, but every failed test in its uploads is quarantined */
  testsPassedQuarantinedOnly: "TEST_RUN_PASSED_QUARANTINED_FAILURES_ONLY",
  /** extension (#20): the run failed with known-flaky tests among its failures and is run again */
  retriedKnownFlaky: "TEST_RUN_RETRIED_KNOWN_FLAKY_FAILURES",
  merged: "MERGED",
  directMerge: "MERGE_GRAPH_DIRECT_MERGE",
  /** merged outside the queue (the public API's merged_reason) */
  manualMerge: "MANUAL_MERGE",
  prerequisiteManuallyMerged: "PREREQUISITE_MERGE_ITEM_MANUALLY_MERGED",
  requiredStatusFailed: "TEST_RUN_REQUIRED_STATUS_FAILED",
  timeout: "TEST_RUN_TIMEOUT",
  notReadyTimeout: "NOT_READY_TIMEOUT_EXPIRED",
  mergeConflict: "START_TEST_RUN_MERGE_CONFLICT",
  prerequisiteFailed: "PREREQUISITE_MERGE_ITEM_FAILED",
  prerequisiteCancelled: "PREREQUISITE_MERGE_ITEM_CANCELLED",
  prPushedTo: "PR_PUSHED_TO",
  manualPush: "MANUAL_PUSH_TO_TARGET_BRANCH",
  skipTheLine: "SKIP_THE_LINE_INTERRUPTED",
  bisection: "BISECTION_REQUIRED",
  restart: "RESTART_REQUESTED",
  modeSwitched: "MODE_SWITCHED",
  mergeRebaseFailed: "MERGE_REBASE_FAILED",
  priorityChanged: "PRIORITY_CHANGED"
} as const

/** A merge the planner decided on (see `planMergeSingle`, `planMergeParallel`). */
export interface MergePlan {
  readonly runId: string
  readonly entryIds: string[]
  readonly newSha: string
  readonly rebaseOnto: boolean
  /** entry id -> the run that verified it, when not `runId` (a prefix of passed runs merged at once) */
  readonly verifiedBy?: Readonly<Record<string, string>>
}
