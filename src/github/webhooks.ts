/** `POST /webhooks/github`: GitHub's events into the engine, verified and idempotent (docs/architecture.md). */
import { createHmac, timingSafeEqual } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, Fiber, Option, type ParseResult, Redacted, Runtime, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { ApiError, errorResponse, internal, invalidRequest, unauthorized } from "../http/errors.ts"
import { readBody } from "../http/router.ts"
import { Engine, type HostChange, type QueueRow } from "../queue/Engine.ts"
import { isQueueError, type QueueError } from "../queue/errors.ts"
import { Statuses, type StatusState } from "../queue/Statuses.ts"
import { parseComment, type QueueCommand } from "./commands.ts"
import { GitHubAuth, GitHubClient, type GitHubError } from "./GitHubClient.ts"
import { makeInstallations, splitFullName } from "./installations.ts"

export const WEBHOOK_PATH = "/webhooks/github"
/** GitHub caps webhook payloads at 25 MB. */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024
/** Delivery ids are kept this long (GitHub lets a delivery be redelivered for a few days). */
const DELIVERY_RETENTION_DAYS = 30

// ------------------------------------------------------------------------------------------------ signature

/** True when `header` is `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret` (constant-time comparison). */
export const verifySignature = (secret: string, body: Uint8Array, header: string | null): boolean => {
  if (header === null || secret === "") return false
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header.trim())
  if (match?.[1] === undefined) return false
  const expected = createHmac("sha256", secret).update(body).digest()
  const given = Buffer.from(match[1], "hex")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/** The header GitHub would send for `body` (tests, tools). */
export const signBody = (secret: string, body: string | Uint8Array): string =>
  `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`

// ------------------------------------------------------------------------------------------------ payloads
// Only the fields used; others are ignored.

const Repository = Schema.Struct({ name: Schema.String, owner: Schema.Struct({ login: Schema.String }) })
const OptionalString = Schema.optional(Schema.NullOr(Schema.String))

const PullRequestEvent = Schema.Struct({
  action: Schema.String,
  pull_request: Schema.Struct({
    number: Schema.Number,
    head: Schema.Struct({ sha: Schema.String }),
    base: Schema.Struct({ ref: Schema.String })
  }),
  changes: Schema.optional(
    Schema.Struct({ base: Schema.optional(Schema.Struct({ ref: Schema.Struct({ from: Schema.String }) })) })
  ),
  repository: Repository
})

const PushEvent = Schema.Struct({ ref: Schema.String, after: Schema.String, repository: Repository })

const StatusEvent = Schema.Struct({
  sha: Schema.String,
  context: Schema.String,
  state: Schema.Literal("pending", "success", "failure", "error"),
  target_url: OptionalString,
  description: OptionalString,
  repository: Repository
})

const CheckRun = Schema.Struct({
  id: Schema.Number,
  name: Schema.String,
  head_sha: Schema.String,
  status: Schema.String,
  conclusion: OptionalString,
  html_url: OptionalString,
  details_url: OptionalString,
  check_suite: Schema.optional(Schema.NullOr(Schema.Struct({ id: Schema.Number })))
})

const CheckRunEvent = Schema.Struct({ action: Schema.String, check_run: CheckRun, repository: Repository })

const CheckSuiteEvent = Schema.Struct({
  action: Schema.String,
  check_suite: Schema.Struct({ id: Schema.Number, head_sha: Schema.String }),
  repository: Repository
})

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

const Installation = Schema.Struct({
  id: Schema.Number,
  account: Schema.optional(Schema.NullOr(Schema.Struct({ login: Schema.String })))
})
const RepoName = Schema.Struct({ full_name: Schema.String })

const InstallationEvent = Schema.Struct({
  action: Schema.String,
  installation: Installation,
  repositories: Schema.optional(Schema.NullOr(Schema.Array(RepoName)))
})

