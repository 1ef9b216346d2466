import type { SqlError } from "@effect/sql/SqlError"
import { Context, type Effect, type Option } from "effect"
import type { ApiError } from "../http/errors.ts"
import type { PullRequestInfo } from "./GitHost.ts"
import type { QueueRow } from "./QueueRepo.ts"
import type {
  EnqueuedPullRequest,
  RunnerError,
  StoredQueueConfig,
  SubmittedPullRequest,
  TestingDetails
} from "./schemas.ts"

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
}

/** What the HTTP handlers ask of the merge-queue engine. Calls that write run inside the request's transaction. */
export interface EngineShape {
  readonly queueCreated: (queue: QueueRow) => Effect.Effect<void, SqlError>
  readonly configChanged: (queue: QueueRow) => Effect.Effect<void, SqlError>
  /** The effective configuration (the runner may be switching modes) and the active entries in testing order. */
  readonly view: (
    queue: QueueRow
  ) => Effect.Effect<
    { readonly config: StoredQueueConfig; readonly enqueued: ReadonlyArray<EnqueuedPullRequest> },
    SqlError
  >
  /**
   * `view` of the queue `key` names, read with it in one statement (QUEUE_NOT_FOUND when there is none), with its
   * runner's last error while the runner keeps failing.
   */
  readonly viewByKey: (key: QueueKey) => Effect.Effect<
    {
      readonly config: StoredQueueConfig
      readonly enqueued: ReadonlyArray<EnqueuedPullRequest>
      readonly runnerError: RunnerError | null
    },
    ApiError | SqlError
  >
  /** The queues whose runner keeps failing, on any instance (for `/readyz`). */
  readonly runnerErrors: Effect.Effect<
    ReadonlyArray<{ readonly queueId: string; readonly message: string; readonly since: string }>,
    SqlError
  >
  /** The PR as the Git host shows it now (PR_NOT_FOUND when it does not exist). */
  readonly readPullRequest: (queue: QueueRow, prNumber: number) => Effect.Effect<PullRequestInfo, ApiError>
  /** `pr`, when given, is the PR already read (outside the request's transaction); otherwise it is read here. */
  readonly submit: (
    queue: QueueRow,
    prNumber: number,
    priority: number | undefined,
    noBatch: boolean | undefined,
    pr?: PullRequestInfo
  ) => Effect.Effect<void, ApiError | SqlError>
  /**
   * `submit` in a transaction of its own, together with the other submissions that arrive meanwhile (group
   * commit); the runner is woken after the commit. False when the queue is gone.
   */
  readonly submitBatched: (submission: Submission) => Effect.Effect<boolean, SqlError>
  /** `reason` defaults to `API_REQUESTED` (a comment command cancels with `USER_REQUESTED`). */
  readonly cancel: (queue: QueueRow, prNumber: number, reason?: string) => Effect.Effect<void, ApiError | SqlError>
  readonly restart: (queue: QueueRow, prNumber: number) => Effect.Effect<void, ApiError | SqlError>
  readonly getSubmitted: (
    key: QueueKey,
    prNumber: number,
    includeTimeline: boolean
  ) => Effect.Effect<SubmittedPullRequest, ApiError | SqlError>
  readonly testingDetails: (queue: QueueRow, testRunId: string) => Effect.Effect<TestingDetails, ApiError | SqlError>
  readonly setImpactedTargets: (
    queue: QueueRow,
    prNumber: number,
    sha: string,
    targets: ReadonlyArray<string> | "ALL"
  ) => Effect.Effect<void, ApiError | SqlError>
  /** Wakes the runner of a queue (after the request's transaction committed). */
  readonly wake: (queueId: string) => Effect.Effect<void>
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
