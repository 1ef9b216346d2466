import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"
import type { FreezeChange } from "./freezes.ts"
import type { Command, Entry, ImpactedTargets, QueueState, RunRecord, Transition } from "./planner/index.ts"
import { ACTIVE_STATES } from "./QueueRepo.ts"

/**
 * The engine's storage: the planner state of each queue (one JSON document with its outbox of commands and its
 * lease), the inbox of events, and the projections the API reads (entries, test runs; the entries' timelines are
 * records of the event log, written by the round's `onRound`).
 */

/** An event in a queue's inbox: a planner event, or something the runner turns into one. */
export type InboxEvent =
  | { readonly _tag: "Planner"; readonly event: import("./planner/index.ts").PlannerEvent }
  | { readonly _tag: "StatusReported"; readonly sha: string }
  /** the Git host reported a change (a push to the target branch): the runner looks at the branches at once */
  | { readonly _tag: "GitChanged" }
  /** impacted targets were stored for the PR's head `sha`; the runner reduces them to a lane (planner/types.ts) */
  | { readonly _tag: "TargetsSet"; readonly prNumber: number; readonly sha: string }
  | { readonly _tag: "ConfigChanged" }

/** A queue as a reconciliation with its Git host sees it (`watchedQueues`). */
export interface WatchedQueue {
  readonly queueId: string
  readonly branch: string
  /** `directMergeMode: always`: pending heads' own statuses matter too */
  readonly directMerge: boolean
  readonly repo: { readonly id: string; readonly host: string; readonly owner: string; readonly name: string }
  readonly active: ReadonlyArray<{
    readonly prNumber: number
    readonly headSha: string
    readonly state: string
    readonly merging: boolean
  }>
  /** the test branches of the runs in progress */
  readonly testedShas: ReadonlyArray<string>
  readonly targetSha: string | null
  readonly merging: boolean
}

export interface Runtime {
  readonly state: QueueState
  readonly outbox: ReadonlyArray<Command>
  readonly fencing: number
}

export const parseJson = <A>(value: unknown): A => (typeof value === "string" ? (JSON.parse(value) as A) : (value as A))

export const TERMINAL = new Set(["merged", "failed", "cancelled"])

/**
 * The ids of the entries that have a position (active, not not_ready) in testing order, as a PostgreSQL array
 * literal: what getSubmittedPullRequest reads a position from.
 */
export const positionsOf = (state: QueueState): string => {
  const ids: Array<string> = []
  for (const e of state.entries) if (e.state !== "not_ready" && !TERMINAL.has(e.state)) ids.push(e.id)
  return `{${ids.join(",")}}`
}

/** Entry fields stored only when they differ from these (stateJson), put back when a state is read (upgradeState). */
const ENTRY_DEFAULTS = {
  noBatch: false,
  runId: null,
  verifiedByTestRun: null,
  ready: true,
  failure: null,
  segment: null,
  merging: false,
  cancelRequested: null,
  directMerge: "none"
} as const satisfies Partial<Entry>
const DEFAULT_KEYS = Object.keys(ENTRY_DEFAULTS) as ReadonlyArray<keyof typeof ENTRY_DEFAULTS>

const isWhole = (e: object) => "lane" in e && DEFAULT_KEYS.every((k) => k in e)

/** A stored entry with its default fields back; `lane` is null unless it is a state stored before lanes. */
const withDefaults = <E extends object>(e: E): E =>
  ({ ...ENTRY_DEFAULTS, ...("impactedTargets" in e || "lane" in e ? {} : { lane: null }), ...e }) as E

/** An entry's JSON without the fields that have their default value (a state of thousands is 40% smaller). */
const compactJson = (e: Entry): string => {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(e)) {
    if (key === "lane" && value === null) continue
    if (key in ENTRY_DEFAULTS && ENTRY_DEFAULTS[key as keyof typeof ENTRY_DEFAULTS] === value) continue
    out[key] = value
  }
  return JSON.stringify(out)
}

/** The JSON of each entry object written (the planner never changes an entry in place: a change is a new object). */
const entryJson = new WeakMap<Entry, string>()

/**
 * The state's JSON as stored: entries without their default fields (upgradeState puts them back), and their JSON
 * remembered between rounds: a round rewrites the whole state, but only the entries it changed are serialised again.
 */
