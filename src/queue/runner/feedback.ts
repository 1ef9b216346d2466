import { Clock, Effect, Option } from "effect"
import { estimateOf } from "../estimates.ts"
import type { CommentEta } from "../Feedback.ts"
import type { Comment, EntryState, PrStatusState, SetStatus } from "../planner/index.ts"
import type { RunnerCtx } from "./context.ts"

export const statusCheckName = (branch: string) => `Trunk Merge Queue (${branch})`

/** The text the local records give a note (the `pr_comments` rows, the stored status's description). */
export const noteText = (to: EntryState, reason: string): string => {
  switch (to) {
    case "not_ready":
      return "Waiting to be ready for the merge queue"
    case "pending":
      return "Queued"
    case "testing":
      return "Testing in the merge queue"
    case "tests_passed":
      return "Tests passed, waiting to merge"
    case "pending_failure":
      return `Tests failed (${reason}), waiting for the pull requests ahead`
    case "merged":
      return reason === "MANUAL_MERGE" ? "Merged outside the merge queue" : "Merged by the merge queue"
    case "failed":
      return `Failed in the merge queue: ${reason}`
    case "cancelled":
      return `Removed from the merge queue: ${reason}`
  }
}

const EXACT: ReadonlyArray<readonly [string, EntryState]> = (
  ["not_ready", "pending", "testing", "tests_passed", "merged"] as const
).map((to) => [noteText(to, ""), to] as const)
const WITH_REASON: ReadonlyArray<readonly [RegExp, EntryState]> = [
  [/^Tests failed \((.*)\), waiting for the pull requests ahead$/s, "pending_failure"],
  [/^Failed in the merge queue: (.*)$/s, "failed"],
  [/^Removed from the merge queue: (.*)$/s, "cancelled"]
]
const entryStateOf = (state: PrStatusState): EntryState =>
  state === "queued" ? "pending" : state === "testing" ? "testing" : state

/**
 * A note as data. One saved in an outbox by an earlier version carries its text instead (`body`, `description`,
 * written by `noteText`): its state and reason are read back from it.
 */
export const noteData = <N extends Comment | SetStatus>(note: N): N => {
  if (note.to !== undefined) return note
  const old = note as { readonly body?: string; readonly description?: string }
  const text = old.body ?? old.description ?? ""
  const exact = EXACT.find(([t]) => t === text)
  if (exact !== undefined) return { ...note, to: exact[1], reason: "" }
  for (const [pattern, to] of WITH_REASON) {
    const match = pattern.exec(text)
    if (match !== null) return { ...note, to, reason: match[1] ?? "" }
  }
  return { ...note, to: note._tag === "SetStatus" ? entryStateOf(note.state) : "cancelled", reason: "" }
}

/** The commit status that shows a PR's place in the queue. */
const commitStatusOf = (state: PrStatusState) =>
  state === "merged" ? "success" : state === "failed" ? "failure" : state === "cancelled" ? "error" : "pending"

/**
 * What the planner tells a PR's author (comments and the queue's status on the PR head), all of a round's with
 * two statements; then the Git host's view of them (the PrFeedback port: GitHub's comment and status check), which
 * never fails.
 */
export const recordNotes = (ctx: RunnerCtx, saved: ReadonlyArray<Comment | SetStatus>) =>
  Effect.gen(function* () {
    const notes = saved.map(noteData)
    const queue = ctx.queue
    const comments = queue.config.commentsEnabled ? notes.filter((n) => n._tag === "Comment") : []
    if (comments.length > 0) {
      const rows = comments.map((c) => ({ pr_number: c.prNumber, entry_id: c.entryId, body: noteText(c.to, c.reason) }))
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
            ? [
                {
                  sha: n.headSha,
                  context,
                  state: commitStatusOf(n.state),
                  targetUrl: null,
                  description: noteText(n.to, n.reason)
                }
              ]
            : []
        )
      )
    }
    if (Option.isNone(ctx.feedback)) return
    const host = ctx.feedback.value
    // the estimate the comments show (issue #35): one per round that comments on a PR still in the queue
    // (a status edits the comment too, so it gets the PR's estimate as well)
    const active =
      queue.config.commentsEnabled && notes.some((n) => n.to !== "merged" && n.to !== "failed" && n.to !== "cancelled")
    const now = yield* Clock.currentTimeMillis
    const estimate = active ? estimateOf(ctx.queueId, null, ctx.state, now) : undefined
    const entryOf = new Map<number, string>()
    if (estimate !== undefined)
      for (const e of ctx.state.entries) if (estimate.byEntry.has(e.id)) entryOf.set(e.prNumber, e.id)
    const etaOf = (prNumber: number): CommentEta | undefined => {
      const id = entryOf.get(prNumber)
      const e = id === undefined ? undefined : estimate?.byEntry.get(id)
      return e?.mergeAt == null || e.mergeRange === null
        ? undefined
        : { now, mergeAt: e.mergeAt, earliest: e.mergeRange.earliest, latest: e.mergeRange.latest }
    }
    yield* Effect.forEach(
      notes,
      (n) =>
        n._tag === "SetStatus"
          ? host.status(queue, n, context, etaOf(n.prNumber))
          : queue.config.commentsEnabled
            ? host.comment(queue, n, etaOf(n.prNumber))
            : Effect.void,
      { concurrency: 4, discard: true }
    )
  })
