import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import type { QueueKey } from "./Engine.ts"
import { ACTIVE_STATES, QUEUE_COLUMNS, type QueueColumns } from "./QueueRepo.ts"
import { RECORD_COLUMNS, type RecordRow } from "./store.ts"

/**
 * The engine's statements over entries, runs and leases that the API's reads and writes and the lease loop make
 * (the runner's own are in store.ts). Each is one statement; the caller runs them in its transaction.
 */

type NullableRecordRow = { readonly [K in keyof RecordRow]: RecordRow[K] | null }
/** what getSubmittedPullRequest shows of an entry: its record's columns only (fewer to send and parse) */
const SUBMITTED_COLUMNS = RECORD_COLUMNS.map((c) => `e.${c}`).join(", ")

/** A lease as the lease loop sees it. */
export interface LeaseRow {
  readonly queue_id: string
  readonly fencing: string | number
}

export const makeEngineRepo = (sql: SqlClient.SqlClient) => {
  /**
   * The queue `key` names with the PR submitted to it, in one statement: the entry (null columns when the PR was
   * never submitted), whether targets exist for its head, whether writes wait for the runner (`unsettled`: an entry's,
   * `config_pending`: a configuration's), and its position among the active entries that are not
   * not_ready, in testing order (from the runner's state, computed in the database: the state is not shipped),
   * the runtime's version (what a cached estimate is keyed by) and the entry's timeline as JSON text (its
   * transitions' records in the event log with their `seq`, in no order: the caller sorts them; an aggregate's own
   * ORDER BY sets up a sort for every read, a third of the statement's time). No row: no such queue in the caller's
   * organization.
   */
  const findSubmitted = (key: QueueKey, prNumber: number) =>
    Effect.map(
      sql<
        QueueColumns &
          NullableRecordRow & {
            position: number | null
            has_targets: boolean
            unsettled: boolean
            config_pending: boolean
            runtime_version: string | number | null
            timeline: string | null
          }
      >`
        select ${sql.unsafe(QUEUE_COLUMNS)}, ${sql.unsafe(SUBMITTED_COLUMNS)}, rt.version as runtime_version,
          (select json_agg(json_build_object('at', t.occurred_at, 'state', t.state, 'reason', t.reason, 'seq', t.seq))::text
           from event_log t where t.entry_id = e.id) as timeline,
          exists (select 1 from impacted_targets t
                  where t.repo_id = r.id and t.pr_number = e.pr_number and t.sha = e.head_sha) as has_targets,
          exists (select 1 from entries u where u.queue_id = q.id and u.request_seq is not null) as unsettled,
          exists (select 1 from queue_events ev where ev.queue_id = q.id
                  and ev.event->>'_tag' = 'ConfigChanged') as config_pending,
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

  /**
   * For each submission `{ i, queue_id, pr, sha }`: its queue's mode, the PR's entry in it (null columns when none)
   * and whether impacted targets are stored for the head; the queues held for the transaction (a delete waits).
   * A submission whose queue is gone has no row.
   */
  const submissionTargets = (
    keys: ReadonlyArray<{ readonly i: number; readonly queue_id: string; readonly pr: number; readonly sha: string }>
  ) =>
    sql<{
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

  /** New entries (or ended ones submitted anew: same id), given as JSON rows with their request's event. */
  const insertEntries = (rows: string) =>
    sql`insert into entries (id, queue_id, pr_number, state, state_changed_at, submitted_at, priority, no_batch,
                                head_sha, title, author, request_seq, request_new)
           select v.id, v.queue_id, v.pr_number, v.state, v.at, v.at, v.priority, v.no_batch, v.head_sha, v.title,
             v.author, v.request_seq, true
           from jsonb_to_recordset(${rows}::jsonb) as v(id uuid, queue_id uuid, pr_number bigint,
             state text, at timestamptz, priority int, no_batch boolean, head_sha text, title text, author text,
             request_seq bigint)
           on conflict (queue_id, pr_number) do update set state = excluded.state,
             state_changed_at = excluded.state_changed_at, submitted_at = excluded.submitted_at,
             priority = excluded.priority, no_batch = excluded.no_batch, head_sha = excluded.head_sha,
             title = excluded.title, author = excluded.author, run_id = null, verified_by_test_run = null,
             first_tested_at = null, ended_at = null, restarts = 0, request_seq = excluded.request_seq,
             request_new = true`.pipe(Effect.asVoid)

  /** Active entries submitted again: their priority and batching choice, with their request's event. */
  const updateEntries = (rows: string) =>
    sql`update entries e set priority = v.priority, no_batch = v.no_batch, request_seq = v.request_seq
           from jsonb_to_recordset(${rows}::jsonb) as v(id uuid, priority int, no_batch boolean,
             request_seq bigint)
           where e.id = v.id`.pipe(Effect.asVoid)

  /** The queue `key` names with its runner's state and error and its active entries, in one statement. */
  const queueViewRows = (key: QueueKey) =>
    sql<
      QueueColumns & {
        runtime_state: unknown
        runtime_version: string | number | null
        active: unknown
        runner_error: string | null
        runner_error_since: Date | string | null
      }
    >`
  select ${sql.unsafe(QUEUE_COLUMNS)}, rt.state as runtime_state, rt.version as runtime_version, rt.runner_error, rt.runner_error_since,
    (select coalesce(json_agg(e), '[]'::json) from entries e
     where e.queue_id = q.id and e.state in ${sql.in(ACTIVE_STATES)}) as active
  from queues q join repositories r on r.id = q.repo_id
  left join queue_runtime rt on rt.queue_id = q.id
  where r.host = ${key.repo.host} and r.owner = ${key.repo.owner} and r.name = ${key.repo.name}
    and r.org_id = ${key.orgId} and q.branch = ${key.branch}`

  const testRunRecord = (queueId: string, testRunId: string) =>
    sql<{ record: unknown }>`select record from test_runs where id = ${testRunId} and queue_id = ${queueId}`

  const entryTitles = (ids: ReadonlyArray<string>) =>
    ids.length === 0
      ? Effect.succeed([] as ReadonlyArray<{ id: string; title: string }>)
      : sql<{ id: string; title: string }>`select id, title from entries where id in ${sql.in(ids)}`

  const ciOutput = (id: string) =>
    sql<{ output: string; exit_code: number | null }>`select output, exit_code from ci_outputs where id = ${id}`

  /**
   * Takes the leases of the queues that are free, expired or this owner's (every one with `force`), for `seconds`;
   * the fencing token moves on when the owner changes.
   */
  /**
   * One pass of this instance's share of the queues (#37, docs/decisions.md "Shared queues"): it announces itself
   * (`runner_instances`, alive for `seconds`), renews the leases it holds, and takes free or expired ones (a dead
   * owner's) up to `ceil(queues / live instances) + slack`. `force` (the embedded database at start: one process)
   * takes every queue. Returns the leases held after the pass and the fair share `ceil(queues / live)`.
   */
  const shareLeases = (owner: string, seconds: number, force: boolean, slack: number) =>
    Effect.gen(function* () {
      yield* sql`insert into runner_instances (owner, alive_until)
                 values (${owner}, now() + make_interval(secs => ${seconds}))
                 on conflict (owner) do update set alive_until = excluded.alive_until`
      const renewed = yield* sql<LeaseRow>`
        update queue_runtime set lease_until = now() + make_interval(secs => ${seconds}),
          owned_since = coalesce(owned_since, now())
        where owner = ${owner}
        returning queue_id, fencing`
      const counts = yield* sql<{ live: string | number; queues: string | number }>`
        select (select count(*) from runner_instances where alive_until > now()) as live,
               (select count(*) from queue_runtime) as queues`
      const live = Math.max(1, Number(counts[0]?.live ?? 1))
      const queues = Number(counts[0]?.queues ?? 0)
      const fair = Math.ceil(queues / live)
      const want = force ? queues : fair + slack - renewed.length
      const taken =
        want <= 0
          ? []
          : force
            ? yield* sql<LeaseRow>`
                update queue_runtime set owner = ${owner}, lease_until = now() + make_interval(secs => ${seconds}),
                  fencing = fencing + 1, owned_since = now()
                where owner is distinct from ${owner}
                returning queue_id, fencing`
            : yield* sql<LeaseRow>`
                update queue_runtime set owner = ${owner}, lease_until = now() + make_interval(secs => ${seconds}),
                  fencing = fencing + 1, owned_since = now()
                where queue_id in (
                    select queue_id from queue_runtime
                    where owner is null or lease_until < now()
                    order by lease_until nulls first, queue_id
                    limit ${want}
                    for update skip locked)
                  and (owner is null or lease_until < now())
                returning queue_id, fencing`
      return { held: [...renewed, ...taken], live, queues, fair }
    })

  /**
   * Up to `limit` of the queues `owner` holds that may move to another instance: held for `holdSeconds` at least,
   * and not busy (no run in flight, no merge), the longest held first.
   */
  const movableLeases = (owner: string, limit: number, holdSeconds: number) =>
    sql<LeaseRow>`
      select queue_id, fencing from queue_runtime
      where owner = ${owner} and owned_since < now() - make_interval(secs => ${holdSeconds})
        and json_array_length(coalesce(state->'runs', '[]'::json)) = 0 and (state->>'merging') is null
      order by owned_since, queue_id
      limit ${limit}`

  /** Gives up one lease (the queue moves to another instance); false when it was not held under `fencing`. */
  const releaseLease = (owner: string, queueId: string, fencing: number) =>
    Effect.map(
      sql<{ queue_id: string }>`
        update queue_runtime set owner = null, lease_until = null, owned_since = null
        where queue_id = ${queueId} and owner = ${owner} and fencing = ${fencing}
        returning queue_id`,
      (rows) => rows.length > 0
    )

  const releaseLeases = (owner: string) =>
    Effect.zipRight(
      sql`update queue_runtime set owner = null, lease_until = null, owned_since = null where owner = ${owner}`,
      sql`delete from runner_instances where owner = ${owner} or alive_until < now() - interval '1 day'`
    ).pipe(Effect.asVoid)

  return {
    findSubmitted,
    submissionTargets,
    insertEntries,
    updateEntries,
    queueViewRows,
    testRunRecord,
    entryTitles,
    ciOutput,
    shareLeases,
    movableLeases,
    releaseLease,
    releaseLeases
  }
}