export const stateJson = (state: QueueState): string => {
  const fields: Array<string> = []
  for (const [key, value] of Object.entries(state)) {
    if (value === undefined) continue
    if (key !== "entries") {
      fields.push(`${JSON.stringify(key)}:${JSON.stringify(value)}`)
      continue
    }
    const parts = state.entries.map((e) => {
      let json = entryJson.get(e)
      if (json === undefined) {
        json = compactJson(e)
        entryJson.set(e, json)
      }
      return json
    })
    fields.push(`"entries":[${parts.join(",")}]`)
  }
  return `{${fields.join(",")}}`
}

export const iso = (ms: number | Date) => new Date(ms).toISOString()

export interface EntryRow {
  readonly id: string
  readonly queue_id: string
  readonly pr_number: string | number
  readonly state: string
  readonly state_changed_at: Date | string
  readonly submitted_at: Date | string
  readonly priority: number
  readonly no_batch: boolean
  readonly head_sha: string
  readonly title: string
  readonly author: string
  readonly run_id: string | null
  readonly verified_by_test_run: string | null
  readonly first_tested_at: Date | string | null
  /** The inbox event of the last API write to this row that no runner round has read yet (migration 0010). */
  readonly request_seq: string | number | null
  /** That write submitted the entry anew (a previous submission the runner may still hold is not this one). */
  readonly request_new: boolean
}

/** The columns of an entry its API record shows. */
export const RECORD_COLUMNS = [
  "id",
  "state",
  "state_changed_at",
  "priority",
  "no_batch",
  "pr_number",
  "title",
  "head_sha",
  "author",
  "verified_by_test_run",
  "run_id"
] as const
export type RecordRow = Pick<EntryRow, (typeof RECORD_COLUMNS)[number]>

export interface StepOutput {
  readonly state: QueueState
  readonly outbox: ReadonlyArray<Command>
  readonly transitions: ReadonlyArray<Transition>
  readonly runChanges: ReadonlyArray<RunRecord>
  /**
   * The sequence numbers of the inbox events the round read, removed with it. Not "everything up to the last one":
   * a number is taken when an event is inserted, not when its transaction commits, so an event with a lower number
   * than one read may become visible only after the read; it waits for the next round.
   */
  readonly processed: ReadonlyArray<number>
  /** extension (#31): the freeze in force changed in the round */
  readonly freezeChange?: FreezeChange
}

/**
 * The columns of `entries` a round's transitions leave, one patch per entry: its transitions folded in order (an
 * entry may move several times in one round), so that one statement writes them all.
 * - state and its time: the last transition's;
 * - run_id: a transition's run, else cleared by a transition to a state that is not terminal (kept by a terminal one);
 * - verified_by_test_run: the last one given, else kept;
 * - first_tested_at: the first transition to testing, unless one is stored;
 * - ended_at: the last transition's time when it ends the entry, else cleared.
 */
export const entryPatches = (transitions: ReadonlyArray<Transition>) => {
  interface Patch {
    id: string
    state: string
    at: string
    run_id_set: boolean
    run_id: string | null
    verified_by_test_run: string | null
    first_tested_at: string | null
    ended_at: string | null
  }
  const patches = new Map<string, Patch>()
  for (const t of transitions) {
    const at = iso(t.at)
    const terminal = TERMINAL.has(t.to)
    const p: Patch = patches.get(t.entryId) ?? {
      id: t.entryId,
      state: t.to,
      at,
      run_id_set: false,
      run_id: null,
      verified_by_test_run: null,
      first_tested_at: null,
      ended_at: null
    }
    p.state = t.to
    p.at = at
    if (t.runId !== null) {
      p.run_id_set = true
      p.run_id = t.runId
    } else if (!terminal) {
      p.run_id_set = true
      p.run_id = null
    }
    if (t.verifiedByTestRun !== null) p.verified_by_test_run = t.verifiedByTestRun
    if (t.to === "testing" && p.first_tested_at === null) p.first_tested_at = at
    p.ended_at = terminal ? at : null
    patches.set(t.entryId, p)
  }
  return [...patches.values()]
}

/** The engine's queries over one `SqlClient`. */
/**
 * States stored before lanes (planner/types.ts `Lane`) held each entry's target list as `impactedTargets`: reduce
 * them to lanes with the same rule the runner applies.
 */
