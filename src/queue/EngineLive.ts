import * as os from "node:os"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Context, Deferred, Effect, FiberMap, Layer, Option, Queue, Stream } from "effect"
import { AppConfig } from "../config.ts"
import { Database } from "../kernel/Database.ts"
import { EventLog } from "../kernel/EventLog.ts"
import { Metrics } from "../metrics/Metrics.ts"
import { usesGitHub } from "../providers.ts"
import type { CommandCi } from "./CiRunner.ts"
import { Engine, EngineRunner, type EngineShape, type QueueKey, type Submission } from "./Engine.ts"
import { makeEngineRepo } from "./engineRepo.ts"
import { PrNotActive, PrTestsNotRestartable, PullRequestNotFound, QueueNotFound, TestRunNotFound } from "./errors.ts"
import { estimateFields, estimateOf, needsPrior } from "./estimates.ts"
import { PrFeedback } from "./Feedback.ts"
import { GitHost } from "./GitHost.ts"
import { initialState, type QueueState, type QueueStats, type RunRecord } from "./planner/index.ts"
import { QueueRepo, type QueueRow, queueOfColumns } from "./QueueRepo.ts"
import { entryRecord, positionOf, viewOf } from "./queueView.ts"
import { plannerConfig, repoRefOf, runQueue } from "./Runner.ts"
import { RunnerHealth } from "./runner/health.ts"
import { supervise } from "./runner/supervise.ts"
import { Statuses, type StoredCheckRun, WAKE_CHANNEL } from "./Statuses.ts"
import {
  DEFAULT_PRIORITY,
  type EnqueuedPullRequest,
  type SubmittedPullRequest,
  type TestingDetails
} from "./schemas.ts"
import { type EntryRow, type InboxEvent, iso, makeStore, parseJson, TERMINAL, upgradeState } from "./store.ts"
import { breakdownOf } from "./timeBreakdown.ts"

/** A submission waiting for the next batch. */
interface PendingSubmission {
  readonly submission: Submission
  readonly done: Deferred.Deferred<boolean, SqlError>
}

/** An error's message for users: the first line of it and of each cause under it, bounded. */
const errorMessage = (error: unknown): string => {
  const parts: Array<string> = []
  let e: unknown = error
  for (let depth = 0; depth < 4 && e !== undefined && e !== null; depth++) {
    const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e)
    parts.push(text.split("\n")[0] ?? text)
    e = e instanceof Error ? e.cause : undefined
  }
  const line = parts.join(": caused by ")
  return line.length > 500 ? `${line.slice(0, 497)}...` : line
}

const keyOf = (queue: QueueRow): QueueKey => ({ orgId: queue.repo.orgId, repo: queue.repo, branch: queue.branch })

/**
 * A queue's lease, renewed every LEASE_LOOP_MS: another instance takes a dead owner's queues over within
 * LEASE_SECONDS + LEASE_LOOP_MS. Short is safe: a stale owner cannot save a round (its fencing token is old) and its
 * Git commands are idempotent or compare-and-swap (see docs/decisions.md, "Lease takeover").
 */
