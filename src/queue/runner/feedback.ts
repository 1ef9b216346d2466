import { Effect, Option } from "effect"
import type { Comment, PrStatusState, SetStatus } from "../planner/index.ts"
import type { RunnerCtx } from "./context.ts"

export const statusCheckName = (branch: string) => `Trunk Merge Queue (${branch})`

/** The commit status that shows a PR's place in the queue. */
const commitStatusOf = (state: PrStatusState) =>
  state === "merged" ? "success" : state === "failed" ? "failure" : state === "cancelled" ? "error" : "pending"

/**
 * What the planner tells a PR's author (comments and the queue's status on the PR head), all of a round's with
 * two statements; then the Git host's view of them (the PrFeedback port: GitHub's comment and status check), which
 * never fails.
 */
export const recordNotes = (ctx: RunnerCtx, notes: ReadonlyArray<Comment | SetStatus>) =>
  Effect.gen(function* () {
    const queue = ctx.queue
    const comments = queue.config.commentsEnabled ? notes.filter((n) => n._tag === "Comment") : []
    if (comments.length > 0) {
      const rows = comments.map((c) => ({ pr_number: c.prNumber, entry_id: c.entryId, body: c.body }))
      yield* ctx.sql`insert into pr_comments (repo_id, pr_number, entry_id, body)
                     select ${queue.repo.id}, v.pr_number, v.entry_id, v.body
                     from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(pr_number bigint, entry_id uuid, body text)`
    }
    const context = statusCheckName(queue.branch)
    if (queue.config.statusCheckEnabled) {
      yield* ctx.statuses.recordMany(
        queue.repo.id,
        notes.flatMap((n) =>
          n._tag === "SetStatus"
            ? [{ sha: n.headSha, context, state: commitStatusOf(n.state), targetUrl: null, description: n.description }]
            : []
        )
      )
    }
    if (Option.isNone(ctx.feedback)) return
    const host = ctx.feedback.value
    yield* Effect.forEach(
      notes,
      (n) =>
        n._tag === "SetStatus"
          ? host.status(queue, n, context)
          : queue.config.commentsEnabled
            ? host.comment(queue, n)
            : Effect.void,
      { concurrency: 4, discard: true }
    )
  })
