import { Schema } from "effect"

/** The queue engine's failures; the HTTP edge (`http/errors.ts`) gives each its status and code. */

export class QueueNotFound extends Schema.TaggedError<QueueNotFound>()("QueueNotFound", {
  message: Schema.String
}) {}

/** The pull request was never submitted to the queue, or does not exist on the Git host. */
export class PullRequestNotFound extends Schema.TaggedError<PullRequestNotFound>()("PullRequestNotFound", {
  message: Schema.String
}) {}

/** The pull request is not in the queue any more (it ended), or is being merged. */
export class PrNotActive extends Schema.TaggedError<PrNotActive>()("PrNotActive", { message: Schema.String }) {}

export class PrTestsNotRestartable extends Schema.TaggedError<PrTestsNotRestartable>()("PrTestsNotRestartable", {
  message: Schema.String
}) {}

/** The pull request's head is in the target branch already (merged by the queue, or outside it). */
export class PrAlreadyMerged extends Schema.TaggedError<PrAlreadyMerged>()("PrAlreadyMerged", {
  message: Schema.String
}) {}

export class TestRunNotFound extends Schema.TaggedError<TestRunNotFound>()("TestRunNotFound", {
  message: Schema.String
}) {}

/** Extension (#31): no such freeze in the repository. */
export class FreezeNotFound extends Schema.TaggedError<FreezeNotFound>()("FreezeNotFound", {
  message: Schema.String
}) {}

/** Extension (#31): a freeze that cannot be (an empty reason, a bad cron expression or time zone, an end first). */
export class InvalidFreeze extends Schema.TaggedError<InvalidFreeze>()("InvalidFreeze", {
  message: Schema.String
}) {}

export const QueueError = Schema.Union(
  QueueNotFound,
  PullRequestNotFound,
  PrNotActive,
  PrTestsNotRestartable,
  PrAlreadyMerged,
  TestRunNotFound,
  FreezeNotFound,
  InvalidFreeze
)
export type QueueError = typeof QueueError.Type

export const isQueueError: (e: unknown) => e is QueueError = Schema.is(QueueError)
