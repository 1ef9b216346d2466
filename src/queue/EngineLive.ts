import * as os from "node:os"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Context, Deferred, Effect, FiberMap, Layer, Option, Queue, Stream } from "effect"
import { AppConfig } from "../config.ts"
import { conflict, notFound } from "../http/errors.ts"
import { Database } from "../kernel/Database.ts"
import { Metrics } from "../metrics/Metrics.ts"
import { usesGitHub } from "../providers.ts"
import type { CommandCi } from "./CiRunner.ts"
import { Engine, EngineRunner, type EngineShape, type QueueKey, type Submission } from "./Engine.ts"
import { PrFeedback } from "./Feedback.ts"
import { GitHost } from "./GitHost.ts"
import { initialState, type QueueState, type RunRecord } from "./planner/index.ts"
import {
  ACTIVE_STATES,
  QUEUE_COLUMNS,
  type QueueColumns,
  QueueRepo,
  type QueueRow,
  queueOfColumns
} from "./QueueRepo.ts"
import { entryRecord, positionOf, viewOf } from "./queueView.ts"
import { plannerConfig, repoRefOf, runQueue } from "./Runner.ts"
import { errorMessage, RunnerHealth } from "./RunnerHealth.ts"
import { supervise } from "./runner/supervise.ts"
import { Statuses, type StoredCheckRun, WAKE_CHANNEL } from "./Statuses.ts"
import {
  DEFAULT_PRIORITY,
  type EnqueuedPullRequest,
  type SubmittedPullRequest,
  type TestingDetails
} from "./schemas.ts"
import { type EntryRow, type InboxEvent, iso, makeStore, parseJson, TERMINAL, upgradeState } from "./store.ts"

/** A submission waiting for the next batch. */
interface PendingSubmission {
  readonly submission: Submission
  readonly done: Deferred.Deferred<boolean, SqlError>
}

type NullableEntryRow = { readonly [K in keyof EntryRow]: EntryRow[K] | null }

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
  notFound("QUEUE_NOT_FOUND", `no queue ${key.repo.host}/${key.repo.owner}/${key.repo.name}@${key.branch}`)

