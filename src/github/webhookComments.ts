import { Effect, Option, Schema } from "effect"
import { Engine, type QueueRow } from "../queue/Engine.ts"
import { isQueueError, type QueueError } from "../queue/errors.ts"
import { parseComment, type QueueCommand } from "./commands.ts"
import { GitHubAuth, GitHubClient, type GitHubError } from "./GitHubClient.ts"
import { decode, done, nothing, OptionalString, type Plan, queuesOf, Repository } from "./webhookPlan.ts"

/** `@greenline` commands in pull request comments: permission, the engine's answer, a reaction and a reply. */

const IssueCommentEvent = Schema.Struct({
  action: Schema.String,
  issue: Schema.Struct({ number: Schema.Number, pull_request: Schema.optional(Schema.Unknown) }),
  comment: Schema.Struct({
    id: Schema.Number,
    body: OptionalString,
    user: Schema.Struct({ login: Schema.String, type: Schema.optional(Schema.String) })
  }),
  repository: Repository
})

const WRITE_PERMISSIONS = new Set(["admin", "maintain", "write"])

const notFound = (e: GitHubError) => e._tag === "GitHubApiError" && e.status === 404

export const onIssueComment = (payload: unknown) =>
  Effect.gen(function* () {
    const event = yield* decode("issue_comment", IssueCommentEvent)(payload)
    if (event.action !== "created") return nothing(`issue_comment ${event.action}: nothing to do`)
    if (event.issue.pull_request === undefined || event.issue.pull_request === null) {
      return nothing("issue_comment: not on a pull request")
    }
    const parsed = parseComment(event.comment.body ?? "")
    if (parsed._tag === "None") return nothing("issue_comment: no command")
    const client = yield* GitHubClient
    const queues = yield* queuesOf(event.repository)
    if (queues.length === 0) return nothing("issue_comment: no queue for this repository")
    if (client.mode === "none") return nothing("issue_comment: GitHub is not configured")

    const owner = event.repository.owner.login
    const repo = event.repository.name
    const prNumber = event.issue.number
    const user = event.comment.user.login
    const auth = GitHubAuth.repository(owner, repo)
    const react = (content: "+1" | "confused") =>
      client.request(
        "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
        { owner, repo, comment_id: event.comment.id, content },
        auth
      )
    const reply = (text: string) =>
      client.request(
        "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
        { owner, repo, issue_number: prNumber, body: `@${user} ${text}` },
        auth
      )
    const refuse = (result: string, text: string): Plan =>
      Effect.succeed(done(result, [], Effect.zipRight(react("confused"), reply(text))))

    const pull = yield* client
      .request("GET /repos/{owner}/{repo}/pulls/{pull_number}", { owner, repo, pull_number: prNumber }, auth)
      .pipe(
        Effect.map((r) => Option.some(r.data.base.ref)),
        Effect.catchIf(notFound, () => Effect.succeed(Option.none<string>()))
      )
    if (Option.isNone(pull)) return nothing("issue_comment: the pull request is not found")
    const base = pull.value
    const queueId = queues.find((q) => q.branch === base)?.id
    if (queueId === undefined) {
      return refuse(
        "issue_comment: no queue for the base",
        `there is no merge queue for \`${base}\` in ${owner}/${repo}.`
      )
    }
    const found = yield* (yield* Engine).queueById(queueId)
    if (Option.isNone(found)) return nothing("issue_comment: the queue is gone")
    const queue = found.value
    if (!queue.config.commandsEnabled) return nothing("issue_comment: commands are disabled for this queue")
    if (parsed._tag === "Invalid") return refuse("issue_comment: invalid command", parsed.message)

    if (event.comment.user.type === "Bot") {
      const allowed = queue.config.allowedBotSubmitters.some(
        (b) => b.toLowerCase() === user.toLowerCase() || `${b.toLowerCase()}[bot]` === user.toLowerCase()
      )
      if (!allowed) return nothing("issue_comment: a bot that is not in allowedBotSubmitters")
    } else {
      // GitHub answers 404 for a user who is not a collaborator of a private repository
      const permission = yield* client
        .request("GET /repos/{owner}/{repo}/collaborators/{username}/permission", { owner, repo, username: user }, auth)
        .pipe(
          Effect.map((r) => ({ permission: r.data.permission, role: r.data.role_name ?? "" })),
          Effect.catchIf(notFound, () => Effect.succeed({ permission: "none", role: "" }))
        )
      if (!WRITE_PERMISSIONS.has(permission.permission) && !WRITE_PERMISSIONS.has(permission.role)) {
        return refuse(
          "issue_comment: no write permission",
          `only people with write access to ${owner}/${repo} can give merge-queue commands.`
        )
      }
    }
    return runCommand(queue, prNumber, parsed.command, react, reply)
  })

/** Runs a permitted command inside the delivery's transaction; the engine's refusal is the reply. */
const runCommand = (
  queue: QueueRow,
  prNumber: number,
  command: QueueCommand,
  react: (content: "+1" | "confused") => Effect.Effect<unknown, GitHubError>,
  reply: (text: string) => Effect.Effect<unknown, GitHubError>
): Plan =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const run =
      command._tag === "Merge"
        ? engine.submit(queue, prNumber, command.priority, command.noBatch)
        : engine.cancel(queue, prNumber, "USER_REQUESTED")
    const ran = yield* run.pipe(
      Effect.as(Option.none<QueueError>()),
      Effect.catchIf(isQueueError, (e) => Effect.succeed(Option.some(e)))
    )
    const verb = command._tag === "Merge" ? "merge" : "cancel"
    if (Option.isSome(ran)) {
      return done(
        `issue_comment: ${verb} refused (${ran.value._tag})`,
        [],
        Effect.zipRight(react("confused"), reply(ran.value.message))
      )
    }
    return done(`issue_comment: ${verb} #${prNumber} in ${queue.branch}`, [queue.id], react("+1"))
  })
