/**
 * Extension (#31): the freezes' table and operations. A freeze belongs to a repository, and to one of its queues
 * (`queue_id`) or to every queue of it (`queue_id` null). A change enqueues `ConfigChanged` to the runner of each
 * queue it concerns (the runner reads the freezes again, freezes.ts computes what is in force), in the caller's
 * transaction; the caller wakes those runners after its commit.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { FreezeNotFound, InvalidFreeze } from "./errors.ts"
import {
  cronProblem,
  type FreezeMode,
  type FreezeRule,
  freezeAt,
  type MergeSchedule,
  nextStart,
  scheduleProblem,
  windowAt
} from "./freezes.ts"

export interface FreezeRow {
  readonly id: string
  readonly repo_id: string
  readonly queue_id: string | null
  readonly branch: string | null
  readonly reason: string
  readonly mode: string
  readonly starts_at: Date | string | null
  readonly ends_at: Date | string | null
  readonly cron: string | null
  readonly time_zone: string | null
  readonly duration_minutes: number | null
  readonly created_by: string
  readonly created_at: Date | string
}

const ms = (v: Date | string | null): number | null => (v === null ? null : new Date(v).getTime())
const iso = (v: number | null): string | null => (v === null ? null : new Date(v).toISOString())

export const ruleOf = (row: FreezeRow): FreezeRule => ({
  id: row.id,
  queueId: row.queue_id,
  reason: row.reason,
  mode: row.mode === "all" ? "all" : "merge",
  startsAt: ms(row.starts_at),
  endsAt: ms(row.ends_at),
  cron: row.cron,
  timeZone: row.time_zone,
  durationMinutes: row.duration_minutes === null ? null : Number(row.duration_minutes)
})

/** A freeze as the API shows it. */
export interface FreezeView {
  readonly id: string
  /** the queue's target branch, null for every queue of the repository */
  readonly targetBranch: string | null
  readonly reason: string
  readonly mode: FreezeMode
  readonly startsAt: string | null
  readonly endsAt: string | null
  readonly cron: string | null
  readonly timeZone: string | null
  readonly durationMinutes: number | null
  readonly createdBy: string
  readonly createdAt: string
  /** whether it holds now, and the window it holds in */
  readonly active: boolean
  readonly activeUntil: string | null
  /** when it next starts (null: in force now, or never again) */
  readonly nextStartAt: string | null
}

export const viewOfFreeze = (row: FreezeRow, now: number): FreezeView => {
  const rule = ruleOf(row)
  const w = windowAt(rule, now)
  return {
    id: row.id,
    targetBranch: row.branch,
    reason: row.reason,
    mode: rule.mode,
    startsAt: iso(rule.startsAt),
    endsAt: iso(rule.endsAt),
    cron: rule.cron,
    timeZone: rule.timeZone,
    durationMinutes: rule.durationMinutes,
    createdBy: row.created_by,
    createdAt: new Date(row.created_at).toISOString(),
    active: w !== null,
    activeUntil: w === null || !Number.isFinite(w.end) ? null : new Date(w.end).toISOString(),
    nextStartAt: w !== null ? null : iso(nextStart(rule, now))
  }
}

/** What a request asks a freeze to be (dates in epoch ms); a field absent from an update keeps its value. */
export interface FreezeInput {
  readonly reason: string
  readonly mode: FreezeMode
  readonly startsAt: number | null
  readonly endsAt: number | null
  readonly cron: string | null
  readonly timeZone: string | null
  readonly durationMinutes: number | null
}

/** Why a freeze is refused, or null. */
export const freezeProblem = (f: FreezeInput): string | null => {
  if (f.reason.trim() === "") return "reason must not be empty"
  if (f.cron !== null) {
    if (f.durationMinutes === null || f.durationMinutes < 1) return "a recurring freeze needs durationMinutes >= 1"
    if (f.startsAt !== null || f.endsAt !== null) return "a recurring freeze has no startsAt or endsAt"
    return cronProblem(f.cron, f.timeZone ?? "UTC")
  }
  if (f.timeZone !== null || f.durationMinutes !== null) return "timeZone and durationMinutes go with cron"
  if (f.startsAt !== null && f.endsAt !== null && f.endsAt <= f.startsAt) return "endsAt must be after startsAt"
  return null
}