export const upgradeState = (state: QueueState): QueueState => {
  type Stored = Entry & { readonly impactedTargets?: ImpactedTargets | null }
  const stored = state.entries as ReadonlyArray<Stored>
  // entries are stored without their default fields (stateJson)
  const entries = stored.every(isWhole) ? stored : stored.map((e) => (isWhole(e) ? e : withDefaults(e)))
  if (entries.every((e) => e.lane !== undefined)) return entries === stored ? state : { ...state, entries }
  const listOf = new Map(entries.map((e) => [e.id, e.impactedTargets ?? null]))
  const upgraded = entries.map(({ impactedTargets: _dropped, ...e }): Entry => {
    if (e.lane !== undefined) return e
    const mine = listOf.get(e.id) ?? null
    if (mine === null) return { ...e, lane: null }
    if (mine === "ALL" || mine.length === 0) return { ...e, lane: mine === "ALL" ? "ALL" : "NONE" }
    const overlaps = entries
      .filter((o) => {
        const theirs = listOf.get(o.id) ?? null
        return o.id !== e.id && Array.isArray(theirs) && theirs.some((t) => mine.includes(t))
      })
      .map((o) => o.id)
    return { ...e, lane: { overlaps } }
  })
  return { ...state, entries: upgraded }
}

/** One transition of an entry's timeline, as stored (`at` as the driver gives it, or ISO text from JSON). */
export interface TimelineItem {
  readonly at: Date | string
  readonly state: string
  readonly reason: string
}

/**
 * `onRound` runs in each persisted round's transaction after its rows are written: the round's transitions and
 * domain events go to the event log there (queue/events.ts). The log is where the entries' timelines are kept
 * (engineRepo.ts reads them), so a store without it (reads, the inbox) dies rather than persist a round that moved
 * an entry.
 */

