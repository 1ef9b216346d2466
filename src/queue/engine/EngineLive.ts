import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { Database } from "../../kernel/Database.ts"
import { EventLog } from "../../kernel/EventLog.ts"
import type { CommandCi } from "../CiRunner.ts"
import { Engine, EngineRunner, type EngineShape, type QueueKey } from "../Engine.ts"
import { makeEngineRepo } from "../engineRepo.ts"
import {
  PrAlreadyMerged,
  PrNotActive,
  PrTestsNotRestartable,
  PullRequestNotFound,
  QueueNotFound,
  TestRunNotFound
} from "../errors.ts"
import { cachedEstimate, estimateFields, estimateOf, needsPrior } from "../estimates.ts"
import { PrFeedback } from "../Feedback.ts"
import { makeFreezeStore } from "../freezeStore.ts"
import { GitHost } from "../GitHost.ts"
import { initialState, type QueueState, type QueueStats, type RunRecord } from "../planner/index.ts"
import { previewOf } from "../preview.ts"
import { QueueEnv } from "../QueueEnv.ts"
import { QueueRepo, type QueueRow, queueOfColumns } from "../QueueRepo.ts"
import { entryRecord, estimateKey, pendingEvents, pendingState, positionOf, viewOf } from "../queueView.ts"
import type { RunnerHealth } from "../runner/health.ts"
import { plannerConfig, repoRefOf } from "../runner/index.ts"
import { makeLeases } from "../runner/lease.ts"
import { Statuses, type StoredCheckRun, WAKE_CHANNEL } from "../Statuses.ts"
import type { EnqueuedPullRequest, SubmittedPullRequest, TestingDetails } from "../schemas.ts"
import {
  type EntryRow,
  type InboxEvent,
  iso,
  makeStore,
  parseJson,
  type RecordRow,
  TERMINAL,
  type TimelineItem,
  upgradeState
} from "../store.ts"
import { makeSubmissionWriter } from "../submissions.ts"
import { type Breakdown, breakdownOf } from "../timeBreakdown.ts"

const keyOf = (queue: QueueRow): QueueKey => ({ orgId: queue.repo.orgId, repo: queue.repo, branch: queue.branch })

/** Check runs grouped by suite (runs without a suite each on their own), enum values upper case as in the API. */
const checkSuitesOf = (checks: ReadonlyArray<StoredCheckRun>): TestingDetails["checkSuites"] => {
  const suites = new Map<string, Array<TestingDetails["checkSuites"][number]["checkRuns"][number]>>()
  for (const c of checks) {
    const key = c.suiteId === null ? `run:${c.checkRunId}` : `suite:${c.suiteId}`
    const runs = suites.get(key) ?? []
    runs.push({
      name: c.name,
      url: c.url ?? "",
      status: c.status.toUpperCase(),
      conclusion: c.conclusion === null ? null : c.conclusion.toUpperCase()
    })
    suites.set(key, runs)
  }
  return [...suites.values()].map((checkRuns) => ({ checkRuns }))
}

const statusCheckState = (state: string) =>
  state === "success" ? "SUCCESS" : state === "failure" ? "FAILURE" : state === "error" ? "ERROR" : "PENDING"

const queueNotFound = (key: QueueKey) =>
  new QueueNotFound({ message: `no queue ${key.repo.host}/${key.repo.owner}/${key.repo.name}@${key.branch}` })

