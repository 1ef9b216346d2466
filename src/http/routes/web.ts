import { Effect, Option } from "effect"
import { AuditLog } from "../../audit/AuditLog.ts"
import { isAuditError } from "../../audit/errors.ts"
import { auditedTransaction } from "../../audit/trail.ts"
import { TestHistoryReader } from "../../flaky/history.ts"
import { dieUnless } from "../../kernel/errors.ts"
import { QueueActivityReader, queueHealth } from "../../queue/activity.ts"
import { Engine } from "../../queue/Engine.ts"
import { isQueueError, type QueueError } from "../../queue/errors.ts"
import { PermissionDenied, Tenancy } from "../../tenancy/Tenancy.ts"
import { Triage } from "../../triage/Triage.ts"
import { ops } from "../Api.ts"
import { ApiError, fromDomainError, notFound } from "../errors.ts"
import { CurrentOrg, CurrentPrincipal, handle } from "../router.ts"
import { requireQueue } from "./queue.ts"

/** Handlers of the dashboard's extension endpoints (every one of them also answers an API token). */

// the engine's domain errors (PR not found, ...) go on to the HTTP edge's mapping, as in the queue's handlers
const orDie = dieUnless(
  (e): e is ApiError | QueueError | PermissionDenied =>
    e instanceof ApiError || isQueueError(e) || e instanceof PermissionDenied
)

const iso = (d: Date) => d.toISOString()

export const webRoutes = [
  handle(ops.listQueues, () =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const reader = yield* QueueActivityReader
      return { queues: yield* orDie(reader.listQueues(org.id)) }
    })
  ),

  handle(ops.getQueueActivity, (req) =>
    Effect.gen(function* () {
      const queue = yield* requireQueue(req.repo, req.targetBranch)
      const reader = yield* QueueActivityReader
      return yield* orDie(reader.activity(queue))
    })
  ),

  handle(ops.getQueueHealth, (req) =>
    Effect.gen(function* () {
      const queue = yield* requireQueue(req.repo, req.targetBranch)
      const days = req.days ?? 7
      return yield* orDie(queueHealth(queue, days, req.bucket ?? (days <= 2 ? "hour" : "day"), Date.now()))
    })
  ),

  handle(ops.getPullRequestActivity, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const reader = yield* QueueActivityReader
      const engine = yield* Engine
      const branches = yield* orDie(reader.branchesOfPr(org.id, req.repo, req.pr.number))
      const branch = req.targetBranch ?? branches[0]
      if (branch === undefined) {
        const r = req.repo
        return yield* notFound(
          "PR_NOT_FOUND",
          `pull request #${req.pr.number} of ${r.host}/${r.owner}/${r.name} was never submitted to a queue`
        )
      }
      const queue = yield* requireQueue(req.repo, branch)
      const submitted = yield* orDie(
        engine.getSubmitted({ orgId: org.id, repo: req.repo, branch }, req.pr.number, true)
      )
      // extension (#33): why it failed, and the causing PRs' runs of its restarts
      const pullRequest = yield* orDie((yield* Triage).explain(queue, submitted))
      const runs = yield* orDie(reader.pullRequest(queue, req.pr.number))
      return { targetBranch: branch, targetBranches: branches, pullRequest, ...runs }
    })
  ),

  handle(ops.getTestHistory, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const tenancy = yield* Tenancy
      const reader = yield* TestHistoryReader
      const repo = yield* orDie(tenancy.findRepo(org, req.repo))
      if (Option.isNone(repo)) {
        return yield* notFound("NOT_FOUND", `repository ${req.repo.host}/${req.repo.owner}/${req.repo.name} not found`)
      }
      return yield* orDie(reader.history(repo.value.id, req.test_id, req.days ?? 30))
    })
  ),

  handle(ops.getUpload, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const tenancy = yield* Tenancy
      const reader = yield* TestHistoryReader
      const repo = yield* orDie(tenancy.findRepo(org, req.repo))
      const r = req.repo
      if (Option.isNone(repo))
        return yield* notFound("NOT_FOUND", `repository ${r.host}/${r.owner}/${r.name} not found`)
      const upload = yield* orDie(reader.upload(repo.value.id, req.upload_id))
      if (upload === null) {
        return yield* notFound("NOT_FOUND", `upload ${req.upload_id} of ${r.host}/${r.owner}/${r.name} not found`)
      }
      return upload
    })
  ),

  // the tokens of the caller's organization; below admin, the tenancy service narrows them to the caller's own
  handle(ops.listApiTokens, () =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const by = yield* CurrentPrincipal
      const tenancy = yield* Tenancy
      const tokens = yield* orDie(tenancy.listTokens(org.slug, by))
      return {
        tokens: tokens.map((t) => ({
          id: t.id,
          name: t.name,
          role: t.role,
          createdAt: iso(t.createdAt),
          revokedAt: t.revokedAt === null ? null : iso(t.revokedAt)
        }))
      }
    })
  ),

  handle(ops.createApiToken, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const by = yield* CurrentPrincipal
      const tenancy = yield* Tenancy
      const created = yield* orDie(auditedTransaction(tenancy.createToken(org.slug, req.name, req.role, by)))
      return { id: created.id, name: req.name, role: created.role, token: created.token }
    })
  ),

  handle(ops.revokeApiToken, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const by = yield* CurrentPrincipal
      const tenancy = yield* Tenancy
      // only a token of the caller's organization: another's is not found. Not in a transaction of its own: every
      // instance forgets the token once the revocation committed (the router records it right after)
      const revoked = yield* orDie(tenancy.revokeToken(req.id, { org, by }))
      if (!revoked) return yield* notFound("NOT_FOUND", `no API token ${req.id}`)
      return {}
    })
  ),

  handle(ops.listAuditEvents, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const audit = yield* AuditLog
      return yield* audit
        .list(org.id, req)
        .pipe(Effect.catchAll((e) => (isAuditError(e) ? Effect.fail(fromDomainError(e)) : Effect.die(e))))
    })
  )
]