const InstallationRepositoriesEvent = Schema.Struct({
  action: Schema.String,
  installation: Installation,
  repositories_added: Schema.optional(Schema.Array(RepoName)),
  repositories_removed: Schema.optional(Schema.Array(RepoName))
})

/** A payload that is not what its event promises. */
class PayloadInvalid extends Error {
  constructor(
    readonly event: string,
    readonly parseError: ParseResult.ParseError
  ) {
    super(`the ${event} payload is not valid: ${parseError.message}`)
  }
}

const decode =
  <A, I>(event: string, schema: Schema.Schema<A, I>) =>
  (payload: unknown) =>
    Effect.mapError(Schema.decodeUnknown(schema)(payload), (e) => new PayloadInvalid(event, e))

// ------------------------------------------------------------------------------------------------ handling

type Services = SqlClient.SqlClient | AppConfig | GitHubClient | Engine | Statuses

/** What a delivery did, decided inside its transaction. */
interface Outcome {
  readonly result: string
  /** queues whose runners to wake once the transaction committed */
  readonly wake: ReadonlyArray<string>
  /** best effort, after the commit (reactions, replies, the client's installation cache) */
  readonly after: Effect.Effect<void, unknown, Services>
}

/** The effects of a delivery, to run inside its transaction. */
type Plan = Effect.Effect<Outcome, SqlError, Services>

const done = (result: string, wake: ReadonlyArray<string> = [], after: Outcome["after"] = Effect.void): Outcome => ({
  result,
  wake,
  after
})
const nothing = (result: string): Plan => Effect.succeed(done(result))

/** The Greenline repositories of the payload's repository (GITHUB_HOST; GitHub's names are case-insensitive). */
const repositoriesOf = (repo: typeof Repository.Type) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    return yield* sql<{ id: string }>`
      select id from repositories
      where lower(host) = ${config.githubHost} and lower(owner) = ${repo.owner.login.toLowerCase()}
        and lower(name) = ${repo.name.toLowerCase()}`
  })

/** The queues of the payload's repository, with their branches. */
const queuesOf = (repo: typeof Repository.Type) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const engine = yield* Engine
    return yield* engine.queuesOfRepository(config.githubHost, repo.owner.login, repo.name)
  })

const onPullRequest = (payload: unknown) =>
  Effect.gen(function* () {
    const event = yield* decode("pull_request", PullRequestEvent)(payload)
    const pr = event.pull_request
    const base = event.changes?.base
    const cancel = (reason: string): HostChange => ({ _tag: "PrCancelled", prNumber: pr.number, reason })
    const change: HostChange | undefined =
      event.action === "synchronize"
        ? { _tag: "PrHeadMoved", prNumber: pr.number, sha: pr.head.sha }
        : event.action === "closed"
          ? cancel("PR_CLOSED")
          : event.action === "converted_to_draft"
            ? cancel("PR_CONVERTED_TO_DRAFT")
            : event.action === "edited" && base !== undefined && base.ref.from !== pr.base.ref
              ? cancel("PR_BASE_BRANCH_CHANGED")
              : undefined
    if (change === undefined) return nothing(`pull_request ${event.action}: nothing to do`)
    return Effect.gen(function* () {
      const engine = yield* Engine
      const queues = yield* queuesOf(event.repository)
      const wake: Array<string> = []
      for (const q of queues) {
        // a changed base leaves the queues of every other branch (normally the old base's)
        if (change._tag === "PrCancelled" && change.reason === "PR_BASE_BRANCH_CHANGED" && q.branch === pr.base.ref) {
          continue
        }
        if ((yield* engine.hostChanged(q.id, [change])) > 0) wake.push(q.id)
      }
      return done(`pull_request ${event.action}: ${wake.length} queue(s)`, wake)
    }) satisfies Plan
  })

