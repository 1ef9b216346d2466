import type * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Effect, Option } from "effect"
import { EventLog, type EventLogShape, type EventType, type NewEvent, type PrAction } from "../kernel/EventLog.ts"
import { type BatchEvent, batchEventsOf, batchesByEntry, batchStartEvents, endsBatch, isBatch } from "./batchEvents.ts"
import type { FreezeChange } from "./freezes.ts"
import type { EntryState, FreezeInForce, QueueState, RunRecord, Transition } from "./planner/index.ts"
import type { QueueRow } from "./QueueRepo.ts"
import type { StoredQueueConfig } from "./schemas.ts"
import { type FailedTest, failedTestsData, type TestVerdictsShape } from "./TestVerdicts.ts"

/**
 * The merge queue's domain events (contract.md §8): the pull request and batch state changes of a runner round, the
 * test runs' starts and ends, and configuration changes, appended to the event log in the round's transaction. Every
 * pull request transition of a round is one record of the log (the timeline of getSubmittedPullRequest reads them):
 * carried by the first Trunk event it is told as, or a record without a type when Trunk has none for it.
 */

export interface QueueInfo {
  readonly orgId: string
  readonly repoId: string
  readonly host: string
  readonly owner: string
  readonly name: string
  readonly branch: string
}

export const queueInfoOf = (queue: QueueRow): QueueInfo => ({
  orgId: queue.repo.orgId,
  repoId: queue.repo.id,
  host: queue.repo.host,
  owner: queue.repo.owner,
  name: queue.repo.name,
  branch: queue.branch
})

/** Planner reasons named as Trunk's webhooks name them; the others pass through. */
const QUEUED_REASONS: Record<string, string> = {
  RESTART_REQUESTED: "TESTS_RESTARTED_BY_API_REQUEST",
  READY: "MERGE_ITEM_NOW_READY",
  SUBMITTED: "MERGE_ITEM_NOW_READY"
}

/**
 * `testing` is not told at the transition (the run's test branch is not pushed yet, and may never be: a merge
 * conflict): it is told when the run starts, with its test branch and SHA (`startedEvents`).
 */
const TERMINAL_OR_ACTIVE: Partial<Record<EntryState, PrAction>> = {
  pending_failure: "pending_failure",
  failed: "failed",
  merged: "merged",
  cancelled: "canceled"
}

/** The Trunk actions a transition is told as: a submission is `submitted` (and `queued` once it may be tested). */
const actionsOf = (t: Transition): ReadonlyArray<PrAction> => {
  if (t.from === null) return t.to === "pending" ? ["submitted", "queued"] : ["submitted"]
  if (t.to === "pending") return t.from === "pending" ? [] : ["queued"]
  const action = TERMINAL_OR_ACTIVE[t.to]
  return action === undefined ? [] : [action]
}

/** Trunk's `cancellation_reason` values (trunk-v1-openapi-condensed.md, Webhooks). */
const CANCELLATION_REASONS = new Set([
  "USER_REQUESTED",
  "PR_CLOSED",
  "PR_PUSHED_TO",
  "PR_BASE_BRANCH_CHANGED",
  "TRUNK_ADMIN_REQUESTED",
  "PR_CONVERTED_TO_DRAFT",
  "STACKED_PR_MEMBER_PUSHED_TO",
  "STACKED_PR_MEMBER_CLOSED",
  "STACKED_PR_MEMBER_MERGED",
  "STACKED_PR_MEMBER_BASE_BRANCH_CHANGED"
])

/**
 * A cancellation's reason as one of Trunk's values: a cancel through the API (`API_REQUESTED` in the timeline, a
 * value Trunk's cancellations do not have) is a user's request, as is anything else Trunk has no name for.
 */
export const cancellationReason = (reason: string): string =>
  CANCELLATION_REASONS.has(reason) ? reason : "USER_REQUESTED"

const reasonField = (action: PrAction, reason: string): Record<string, string> => {
  switch (action) {
    case "submitted":
      return { submitted_reason: reason === "USER_REQUESTED" ? reason : "API_REQUESTED" }
    case "queued":
      return { queued_reason: QUEUED_REASONS[reason] ?? reason }
    case "pending_failure":
    case "failed":
      return { failure_reason: reason }
    case "canceled":
      return { cancellation_reason: cancellationReason(reason) }
    case "merged":
      return {
        merged_reason: reason === "MERGE_GRAPH_DIRECT_MERGE" || reason === "MANUAL_MERGE" ? reason : "MERGE_GRAPH_MERGE"
      }
    case "testing":
      return {}
  }
}

