import { Clock, Effect, Option } from "effect"
import { auditedTransaction } from "../../audit/trail.ts"
import { dieUnless } from "../../kernel/errors.ts"
import { Engine, type EngineShape, type QueueKey } from "../../queue/Engine.ts"
import { isQueueError, type QueueError } from "../../queue/errors.ts"
import { appendConfigEvents, appendQueueLifecycle } from "../../queue/events.ts"
import { freezeView, waitsForFreeze } from "../../queue/freezes.ts"
import type { QueueRow } from "../../queue/QueueRepo.ts"
import { applyUpdate, publicConfig } from "../../queue/queueSettings.ts"
import { Statuses } from "../../queue/Statuses.ts"
import {
  DEFAULT_PRIORITY,
  defaultQueueConfig,
  PRIORITY_VALUES,
  type PriorityName,
  type RepoRef
} from "../../queue/schemas.ts"
import { roleAllows } from "../../tenancy/principal.ts"
import { Tenancy } from "../../tenancy/Tenancy.ts"
import { Triage } from "../../triage/Triage.ts"
import { ops } from "../Api.ts"
import { ApiError, conflict, notFound, permissionDenied } from "../errors.ts"
import { CurrentOrg, CurrentPrincipal, handle } from "../router.ts"

/** Handlers of the queue endpoints: thin, each one transaction. */

const describe = (repo: RepoRef, branch: string) => `${repo.host}/${repo.owner}/${repo.name}@${branch}`

/** Keeps the answers a handler means (the contract's errors, the engine's domain errors); anything else is a defect. */
const orDie = dieUnless((e): e is ApiError | QueueError => e instanceof ApiError || isQueueError(e))

/** The queue of `repo`@`branch` in the caller's organization, or 404 QUEUE_NOT_FOUND. */
export const requireQueue = (repo: RepoRef, branch: string) =>
  orDie(
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const queues = (yield* Engine).queues
      const queue = yield* queues.findOwned(org.id, repo, branch)
      if (Option.isNone(queue)) return yield* notFound("QUEUE_NOT_FOUND", `no queue ${describe(repo, branch)}`)
      return queue.value
    })
  )

/** The queue a request names, in the caller's organization. */
const keyOf = (repo: RepoRef, branch: string) =>
  Effect.map(CurrentOrg, (org): QueueKey => ({ orgId: org.id, repo, branch }))

/** One transaction, with the request's audit record in it (audit/trail.ts). */
const transaction = <A, R>(effect: Effect.Effect<A, unknown, R>) => orDie(auditedTransaction(effect))

/** A write to a queue's engine in one transaction, then a wake-up of the queue's runner. */
const engineWrite = <A, R>(
  repo: RepoRef,
  branch: string,
  f: (queue: QueueRow, engine: EngineShape) => Effect.Effect<A, unknown, R>
) =>
  Effect.gen(function* () {
    const engine = yield* Engine
    const queue = yield* requireQueue(repo, branch)
    const out = yield* transaction(f(queue, engine))
    yield* engine.wake(queue.id)
    return out
  })

const priorityValue = (p: number | PriorityName | null | undefined) =>
  p === undefined ? undefined : p === null ? DEFAULT_PRIORITY : typeof p === "number" ? p : PRIORITY_VALUES[p]