const onPush = (payload: unknown) =>
  Effect.gen(function* () {
    const event = yield* decode("push", PushEvent)(payload)
    if (!event.ref.startsWith("refs/heads/")) return nothing("push: not a branch")
    const branch = event.ref.slice("refs/heads/".length)
    return Effect.gen(function* () {
      const engine = yield* Engine
      const queues = (yield* queuesOf(event.repository)).filter((q) => q.branch === branch)
      for (const q of queues) yield* engine.hostChanged(q.id, [{ _tag: "BranchMoved" }])
      return done(
        `push to ${branch}: ${queues.length} queue(s)`,
        queues.map((q) => q.id)
      )
    }) satisfies Plan
  })

const commitState = (state: string): StatusState =>
  state === "success" || state === "failure" || state === "error" ? state : "pending"

const onStatus = (payload: unknown) =>
  Effect.map(
    decode("status", StatusEvent)(payload),
    (event): Plan =>
      Effect.gen(function* () {
        const statuses = yield* Statuses
        const repos = yield* repositoriesOf(event.repository)
        for (const r of repos) {
          yield* statuses.report(
            r.id,
            event.sha,
            event.context,
            commitState(event.state),
            event.target_url ?? null,
            event.description ?? null
          )
        }
        return done(`status ${event.context}=${event.state}: ${repos.length} repository(ies)`)
      })
  )

const checkRunReport = (run: typeof CheckRun.Type) => ({
  checkRunId: run.id,
  suiteId: run.check_suite?.id ?? null,
  name: run.name,
  status: run.status,
  conclusion: run.conclusion ?? null,
  // as the reconciliation (reconcile.ts) reads it, so the two record the same run alike
  url: run.details_url ?? run.html_url ?? null
})

const onCheckRun = (payload: unknown) =>
  Effect.map(
    decode("check_run", CheckRunEvent)(payload),
    (event): Plan =>
      Effect.gen(function* () {
        const statuses = yield* Statuses
        const repos = yield* repositoriesOf(event.repository)
        for (const r of repos) {
          yield* statuses.reportCheckRun(r.id, event.check_run.head_sha, checkRunReport(event.check_run))
        }
        return done(`check_run ${event.check_run.name} ${event.action}: ${repos.length} repository(ies)`)
      })
  )

/** A completed suite on a commit that a run is testing: read its check runs (one call) and store them all. */
const onCheckSuite = (payload: unknown) =>
  Effect.gen(function* () {
    const event = yield* decode("check_suite", CheckSuiteEvent)(payload)
    if (event.action !== "completed") return nothing(`check_suite ${event.action}: nothing to do`)
    const client = yield* GitHubClient
    const sha = event.check_suite.head_sha
    const repos = yield* repositoriesOf(event.repository)
    const engine = yield* Engine
    const testing = (yield* engine.repositoriesTesting(
      repos.map((r) => r.id),
      sha
    )).map((repo_id) => ({ repo_id }))
    if (testing.length === 0 || client.mode === "none") return nothing("check_suite: not a test branch being tested")
    const owner = event.repository.owner.login
    const repo = event.repository.name
    const listed = yield* client.request(
      "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
      { owner, repo, ref: sha, per_page: 100 },
      GitHubAuth.repository(owner, repo)
    )
    const runs = listed.data.check_runs
    return Effect.gen(function* () {
      const statuses = yield* Statuses
      for (const r of testing) {
        for (const run of runs) {
          yield* statuses.reportCheckRun(
            r.repo_id,
            sha,
            checkRunReport({
              id: Number(run.id),
              name: run.name,
              head_sha: run.head_sha,
              status: run.status,
              conclusion: run.conclusion,
              html_url: run.html_url,
              details_url: run.details_url,
              check_suite: run.check_suite === null ? null : { id: Number(run.check_suite.id) }
            })
          )
        }
      }
      return done(`check_suite completed: ${runs.length} check run(s) read`)
    }) satisfies Plan
  })

const WRITE_PERMISSIONS = new Set(["admin", "maintain", "write"])

const notFound = (e: GitHubError) => e._tag === "GitHubApiError" && e.status === 404

const onIssueComment = (payload: unknown) =>
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