const WITH_TEST_DETAILS = new Set<PrAction>(["testing", "failed", "canceled"])

const testDetails = (run: RunRecord | undefined) => ({
  test_branch: run?.branch ?? null,
  test_branch_sha: run?.testBranchSha ?? null,
  test_pr_number: null,
  batched: run === undefined ? false : run.testedEntryIds.length > 1,
  is_bisection: run?.queueType === "bisection"
})

export const prUrl = (publicUrl: string, q: QueueInfo, prNumber: number) =>
  `${publicUrl}/repos/${q.host}/${q.owner}/${q.name}/pull/${prNumber}`

const base = (q: QueueInfo, type: EventType | null, at: number, orderingKey: string, data: Record<string, unknown>) =>
  ({ orgId: q.orgId, type, at, data, repoId: q.repoId, branch: q.branch, orderingKey }) satisfies NewEvent

export interface Round {
  readonly state: QueueState
  readonly transitions: ReadonlyArray<Transition>
  readonly runChanges: ReadonlyArray<RunRecord>
  /** extension (#31) */
  readonly freezeChange?: FreezeChange
}

/** Extension (#31): a freeze in force as its events tell it. */
const freezePayload = (f: FreezeInForce) => ({
  id: f.source === "schedule" ? null : f.source,
  source: f.source === "schedule" ? "schedule" : "freeze",
  reason: f.reason,
  mode: f.mode,
  ends_at: f.until === null ? null : new Date(f.until).toISOString()
})

/** Extension (#31): `queue.frozen` when a freeze comes into force (or changes), `queue.unfrozen` when none holds. */
export const freezeEvents = (q: QueueInfo, change: FreezeChange | undefined): ReadonlyArray<NewEvent> => {
  if (change === undefined) return []
  const data = {
    repository: { host: q.host, owner: q.owner, name: q.name },
    target_branch: q.branch,
    timestamp: new Date(change.at).toISOString()
  }
  const key = `queue:${q.repoId}:${q.branch}`
  if (change.next !== null)
    return [base(q, "queue.frozen", change.at, key, { ...data, freeze: freezePayload(change.next) })]
  if (change.previous === null) return []
  return [base(q, "queue.unfrozen", change.at, key, { ...data, freeze: freezePayload(change.previous) })]
}

/**
 * The events of one persisted runner round, in order: each transition's pull request events, then the batches
 * whose last pull request reached a state, then the test runs that started or ended.
 */
/** What a round's events need beyond the round: read from the database in the round's transaction. */
export interface RoundContext {
  readonly authors: ReadonlyMap<string, string>
  /** runs the transitions name that the state no longer holds (ended runs) */
  readonly endedRuns: ReadonlyArray<RunRecord>
  /** states of the tested entries of batch runs, after the round */
  readonly entryStates: ReadonlyMap<string, EntryState>
  /** every batch run of each pull request that reached a state a batch may end in (batchEvents.ts) */
  readonly batchesOf: ReadonlyMap<string, ReadonlyArray<RunRecord>>
  /** extension (#33): the failed tests of the failing run's uploads, by entry that failed in the round */
  readonly failedTests?: ReadonlyMap<string, ReadonlyArray<FailedTest>>
}

/**
 * When the round happened: what it changed carries its time, anything older was changed by an earlier round. A run
 * whose `startedAt` is this time started in this round.
 */
const roundTime = (round: Round): number => {
  let at = Number.NEGATIVE_INFINITY
  for (const t of round.transitions) at = Math.max(at, t.at)
  for (const r of round.runChanges) at = Math.max(at, r.createdAt, r.startedAt ?? at, r.endedAt ?? at)
  return at
}

/** The runs of a round whose test branch was pushed in it (told as started: `test_run.started`, `testing`). */
export const startedRuns = (round: Round): ReadonlyArray<RunRecord> => {
  const at = roundTime(round)
  return round.runChanges.filter((r) => r.startedAt !== null && r.startedAt === at)
}

/** The runs a round's events may refer to: the state's, the changed ones, and ended ones (given). */
const runsOf = (round: Round, ended: ReadonlyArray<RunRecord>) => {
  const runs = new Map<string, RunRecord>()
  for (const r of ended) runs.set(r.id, r)
  for (const r of round.state.runs) runs.set(r.id, r)
  for (const r of round.runChanges) runs.set(r.id, r)
  return runs
}

