import type { SqlError } from "@effect/sql/SqlError"
import { Context, type Effect, type Option } from "effect"
import type { QueueError } from "./errors.ts"
import type { FreezeStore } from "./freezeStore.ts"
import type { PullRequestInfo } from "./GitHost.ts"
import type { Preview, PreviewAction } from "./preview.ts"
import type { QueueRepoShape, QueueRow } from "./QueueRepo.ts"
import type {
  AdaptiveChoiceView,
  EnqueuedPullRequest,
  RunnerError,
  StoredQueueConfig,
  SubmittedPullRequest,
  TestingDetails
} from "./schemas.ts"

type AdaptiveChoice = typeof AdaptiveChoiceView.Type

/** A queue named as a request names it, in the caller's organization. */
export interface QueueKey {
  readonly orgId: string
  readonly repo: { readonly host: string; readonly owner: string; readonly name: string }
  readonly branch: string
}

/** A pull request submitted to a queue, as the Git host showed it. */
export interface Submission {
  readonly queue: QueueRow
  readonly prNumber: number
  readonly priority: number | undefined
  readonly noBatch: boolean | undefined
  readonly pr: PullRequestInfo
  /** extension (#31): it merges in a `merge` freeze (the caller checked the role) */
  readonly ignoreFreeze?: boolean
}

/**
 * What became of a submission: written; its queue gone (nothing written); or refused because the queue merged the
 * PR at this very head already (PR_ALREADY_MERGED: a squash or rebase merge leaves no trace of the head in the target
 * branch, so this is how a resubmission is known).
 */
export type SubmitOutcome = "written" | "gone" | "merged"

/** What a Git host (its webhooks, a reconciliation) saw change, for the runners of the queues it concerns. */
export type HostChange =
  /** the PR left the queue's reach: closed, turned into a draft, retargeted (`reason`, a cancellation reason) */
  | { readonly _tag: "PrCancelled"; readonly prNumber: number; readonly reason: string }
  | { readonly _tag: "PrHeadMoved"; readonly prNumber: number; readonly sha: string }
  /** the PR was merged outside the queue (GitHub: closed as merged) at head `sha` */
  | { readonly _tag: "PrMerged"; readonly prNumber: number; readonly sha: string }
  /** a branch moved (a push): the runner looks at the target's tip at once */
  | { readonly _tag: "BranchMoved" }

export type { QueueRow } from "./QueueRepo.ts"
export type { WatchedQueue } from "./store.ts"

/** What the HTTP handlers ask of the merge-queue engine. Calls that write run inside the request's transaction. */
/** The organizations' queues and their settings, as the API's queue operations use them. */
export type QueueCatalog = Pick<
  QueueRepoShape,
  "findOwned" | "findOwnedCached" | "create" | "hold" | "saveConfig" | "find" | "removeIfEmpty" | "forget"
>