/** Freezes at most per repository: a runner reads its queue's at each change. */
export const MAX_FREEZES_PER_REPOSITORY = 200

/** The freezes that hold for a queue: its own and its repository's. */
export const freezeRulesOf = (sql: SqlClient.SqlClient) => (queueId: string) =>
  Effect.map(
    sql<FreezeRow>`select f.*, null as branch from queue_freezes f
      where f.queue_id = ${queueId}
         or (f.queue_id is null and f.repo_id = (select repo_id from queues where id = ${queueId}))
      order by f.created_at, f.id`,
    (rows) => rows.map(ruleOf)
  )

/** A queue's merge schedule (#31), null when it has none. */
export const mergeScheduleOf = (sql: SqlClient.SqlClient) => (queueId: string) =>
  Effect.map(
    sql<{ schedule: unknown }>`select schedule from queue_merge_schedules where queue_id = ${queueId}`,
    (rows) => scheduleFrom(rows[0]?.schedule)
  )

/** A stored schedule (jsonb: an object with pg, a string with PGlite's text results), null when there is none. */
const scheduleFrom = (raw: unknown): MergeSchedule | null => {
  if (raw === undefined || raw === null) return null
  return (typeof raw === "string" ? JSON.parse(raw) : raw) as MergeSchedule
}

