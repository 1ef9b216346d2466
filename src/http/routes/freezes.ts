import { Clock, Effect, Option } from "effect"
import { auditedTransaction } from "../../audit/trail.ts"
import { dieUnless } from "../../kernel/errors.ts"
import { Engine } from "../../queue/Engine.ts"
import { isQueueError, type QueueError } from "../../queue/errors.ts"
import { type FreezeInput, viewOfFreeze } from "../../queue/freezeStore.ts"
import { scheduleAt } from "../../queue/freezes.ts"
import type { PreviewAction } from "../../queue/preview.ts"
import { DEFAULT_PRIORITY, PRIORITY_VALUES, type RepoRef } from "../../queue/schemas.ts"
import type { Principal } from "../../tenancy/principal.ts"
import { Tenancy } from "../../tenancy/Tenancy.ts"
import { ops } from "../Api.ts"
import { ApiError, invalidRequest, notFound } from "../errors.ts"
import { CurrentOrg, CurrentPrincipal, handle } from "../router.ts"

/** Extension (#31): the freeze operations. Each is one transaction; the runners of the queues concerned are woken. */

const orDie = dieUnless((e): e is ApiError | QueueError => e instanceof ApiError || isQueueError(e))

const repoOf = (ref: RepoRef) =>
  orDie(
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const repo = yield* (yield* Tenancy).findRepo(org, ref)
      if (Option.isNone(repo))
        return yield* notFound("NOT_FOUND", `repository ${ref.host}/${ref.owner}/${ref.name} not found`)
      return repo.value
    })
  )

const queueOf = (repo: RepoRef, branch: string) =>
  orDie(
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const queue = yield* (yield* Engine).queues.findOwned(org.id, repo, branch)
      if (Option.isNone(queue)) {
        return yield* notFound("QUEUE_NOT_FOUND", `no queue ${repo.host}/${repo.owner}/${repo.name}@${branch}`)
      }
      return queue.value
    })
  )

const actorName = (p: Principal) => (p.actor.kind === "person" ? (p.actor.email ?? p.actor.name) : p.actor.name)

const ms = (s: string | null | undefined) => (s === undefined ? undefined : s === null ? null : Date.parse(s))

interface Fields {
  readonly reason?: string
  readonly mode?: "merge" | "all"
  readonly startsAt?: string | null
  readonly endsAt?: string | null
  readonly forMinutes?: number
  readonly cron?: string | null
  readonly timeZone?: string | null
  readonly durationMinutes?: number | null
}

/** A request's fields over `current`: "freeze now until" (no start: now), `forMinutes` the form of `endsAt`. */
const inputOf = (req: Fields, current: FreezeInput, now: number, creating: boolean): FreezeInput => {
  const cron = req.cron === undefined ? current.cron : req.cron
  let startsAt = ms(req.startsAt) ?? (req.startsAt === null ? null : current.startsAt)
  if (creating && cron === null && startsAt === null) startsAt = now
  const endsAt =
    req.forMinutes !== undefined
      ? (startsAt ?? now) + req.forMinutes * 60_000
      : (ms(req.endsAt) ?? (req.endsAt === null ? null : current.endsAt))
  return {
    reason: req.reason ?? current.reason,
    mode: req.mode ?? current.mode,
    startsAt: cron === null ? startsAt : null,
    endsAt: cron === null ? endsAt : null,
    cron,
    timeZone: req.timeZone === undefined ? current.timeZone : req.timeZone,
    durationMinutes: req.durationMinutes === undefined ? current.durationMinutes : req.durationMinutes
  }
}

/** `endsAt` and `forMinutes` say the same thing: one of them. */
const oneEnd = (req: Fields) =>
  req.forMinutes !== undefined && req.endsAt !== undefined && req.endsAt !== null
    ? Effect.fail(invalidRequest("give endsAt or forMinutes, not both"))
    : Effect.void

