import { Effect, Schema } from "effect"
import { Engine, type HostChange } from "../queue/Engine.ts"
import { Statuses, type StatusState } from "../queue/Statuses.ts"
import { GitHubAuth, GitHubClient } from "./GitHubClient.ts"
import {
  decode,
  done,
  nothing,
  OptionalString,
  type Plan,
  queuesOf,
  Repository,
  repositoriesOf
} from "./webhookPlan.ts"

/** Pull requests, pushes, commit statuses and checks: what they change in the queues. */

const PullRequestEvent = Schema.Struct({
  action: Schema.String,
  pull_request: Schema.Struct({
    number: Schema.Number,
    merged: Schema.optional(Schema.NullOr(Schema.Boolean)),
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

export const onPullRequest = (payload: unknown) =>
  Effect.gen(function* () {
    const event = yield* decode("pull_request", PullRequestEvent)(payload)
    const pr = event.pull_request
    const base = event.changes?.base
    const cancel = (reason: string): HostChange => ({ _tag: "PrCancelled", prNumber: pr.number, reason })
    const change: HostChange | undefined =
      event.action === "synchronize"
        ? { _tag: "PrHeadMoved", prNumber: pr.number, sha: pr.head.sha }
        : event.action === "closed"
          ? pr.merged === true
            ? { _tag: "PrMerged", prNumber: pr.number, sha: pr.head.sha }
            : cancel("PR_CLOSED")
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

export const onPush = (payload: unknown) =>
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

export const onStatus = (payload: unknown) =>
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

export const onCheckRun = (payload: unknown) =>
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
export const onCheckSuite = (payload: unknown) =>
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