/** The run a transition is about: its own, else the run that verified it, else the run that tests it now. */
const runIdOf = (t: Transition, runs: ReadonlyMap<string, RunRecord>): string | undefined => {
  if (t.runId !== null) return t.runId
  if (t.verifiedByTestRun !== null) return t.verifiedByTestRun
  for (const r of runs.values()) if (r.testedEntryIds.includes(t.entryId) && r.endedAt === null) return r.id
  return undefined
}

export const roundEvents = (
  q: QueueInfo,
  round: Round,
  context: RoundContext,
  publicUrl: string
): ReadonlyArray<NewEvent> => {
  const { authors } = context
  const events: Array<NewEvent> = []
  const runs = runsOf(round, context.endedRuns)
  const repository = { host: q.host, owner: q.owner, name: q.name }
  const common = (action: PrAction, prNumber: number, entryId: string, at: number) => ({
    action,
    status: action,
    author: authors.get(entryId) ?? "",
    http_details_url: prUrl(publicUrl, q, prNumber),
    pr_number: prNumber,
    repository,
    target_branch: q.branch,
    timestamp: new Date(at).toISOString()
  })
  const runOf = (t: Transition) => {
    const id = runIdOf(t, runs)
    return id === undefined ? undefined : runs.get(id)
  }
  const prKey = (prNumber: number) => `pr:${q.repoId}:${q.branch}:${prNumber}`
  const testedItems = (run: RunRecord) => run.items.filter((i) => run.testedEntryIds.includes(i.entryId))
  const runData = (run: RunRecord) => ({
    test_run_id: run.id,
    repository,
    target_branch: q.branch,
    queue_type: run.queueType,
    testBranch: run.branch,
    testBranchSha: run.testBranchSha ?? "",
    testedPullRequests: testedItems(run).map((i) => ({ prNumber: i.prNumber, prUrl: prUrl(publicUrl, q, i.prNumber) })),
    createdAt: new Date(run.createdAt).toISOString(),
    status: run.status === "building" ? "in_progress" : run.status,
    dependentPrs: [...run.dependentPrs],
    ...(run.failureReason === null ? {} : { failure_reason: run.failureReason })
  })
  const batchEvent = ({ type, action, at, run, reason, entryIds }: BatchEvent): NewEvent | undefined => {
    const all = testedItems(run)
    const items = all.filter((i) => entryIds.includes(i.entryId))
    const first = items[0]
    if (first === undefined) return undefined
    const data = {
      ...common(action, first.prNumber, first.entryId, at),
      ...reasonField(action, reason),
      ...(WITH_TEST_DETAILS.has(action) ? testDetails(run) : {}),
      pr_numbers: items.map((i) => i.prNumber),
      pr_numbers_in_batch: all.map((i) => i.prNumber)
    }
    return { ...base(q, type, at, `run:${run.id}`, data), dedupeKey: `${type}:${run.id}` }
  }

  // the runs that started in this round (their test branch pushed): the run, then its pull requests' `testing`,
  // then its batch's start; told once each. A run starts in a later round than the one that made it, so this comes
  // before the round's transitions, which may already end its pull requests.
  for (const run of startedRuns(round)) {
    const at = run.startedAt ?? run.createdAt
    events.push({
      ...base(q, "test_run.started", at, `run:${run.id}`, runData({ ...run, status: "in_progress" })),
      dedupeKey: `test_run.started:${run.id}`
    })
    for (const item of testedItems(run)) {
      const data = { ...common("testing", item.prNumber, item.entryId, at), ...testDetails(run) }
      events.push({
        ...base(q, "pull_request.testing", at, prKey(item.prNumber), data),
        dedupeKey: `pull_request.testing:${run.id}:${item.entryId}`
      })
    }
    for (const b of batchStartEvents(run)) {
      const event = batchEvent(b)
      if (event !== undefined) events.push(event)
    }
  }
  for (const t of round.transitions) {
    const run = runOf(t)
    const key = prKey(t.prNumber)
    // the transition itself rides on its first event, or on a record of its own when Trunk tells it not at all
    const transition = { entryId: t.entryId, state: t.to, reason: t.reason }
    const actions = actionsOf(t)
    if (actions.length === 0) events.push({ ...base(q, null, t.at, key, {}), transition })
    for (const [i, action] of actions.entries()) {
      const failed = action === "failed" ? context.failedTests?.get(t.entryId) : undefined
      const data = {
        ...common(action, t.prNumber, t.entryId, t.at),
        ...reasonField(action, t.reason),
        ...(WITH_TEST_DETAILS.has(action) ? testDetails(run) : {}),
        ...(failed === undefined ? {} : { failed_tests: failedTestsData(failed) })
      }
      const event = base(q, `pull_request.${action}`, t.at, key, data)
      events.push(i === 0 ? { ...event, transition } : event)
    }
  }
  const stateOf = new Map<string, EntryState>(context.entryStates)
  for (const e of round.state.entries) stateOf.set(e.id, e.state)
  for (const t of round.transitions) stateOf.set(t.entryId, t.to)
  for (const b of batchEventsOf({ transitions: round.transitions, actionsOf, batchesOf: context.batchesOf, stateOf })) {
    const event = batchEvent(b)
    if (event !== undefined) events.push(event)
  }
  // the runs that ended; a run that never started (cancelled, or failed to build: a merge conflict) was never told
  for (const run of round.runChanges) {
    const ended = run.status === "succeeded" || run.status === "failed" || run.status === "cancelled"
    if (!ended || run.startedAt === null) continue
    const at = run.endedAt ?? run.createdAt
    events.push({
      ...base(q, "test_run.completed", at, `run:${run.id}`, runData(run)),
      dedupeKey: `test_run.completed:${run.id}`
    })
  }
  return events
}