const LEASE_SECONDS = 6
const LEASE_LOOP_MS = 2000

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
    const config = yield* AppConfig
    const metrics = yield* Metrics
    const health = yield* RunnerHealth
    const context = yield* Effect.context<
      SqlClient.SqlClient | GitHost | QueueRepo | Statuses | AppConfig | Database | CommandCi | RunnerHealth
    >()
    // the Git host's view of a PR (GitHub: comment and status check), when the application provides one
    const feedback = yield* Effect.serviceOption(PrFeedback)
    const withFeedback = Option.isSome(feedback) ? Context.add(context, PrFeedback, feedback.value) : context
    // the event log the runners append their rounds' events to, when the application has one
    const eventLog = yield* Effect.serviceOption(EventLog)
    const runnerContext = Option.isSome(eventLog) ? Context.add(withFeedback, EventLog, eventLog.value) : withFeedback
    const store = makeStore(sql)
    const repo = makeEngineRepo(sql)
    const { activeEntries, enqueueEvent, enqueueEvents, insertRuntime, loadRuntime, readTargets, timeline } = store

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

    /** getSubmittedPullRequest's extension fields (issue #18): the estimates and the time breakdown. */
    const extensionsOf = (queue: QueueRow, entryId: string, active: boolean) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        let estimates = {}
        if (active) {
          const rt = yield* sql<{ state: unknown; version: string | number }>`
            select state, version from queue_runtime where queue_id = ${queue.id}`
          const found = rt[0]
          const state =
            found === undefined
              ? initialState(plannerConfig(queue.config), null)
              : upgradeState(parseJson<QueueState>(found.state))
          const version = found === undefined ? null : Number(found.version)
          // an entry the runner has not placed yet: right behind the placed ones
          const fresh = { place: 1, depth: state.config.concurrency, now }
          const prior = yield* priorFor(queue, state)
          estimates = estimateFields(estimateOf(queue.id, version, state, now, prior), entryId, fresh)
        }
        const rows = (yield* timeline(entryId)).map((t) => ({
          at: new Date(t.at).getTime(),
          state: t.state,
          reason: t.reason
        }))
        const b = breakdownOf(rows, now, {
          batch: queue.config.batch,
          maxWaitMs: queue.config.batchingMaxWaitTimeMinutes * 60_000
        })
        // the PR that failed (or went pending_failure) at the instant of each restart caused it
        const causes =
          b.restarts.length === 0
            ? []
            : yield* sql<{ pr_number: string | number; at: Date | string }>`
                select e.pr_number, t.at from entry_timeline t join entries e on e.id = t.entry_id
                where e.queue_id = ${queue.id} and e.id <> ${entryId}
                  and t.state in ('failed', 'pending_failure')
                  and t.at in ${sql.in(b.restarts.map((r) => iso(r.at)))}`
        const causeAt = new Map(causes.map((c) => [new Date(c.at).getTime(), Number(c.pr_number)]))
        return {
          ...estimates,
          timeBreakdown: {
            waitingForSlotMs: b.waitingForSlotMs,
            waitingForBatchMs: b.waitingForBatchMs,
            testingMs: b.testingMs,
            restarts: b.restarts.map((r) => ({
              at: iso(r.at),
              reason: r.reason,
              causedByPr: causeAt.get(r.at) ?? null
            }))
          }
        }
      })

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

    const readPullRequest = (queue: QueueRow, prNumber: number) =>
      git.getPullRequest(repoRefOf(queue.repo), prNumber).pipe(
        Effect.catchTags({
          PrNotFound: () =>
            new PullRequestNotFound({
              message: `pull request #${prNumber} does not exist (no refs/pull/${prNumber}/head)`
            }),
          RepoNotFound: () =>
            new PullRequestNotFound({
              message: `pull request #${prNumber} does not exist: ${queue.repo.host}/${queue.repo.owner}/${queue.repo.name} has no repository`
            })
        }),
        Effect.catchTag("GitError", (e) => Effect.die(e))
      )

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

    // ---------------------------------------------------------------- submissions

    /**
     * Writes submissions (to any queues) in the current transaction with a fixed number of statements, whatever
     * their number: one read of the queues, entries and stored targets, one upsert of new entries, one update of
     * those already active, one insert of the runner's events in order. An element of the answer is false when that
     * submission's queue is gone (nothing is written for it). No two submissions may name the same queue and PR.
     */
    const writeSubmissions = (items: ReadonlyArray<Submission>) =>
      Effect.gen(function* () {
        if (items.length === 0) return [] as ReadonlyArray<boolean>
        const at = iso(yield* Clock.currentTimeMillis)
        const keys = items.map((s, i) => ({ i, queue_id: s.queue.id, pr: s.prNumber, sha: s.pr.headSha }))
        const found = yield* repo.submissionTargets(keys)
        const byIndex = new Map(found.map((row) => [Number(row.i), row]))
        const inserts: Array<Record<string, unknown>> = []
        const updates: Array<Record<string, unknown>> = []
        const events: Array<{ readonly i: number; readonly queue_id: string; readonly event: InboxEvent }> = []
        // the index of each entry's Submitted event in `events`: its sequence number goes into the row (request_seq)
        const submitted = (s: Submission, entryId: string, headSha: string, priority: number, noBatch: boolean) =>
          events.push({
            i: events.length,
            queue_id: s.queue.id,
            event: {
              _tag: "Planner",
              event: { _tag: "Submitted", entryId, prNumber: s.prNumber, headSha, priority, noBatch, ready: true }
            }
          })
        items.forEach((s, i) => {
          const row = byIndex.get(i)
          if (row === undefined) return
          if (row.id !== null && row.state !== null && !TERMINAL.has(row.state)) {
            // already in the queue: a new priority or batching choice, the head it was submitted with
            const priority = s.priority ?? row.priority ?? DEFAULT_PRIORITY
            const noBatch = s.noBatch ?? row.no_batch ?? false
            const ev = submitted(s, row.id, row.head_sha ?? s.pr.headSha, priority, noBatch) - 1
            updates.push({ id: row.id, priority, no_batch: noBatch, ev })
            return
          }
          const id = row.id ?? crypto.randomUUID()
          const priority = s.priority ?? DEFAULT_PRIORITY
          const noBatch = s.noBatch ?? false
          const ev = submitted(s, id, s.pr.headSha, priority, noBatch) - 1
          inserts.push({
            id,
            queue_id: s.queue.id,
            pr_number: s.prNumber,
            state: row.mode === "parallel" && !row.has_targets ? "not_ready" : "pending",
            at,
            priority,
            no_batch: noBatch,
            head_sha: s.pr.headSha,
            title: s.pr.title,
            author: s.pr.author,
            ev
          })
          if (row.has_targets) {
            events.push({
              i: events.length,
              queue_id: s.queue.id,
              event: { _tag: "TargetsSet", prNumber: s.prNumber, sha: s.pr.headSha }
            })
          }
        })
        const seqs = events.length > 0 ? yield* enqueueEvents(events) : []
        const withSeq = (rows: ReadonlyArray<Record<string, unknown>>) =>
          JSON.stringify(rows.map((r) => ({ ...r, request_seq: seqs[r.ev as number] ?? null })))
        if (inserts.length > 0) {
          yield* repo.insertEntries(withSeq(inserts))
        }
        if (updates.length > 0) {
          yield* repo.updateEntries(withSeq(updates))
        }
        return items.map((_, i) => byIndex.has(i))
      })

    // Submissions through the API wait here and are written together, a batch per transaction (group commit):
    // what arrives while one batch commits goes into the next. A batch that fails is written again one submission
    // per transaction, so one bad submission fails alone.
    const MAX_BATCH = 256
    const submissions = yield* Queue.unbounded<PendingSubmission>()
    const flush = (batch: ReadonlyArray<PendingSubmission>) =>
      sql.withTransaction(writeSubmissions(batch.map((p) => p.submission))).pipe(
        Effect.flatMap((written) =>
          Effect.forEach(batch, (p, i) => Deferred.succeed(p.done, written[i] === true), { discard: true })
        ),
        Effect.catchAllCause(() =>
          Effect.forEach(
            batch,
            (p) =>
              sql.withTransaction(writeSubmissions([p.submission])).pipe(
                Effect.flatMap(([written]) => Deferred.succeed(p.done, written === true)),
                Effect.catchAllCause((cause) => Deferred.failCause(p.done, cause))
              ),
            { discard: true }
          )
        ),
        Effect.zipRight(Effect.forEach(new Set(batch.map((p) => p.submission.queue.id)), wake, { discard: true }))
      )
    let carried: Array<PendingSubmission> = []
    let current: ReadonlyArray<PendingSubmission> = []
    const submitLoop = Effect.gen(function* () {
      const taken =
        carried.length === 0
          ? yield* Queue.takeBetween(submissions, 1, MAX_BATCH)
          : yield* Queue.takeUpTo(submissions, MAX_BATCH)
      const batch: Array<PendingSubmission> = []
      const later: Array<PendingSubmission> = []
      const keys = new Set<string>()
      for (const p of [...carried, ...taken]) {
        // the same PR twice goes into the next batch, after this one
        const key = `${p.submission.queue.id}#${p.submission.prNumber}`
        if (keys.has(key)) later.push(p)
        else {
          keys.add(key)
          batch.push(p)
        }
      }
      carried = later
      current = batch
      yield* flush(batch)
    })
    yield* Effect.forkScoped(
      Effect.forever(submitLoop).pipe(
        Effect.ensuring(
          // at shutdown, what waits is told so (a submission already answered is not touched)
          Effect.flatMap(Queue.takeAll(submissions), (left) =>
            Effect.forEach([...current, ...carried, ...left], (p) => Deferred.interrupt(p.done), { discard: true })
          )
        )
      )
    )

    const engine: EngineShape = {
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
          const prior = yield* priorFor(queue, state)
          const runnerError =
            row.runner_error === null
              ? null
              : { message: row.runner_error, since: iso(new Date(row.runner_error_since ?? now)) }
          const view = viewOf(queue, state, parseJson<ReadonlyArray<EntryRow>>(row.active), now, version, prior)
          return { ...view, runnerError }
        }),

      readPullRequest,

      submit: (queue, prNumber, priority, noBatch, read) =>
        Effect.gen(function* () {
          const pr = read ?? (yield* readPullRequest(queue, prNumber))
          const [written] = yield* writeSubmissions([{ queue, prNumber, priority, noBatch, pr }])
          if (written !== true) return yield* queueNotFound(keyOf(queue))
        }),

      submitBatched: (submission) =>
        Effect.gen(function* () {
          const done = yield* Deferred.make<boolean, SqlError>()
          yield* Queue.offer(submissions, { submission, done })
          return yield* Deferred.await(done)
        }),

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
          const row = { ...found.value, id: found.value.id } as EntryRow & typeof found.value
          const active = !TERMINAL.has(row.state)
          // requests the runner has not stepped yet move places: the view's order then (the state is read whole)
          const place =
            active && row.unsettled
              ? positionOf(yield* runtimeOf(queue), yield* activeEntries(queue.id), row.id)
              : row.position
          const hasTargets = row.has_targets
          // on GitHub, the PR as GitHub sees it now (a conditional request; unknown when GitHub does not answer soon)
          const live =
            active && usesGitHub(config, queue.repo)
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
            ...(yield* extensionsOf(queue, row.id, active))
          }
          if (!includeTimeline) return record
          const items = yield* timeline(row.id)
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
                    : { _tag: "Planner", event: { _tag: "PrHeadMoved", prNumber: change.prNumber, sha: change.sha } }
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

    // ---------------------------------------------------------------- runners of this instance

    const layerScope = yield* Effect.scope
    const owner = `${os.hostname()}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`
    const signals = new Map<string, Queue.Queue<void>>()
    const leaseWake = yield* Queue.sliding<void>(1)
    const runners = yield* FiberMap.make<string>()
    const fencings = new Map<string, number>()

    const signalOf = (queueId: string) => {
      let q = signals.get(queueId)
      if (q === undefined) {
        q = Effect.runSync(Queue.sliding<void>(1))
        signals.set(queueId, q)
      }
      return q
    }

    /**
     * Forgets the token of a runner that ends, unless the queue is already another runner's: the lease loop replaces a
     * runner found under a new token while the old one still runs, and the old one ends after the new one started.
     * Without its token the queue's wake-ups would go to the lease loop, which would replace the runner at each one.
     */
    const forget = (queueId: string, fencing: number) => {
      if (fencings.get(queueId) === fencing) fencings.delete(queueId)
    }

    /**
     * Queues whose stored runner error may be set: a runner new on this instance may find one another instance
     * recorded, and a failure records one; the next completed round clears it (one statement, not one per round).
     */
    const storedError = new Set<string>()

    const hooks = {
      observeLag: (seconds: number) => metrics.runnerLag.observe({}, seconds),
      observeStep: (seconds: number) => metrics.observeStep(seconds),
      roundDone: (queueId: string) => {
        health.recovered(queueId)
        // the stored error (getQueue's runnerError, any instance) is cleared once per runner start or failure
        if (storedError.delete(queueId)) Effect.runFork(store.clearRunnerError(queueId).pipe(Effect.ignore))
      },
      lostLease: (queueId: string, fencing: number) =>
        Effect.sync(() => forget(queueId, fencing)).pipe(
          Effect.zipRight(Effect.logWarning(`lost the lease of queue ${queueId}`))
        )
    }

    const supervised = (queueId: string, fencing: number) =>
      Effect.suspend(() => {
        storedError.add(queueId)
        return supervise(runQueue(queueId, owner, fencing, signalOf(queueId), hooks), {
          // a runner that lost its lease ends by interruption: that is no failure, and it is not restarted
          failed: (cause, attempt, delayMs) =>
            Effect.gen(function* () {
              const now = yield* Clock.currentTimeMillis
              const message = errorMessage(Cause.squash(cause))
              health.failed(queueId, message, now, now + delayMs)
              metrics.runnerRestarts.inc()
              storedError.add(queueId)
              yield* store
                .recordRunnerError(queueId, message)
                .pipe(Effect.catchAllCause((c) => Effect.logWarning("could not record a runner's error", c)))
              yield* Effect.logError(
                `runner of queue ${queueId} failed (${attempt + 1} in a row); restarting in ${delayMs} ms`,
                cause
              )
            })
        })
      }).pipe(Effect.ensuring(Effect.sync(() => forget(queueId, fencing))), Effect.provide(runnerContext))

    const takeLeases = (force: boolean) =>
      Effect.gen(function* () {
        const rows = yield* repo.takeLeases(owner, LEASE_SECONDS, force)
        const held = new Set<string>()
        for (const row of rows) {
          const fencing = Number(row.fencing)
          held.add(row.queue_id)
          if (fencings.get(row.queue_id) === fencing && (yield* FiberMap.has(runners, row.queue_id))) continue
          fencings.set(row.queue_id, fencing)
          yield* FiberMap.run(runners, row.queue_id, supervised(row.queue_id, fencing))
        }
        for (const queueId of [...fencings.keys()]) {
          if (!held.has(queueId)) {
            fencings.delete(queueId)
            yield* FiberMap.remove(runners, queueId)
          }
        }
      })

    const start = Effect.gen(function* () {
      yield* takeLeases(db.kind === "pglite").pipe(Effect.orDie)
      yield* Effect.forkIn(
        Effect.forever(
          Effect.raceFirst(Queue.take(leaseWake), Effect.sleep(LEASE_LOOP_MS)).pipe(
            Effect.zipRight(takeLeases(false)),
            Effect.catchAllCause((cause) => Effect.logError("lease loop failed", cause))
          )
        ),
        layerScope
      )
      yield* Effect.forkIn(
        db
          .listen(WAKE_CHANNEL)
          .pipe(
            Stream.runForEach((queueId) =>
              fencings.has(queueId) ? Queue.offer(signalOf(queueId), undefined) : Queue.offer(leaseWake, undefined)
            )
          ),
        layerScope
      )
    })

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* FiberMap.clear(runners)
        yield* repo.releaseLeases(owner).pipe(Effect.ignore)
      })
    )

    return Context.make(Engine, engine).pipe(Context.add(EngineRunner, { start: Effect.provide(start, context) }))
  })
)