export const queueRoutes = [
  handle(ops.createQueue, (req) =>
    transaction(
      Effect.gen(function* () {
        const org = yield* CurrentOrg
        const tenancy = yield* Tenancy
        const queues = (yield* Engine).queues
        const engine = yield* Engine
        const repo = yield* tenancy.findRepo(org, req.repo, { claim: true })
        if (Option.isNone(repo)) {
          return yield* notFound(
            "NOT_FOUND",
            `repository ${req.repo.host}/${req.repo.owner}/${req.repo.name} not found`
          )
        }
        const config = {
          ...defaultQueueConfig(req.targetBranch),
          ...(req.mode !== undefined ? { mode: req.mode } : {}),
          ...(req.concurrency !== undefined ? { concurrency: req.concurrency } : {})
        }
        const created = yield* queues.create(repo.value, req.targetBranch, config)
        if (Option.isNone(created)) {
          return yield* conflict("QUEUE_ALREADY_EXISTS", `queue ${describe(req.repo, req.targetBranch)} already exists`)
        }
        yield* engine.queueCreated(created.value)
        yield* appendQueueLifecycle(created.value, "queue.created", publicConfig(created.value.config))
        return publicConfig(created.value.config)
      })
    )
  ),

  handle(ops.getQueue, (req) =>
    Effect.gen(function* () {
      const engine = yield* Engine
      const view = yield* orDie(engine.viewByKey(yield* keyOf(req.repo, req.targetBranch)))
      // extension (#31): the freeze in force as the freezes say now (a write shows at once), and who waits for it
      const held = yield* orDie(engine.freezes.inForce(view.queueId, yield* Clock.currentTimeMillis))
      const frozen = held.inForce
      return {
        ...publicConfig(view.config),
        freeze: freezeView(frozen),
        mergeSchedule: held.schedule,
        enqueuedPullRequests: view.enqueued.map((e) => ({
          ...e,
          waitReason: waitsForFreeze(frozen, e.state) ? ("FREEZE" as const) : null
        })),
        adaptiveChoice: view.adaptiveChoice ?? null,
        runnerError: view.runnerError
      }
    })
  ),

  handle(ops.updateQueue, (req) =>
    transaction(
      Effect.gen(function* () {
        const queue = yield* requireQueue(req.repo, req.targetBranch)
        const queues = (yield* Engine).queues
        const engine = yield* Engine
        if (!(yield* queues.hold(queue.id))) {
          return yield* notFound("QUEUE_NOT_FOUND", `no queue ${describe(req.repo, req.targetBranch)}`)
        }
        const config = applyUpdate(queue.config, req)
        yield* queues.saveConfig(queue.id, config)
        yield* engine.configChanged({ ...queue, config })
        yield* appendConfigEvents(queue, config, publicConfig(config))
        const view = yield* engine.view({ ...queue, config })
        return publicConfig(view.config)
      })
    )
  ),

  handle(ops.deleteQueue, (req) =>
    transaction(
      Effect.gen(function* () {
        const org = yield* CurrentOrg
        const tenancy = yield* Tenancy
        const queues = (yield* Engine).queues
        const owned = yield* tenancy.findRepo(org, req.repo)
        if (Option.isNone(owned)) return {}
        const queue = yield* queues.find(owned.value, req.targetBranch)
        if (Option.isNone(queue)) return {}
        const active = yield* queues.removeIfEmpty(queue.value.id)
        if (active > 0) {
          return yield* conflict(
            "QUEUE_NOT_EMPTY",
            `queue ${describe(req.repo, req.targetBranch)} still holds ${active} pull request${active === 1 ? "" : "s"}`
          )
        }
        yield* appendQueueLifecycle(queue.value, "queue.deleted")
        return {}
      })
    )
  ),

  handle(ops.submitPullRequest, (req) =>
    Effect.gen(function* () {
      // extension (#31): ignoring a freeze takes the role that manages freezes
      const principal = yield* CurrentPrincipal
      if (req.ignoreFreeze === true && !roleAllows(principal.role, "maintain")) {
        return yield* permissionDenied("submitPullRequest with ignoreFreeze", "maintain", principal.role)
      }
      const engine = yield* Engine
      const queues = (yield* Engine).queues
      const org = yield* CurrentOrg
      // the queue as remembered for a few seconds: the write checks it still exists (and reads its mode itself); when
      // it is gone, the queue is looked up again once (it may have been made anew)
      const attempt = (cached: boolean) =>
        Effect.gen(function* () {
          const found = yield* orDie(
            (cached ? queues.findOwnedCached : queues.findOwned)(org.id, req.repo, req.targetBranch)
          )
          if (Option.isNone(found)) {
            return yield* notFound("QUEUE_NOT_FOUND", `no queue ${describe(req.repo, req.targetBranch)}`)
          }
          const queue = found.value
          // the Git host is read before the transaction, so no connection waits on it
          const pr = yield* engine.readPullRequest(queue, req.pr.number)
          const outcome = yield* orDie(
            engine.submitBatched({
              queue,
              prNumber: req.pr.number,
              priority: priorityValue(req.priority),
              noBatch: req.noBatch,
              pr,
              ...(req.ignoreFreeze === true ? { ignoreFreeze: true } : {})
            })
          )
          if (outcome === "merged") {
            return yield* conflict(
              "PR_ALREADY_MERGED",
              `pull request #${req.pr.number} is merged into ${req.targetBranch} already: the queue merged this head`
            )
          }
          if (outcome === "gone") queues.forget(queue.id)
          return outcome === "written"
        })
      if (!(yield* attempt(true)) && !(yield* attempt(false))) {
        return yield* notFound("QUEUE_NOT_FOUND", `no queue ${describe(req.repo, req.targetBranch)}`)
      }
      return {}
    })
  ),

  handle(ops.cancelPullRequest, (req) =>
    Effect.as(
      engineWrite(req.repo, req.targetBranch, (queue, engine) => engine.cancel(queue, req.pr.number)),
      {}
    )
  ),

  handle(ops.restartTestsOnPullRequest, (req) =>
    Effect.as(
      engineWrite(req.repo, req.targetBranch, (queue, engine) => engine.restart(queue, req.pr.number)),
      {}
    )
  ),

  handle(ops.getSubmittedPullRequest, (req) =>
    Effect.gen(function* () {
      const engine = yield* Engine
      const key = yield* keyOf(req.repo, req.targetBranch)
      const record = yield* orDie(engine.getSubmitted(key, req.pr.number, req.includeTimeline ?? false))
      // extension (#33): why it failed, and the causing PRs' runs of its restarts
      const restarted = record.timeBreakdown?.restarts.some((r) => r.causedByPr !== null) === true
      if (record.state !== "failed" && !restarted) return record
      const queue = yield* requireQueue(req.repo, req.targetBranch)
      return yield* orDie((yield* Triage).explain(queue, record))
    })
  ),

  handle(ops.getMergeQueueTestingDetails, (req) =>
    Effect.gen(function* () {
      const queue = yield* requireQueue(req.repo, req.targetBranch)
      const engine = yield* Engine
      return yield* orDie(engine.testingDetails(queue, req.testRunId))
    })
  ),

  handle(ops.setImpactedTargets, (req) =>
    Effect.as(
      engineWrite(req.repo, req.targetBranch, (queue, engine) =>
        engine.setImpactedTargets(
          queue,
          req.pr.number,
          req.pr.sha,
          typeof req.impactedTargets === "string" ? "ALL" : req.impactedTargets
        )
      ),
      {}
    )
  ),

  handle(ops.reportStatus, (req) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const tenancy = yield* Tenancy
      const statuses = yield* Statuses
      const repo = yield* orDie(tenancy.findRepo(org, req.repo, { claim: true }))
      if (Option.isNone(repo)) {
        return yield* notFound("NOT_FOUND", `repository ${req.repo.host}/${req.repo.owner}/${req.repo.name} not found`)
      }
      yield* orDie(
        statuses.report(repo.value.id, req.sha, req.context, req.state, req.targetUrl ?? null, req.description ?? null)
      )
      return {}
    })
  )
]
