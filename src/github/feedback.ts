/**
 * What a pull request on GitHub shows of its queue entry: one comment, created once and edited as the entry's state
 * changes (`commentsEnabled`), and a commit status `Trunk Merge Queue (<branch>)` on the PR head
 * (`statusCheckEnabled`).
 *
 * The runner calls `PrFeedback` after the planner's `Comment` and `SetStatus` commands (the local provider's
 * behaviour, the `pr_comments` rows and the stored statuses, does not change). Both render the entry's state as it is
 * stored when they run, under one lock per pull request, so commands that run concurrently or late still leave the
 * latest state on GitHub. A failure to reach GitHub is logged and dropped: the next state change writes it again.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { type CommentEta, PrFeedback } from "../queue/Feedback.ts"
import type { EntryState } from "../queue/planner/index.ts"
import type { QueueRow } from "../queue/QueueRepo.ts"
import { GitHubAuth, GitHubClient } from "./GitHubClient.ts"
import { GitHubEnv } from "./GitHubEnv.ts"

// the port this adapter implements (the queue's)
export { PrFeedback, type PrFeedbackShape } from "../queue/Feedback.ts"

/** A duration in words for the comment: "under a minute", "40 min", "1 h 10 min", "3 h". */
export const durationWords = (ms: number): string => {
  const minutes = Math.round(ms / 60_000)
  if (minutes < 1) return "under a minute"
  if (minutes < 60) return `${minutes} min`
  const h = Math.floor(minutes / 60)
  const m = minutes % 60
  return m === 0 ? `${h} h` : `${h} h ${m} min`
}

/** The comment's estimate line (issue #35): "Expected to merge in about 40 min (between 25 min and 1 h 10 min)". */
export const etaSentence = (eta: CommentEta): string =>
  `Expected to merge in about ${durationWords(eta.mergeAt - eta.now)} (between ${durationWords(
    Math.max(0, eta.earliest - eta.now)
  )} and ${durationWords(eta.latest - eta.now)}), as of ${new Date(eta.now).toISOString().slice(0, 16).replace("T", " ")} UTC.`

/** Marks the queue's own comment (and keeps it apart from a user's comment quoting it). */
export const COMMENT_MARKER = "<!-- greenline:merge-queue -->"

const headline = (state: EntryState, reason: string): string => {
  switch (state) {
    case "not_ready":
      return "Queued: waiting until the pull request is ready to test"
    case "pending":
      return "Queued: waiting for a testing slot"
    case "testing":
      return "Testing in the merge queue"
    case "tests_passed":
      return "Tests passed: waiting for the pull requests ahead to merge"
    case "pending_failure":
      return `Tests failed (${reason}): waiting for the pull requests ahead`
    case "merged":
      return reason === "MANUAL_MERGE" ? "Merged outside the merge queue" : "Merged by the merge queue"
    case "failed":
      return `Failed in the merge queue: ${reason}`
    case "cancelled":
      return `Removed from the merge queue: ${reason}`
  }
}

/** The commit status state of an entry state (as the runner's stored status). */
export const statusState = (state: EntryState): "pending" | "success" | "failure" | "error" =>
  state === "merged" ? "success" : state === "failed" ? "failure" : state === "cancelled" ? "error" : "pending"

const terminal = (state: EntryState) => state === "merged" || state === "failed" || state === "cancelled"

/** The body of the queue's comment on a pull request; `eta`: the estimate line, for a PR still in the queue. */
export const renderComment = (branch: string, state: EntryState, reason: string, eta?: CommentEta): string =>
  [
    COMMENT_MARKER,
    `**Merge queue** (\`${branch}\`): ${headline(state, reason)}.`,
    ...(eta !== undefined && !terminal(state) ? ["", etaSentence(eta)] : []),
    "",
    state === "merged" || state === "failed" || state === "cancelled"
      ? "<sub>Comment `/trunk merge` to submit this pull request again.</sub>"
      : "<sub>Comment `/trunk cancel` to take this pull request out of the queue.</sub>"
  ].join("\n")

/** GitHub refuses status descriptions over 140 characters. */
const shortDescription = (text: string) => (text.length <= 140 ? text : `${text.slice(0, 139)}…`)

interface EntryNow {
  readonly state: EntryState
  readonly headSha: string
  readonly reason: string
}