/** queue.updated with the new configuration, and queue.state_changed when its state (running, paused, draining) moved. */
export const configEvents = (
  q: QueueInfo,
  previous: StoredQueueConfig,
  next: StoredQueueConfig,
  publicConfig: object,
  at: number
): ReadonlyArray<NewEvent> => {
  const repository = { host: q.host, owner: q.owner, name: q.name }
  const key = `queue:${q.repoId}:${q.branch}`
  const stamp = new Date(at).toISOString()
  const events: Array<NewEvent> = [
    base(q, "queue.updated", at, key, {
      repository,
      target_branch: q.branch,
      timestamp: stamp,
      queue: { ...publicConfig }
    })
  ]
  if (previous.state !== next.state) {
    events.push(
      base(q, "queue.state_changed", at, key, {
        repository,
        target_branch: q.branch,
        timestamp: stamp,
        previous_state: previous.state,
        state: next.state
      })
    )
  }
  return events
}

const uuids = (ids: ReadonlyArray<string>) => `{${ids.join(",")}}`

/**
 * Appends a round's events in the round's transaction: the queue's repository (remembered: it never changes) and
 * the authors of the pull requests that moved are read with one statement each.
 */
export const makeRoundEventWriter = (
  sql: SqlClient.SqlClient,
  log: EventLogShape,
  publicUrl: string,
  verdicts: Option.Option<TestVerdictsShape> = Option.none()
) => {
  const infos = new Map<string, QueueInfo>()
  const infoOf = (queueId: string) =>
    Effect.suspend(() => {
      const known = infos.get(queueId)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(
        sql<{ org_id: string; repo_id: string; host: string; owner: string; name: string; branch: string }>`
          select r.org_id, r.id as repo_id, r.host, r.owner, r.name, q.branch
          from queues q join repositories r on r.id = q.repo_id where q.id = ${queueId}`,
        (rows) => {
          const row = rows[0]
          if (row === undefined) return undefined
          const info: QueueInfo = {
            orgId: row.org_id,
            repoId: row.repo_id,
            host: row.host,
            owner: row.owner,
            name: row.name,
            branch: row.branch
          }
          infos.set(queueId, info)
          return info
        }
      )
    })
  return (queueId: string, round: Round) =>
    Effect.gen(function* () {
      if (round.transitions.length === 0 && round.runChanges.length === 0 && round.freezeChange === undefined) return
      const info = yield* infoOf(queueId)
      if (info === undefined) return
      const parse = (record: unknown): RunRecord =>
        typeof record === "string" ? JSON.parse(record) : (record as RunRecord)
      // runs named by transitions that the state no longer holds (a merge verified by an ended run)
      const known = runsOf(round, [])
      const missing = new Set<string>()
      for (const t of round.transitions) {
        const id = runIdOf(t, known)
        if (id !== undefined && !known.has(id)) missing.add(id)
      }
      const endedRuns: Array<RunRecord> = []
      if (missing.size > 0) {
        const rows = yield* sql<{ record: unknown }>`
          select record from test_runs where id = any(${`{${[...missing].join(",")}}`}::text[])`
        for (const r of rows) endedRuns.push(parse(r.record))
      }
      // every batch of each pull request that reached a state a batch may end in (batchEvents.ts)
      const ending = [...new Set(round.transitions.filter((t) => actionsOf(t).some(endsBatch)).map((t) => t.entryId))]
      const batchesOf = new Map<string, ReadonlyArray<RunRecord>>()
      if (ending.length > 0) {
        const rows = yield* sql<{ record: unknown }>`
          select record from test_runs
          where queue_id = ${queueId} and record->'testedEntryIds' ?| ${uuids(ending)}::text[]`
        // the round's own records first: they are newer than the stored ones
        const batches = batchesByEntry([...runsOf(round, endedRuns).values(), ...rows.map((r) => parse(r.record))])
        for (const id of ending) {
          const list = batches.get(id)
          if (list !== undefined) batchesOf.set(id, list)
        }
      }
      // authors of the pull requests that moved, of the runs that started and of the batches' pull requests; the
      // batches' states after the round
      const batchEntries = new Set<string>()
      for (const list of batchesOf.values())
        for (const run of list) for (const e of run.testedEntryIds) batchEntries.add(e)
      for (const run of round.runChanges) if (isBatch(run)) for (const e of run.testedEntryIds) batchEntries.add(e)
      for (const run of startedRuns(round)) for (const e of run.testedEntryIds) batchEntries.add(e)
      const ids = [...new Set([...round.transitions.map((t) => t.entryId), ...batchEntries])]
      const authors = new Map<string, string>()
      const entryStates = new Map<string, EntryState>()
      if (ids.length > 0) {
        const rows = yield* sql<{ id: string; author: string; state: EntryState }>`
          select id, author, state from entries where id = any(${uuids(ids)}::uuid[])`
        for (const r of rows) {
          authors.set(r.id, r.author)
          entryStates.set(r.id, r.state)
        }
      }
      // extension (#33): what the uploads of a failing run's test-branch sha say, for `pull_request.failed`
      const failedTests = new Map<string, ReadonlyArray<FailedTest>>()
      if (Option.isSome(verdicts)) {
        const runs = runsOf(round, endedRuns)
        for (const t of round.transitions) {
          if (t.to !== "failed") continue
          const id = runIdOf(t, runs)
          const sha = id === undefined ? null : (runs.get(id)?.testBranchSha ?? null)
          if (sha === null) continue
          const found = yield* verdicts.value.failedTests(info.repoId, sha, info.branch, 50)
          if (found.tests.length > 0) failedTests.set(t.entryId, found.tests)
        }
      }
      yield* log.append([
        ...freezeEvents(info, round.freezeChange),
        ...roundEvents(info, round, { authors, endedRuns, entryStates, batchesOf, failedTests }, publicUrl)
      ])
    })
}