export interface EngineShape {
  /** The queues themselves: find, create, configure, delete (the handlers reach the queue's tables only here). */
  readonly queues: QueueCatalog
  readonly queueCreated: (queue: QueueRow) => Effect.Effect<void, SqlError>
  readonly configChanged: (queue: QueueRow) => Effect.Effect<void, SqlError>
  /** The effective configuration (the runner may be switching modes) and the active entries in testing order. */
  readonly view: (queue: QueueRow) => Effect.Effect<
    {
      readonly config: StoredQueueConfig
      readonly enqueued: ReadonlyArray<EnqueuedPullRequest>
      /** extension: adaptive mode's choice (estimates.ts), null when it is off */
      readonly adaptiveChoice?: AdaptiveChoice | null
    },
    SqlError
  >
  /**
   * `view` of the queue `key` names, read with it in one statement (QUEUE_NOT_FOUND when there is none), with its
   * runner's last error while the runner keeps failing.
   */
  readonly viewByKey: (key: QueueKey) => Effect.Effect<
    {
      readonly queueId: string
      readonly config: StoredQueueConfig
      readonly enqueued: ReadonlyArray<EnqueuedPullRequest>
      /** extension: adaptive mode's choice (estimates.ts), null when it is off */
      readonly adaptiveChoice?: AdaptiveChoice | null
      readonly runnerError: RunnerError | null
    },
    QueueError | SqlError
  >
  /** The PR as the Git host shows it now (PR_NOT_FOUND when it does not exist). */
  readonly readPullRequest: (queue: QueueRow, prNumber: number) => Effect.Effect<PullRequestInfo, QueueError>
  /** `pr`, when given, is the PR already read (outside the request's transaction); otherwise it is read here. */
  readonly submit: (
    queue: QueueRow,
    prNumber: number,
    priority: number | undefined,
    noBatch: boolean | undefined,
    pr?: PullRequestInfo
  ) => Effect.Effect<void, QueueError | SqlError>
  /**
   * `submit` in a transaction of its own, together with the other submissions that arrive meanwhile (group
   * commit); the runner is woken after the commit. `gone` when the queue is gone, `merged` when the queue merged the
   * PR at this head already (nothing written).
   */
  readonly submitBatched: (submission: Submission) => Effect.Effect<SubmitOutcome, SqlError>
  /** `reason` defaults to `API_REQUESTED` (a comment command cancels with `USER_REQUESTED`). */
  readonly cancel: (queue: QueueRow, prNumber: number, reason?: string) => Effect.Effect<void, QueueError | SqlError>
  readonly restart: (queue: QueueRow, prNumber: number) => Effect.Effect<void, QueueError | SqlError>
  readonly getSubmitted: (
    key: QueueKey,
    prNumber: number,
    includeTimeline: boolean
  ) => Effect.Effect<SubmittedPullRequest, QueueError | SqlError>
  readonly testingDetails: (queue: QueueRow, testRunId: string) => Effect.Effect<TestingDetails, QueueError | SqlError>
  readonly setImpactedTargets: (
    queue: QueueRow,
    prNumber: number,
    sha: string,
    targets: ReadonlyArray<string> | "ALL"
  ) => Effect.Effect<void, QueueError | SqlError>
  /** The queues of a repository named case-insensitively (`host` lower case), as a Git host's events name it. */
  readonly queuesOfRepository: (
    host: string,
    owner: string,
    name: string
  ) => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly branch: string; readonly repoId: string }>, SqlError>
  /** A queue by id (a Git host's command names the queue it found). */
  readonly queueById: (queueId: string) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  /**
   * Hands what the Git host saw to the queue's runner, in the caller's transaction: the PR changes that concern an
   * active entry, and branch moves. The number handed over; the caller wakes the runner after its commit.
   */
  readonly hostChanged: (queueId: string, changes: ReadonlyArray<HostChange>) => Effect.Effect<number, SqlError>
  /** The repositories among `repoIds` with a queue whose run is being built or tested on `sha`. */
  readonly repositoriesTesting: (
    repoIds: ReadonlyArray<string>,
    sha: string
  ) => Effect.Effect<ReadonlyArray<string>, SqlError>
  /** Every queue on the Git host `host` (lower case) as a reconciliation looks at it. */
  readonly watchedQueues: (host: string) => Effect.Effect<ReadonlyArray<import("./store.ts").WatchedQueue>, SqlError>
  /** Wakes the runner of a queue (after the request's transaction committed). */
  readonly wake: (queueId: string) => Effect.Effect<void>
  /** extension (#31): the freezes of repositories and queues (freezeStore.ts); writes run in the caller's transaction */
  readonly freezes: FreezeStore
  /** extension (#31): what an action would do (preview.ts), read-only; PR_NOT_ACTIVE when its PR is not in the queue */
  readonly preview: (queue: QueueRow, action: PreviewAction) => Effect.Effect<Preview, QueueError | SqlError>
  readonly ciOutput: (
    id: string
  ) => Effect.Effect<Option.Option<{ readonly output: string; readonly exitCode: number | null }>, SqlError>
}

export class Engine extends Context.Tag("greenline/Engine")<Engine, EngineShape>() {}

/** Starts the runners of this instance: the lease loop and the wake-up listener. */
export class EngineRunner extends Context.Tag("greenline/EngineRunner")<
  EngineRunner,
  { readonly start: Effect.Effect<void> }
>() {}