export const EngineLive = Layer.scopedContext(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const git = yield* GitHost
    const queues = yield* QueueRepo
    const statuses = yield* Statuses
    const health = yield* RunnerHealth
    const config = yield* AppConfig
    const metrics = yield* Metrics
    const context = yield* Effect.context<
      SqlClient.SqlClient | GitHost | QueueRepo | Statuses | AppConfig | Database | CommandCi | RunnerHealth
    >()
    // the Git host's view of a PR (GitHub: comment and status check), when the application provides one
    const feedback = yield* Effect.serviceOption(PrFeedback)
    const runnerContext = Option.isSome(feedback) ? Context.add(context, PrFeedback, feedback.value) : context
    const store = makeStore(sql)
    const { activeEntries, enqueueEvent, enqueueEvents, insertRuntime, loadRuntime, readTargets, timeline } = store

    const runtimeOf = (queue: QueueRow) =>
      Effect.map(loadRuntime(queue.id), (r) =>
        Option.getOrElse(
          Option.map(r, (x) => x.state),
          () => initialState(plannerConfig(queue.config), null)
        )
      )

    /**
     * The queue `key` names with the PR submitted to it, in one statement: the entry (null columns when the PR was
     * never submitted), whether targets exist for its head, and its position among the active entries that are not
     * not_ready, in testing order (from the runner's state, computed in the database: the state is not shipped).
     * No row: no such queue in the caller's organization.
     */
    const findSubmitted = (key: QueueKey, prNumber: number) =>
      Effect.map(
        sql<QueueColumns & NullableEntryRow & { position: number | null; has_targets: boolean; unsettled: boolean }>`
          select ${sql.unsafe(QUEUE_COLUMNS)}, e.*,
            exists (select 1 from impacted_targets t
                    where t.repo_id = r.id and t.pr_number = e.pr_number and t.sha = e.head_sha) as has_targets,
            exists (select 1 from entries u where u.queue_id = q.id and u.request_seq is not null) as unsettled,
            case when e.state in ('pending', 'testing', 'tests_passed', 'pending_failure') then coalesce(
              array_position(rt.positions, e.id),
              -- not placed by the runner yet: after the placed ones, by priority and submission, as getQueue shows it
              coalesce(cardinality(rt.positions), 0) + (
                select count(*)::int from entries f
                where f.queue_id = q.id and f.state in ('pending', 'testing', 'tests_passed', 'pending_failure')
                  and not (f.id = any(coalesce(rt.positions, '{}')))
                  and (f.priority, f.submitted_at, f.id) <= (e.priority, e.submitted_at, e.id)))
            end as position
          from queues q join repositories r on r.id = q.repo_id
          left join queue_runtime rt on rt.queue_id = q.id
          left join entries e on e.queue_id = q.id and e.pr_number = ${prNumber}
          where r.host = ${key.repo.host} and r.owner = ${key.repo.owner} and r.name = ${key.repo.name}
            and r.org_id = ${key.orgId} and q.branch = ${key.branch}`,
        (rows) => Option.fromNullable(rows[0])
      )

    /** The queue held for the transaction (QUEUE_NOT_FOUND when a delete came first). */
    const hold = (queue: QueueRow) =>
      Effect.flatMap(store.holdQueue(queue.id), (held) => (held ? Effect.void : queueNotFound(keyOf(queue))))

    /** The active entry of a PR, locked for the transaction, in a queue held for it. */
    const requireActive = (queue: QueueRow, prNumber: number) =>
      Effect.gen(function* () {
        yield* hold(queue)
        const entry = yield* store.lockEntry(queue.id, prNumber)
        if (Option.isNone(entry))
          return yield* notFound("PR_NOT_FOUND", `pull request #${prNumber} was never submitted to this queue`)
        if (TERMINAL.has(entry.value.state)) {
          return yield* conflict(
            "PR_NOT_ACTIVE",
            `pull request #${prNumber} is not in the queue (it is ${entry.value.state})`
          )
        }
        return entry.value
      })

    const readPullRequest = (queue: QueueRow, prNumber: number) =>
      git.getPullRequest(repoRefOf(queue.repo), prNumber).pipe(
        Effect.catchTags({
          PrNotFound: () =>
            notFound("PR_NOT_FOUND", `pull request #${prNumber} does not exist (no refs/pull/${prNumber}/head)`),
          RepoNotFound: () =>
            notFound(
              "PR_NOT_FOUND",
              `pull request #${prNumber} does not exist: ${queue.repo.host}/${queue.repo.owner}/${queue.repo.name} has no repository`
            )
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
        const found = yield* sql<{
          i: number
          mode: string | null
          id: string | null
          state: string | null
          priority: number | null
          no_batch: boolean | null
          head_sha: string | null
          has_targets: boolean
        }>`
          select v.i, q.config->>'mode' as mode, e.id, e.state, e.priority, e.no_batch, e.head_sha,
            exists (select 1 from impacted_targets t
                    where t.repo_id = q.repo_id and t.pr_number = v.pr and t.sha = v.sha) as has_targets
          from jsonb_to_recordset(${JSON.stringify(keys)}::jsonb) as v(i int, queue_id uuid, pr bigint, sha text)
          join queues q on q.id = v.queue_id
          left join entries e on e.queue_id = v.queue_id and e.pr_number = v.pr
          order by q.id
          for key share of q`
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
          yield* sql`insert into entries (id, queue_id, pr_number, state, state_changed_at, submitted_at, priority, no_batch,
                                          head_sha, title, author, request_seq, request_new)
                     select v.id, v.queue_id, v.pr_number, v.state, v.at, v.at, v.priority, v.no_batch, v.head_sha, v.title,
                       v.author, v.request_seq, true
                     from jsonb_to_recordset(${withSeq(inserts)}::jsonb) as v(id uuid, queue_id uuid, pr_number bigint,
                       state text, at timestamptz, priority int, no_batch boolean, head_sha text, title text, author text,
                       request_seq bigint)
                     on conflict (queue_id, pr_number) do update set state = excluded.state,
                       state_changed_at = excluded.state_changed_at, submitted_at = excluded.submitted_at,
                       priority = excluded.priority, no_batch = excluded.no_batch, head_sha = excluded.head_sha,
                       title = excluded.title, author = excluded.author, run_id = null, verified_by_test_run = null,
                       first_tested_at = null, ended_at = null, restarts = 0, request_seq = excluded.request_seq,
                       request_new = true`
        }
        if (updates.length > 0) {
          yield* sql`update entries e set priority = v.priority, no_batch = v.no_batch, request_seq = v.request_seq
                     from jsonb_to_recordset(${withSeq(updates)}::jsonb) as v(id uuid, priority int, no_batch boolean,
                       request_seq bigint)
                     where e.id = v.id`
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
          return viewOf(queue, state, rows)
        }),

      viewByKey: (key) =>
        Effect.gen(function* () {
          const rows = yield* sql<
            QueueColumns & {
              runtime_state: unknown
              active: unknown
              runner_error: string | null
              runner_error_since: Date | string | null
            }
          >`
            select ${sql.unsafe(QUEUE_COLUMNS)}, rt.state as runtime_state, rt.runner_error, rt.runner_error_since,
              (select coalesce(json_agg(e), '[]'::json) from entries e
               where e.queue_id = q.id and e.state in ${sql.in(ACTIVE_STATES)}) as active
            from queues q join repositories r on r.id = q.repo_id
            left join queue_runtime rt on rt.queue_id = q.id
            where r.host = ${key.repo.host} and r.owner = ${key.repo.owner} and r.name = ${key.repo.name}
              and r.org_id = ${key.orgId} and q.branch = ${key.branch}`
          const row = rows[0]
          if (row === undefined) return yield* queueNotFound(key)
          const queue = queueOfColumns(row)
          const state =
            row.runtime_state === null
              ? initialState(plannerConfig(queue.config), null)
              : upgradeState(parseJson<QueueState>(row.runtime_state))
          const runnerError =
            row.runner_error === null
              ? null
              : { message: row.runner_error, since: iso(new Date(row.runner_error_since ?? Date.now())) }
          return { ...viewOf(queue, state, parseJson<ReadonlyArray<EntryRow>>(row.active)), runnerError }
        }),

      runnerErrors: health.runnerErrors,

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
            return yield* conflict(
              "PR_NOT_ACTIVE",
              `pull request #${prNumber} is being merged: it can no longer be cancelled`
            )
          }
          const seq = yield* enqueueEvent(queue.id, { _tag: "Planner", event: { _tag: "Cancelled", prNumber, reason } })
          yield* store.markCancelled(entry.id, iso(yield* Clock.currentTimeMillis), seq)
        }),

      restart: (queue, prNumber) =>
        Effect.gen(function* () {
          const entry = yield* requireActive(queue, prNumber)
          if (entry.first_tested_at === null && entry.run_id === null) {
            return yield* conflict(
              "PR_TESTS_NOT_RESTARTABLE",
              `pull request #${prNumber} has no test run to restart yet`
            )
          }
          if (yield* store.isMerging(queue.id, entry.id)) {
            return yield* conflict("PR_TESTS_NOT_RESTARTABLE", `pull request #${prNumber} is being merged`)
          }
          const seq = yield* enqueueEvent(queue.id, { _tag: "Planner", event: { _tag: "RestartRequested", prNumber } })
          yield* store.markRestarted(entry.id, iso(yield* Clock.currentTimeMillis), seq)
        }),

      getSubmitted: (key, prNumber, includeTimeline) =>
        Effect.gen(function* () {
          const found = yield* findSubmitted(key, prNumber)
          if (Option.isNone(found)) return yield* queueNotFound(key)
          const queue = queueOfColumns(found.value)
          if (found.value.id === null)
            return yield* notFound("PR_NOT_FOUND", `pull request #${prNumber} was never submitted to this queue`)
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
            isCurrentlySubmittedToQueue: active
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
          const rows = yield* sql<{ record: unknown }>`
            select record from test_runs where id = ${testRunId} and queue_id = ${queue.id}`
          const raw = rows[0]
          if (raw === undefined) return yield* notFound("TEST_RUN_NOT_FOUND", `no test run ${testRunId} in this queue`)
          const run = (typeof raw.record === "string" ? JSON.parse(raw.record) : raw.record) as RunRecord
          const required = yield* statuses.requirements(run.id)
          const reported = run.testBranchSha === null ? [] : yield* statuses.forSha(queue.repo.id, run.testBranchSha)
          const checks =
            run.testBranchSha === null ? [] : yield* statuses.checkRunsForSha(queue.repo.id, run.testBranchSha)
          const tested = run.items.filter((i) => run.testedEntryIds.includes(i.entryId))
          const titles = yield* sql<{ id: string; title: string }>`
            select id, title from entries where id in ${sql.in(run.items.map((i) => i.entryId).concat(["00000000-0000-0000-0000-000000000000"]))}`
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

      wake,

      ciOutput: (id) =>
        Effect.gen(function* () {
          if (!/^[0-9a-f-]{36}$/i.test(id)) return Option.none()
          const rows = yield* sql<{ output: string; exit_code: number | null }>`
            select output, exit_code from ci_outputs where id = ${id}`
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

    const hooks = {
      observeLag: (seconds: number) => metrics.runnerLag.observe({}, seconds),
      observeStep: (seconds: number) => metrics.observeStep(seconds),
      roundDone: (queueId: string) => health.clearRunnerError(queueId).pipe(Effect.ignore),
      lostLease: (queueId: string, fencing: number) =>
        Effect.sync(() => forget(queueId, fencing)).pipe(
          Effect.zipRight(Effect.logWarning(`lost the lease of queue ${queueId}`))
        )
    }

    const supervised = (queueId: string, fencing: number) =>
      supervise(runQueue(queueId, owner, fencing, signalOf(queueId), hooks), {
        // a runner that lost its lease ends by interruption: that is no failure, and it is not restarted
        failed: (cause, attempt, delayMs) =>
          Effect.gen(function* () {
            metrics.runnerRestarts.inc()
            yield* health
              .recordRunnerError(queueId, errorMessage(Cause.squash(cause)))
              .pipe(Effect.catchAllCause((c) => Effect.logWarning("could not record a runner's error", c)))
            yield* Effect.logError(
              `runner of queue ${queueId} failed (${attempt + 1} in a row); restarting in ${delayMs} ms`,
              cause
            )
          })
      }).pipe(Effect.ensuring(Effect.sync(() => forget(queueId, fencing))), Effect.provide(runnerContext))

    const takeLeases = (force: boolean) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ queue_id: string; fencing: string | number }>`
          update queue_runtime set owner = ${owner},
            lease_until = now() + make_interval(secs => ${LEASE_SECONDS}),
            fencing = case when owner = ${owner} then fencing else fencing + 1 end
          where owner is null or owner = ${owner} or lease_until < now() or ${force}
          returning queue_id, fencing`
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
        yield* sql`update queue_runtime set owner = null, lease_until = null where owner = ${owner}`.pipe(Effect.ignore)
      })
    )

    void queues
    return Context.make(Engine, engine).pipe(Context.add(EngineRunner, { start: Effect.provide(start, context) }))
  })
)