export const makeStore = (
  sql: SqlClient.SqlClient,
  onRound?: (queueId: string, out: StepOutput) => Effect.Effect<void, SqlError>
) => {
  const loadRuntime = (queueId: string) =>
    Effect.map(
      sql<{ state: unknown; outbox: unknown; fencing: string | number }>`
          select state, outbox, fencing from queue_runtime where queue_id = ${queueId}`,
      (rows): Option.Option<Runtime> =>
        Option.map(Option.fromNullable(rows[0]), (row) => ({
          state: upgradeState(parseJson<QueueState>(row.state)),
          outbox: parseJson<ReadonlyArray<Command>>(row.outbox),
          fencing: Number(row.fencing)
        }))
    )

  const insertRuntime = (queueId: string, state: QueueState) =>
    sql`insert into queue_runtime (queue_id, state, positions)
        values (${queueId}, ${stateJson(state)}::json, ${positionsOf(state)}::uuid[])
          on conflict (queue_id) do nothing`.pipe(Effect.asVoid)

  /** Stores an event for the queue's runner; its sequence number. */
  const enqueueEvent = (queueId: string, event: InboxEvent) =>
    Effect.map(
      sql<{ seq: string | number }>`insert into queue_events (queue_id, event)
        values (${queueId}, ${JSON.stringify(event)}::jsonb) returning seq`,
      (rows) => Number(rows[0]?.seq)
    )

  /**
   * Events for any queues, stored in the order given (`i` ascending) with one statement; their sequence numbers in
   * that order (numbers are drawn in insertion order).
   */
  const enqueueEvents = (
    events: ReadonlyArray<{ readonly i: number; readonly queue_id: string; readonly event: InboxEvent }>
  ) =>
    Effect.map(
      sql<{ seq: string | number }>`insert into queue_events (queue_id, event)
        select v.queue_id, v.event from jsonb_to_recordset(${JSON.stringify(events)}::jsonb) as v(i int, queue_id uuid, event jsonb)
        order by v.i returning seq`,
      (rows) => rows.map((r) => Number(r.seq)).sort((a, b) => a - b)
    )

  const readInbox = (queueId: string, limit: number) =>
    Effect.map(
      sql<{ seq: string | number; event: unknown; created_at: Date | string }>`
          select seq, event, created_at from queue_events where queue_id = ${queueId} order by seq limit ${limit}`,
      (rows) =>
        rows.map((r) => ({
          seq: Number(r.seq),
          event: parseJson<InboxEvent>(r.event),
          createdAt: new Date(r.created_at).getTime()
        }))
    )

  /**
   * Persists one round of planner steps in one transaction, fenced: nothing is written, and false is returned, when
   * another instance has taken the queue over.
   */
  const persistStep = (queueId: string, owner: string, fencing: number, out: StepOutput) =>
    sql.withTransaction(
      Effect.gen(function* () {
        const updated = yield* sql<{ queue_id: string }>`
            update queue_runtime set state = ${stateJson(out.state)}::json, positions = ${positionsOf(out.state)}::uuid[],
                   outbox = ${JSON.stringify(out.outbox)}::jsonb,
                   version = version + 1
            where queue_id = ${queueId} and owner = ${owner} and fencing = ${fencing}
            returning queue_id`
        if (updated.length === 0) return false
        const processed = `{${out.processed.join(",")}}`
        if (out.transitions.length > 0) {
          // a row an API request wrote after this round read the inbox keeps what the request wrote: the round that
          // reads the request's event writes the row again (docs/decisions.md, "Read-your-writes"). A request that
          // wrote only a new priority (a submission of an active entry) leaves the state to the runner: its
          // transitions are written (a merge of that entry must show, and it must not be queued again), the mark kept
          yield* sql`update entries e set state = v.state, state_changed_at = v.at,
                       run_id = case when v.run_id_set then v.run_id else e.run_id end,
                       verified_by_test_run = coalesce(v.verified_by_test_run, e.verified_by_test_run),
                       first_tested_at = coalesce(e.first_tested_at, v.first_tested_at),
                       ended_at = v.ended_at,
                       request_seq = case when e.request_seq = any(${processed}::bigint[]) then null else e.request_seq end,
                       request_new = false
                     from jsonb_to_recordset(${JSON.stringify(entryPatches(out.transitions))}::jsonb) as v(
                       id uuid, state text, at timestamptz, run_id_set boolean, run_id text, verified_by_test_run text,
                       first_tested_at timestamptz, ended_at timestamptz)
                     where e.id = v.id and (e.request_seq is null or e.request_seq = any(${processed}::bigint[])
                       or (not e.request_new and exists (
                         select 1 from queue_events r where r.seq = e.request_seq and r.queue_id = e.queue_id
                           and r.event->'event'->>'_tag' = 'Submitted')))`
        }
        if (out.runChanges.length > 0) {
          const runs = out.runChanges.map((run) => ({
            id: run.id,
            record: run,
            status: run.status,
            test_branch_sha: run.testBranchSha,
            created_at: iso(run.createdAt),
            ended_at: run.endedAt === null ? null : iso(run.endedAt)
          }))
          yield* sql`insert into test_runs (id, queue_id, record, status, test_branch_sha, created_at, ended_at)
                     select v.id, ${queueId}, v.record, v.status, v.test_branch_sha, v.created_at, v.ended_at
                     from jsonb_to_recordset(${JSON.stringify(runs)}::jsonb) as v(id text, record jsonb, status text,
                       test_branch_sha text, created_at timestamptz, ended_at timestamptz)
                     on conflict (id) do update set record = excluded.record, status = excluded.status,
                       test_branch_sha = excluded.test_branch_sha, ended_at = excluded.ended_at`
        }
        // the round's records in the event log: its transitions (the entries' timelines) and its events
        if (onRound !== undefined) yield* onRound(queueId, out)
        else if (out.transitions.length > 0) return yield* Effect.dieMessage("a round persisted without its event log")
        if (out.processed.length > 0) {
          // the requests this round read are in its state now
          yield* sql`update entries set request_seq = null, request_new = false
                     where queue_id = ${queueId} and request_seq is not null and request_seq = any(${processed}::bigint[])`
          yield* sql`delete from queue_events where queue_id = ${queueId} and seq = any(${processed}::bigint[])`
        }
        return true
      })
    )

  /** The outbox alone, fenced as `persistStep` (the state unchanged since it was persisted). */
  const saveOutbox = (queueId: string, owner: string, fencing: number, outbox: ReadonlyArray<Command>) =>
    sql`update queue_runtime set outbox = ${JSON.stringify(outbox)}::jsonb, version = version + 1
        where queue_id = ${queueId} and owner = ${owner} and fencing = ${fencing}`.pipe(Effect.asVoid)

  const findEntry = (queueId: string, prNumber: number) =>
    Effect.map(sql<EntryRow>`select * from entries where queue_id = ${queueId} and pr_number = ${prNumber}`, (rows) =>
      Option.fromNullable(rows[0])
    )

  /** The entry of a PR, its row locked until the transaction ends (two writes to one entry take turns). */
  const lockEntry = (queueId: string, prNumber: number) =>
    Effect.map(
      sql<EntryRow>`select * from entries where queue_id = ${queueId} and pr_number = ${prNumber} for update`,
      (rows) => Option.fromNullable(rows[0])
    )

  /**
   * Holds the queue until the transaction ends (false when it is gone): deleteQueue waits for the writes that hold
   * it, and a write that comes after a delete finds no queue instead of violating a foreign key.
   */
  const holdQueue = (queueId: string) =>
    Effect.map(sql`select id from queues where id = ${queueId} for key share`, (rows) => rows.length > 0)

  /** Whether the runner's stored state has the entry in a merge it started (the merge may still land it). */
  const isMerging = (queueId: string, entryId: string) =>
    Effect.map(
      sql<{ merging: boolean }>`
        select exists (select 1 from json_array_elements_text(rt.state->'merging'->'entryIds') m
                       where m = ${entryId}) as merging
        from queue_runtime rt where rt.queue_id = ${queueId}`,
      (rows) => rows[0]?.merging === true
    )

  /** A request's cancellation, shown at once; `seq` is its event for the runner. */
  const markCancelled = (entryId: string, at: string, seq: number) =>
    sql`update entries set state = 'cancelled', state_changed_at = ${at}, ended_at = ${at}, request_seq = ${seq},
          request_new = false
        where id = ${entryId}`.pipe(Effect.asVoid)

  /** A request's restart, shown at once: the entry leaves its run and waits for a new one. */
  const markRestarted = (entryId: string, at: string, seq: number) =>
    sql`update entries set restarts = restarts + 1, request_seq = ${seq}, run_id = null,
          state_changed_at = case when state in ('testing', 'tests_passed', 'pending_failure') then ${at}::timestamptz
                                  else state_changed_at end,
          state = case when state in ('testing', 'tests_passed', 'pending_failure') then 'pending' else state end
        where id = ${entryId}`.pipe(Effect.asVoid)

  /** Impacted targets arrived for the entry's head: eligible at once (`eligible`) in a parallel queue. */
  const markTargetsSet = (entryId: string, at: string, seq: number, eligible: boolean) =>
    sql`update entries set request_seq = ${seq},
          state_changed_at = case when ${eligible} and state = 'not_ready' then ${at}::timestamptz
                                  else state_changed_at end,
          state = case when ${eligible} and state = 'not_ready' then 'pending' else state end
        where id = ${entryId}`.pipe(Effect.asVoid)

  /** Stores the impacted targets of a PR's head (replacing what was stored for it). */
  const storeTargets = (repoId: string, prNumber: number, sha: string, targets: ImpactedTargets) =>
    sql`insert into impacted_targets (repo_id, pr_number, sha, all_targets, targets_json, updated_at)
        values (${repoId}, ${prNumber}, ${sha}, ${targets === "ALL"}, ${JSON.stringify(targets === "ALL" ? [] : targets)}, now())
        on conflict (repo_id, pr_number, sha) do update set all_targets = excluded.all_targets,
          targets_json = excluded.targets_json, updated_at = excluded.updated_at`.pipe(Effect.asVoid)

  /** The queues of a repository named case-insensitively (`host` lower case), as a Git host's events name it. */
  const queuesOfRepository = (host: string, owner: string, name: string) =>
    Effect.map(
      sql<{ id: string; branch: string; repo_id: string }>`
        select q.id, q.branch, q.repo_id from queues q join repositories r on r.id = q.repo_id
        where lower(r.host) = ${host} and lower(r.owner) = ${owner.toLowerCase()} and lower(r.name) = ${name.toLowerCase()}`,
      (rows) => rows.map((r) => ({ id: r.id, branch: r.branch, repoId: r.repo_id }))
    )

  /** Which of `prNumbers` have an active entry in the queue. */
  const activePrs = (queueId: string, prNumbers: ReadonlyArray<number>) =>
    prNumbers.length === 0
      ? Effect.succeed(new Set<number>())
      : Effect.map(
          sql<{ pr_number: string | number }>`
            select pr_number from entries where queue_id = ${queueId} and pr_number in ${sql.in(prNumbers)}
              and state in ${sql.in(ACTIVE_STATES)}`,
          (rows) => new Set(rows.map((r) => Number(r.pr_number)))
        )

  /** The repositories among `repoIds` with a queue whose run is being built or tested on `sha`. */
  const repositoriesTesting = (repoIds: ReadonlyArray<string>, sha: string) =>
    repoIds.length === 0
      ? Effect.succeed([] as ReadonlyArray<string>)
      : Effect.map(
          sql<{ repo_id: string }>`
            select distinct q.repo_id from test_runs t join queues q on q.id = t.queue_id
            where q.repo_id in ${sql.in(repoIds)} and t.test_branch_sha = ${sha}
              and t.status in ('building', 'in_progress')`,
          (rows) => rows.map((r) => r.repo_id)
        )

  /**
   * What a reconciliation with the Git host `host` (lower case) looks at, per queue: its active entries (from the
   * runner's state), the heads its runs in progress test, its target's tip as the runner saw it, and whether a merge
   * is under way. Ordered by repository.
   */
  const watchedQueues = (host: string) =>
    Effect.map(
      sql<{
        queue_id: string
        branch: string
        direct: boolean
        repo_id: string
        host: string
        owner: string
        name: string
        entries: unknown
        runs: unknown
        target_sha: string | null
        merging: boolean | null
      }>`
        select q.id as queue_id, q.branch, coalesce(q.config->>'directMergeMode', 'off') = 'always' as direct,
               r.id as repo_id, r.host, r.owner, r.name, rt.state->'entries' as entries, rt.state->'runs' as runs,
               rt.state->>'targetSha' as target_sha,
               (rt.state->'merging') is not null and rt.state->'merging' <> 'null'::jsonb as merging
        from queues q join repositories r on r.id = q.repo_id
        left join lateral (select state::jsonb as state from queue_runtime where queue_id = q.id) rt on true
        where lower(r.host) = ${host}
        order by r.id, q.id`,
      (rows): ReadonlyArray<WatchedQueue> =>
        rows.map((r) => {
          const list = <A>(value: unknown): ReadonlyArray<A> => {
            const v = parseJson<unknown>(value)
            return Array.isArray(v) ? (v as ReadonlyArray<A>) : []
          }
          type StoredEntry = { prNumber: number; headSha: string; state: string; merging?: boolean }
          type StoredRun = { status: string; testBranchSha: string | null }
          return {
            queueId: r.queue_id,
            branch: r.branch,
            directMerge: r.direct,
            repo: { id: r.repo_id, host: r.host, owner: r.owner, name: r.name },
            active: list<StoredEntry>(r.entries)
              .filter((e) => !TERMINAL.has(e.state))
              .map((e) => ({ prNumber: e.prNumber, headSha: e.headSha, state: e.state, merging: e.merging === true })),
            testedShas: list<StoredRun>(r.runs).flatMap((run) =>
              run.status === "in_progress" && run.testBranchSha !== null ? [run.testBranchSha] : []
            ),
            targetSha: r.target_sha,
            merging: r.merging === true
          }
        })
    )

  /** Records the runner's last error; `since` stays the time of the first failure of a streak. */
  const recordRunnerError = (queueId: string, message: string) =>
    sql`update queue_runtime set runner_error = ${message}, runner_error_since = coalesce(runner_error_since, now())
        where queue_id = ${queueId}`.pipe(Effect.asVoid)

  const clearRunnerError = (queueId: string) =>
    sql`update queue_runtime set runner_error = null, runner_error_since = null
        where queue_id = ${queueId} and runner_error is not null`.pipe(Effect.asVoid)

  const activeEntries = (queueId: string): Effect.Effect<ReadonlyArray<EntryRow>, SqlError> =>
    sql<EntryRow>`select * from entries where queue_id = ${queueId} and state in ${sql.in(ACTIVE_STATES)}`

  /**
   * The impacted targets stored for a PR's head, null when none were. Kept as JSON text (a list may hold 100,000s
   * of names): one string to store and to read back.
   */
  const readTargets = (repoId: string, prNumber: number, sha: string) =>
    Effect.map(
      sql<{ all_targets: boolean; targets: string }>`
        select all_targets, targets_json as targets from impacted_targets
        where repo_id = ${repoId} and pr_number = ${prNumber} and sha = ${sha}`,
      (rows): ImpactedTargets | null => {
        const row = rows[0]
        if (row === undefined) return null
        return row.all_targets ? "ALL" : (JSON.parse(row.targets) as ReadonlyArray<string>)
      }
    )

  return {
    loadRuntime,
    insertRuntime,
    enqueueEvent,
    enqueueEvents,
    readInbox,
    persistStep,
    saveOutbox,
    findEntry,
    lockEntry,
    holdQueue,
    isMerging,
    markCancelled,
    markRestarted,
    markTargetsSet,
    storeTargets,
    queuesOfRepository,
    activePrs,
    repositoriesTesting,
    watchedQueues,
    recordRunnerError,
    clearRunnerError,
    activeEntries,
    readTargets
  }
}

export type Store = ReturnType<typeof makeStore>