export const makeFreezeStore = (
  sql: SqlClient.SqlClient,
  configChanged: (queueIds: ReadonlyArray<string>) => Effect.Effect<void, SqlError>
) => {
  const rulesOf = freezeRulesOf(sql)
  const queuesOf = (repoId: string, queueId: string | null) =>
    queueId !== null
      ? Effect.succeed([queueId])
      : Effect.map(sql<{ id: string }>`select id from queues where repo_id = ${repoId}`, (rows) =>
          rows.map((r) => r.id)
        )
  const list = (repoId: string, queueId: string | null | undefined) =>
    queueId === undefined
      ? sql<FreezeRow>`select f.*, q.branch from queue_freezes f left join queues q on q.id = f.queue_id
          where f.repo_id = ${repoId} order by f.created_at, f.id`
      : sql<FreezeRow>`select f.*, q.branch from queue_freezes f left join queues q on q.id = f.queue_id
          where f.repo_id = ${repoId} and (f.queue_id = ${queueId} or f.queue_id is null) order by f.created_at, f.id`
  const find = (repoId: string, id: string) =>
    Effect.flatMap(
      /^[0-9a-f-]{36}$/i.test(id)
        ? sql<FreezeRow>`select f.*, q.branch from queue_freezes f left join queues q on q.id = f.queue_id
            where f.repo_id = ${repoId} and f.id = ${id}`
        : Effect.succeed([] as ReadonlyArray<FreezeRow>),
      (rows) =>
        rows[0] === undefined
          ? Effect.fail(new FreezeNotFound({ message: `no freeze ${id} in this repository` }))
          : Effect.succeed(rows[0])
    )
  const check = (f: FreezeInput) => {
    const problem = freezeProblem(f)
    return problem === null ? Effect.void : Effect.fail(new InvalidFreeze({ message: problem }))
  }
  const create = (repoId: string, queueId: string | null, f: FreezeInput, actor: string) =>
    Effect.gen(function* () {
      yield* check(f)
      const [count] = yield* sql<{ n: number }>`select count(*)::int as n from queue_freezes where repo_id = ${repoId}`
      if ((count?.n ?? 0) >= MAX_FREEZES_PER_REPOSITORY)
        return yield* new InvalidFreeze({ message: `a repository has at most ${MAX_FREEZES_PER_REPOSITORY} freezes` })
      const id = crypto.randomUUID()
      yield* sql`insert into queue_freezes (id, repo_id, queue_id, reason, mode, starts_at, ends_at, cron, time_zone,
          duration_minutes, created_by)
        values (${id}, ${repoId}, ${queueId}, ${f.reason}, ${f.mode}, ${iso(f.startsAt)}, ${iso(f.endsAt)}, ${f.cron},
          ${f.timeZone}, ${f.durationMinutes}, ${actor})`
      const queues = yield* queuesOf(repoId, queueId)
      yield* configChanged(queues)
      return { row: yield* find(repoId, id), queues }
    })
  const update = (repoId: string, id: string, patch: (current: FreezeInput) => FreezeInput) =>
    Effect.gen(function* () {
      const row = yield* find(repoId, id)
      const rule = ruleOf(row)
      const next = patch(rule)
      yield* check(next)
      yield* sql`update queue_freezes set reason = ${next.reason}, mode = ${next.mode}, starts_at = ${iso(next.startsAt)},
          ends_at = ${iso(next.endsAt)}, cron = ${next.cron}, time_zone = ${next.timeZone},
          duration_minutes = ${next.durationMinutes}, updated_at = now()
        where id = ${id}`
      const queues = yield* queuesOf(repoId, row.queue_id)
      yield* configChanged(queues)
      return { row: yield* find(repoId, id), queues }
    })
  const remove = (repoId: string, id: string) =>
    Effect.gen(function* () {
      const row = yield* find(repoId, id)
      yield* sql`delete from queue_freezes where id = ${id}`
      const queues = yield* queuesOf(repoId, row.queue_id)
      yield* configChanged(queues)
      return { row, queues }
    })
  const scheduleOf = mergeScheduleOf(sql)
  /** Sets (or with null removes) a queue's merge schedule. */
  const setSchedule = (queueId: string, schedule: MergeSchedule | null) =>
    Effect.gen(function* () {
      if (schedule !== null) {
        const problem = scheduleProblem(schedule)
        if (problem !== null) return yield* new InvalidFreeze({ message: problem })
        yield* sql`insert into queue_merge_schedules (queue_id, schedule) values (${queueId}, ${JSON.stringify(schedule)}::jsonb)
          on conflict (queue_id) do update set schedule = excluded.schedule, updated_at = now()`
      } else yield* sql`delete from queue_merge_schedules where queue_id = ${queueId}`
      yield* configChanged([queueId])
    })
  /**
   * The freeze in force on a queue at `now` (getQueue), its merge schedule's closed hours included: the freezes and
   * the schedule in one statement (getQueue is the hottest read; a row without a freeze carries only the schedule).
   */
  const inForce = (queueId: string, now: number) =>
    Effect.map(
      sql<FreezeRow & { readonly queue_schedule: unknown }>`
        select f.*, null as branch, s.schedule as queue_schedule
        from (select 1) as one
        left join queue_freezes f
          on f.queue_id = ${queueId}
          or (f.queue_id is null and f.repo_id = (select repo_id from queues where id = ${queueId}))
        left join queue_merge_schedules s on s.queue_id = ${queueId}
        order by f.created_at, f.id`,
      (rows) => {
        const rules = rows.filter((r) => r.id !== null).map(ruleOf)
        const schedule = scheduleFrom(rows[0]?.queue_schedule)
        return { ...freezeAt(rules, now, schedule), schedule }
      }
    )
  return { rulesOf, list, find, create, update, remove, inForce, scheduleOf, setSchedule }
}

export type FreezeStore = ReturnType<typeof makeFreezeStore>

/** 0300 (#31): the freezes. */
export const freezesMigration = [
  `create table queue_freezes (
     id uuid primary key,
     repo_id uuid not null references repositories(id) on delete cascade,
     queue_id uuid references queues(id) on delete cascade,
     reason text not null,
     mode text not null check (mode in ('merge', 'all')),
     starts_at timestamptz,
     ends_at timestamptz,
     cron text,
     time_zone text,
     duration_minutes integer,
     created_by text not null default '',
     created_at timestamptz not null default now(),
     updated_at timestamptz not null default now()
   )`,
  `create index queue_freezes_repo on queue_freezes (repo_id)`
] as const

/** 0301 (#31): merge schedules, one per queue at most. */
export const mergeSchedulesMigration = [
  `create table queue_merge_schedules (
     queue_id uuid primary key references queues(id) on delete cascade,
     schedule jsonb not null,
     updated_at timestamptz not null default now()
   )`
] as const