/** Appends queue.updated (and queue.state_changed) in the caller's transaction, when the application has a log. */
export const appendConfigEvents = (queue: QueueRow, next: StoredQueueConfig, publicConfig: object) =>
  Effect.gen(function* () {
    const log = yield* Effect.serviceOption(EventLog)
    if (Option.isNone(log)) return
    const at = yield* Clock.currentTimeMillis
    yield* log.value.append(configEvents(queueInfoOf(queue), queue.config, next, publicConfig, at))
  })

/**
 * `queue.created` (with its configuration, as `queue.updated`) and `queue.deleted` (extensions, docs/api-extensions.md)
 * in the caller's transaction, when the application has a log.
 */
export const appendQueueLifecycle = (queue: QueueRow, type: "queue.created" | "queue.deleted", publicConfig?: object) =>
  Effect.gen(function* () {
    const log = yield* Effect.serviceOption(EventLog)
    if (Option.isNone(log)) return
    const at = yield* Clock.currentTimeMillis
    const q = queueInfoOf(queue)
    const data = {
      repository: { host: q.host, owner: q.owner, name: q.name },
      target_branch: q.branch,
      timestamp: new Date(at).toISOString(),
      ...(publicConfig === undefined ? {} : { queue: { ...publicConfig } })
    }
    // told once per queue (two deletes racing both find it gone)
    yield* log.value.append([
      { ...base(q, type, at, `queue:${q.repoId}:${q.branch}`, data), dedupeKey: `${type}:${queue.id}` }
    ])
  })