/** What the installation events work with: the stored installations, and the client's installation cache for one id. */
const installationTools = (id: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const client = yield* GitHubClient
    const remember = (repos: ReadonlyArray<{ owner: string; name: string }>) =>
      Effect.forEach(repos, (r) => client.rememberInstallation(r.owner, r.name, id), { discard: true })
    const forget = (repos: ReadonlyArray<{ owner: string; name: string }>) =>
      Effect.forEach(repos, (r) => client.forgetInstallation(r.owner, r.name), { discard: true })
    return { sql, store: makeInstallations(sql, config.githubHost), remember, forget }
  })

/** `owner/name` of the repositories an installation event lists (unparseable names left out). */
const repoNames = (list: ReadonlyArray<{ readonly full_name: string }> | null | undefined) =>
  (list ?? []).flatMap((r) => {
    const split = splitFullName(r.full_name)
    return split === undefined ? [] : [split]
  })

const onInstallation = (payload: unknown) =>
  Effect.map(
    decode("installation", InstallationEvent)(payload),
    (event): Plan =>
      Effect.gen(function* () {
        const id = event.installation.id
        const { store, remember, forget } = yield* installationTools(id)
        const account = event.installation.account?.login ?? ""
        const listed = repoNames(event.repositories)
        switch (event.action) {
          case "created":
          case "new_permissions_accepted":
          case "unsuspend": {
            yield* store.upsert(id, account, false)
            yield* store.addRepos(id, listed)
            return done(`installation ${event.action}: ${listed.length} repository(ies)`, [], remember(listed))
          }
          case "suspend": {
            yield* store.upsert(id, account, true)
            yield* store.addRepos(id, listed)
            const covered = yield* store.reposOf(id)
            return done("installation suspend", [], forget(covered))
          }
          case "deleted": {
            const covered = yield* store.reposOf(id)
            yield* store.remove(id)
            return done(`installation deleted: ${covered.length} repository(ies)`, [], forget([...covered, ...listed]))
          }
          default:
            return done(`installation ${event.action}: nothing to do`)
        }
      })
  )

const onInstallationRepositories = (payload: unknown) =>
  Effect.map(
    decode("installation_repositories", InstallationRepositoriesEvent)(payload),
    (event): Plan =>
      Effect.gen(function* () {
        const id = event.installation.id
        const { sql, store, remember, forget } = yield* installationTools(id)
        const added = repoNames(event.repositories_added)
        const removed = repoNames(event.repositories_removed)
        const known = yield* sql<{ suspended: boolean }>`select suspended from github_installations where id = ${id}`
        yield* store.upsert(id, event.installation.account?.login ?? "", known[0]?.suspended ?? false)
        yield* store.addRepos(id, added)
        yield* store.removeRepos(id, removed)
        return done(
          `installation_repositories ${event.action}: +${added.length} -${removed.length}`,
          [],
          Effect.zipRight(remember(added), forget(removed))
        )
      })
  )

const handlers: Record<
  string,
  (payload: unknown) => Effect.Effect<Plan, PayloadInvalid | GitHubError | SqlError, Services>
> = {
  pull_request: onPullRequest,
  push: onPush,
  status: onStatus,
  check_run: onCheckRun,
  check_suite: onCheckSuite,
  issue_comment: onIssueComment,
  installation: onInstallation,
  installation_repositories: onInstallationRepositories
}

export const HANDLED_EVENTS = Object.keys(handlers)

/** Processes one verified delivery: its effects and its id in one transaction. */
export const processDelivery = (delivery: string, event: string, payload: unknown) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const seen = yield* sql<{ id: string }>`select id from github_deliveries where id = ${delivery}`
    if (seen.length > 0) return { result: "duplicate delivery: ignored", after: Effect.void, wake: [] } as Outcome
    const handler = handlers[event]
    const plan: Plan = handler === undefined ? nothing(`${event}: not handled`) : yield* handler(payload)
    const outcome = yield* sql.withTransaction(
      Effect.gen(function* () {
        const inserted = yield* sql<{ id: string }>`
          insert into github_deliveries (id, event) values (${delivery}, ${event}) on conflict (id) do nothing returning id`
        if (inserted.length === 0) return Option.none<Outcome>()
        return Option.some(yield* plan)
      })
    )
    if (Option.isNone(outcome))
      return { result: "duplicate delivery: ignored", after: Effect.void, wake: [] } as Outcome
    const engine = yield* Engine
    for (const queueId of outcome.value.wake) yield* engine.wake(queueId)
    return outcome.value
  })