export const GitHubFeedbackLive = Layer.effect(
  PrFeedback,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const client = yield* GitHubClient
    const config = yield* GitHubEnv
    const locks = new Map<string, Effect.Semaphore>()

    const onGitHub = (queue: QueueRow) => client.mode !== "none" && queue.repo.host.toLowerCase() === config.githubHost

    /** One writer per pull request at a time (commands of one round run concurrently). */
    const locked = <A, E, R>(queue: QueueRow, prNumber: number, effect: Effect.Effect<A, E, R>) =>
      Effect.suspend(() => {
        const key = `${queue.repo.id}#${prNumber}`
        let lock = locks.get(key)
        if (lock === undefined) {
          if (locks.size > 10_000) locks.clear()
          lock = Effect.unsafeMakeSemaphore(1)
          locks.set(key, lock)
        }
        return lock.withPermits(1)(effect)
      })

    const entryNow = (queue: QueueRow, prNumber: number) =>
      Effect.map(
        sql<{ state: EntryState; head_sha: string; reason: string | null }>`
          select e.state, e.head_sha,
                 (select t.reason from event_log t where t.entry_id = e.id order by t.seq desc limit 1) as reason
          from entries e where e.queue_id = ${queue.id} and e.pr_number = ${prNumber}`,
        (rows): Option.Option<EntryNow> =>
          Option.map(Option.fromNullable(rows[0]), (r) => ({
            state: r.state,
            headSha: r.head_sha,
            reason: r.reason ?? ""
          }))
      )

    const auth = (queue: QueueRow) => GitHubAuth.repository(queue.repo.owner, queue.repo.name)

    const createComment = (queue: QueueRow, prNumber: number, body: string) =>
      Effect.gen(function* () {
        const created = yield* client.request(
          "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
          { owner: queue.repo.owner, repo: queue.repo.name, issue_number: prNumber, body },
          auth(queue)
        )
        yield* sql`insert into github_pr_comments (repo_id, pr_number, comment_id, body, updated_at)
                   values (${queue.repo.id}, ${prNumber}, ${created.data.id}, ${body}, now())
                   on conflict (repo_id, pr_number) do update set comment_id = excluded.comment_id,
                     body = excluded.body, updated_at = excluded.updated_at`
      })

    /** Creates the PR's comment, or edits it when its text changed (a deleted comment is created again). */
    const upsertComment = (queue: QueueRow, prNumber: number, body: string) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ comment_id: string | number; body: string }>`
          select comment_id, body from github_pr_comments where repo_id = ${queue.repo.id} and pr_number = ${prNumber}`
        const known = rows[0]
        if (known === undefined) return yield* createComment(queue, prNumber, body)
        if (known.body === body) return
        const edited = yield* client
          .request(
            "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}",
            { owner: queue.repo.owner, repo: queue.repo.name, comment_id: Number(known.comment_id), body },
            auth(queue)
          )
          .pipe(
            Effect.as(true),
            Effect.catchIf(
              (e) => e._tag === "GitHubApiError" && e.status === 404,
              () => Effect.succeed(false)
            )
          )
        if (!edited) return yield* createComment(queue, prNumber, body)
        yield* sql`update github_pr_comments set body = ${body}, updated_at = now()
                   where repo_id = ${queue.repo.id} and pr_number = ${prNumber}`
      })

    const postStatus = (queue: QueueRow, sha: string, context: string, state: EntryState, description: string) =>
      client.request(
        "POST /repos/{owner}/{repo}/statuses/{sha}",
        {
          owner: queue.repo.owner,
          repo: queue.repo.name,
          sha,
          state: statusState(state),
          context,
          description: shortDescription(description)
        },
        auth(queue)
      )

    const quietly = (what: string, effect: Effect.Effect<unknown, unknown>) =>
      effect.pipe(
        Effect.asVoid,
        Effect.catchAllCause((cause) => Effect.logWarning(`GitHub feedback: ${what} failed`, cause))
      )

    return {
      comment: (queue, command, eta) =>
        !onGitHub(queue)
          ? Effect.void
          : quietly(
              `comment on #${command.prNumber}`,
              locked(
                queue,
                command.prNumber,
                Effect.gen(function* () {
                  const now = yield* entryNow(queue, command.prNumber)
                  if (Option.isNone(now)) return
                  yield* upsertComment(
                    queue,
                    command.prNumber,
                    renderComment(queue.branch, now.value.state, now.value.reason, eta)
                  )
                })
              )
            ),
      status: (queue, command, context, eta) =>
        !onGitHub(queue)
          ? Effect.void
          : quietly(
              `status of #${command.prNumber}`,
              locked(
                queue,
                command.prNumber,
                Effect.gen(function* () {
                  const found = yield* entryNow(queue, command.prNumber)
                  // the stored state, unless the entry moved on to another head (then the command's own state)
                  const current = Option.isSome(found) && found.value.headSha === command.headSha
                  const state = current ? found.value.state : command.to
                  const description = headline(state, current ? found.value.reason : command.reason)
                  if (queue.config.statusCheckEnabled) {
                    yield* postStatus(queue, command.headSha, context, state, description)
                  }
                  if (queue.config.commentsEnabled && Option.isSome(found)) {
                    yield* upsertComment(
                      queue,
                      command.prNumber,
                      renderComment(queue.branch, found.value.state, found.value.reason, current ? eta : undefined)
                    )
                  }
                })
              )
            )
    }
  })
)