export const EngineLive = Layer.scopedContext(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const git = yield* GitHost
    const queues = yield* QueueRepo
    const statuses = yield* Statuses
    const config = yield* QueueEnv
    const context = yield* Effect.context<
      SqlClient.SqlClient | GitHost | QueueRepo | Statuses | QueueEnv | Database | CommandCi | RunnerHealth
    >()
    // the Git host's view of a PR (GitHub: comment and status check), when the application provides one
    const feedback = yield* Effect.serviceOption(PrFeedback)
    const withFeedback = Option.isSome(feedback) ? Context.add(context, PrFeedback, feedback.value) : context
    // the event log the runners append their rounds' transitions (the timelines) and events to
    const runnerContext = Context.add(withFeedback, EventLog, yield* EventLog)
    const store = makeStore(sql)
    const repo = makeEngineRepo(sql)
    const { activeEntries, enqueueEvent, enqueueEvents, insertRuntime, loadRuntime, readTargets } = store

    const runtimeOf = (queue: QueueRow) =>
      Effect.map(loadRuntime(queue.id), (r) =>
        Option.getOrElse(
          Option.map(r, (x) => x.state),
          () => initialState(plannerConfig(queue.config), null)
        )
      )

    /** The queue held for the transaction (QUEUE_NOT_FOUND when a delete came first). */
    const hold = (queue: QueueRow) =>
      Effect.flatMap(store.holdQueue(queue.id), (held) => (held ? Effect.void : queueNotFound(keyOf(queue))))

    /** A young queue's prior for its estimates: the observations of the repository's busiest other queue. */
    const priorFor = (queue: QueueRow, state: QueueState) =>
      needsPrior(state)
        ? Effect.map(
            sql<{ stats: unknown }>`
              select rt.state->'stats' as stats from queue_runtime rt join queues q on q.id = rt.queue_id
              where q.repo_id = ${queue.repo.id} and q.id <> ${queue.id}
                and coalesce((rt.state->'stats'->>'finishedRuns')::int, 0) >= 3
              order by (rt.state->'stats'->>'finishedRuns')::int desc limit 1`,
            (rows) => (rows[0] === undefined ? undefined : parseJson<QueueStats>(rows[0].stats))
          )
        : Effect.succeed(undefined)

    /** An active entry's estimate fields when its queue's estimate is not cached: the state (and prior) read. */
    const estimateRead = (queue: QueueRow, entryId: string, now: number) =>
      Effect.gen(function* () {
        const rt = yield* sql<{ state: unknown; version: string | number }>`
          select state, version from queue_runtime where queue_id = ${queue.id}`
        const found = rt[0]
        const state =
          found === undefined
            ? initialState(plannerConfig(queue.config), null)
            : upgradeState(parseJson<QueueState>(found.state))
        const at = found === undefined ? null : Number(found.version)
        // an entry the runner has not placed yet: right behind the placed ones
        const fresh = { place: 1, depth: state.config.concurrency, now }
        const prior = yield* priorFor(queue, state)
        return estimateFields(estimateOf(queue.id, at, state, now, prior), entryId, fresh)
      })

    /** The PR of the queue that failed (or went pending_failure) at the instant of each restart: its cause. */
    const restartCauses = (queue: QueueRow, entryId: string, b: Breakdown) =>
      Effect.map(
        sql<{ pr_number: string | number; at: Date | string }>`
          select e.pr_number, t.occurred_at as at from event_log t join entries e on e.id = t.entry_id
          where t.entry_id is not null and e.queue_id = ${queue.id} and e.id <> ${entryId}
            and t.state in ('failed', 'pending_failure')
            and t.occurred_at in ${sql.in(b.restarts.map((r) => iso(r.at)))}`,
        (causes) => new Map(causes.map((c) => [new Date(c.at).getTime(), Number(c.pr_number)]))
      )

    const breakdownView = (b: Breakdown, causeAt: ReadonlyMap<number, number>) => ({
      waitingForSlotMs: b.waitingForSlotMs,
      waitingForBatchMs: b.waitingForBatchMs,
      testingMs: b.testingMs,
      restarts: b.restarts.map((r) => ({ at: iso(r.at), reason: r.reason, causedByPr: causeAt.get(r.at) ?? null }))
    })

    const noCauses: ReadonlyMap<number, number> = new Map()

    /**
     * getSubmittedPullRequest's extension fields (issue #18): the estimates and the time breakdown, from the
     * runtime's version and the entry's timeline that the caller read with the entry. The common read (the queue's
     * estimate cached for its version, no restart) needs no statement and is computed without a fiber step.
     */
    const extensionsOf = (
      queue: QueueRow,
      entryId: string,
      active: boolean,
      version: number | null,
      items: ReadonlyArray<TimelineItem>,
      now: number,
      known?: ReturnType<typeof estimateFields>
    ) => {
      const rows = items.map((t) => ({ at: new Date(t.at).getTime(), state: t.state, reason: t.reason }))
      const b = breakdownOf(rows, now, {
        batch: queue.config.batch,
        maxWaitMs: queue.config.batchingMaxWaitTimeMinutes * 60_000
      })
      // an unchanged queue's estimate is cached by its runtime version: then its state is not read again
      const hit = known === undefined && active && version !== null ? cachedEstimate(queue.id, version) : undefined
      const estimates =
        known !== undefined
          ? known
          : hit !== undefined
            ? estimateFields(hit.estimate, entryId, { place: 1, depth: hit.depth, now })
            : active
              ? undefined
              : {}
      if (estimates !== undefined && b.restarts.length === 0)
        return Effect.succeed({ ...estimates, timeBreakdown: breakdownView(b, noCauses) })
      return Effect.all([
        estimates === undefined ? estimateRead(queue, entryId, now) : Effect.succeed(estimates),
        b.restarts.length === 0 ? Effect.succeed(noCauses) : restartCauses(queue, entryId, b)
      ]).pipe(Effect.map(([fields, causeAt]) => ({ ...fields, timeBreakdown: breakdownView(b, causeAt) })))
    }

    /** The active entry of a PR, locked for the transaction, in a queue held for it. */
    const requireActive = (queue: QueueRow, prNumber: number) =>
      Effect.gen(function* () {
        yield* hold(queue)
        const entry = yield* store.lockEntry(queue.id, prNumber)
        if (Option.isNone(entry))
          return yield* new PullRequestNotFound({
            message: `pull request #${prNumber} was never submitted to this queue`
          })
        if (TERMINAL.has(entry.value.state)) {
          return yield* new PrNotActive({
            message: `pull request #${prNumber} is not in the queue (it is ${entry.value.state})`
          })
        }
        return entry.value
      })

    const alreadyMerged = (queue: QueueRow, prNumber: number, why: string) =>
      new PrAlreadyMerged({ message: `pull request #${prNumber} is merged into ${queue.branch} already: ${why}` })

    /**
     * The PR as the Git host shows it, unless it is merged already (PR_ALREADY_MERGED): the host says so (GitHub), or
     * its head is in the target branch (local Git, which has no pull requests of its own to ask).
     */
    const readPullRequest = (queue: QueueRow, prNumber: number) =>
      Effect.gen(function* () {
        const ref = repoRefOf(queue.repo)
        const pr = yield* git.getPullRequest(ref, prNumber).pipe(
          Effect.catchTags({
            PrNotFound: () =>
              new PullRequestNotFound({
                message: `pull request #${prNumber} does not exist (no refs/pull/${prNumber}/head)`
              }),
            PrMerged: () => alreadyMerged(queue, prNumber, "the Git host says it is merged"),
            RepoNotFound: () =>
              new PullRequestNotFound({
                message: `pull request #${prNumber} does not exist: ${queue.repo.host}/${queue.repo.owner}/${queue.repo.name} has no repository`
              })
          }),
          Effect.catchTag("GitError", (e) => Effect.die(e))
        )
        if (git.remotePullRequests?.(ref) !== true) {
          const tip = yield* git.getBranchSha(ref, queue.branch).pipe(Effect.orElseSucceed(() => null))
          const contained =
            tip !== null && (yield* git.isAncestor(ref, pr.headSha, tip).pipe(Effect.orElseSucceed(() => false)))
          if (contained) return yield* alreadyMerged(queue, prNumber, `its head ${pr.headSha} is in the branch`)
        }
        return pr
      })

    // One wake-up in flight per queue: wakes asked for meanwhile fold into one more, sent after it (so after every
    // commit that asked), instead of a notification per request.
    const waking = new Map<string, boolean>()
    const notifyLoop = (queueId: string): Effect.Effect<void> =>
      Effect.flatMap(db.notify(WAKE_CHANNEL, queueId), () => {
        if (waking.get(queueId) === true) {
          waking.set(queueId, false)
          return notifyLoop(queueId)
        }
        waking.delete(queueId)
        return Effect.void
      })
    const wake = (queueId: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (waking.has(queueId)) {
          waking.set(queueId, true)
          return Effect.void
        }
        waking.set(queueId, false)
        return Effect.asVoid(Effect.forkDaemon(notifyLoop(queueId)))
      })

    const { writeSubmissions, submitBatched } = yield* makeSubmissionWriter(sql, repo, enqueueEvents, wake)

    const freezes = makeFreezeStore(sql, (ids) =>
      Effect.asVoid(enqueueEvents(ids.map((id, i) => ({ i, queue_id: id, event: { _tag: "ConfigChanged" as const } }))))
    )

    const engine: EngineShape = {
      freezes,
      preview: (queue, action) =>
        Effect.gen(function* () {
          const state = yield* runtimeOf(queue)
          const rows = yield* activeEntries(queue.id)
          const now = yield* Clock.currentTimeMillis
          const pending = pendingState(queue, state, rows, now).state
          const out = previewOf(pending, action, now, yield* priorFor(queue, pending))
          if (out === null) {
            return yield* new PrNotActive({ message: `pull request #${action.prNumber} is not in the queue` })
          }
          return out
        }),
      queueCreated: (queue) =>
        Effect.gen(function* () {
          const tip = yield* git
            .getBranchSha(repoRefOf(queue.repo), queue.branch)
            .pipe(Effect.orElseSucceed(() => null))
          yield* insertRuntime(queue.id, initialState(plannerConfig(queue.config), tip))
        }),

      configChanged: (queue) => enqueueEvent(queue.id, { _tag: "ConfigChanged" }),

      view: (queue) =>
        Effect.gen(function* () {
          const state = yield* runtimeOf(queue)
          const rows = yield* activeEntries(queue.id)
          return viewOf(queue, state, rows, yield* Clock.currentTimeMillis, null, yield* priorFor(queue, state))
        }),

      viewByKey: (key) =>
        Effect.gen(function* () {
          const rows = yield* repo.queueViewRows(key)
          const row = rows[0]
          if (row === undefined) return yield* queueNotFound(key)
          const queue = queueOfColumns(row)
          const state =
            row.runtime_state === null
              ? initialState(plannerConfig(queue.config), null)
              : upgradeState(parseJson<QueueState>(row.runtime_state))
          const version = row.runtime_version === null ? null : Number(row.runtime_version)
          const now = yield* Clock.currentTimeMillis
          const active = parseJson<ReadonlyArray<EntryRow>>(row.active)
          // the prior only feeds the estimate: not read when the estimate of this version is cached (and no write
          // waits for the runner: the estimate is then of the state as it will step them)
          const cached =
            version !== null &&
            cachedEstimate(queue.id, version) !== undefined &&
            pendingEvents(queue, state, active).length === 0
          const prior = cached ? undefined : yield* priorFor(queue, state)
          const runnerError =
            row.runner_error === null
              ? null
              : { message: row.runner_error, since: iso(new Date(row.runner_error_since ?? now)) }
          const view = viewOf(queue, state, active, now, version, prior)
          return { ...view, queueId: queue.id, runnerError }
        }),

      readPullRequest,

      submit: (queue, prNumber, priority, noBatch, read) =>
        Effect.gen(function* () {
          const pr = read ?? (yield* readPullRequest(queue, prNumber))
          const [outcome] = yield* writeSubmissions([{ queue, prNumber, priority, noBatch, pr }])
          if (outcome === "merged") return yield* alreadyMerged(queue, prNumber, "the queue merged this head")
          if (outcome !== "written") return yield* queueNotFound(keyOf(queue))
        }),

      submitBatched,

      cancel: (queue, prNumber, reason = "API_REQUESTED") =>
        Effect.gen(function* () {
          const entry = yield* requireActive(queue, prNumber)
          if (yield* store.isMerging(queue.id, entry.id)) {
            return yield* new PrNotActive({
              message: `pull request #${prNumber} is being merged: it can no longer be cancelled`
            })
          }
          const seq = yield* enqueueEvent(queue.id, { _tag: "Planner", event: { _tag: "Cancelled", prNumber, reason } })
          yield* store.markCancelled(entry.id, iso(yield* Clock.currentTimeMillis), seq)
        }),

      restart: (queue, prNumber) =>
        Effect.gen(function* () {
          const entry = yield* requireActive(queue, prNumber)
          if (entry.first_tested_at === null && entry.run_id === null) {
            return yield* new PrTestsNotRestartable({
              message: `pull request #${prNumber} has no test run to restart yet`
            })
          }
          if (yield* store.isMerging(queue.id, entry.id)) {
            return yield* new PrTestsNotRestartable({ message: `pull request #${prNumber} is being merged` })
          }
          const seq = yield* enqueueEvent(queue.id, { _tag: "Planner", event: { _tag: "RestartRequested", prNumber } })
          yield* store.markRestarted(entry.id, iso(yield* Clock.currentTimeMillis), seq)
        }),

      getSubmitted: (key, prNumber, includeTimeline) =>
        Effect.gen(function* () {
          const found = yield* repo.findSubmitted(key, prNumber)
          if (Option.isNone(found)) return yield* queueNotFound(key)
          const queue = queueOfColumns(found.value)
          if (found.value.id === null)
            return yield* new PullRequestNotFound({
              message: `pull request #${prNumber} was never submitted to this queue`
            })
          const row = found.value as RecordRow & typeof found.value
          const active = !TERMINAL.has(row.state)
          const version = found.value.runtime_version === null ? null : Number(found.value.runtime_version)
          const items =
            found.value.timeline === null
              ? []
              : parseJson<Array<TimelineItem & { readonly seq: number }>>(found.value.timeline).sort(
                  (a, b) => a.seq - b.seq
                )
          // requests the runner has not stepped yet move places and estimates: the view's order then, and the
          // estimate of the state as the runner will step them (the state is read whole)
          const now = yield* Clock.currentTimeMillis
          let place = row.position
          let known: ReturnType<typeof estimateFields> | undefined
          if (active && (row.unsettled || found.value.config_pending)) {
            const state = yield* runtimeOf(queue)
            const rows = yield* activeEntries(queue.id)
            if (row.unsettled) place = positionOf(state, rows, row.id)
            const pending = pendingState(queue, state, rows, now)
            const prior = yield* priorFor(queue, pending.state)
            const estimate = estimateOf(queue.id, estimateKey(version, pending.key), pending.state, now, prior)
            known = estimateFields(estimate, row.id, { place: 1, depth: pending.state.config.concurrency, now })
          }
          const hasTargets = row.has_targets
          // on GitHub, the PR as GitHub sees it now (a conditional request; unknown when GitHub does not answer soon)
          const live =
            active && git.remotePullRequests?.(repoRefOf(queue.repo)) === true
              ? yield* git
                  .getPullRequest(repoRefOf(queue.repo), prNumber)
                  .pipe(Effect.timeout("2 seconds"), Effect.option)
              : Option.none()
          const record: SubmittedPullRequest = {
            ...entryRecord(queue, row, place),
            readiness: {
              hasImpactedTargets: hasTargets,
              requiresImpactedTargets: queue.config.mode === "parallel",
              doesBaseBranchMatch: Option.match(live, {
                onNone: () => true,
                onSome: (pr) => pr.baseBranch === undefined || pr.baseBranch === queue.branch
              }),
              gitHubMergeability: Option.match(live, {
                onNone: () => "unspecified" as const,
                onSome: (pr) => pr.mergeability ?? "unspecified"
              })
            },
            forceEnqueued: false,
            isCurrentlySubmittedToQueue: active,
            ...(yield* extensionsOf(queue, row.id, active, version, items, now, known))
          }
          if (!includeTimeline) return record
          return {
            ...record,
            timeline: items.map((t) => ({
              at: iso(new Date(t.at)),
              state: t.state as EnqueuedPullRequest["state"],
              reason: t.reason
            }))
          }
        }),

      testingDetails: (queue, testRunId) =>
        Effect.gen(function* () {
          const rows = yield* repo.testRunRecord(queue.id, testRunId)
          const raw = rows[0]
          if (raw === undefined)
            return yield* new TestRunNotFound({ message: `no test run ${testRunId} in this queue` })
          const run = (typeof raw.record === "string" ? JSON.parse(raw.record) : raw.record) as RunRecord
          const required = yield* statuses.requirements(run.id)
          const reported = run.testBranchSha === null ? [] : yield* statuses.forSha(queue.repo.id, run.testBranchSha)
          const checks =
            run.testBranchSha === null ? [] : yield* statuses.checkRunsForSha(queue.repo.id, run.testBranchSha)
          const tested = run.items.filter((i) => run.testedEntryIds.includes(i.entryId))
          const titles = yield* repo.entryTitles(run.items.map((i) => i.entryId))
          const titleOf = new Map(titles.map((t) => [t.id, t.title]))
          const repoPath = `${queue.repo.host}/${queue.repo.owner}/${queue.repo.name}`
          const details: TestingDetails = {
            requiredStatuses: required?.statuses ?? [],
            requiredStatusesSource: (required?.source ?? null) as TestingDetails["requiredStatusesSource"],
            testBranch: run.branch,
            testBranchSha: run.testBranchSha ?? "",
            checkSuites: checkSuitesOf(checks),
            statusChecks: reported.map((s) => ({
              context: s.context,
              url: s.targetUrl ?? "",
              state: statusCheckState(s.state)
            })),
            testedPullRequests: tested.map((i) => ({
              prNumber: i.prNumber,
              prUrl: `${config.publicUrl}/repos/${repoPath}/pull/${i.prNumber}`,
              title: titleOf.get(i.entryId) ?? ""
            })),
            createdAt: iso(run.createdAt),
            status: run.status === "building" ? "in_progress" : run.status,
            dependentPrs: [...run.dependentPrs]
          }
          if (queue.config.mode !== "parallel") return details
          const all = new Set<string>()
          const testedTargets = new Set<string>()
          for (const item of run.items) {
            const t = yield* readTargets(queue.repo.id, item.prNumber, item.headSha)
            const list = t === "ALL" ? ["ALL"] : (t ?? [])
            for (const x of list) {
              all.add(x)
              if (run.testedEntryIds.includes(item.entryId)) testedTargets.add(x)
            }
          }
          return { ...details, impactedTargets: [...all], impactedTargetsForTestedPrs: [...testedTargets] }
        }),

      setImpactedTargets: (queue, prNumber, sha, targets) =>
        Effect.gen(function* () {
          yield* hold(queue)
          yield* store.storeTargets(queue.repo.id, prNumber, sha, targets)
          const entry = yield* store.lockEntry(queue.id, prNumber)
          if (Option.isSome(entry) && !TERMINAL.has(entry.value.state) && entry.value.head_sha === sha) {
            const seq = yield* enqueueEvent(queue.id, { _tag: "TargetsSet", prNumber, sha })
            const at = iso(yield* Clock.currentTimeMillis)
            yield* store.markTargetsSet(entry.value.id, at, seq, queue.config.mode === "parallel")
          }
        }),

      queuesOfRepository: store.queuesOfRepository,

      queueById: (queueId) => queues.findById(queueId),

      queues,

      hostChanged: (queueId, changes) =>
        Effect.gen(function* () {
          const prs = changes.flatMap((c) => (c._tag === "BranchMoved" ? [] : [c.prNumber]))
          const active = yield* store.activePrs(queueId, prs)
          const events: Array<{ readonly i: number; readonly queue_id: string; readonly event: InboxEvent }> = []
          for (const change of changes) {
            const event: InboxEvent | undefined =
              change._tag === "BranchMoved"
                ? { _tag: "GitChanged" }
                : !active.has(change.prNumber)
                  ? undefined
                  : change._tag === "PrCancelled"
                    ? {
                        _tag: "Planner",
                        event: { _tag: "Cancelled", prNumber: change.prNumber, reason: change.reason }
                      }
                    : change._tag === "PrMerged"
                      ? {
                          _tag: "Planner",
                          event: { _tag: "MergedOutside", prNumber: change.prNumber, sha: change.sha }
                        }
                      : {
                          _tag: "Planner",
                          event: { _tag: "PrHeadMoved", prNumber: change.prNumber, sha: change.sha }
                        }
            if (event !== undefined) events.push({ i: events.length, queue_id: queueId, event })
          }
          if (events.length > 0) yield* enqueueEvents(events)
          return events.length
        }),

      repositoriesTesting: store.repositoriesTesting,

      watchedQueues: store.watchedQueues,

      wake,

      ciOutput: (id) =>
        Effect.gen(function* () {
          if (!/^[0-9a-f-]{36}$/i.test(id)) return Option.none()
          const rows = yield* repo.ciOutput(id)
          return Option.map(Option.fromNullable(rows[0]), (r) => ({ output: r.output, exitCode: r.exit_code }))
        })
    }

    const { start } = yield* makeLeases(repo, store, runnerContext)

    return Context.make(Engine, engine).pipe(Context.add(EngineRunner, { start: Effect.provide(start, context) }))
  })
)