const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,100}$/

/**
 * The endpoint, over the application's services (server.ts routes `WEBHOOK_PATH` here), and `close`, which stops the
 * follow-ups still running in the background (the server calls it before closing the database).
 */
export const makeWebhookEndpoint = Effect.gen(function* () {
  const runtime = yield* Effect.runtime<Services>()
  const config = yield* AppConfig
  const runExit = Runtime.runPromiseExit(runtime)
  const fork = Runtime.runFork(runtime)
  const background = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
  const runFork = (effect: Effect.Effect<unknown, never, Services>) => {
    const fiber = fork(effect)
    background.add(fiber)
    fiber.addObserver(() => background.delete(fiber))
  }
  const close: Effect.Effect<void> = Effect.suspend(() => Fiber.interruptAll([...background]))
  const secret = Option.map(config.githubWebhookSecret, Redacted.value)
  let handled = 0

  const handle = async (request: Request): Promise<Response> => {
    if (request.method !== "POST") {
      return errorResponse(
        new ApiError({ status: 405, code: "NOT_FOUND", message: `${request.method} is not allowed on ${WEBHOOK_PATH}` })
      )
    }
    const body = await readBody(request, MAX_WEBHOOK_BYTES)
    if (body === "too-large") {
      return errorResponse(
        new ApiError({
          status: 413,
          code: "PAYLOAD_TOO_LARGE",
          message: `a webhook payload is at most ${MAX_WEBHOOK_BYTES} bytes`,
          headers: { connection: "close" }
        })
      )
    }
    if (Option.isNone(secret))
      return errorResponse(unauthorized("webhooks are not accepted: GITHUB_WEBHOOK_SECRET is not set"))
    if (!verifySignature(secret.value, body, request.headers.get("x-hub-signature-256"))) {
      return errorResponse(unauthorized("the X-Hub-Signature-256 signature is missing or wrong"))
    }
    const event = request.headers.get("x-github-event") ?? ""
    const delivery = request.headers.get("x-github-delivery") ?? ""
    if (event === "" || !DELIVERY_ID.test(delivery)) {
      return errorResponse(invalidRequest("X-GitHub-Event and X-GitHub-Delivery are required"))
    }
    let payload: unknown
    try {
      const text = new TextDecoder().decode(body)
      const form = (request.headers.get("content-type") ?? "")
        .toLowerCase()
        .startsWith("application/x-www-form-urlencoded")
      payload = JSON.parse(form ? (new URLSearchParams(text).get("payload") ?? "") : text)
    } catch {
      return errorResponse(invalidRequest("the payload is not valid JSON"))
    }
    if (event === "ping") return Response.json({ delivery, event, result: "pong" })

    const exit = await runExit(processDelivery(delivery, event, payload))
    if (Exit.isSuccess(exit)) {
      runFork(
        exit.value.after.pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`webhook ${event} ${delivery}: follow-up failed`, cause))
        )
      )
      if (++handled % 500 === 0) {
        runFork(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql`delete from github_deliveries where received_at < now() - make_interval(days => ${DELIVERY_RETENTION_DAYS})`
          ).pipe(Effect.ignore)
        )
      }
      return Response.json({ delivery, event, result: exit.value.result })
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && failure.value instanceof PayloadInvalid) {
      return errorResponse(invalidRequest(failure.value.message))
    }
    await runExit(Effect.logError(`webhook ${event} ${delivery} failed`, exit.cause))
    return errorResponse(internal())
  }
  return { handle, close }
})
