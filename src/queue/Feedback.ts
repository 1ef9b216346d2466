import { Context, type Effect } from "effect"
import type { Comment, SetStatus } from "./planner/index.ts"
import type { QueueRow } from "./QueueRepo.ts"

/**
 * Port: what the Git host shows on a pull request besides the queue's own records (GitHub: one comment and the
 * queue's status check). The runner calls it after the planner's `Comment` and `SetStatus` commands; it never fails
 * (an adapter logs and drops what it cannot deliver). Optional: without it the runner's behaviour is unchanged.
 */
/** When a PR is expected to merge, as of the round that commented (issue #35), ms since the epoch. */
export interface CommentEta {
  readonly now: number
  readonly mergeAt: number
  readonly earliest: number
  readonly latest: number
}

export interface PrFeedbackShape {
  /**
   * After the planner's `Comment` command (only called when the queue has `commentsEnabled`); `eta`: the entry's
   * estimate when the runner has one.
   */
  readonly comment: (queue: QueueRow, command: Comment, eta?: CommentEta) => Effect.Effect<void>
  /** After the planner's `SetStatus` command; `context` is the queue's status check name; `eta` as `comment`'s. */
  readonly status: (queue: QueueRow, command: SetStatus, context: string, eta?: CommentEta) => Effect.Effect<void>
}

export class PrFeedback extends Context.Tag("greenline/PrFeedback")<PrFeedback, PrFeedbackShape>() {}