const EMPTY: FreezeInput = {
  reason: "",
  mode: "merge",
  startsAt: null,
  endsAt: null,
  cron: null,
  timeZone: null,
  durationMinutes: null
}

const wakeAll = (queueIds: ReadonlyArray<string>) =>
  Effect.flatMap(Engine, (engine) => Effect.forEach(queueIds, (id) => engine.wake(id), { discard: true }))

const preview = (repo: RepoRef, branch: string, action: PreviewAction) =>
  Effect.gen(function* () {
    const queue = yield* queueOf(repo, branch)
    return yield* orDie((yield* Engine).preview(queue, action))
  })

export const freezeRoutes = [
  handle(ops.previewCancelPullRequest, (req) =>
    preview(req.repo, req.targetBranch, { _tag: "cancel", prNumber: req.pr.number })
  ),
  handle(ops.previewRestartTests, (req) =>
    preview(req.repo, req.targetBranch, { _tag: "restart", prNumber: req.pr.number })
  ),
  handle(ops.previewSubmitPullRequest, (req) =>
    preview(req.repo, req.targetBranch, {
      _tag: "priority",
      prNumber: req.pr.number,
      priority:
        req.priority === null
          ? DEFAULT_PRIORITY
          : typeof req.priority === "number"
            ? req.priority
            : PRIORITY_VALUES[req.priority]
    })
  ),

  handle(ops.createFreeze, (req) =>
    Effect.gen(function* () {
      const repo = yield* repoOf(req.repo)
      const queue =
        req.targetBranch === undefined || req.targetBranch === null ? null : yield* queueOf(req.repo, req.targetBranch)
      const principal = yield* CurrentPrincipal
      const now = yield* Clock.currentTimeMillis
      yield* oneEnd(req)
      const input = inputOf(req, EMPTY, now, true)
      const engine = yield* Engine
      const made = yield* orDie(
        auditedTransaction(engine.freezes.create(repo.id, queue?.id ?? null, input, actorName(principal)))
      )
      yield* wakeAll(made.queues)
      return viewOfFreeze(made.row, now)
    })
  ),

  handle(ops.listFreezes, (req) =>
    Effect.gen(function* () {
      const repo = yield* repoOf(req.repo)
      const queue = req.targetBranch === undefined ? undefined : yield* queueOf(req.repo, req.targetBranch)
      const now = yield* Clock.currentTimeMillis
      const rows = yield* orDie((yield* Engine).freezes.list(repo.id, queue?.id))
      return { freezes: rows.map((row) => viewOfFreeze(row, now)) }
    })
  ),

  handle(ops.updateFreeze, (req) =>
    Effect.gen(function* () {
      const repo = yield* repoOf(req.repo)
      const now = yield* Clock.currentTimeMillis
      const engine = yield* Engine
      yield* oneEnd(req)
      const done = yield* orDie(
        auditedTransaction(engine.freezes.update(repo.id, req.id, (current) => inputOf(req, current, now, false)))
      )
      yield* wakeAll(done.queues)
      return viewOfFreeze(done.row, now)
    })
  ),

  handle(ops.setMergeSchedule, (req) =>
    Effect.gen(function* () {
      const queue = yield* queueOf(req.repo, req.targetBranch)
      const engine = yield* Engine
      yield* orDie(auditedTransaction(engine.freezes.setSchedule(queue.id, req.schedule)))
      yield* engine.wake(queue.id)
      const now = yield* Clock.currentTimeMillis
      const state = req.schedule === null ? null : scheduleAt(req.schedule, now)
      return {
        schedule: req.schedule,
        open: state?.open ?? true,
        nextChangeAt: state?.nextChange == null ? null : new Date(state.nextChange).toISOString()
      }
    })
  ),

  handle(ops.deleteFreeze, (req) =>
    Effect.gen(function* () {
      const repo = yield* repoOf(req.repo)
      const done = yield* orDie(auditedTransaction((yield* Engine).freezes.remove(repo.id, req.id)))
      yield* wakeAll(done.queues)
      return {}
    })
  )
]
