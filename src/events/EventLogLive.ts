import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { Database } from "../kernel/Database.ts"
import { EventLog, type EventLogShape, type NewEvent } from "../kernel/EventLog.ts"
import { EVENTS_CHANNEL } from "./StreamWakeups.ts"

/** Tells the delivery workers of every instance (after the commit, with PostgreSQL) that messages are due. */
export const DELIVERY_CHANNEL = "greenline_webhooks"

/** A stored event as the stream and the replay read it. */
export interface LoggedEvent {
  readonly seq: number
  readonly id: string
  /** The writing transaction: with `seq`, the event's place in the order readers follow. */
  readonly xid: string
  readonly type: string
  readonly body: string
}

/** A position in the log: after this event (`xid`, `seq` order). */
export interface LogPosition {
  readonly xid: string
  readonly seq: number
}

/** The message id (`webhook-id`, the stream's `id:`) of an event. */
export const messageId = (eventId: string) => `msg_${eventId.replaceAll("-", "")}`

/** The event id of a message id, or undefined when it is not one of ours. */
export const eventIdOf = (messageIdText: string): string | undefined => {
  const m = /^msg_([0-9a-f]{32})$/i.exec(messageIdText.trim())
  if (m?.[1] === undefined) return undefined
  const h = m[1].toLowerCase()
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

export interface LogStart {
  readonly position: LogPosition
  readonly committed: ReadonlySet<string>
}

export interface StreamFilter {
  readonly repoIds?: ReadonlyArray<string> | undefined
  readonly branch?: string | undefined
  readonly types?: ReadonlyArray<string> | undefined
}

export interface EventReaderShape {
  /**
   * Where a new subscriber starts: the newest settled position of an organization's log, and the ids of the events
   * after it that are committed already (their transaction ended while an older one still runs). The subscriber skips
   * those: they were written before it came. One statement, so both are of one snapshot.
   */
  readonly head: (orgId: string) => Effect.Effect<LogStart, SqlError>
  /** The position of a message of the organization, when the log still holds it. */
  readonly positionOf: (orgId: string, messageIdText: string) => Effect.Effect<LogPosition | undefined, SqlError>
  /**
   * Events after `after`, oldest first, that no running transaction can still precede: only rows of transactions
   * older than every running one (`xid < pg_snapshot_xmin`) are read, so nothing appears later behind a position
   * already passed.
   */
  readonly after: (
    orgId: string,
    after: LogPosition,
    filter: StreamFilter,
    limit: number
  ) => Effect.Effect<ReadonlyArray<LoggedEvent>, SqlError>
  /**
   * Whether the log holds committed events after `after` that the reader has not taken: not readable yet (their
   * transaction is not older than every running one), or readable since its last read found none (what settled in
   * between would otherwise wait for the next wake-up).
   */
  readonly unsettled: (orgId: string, after: LogPosition, filter: StreamFilter) => Effect.Effect<boolean, SqlError>
  /**
   * Deletes events older than `days` days (with their messages and attempts), a bounded batch at a time; the records
   * of a queue entry's timeline only once the entry ended more than `days` ago (or is gone).
   */
  readonly prune: (days: number) => Effect.Effect<number, SqlError>
}

export class EventReader extends Context.Tag("greenline/EventReader")<EventReader, EventReaderShape>() {}

const ORIGIN: LogPosition = { xid: "0", seq: 0 }

export const EventLogLive = Layer.effectContext(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database

    const append: EventLogShape["append"] = (events: ReadonlyArray<NewEvent>) =>
      Effect.gen(function* () {
        if (events.length === 0) return
        const rows = events.map((e, i) => {
          const timestamp = new Date(e.at).toISOString()
          return {
            i,
            id: crypto.randomUUID(),
            org_id: e.orgId,
            repo_id: e.repoId,
            branch: e.branch,
            type: e.type,
            ordering_key: e.orderingKey,
            dedupe_key: e.dedupeKey ?? null,
            occurred_at: timestamp,
            body:
              e.type === null ? null : JSON.stringify({ type: e.type, timestamp, data: { type: e.type, ...e.data } }),
            entry_id: e.transition?.entryId ?? null,
            state: e.transition?.state ?? null,
            reason: e.transition?.reason ?? null,
            except_endpoint: e.exceptEndpointId ?? null
          }
        })
        const excepting = rows.some((r) => r.except_endpoint !== null)
        // the events and, in the same statement, a message for every enabled endpoint that wants each of them (records
        // without a type are never delivered nor streamed)
        const fanned = yield* sql<{ n: number; streamed: string | null }>`
          with ins as (
            insert into event_log (id, org_id, repo_id, branch, type, ordering_key, dedupe_key, occurred_at, body,
                                   entry_id, state, reason)
            select v.id, v.org_id, v.repo_id, v.branch, v.type, v.ordering_key, v.dedupe_key, v.occurred_at, v.body,
                   v.entry_id, v.state, v.reason
            from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(i int, id uuid, org_id uuid, repo_id uuid,
              branch text, type text, ordering_key text, dedupe_key text, occurred_at timestamptz, body text,
              entry_id uuid, state text, reason text)
            order by v.i
            on conflict (org_id, dedupe_key) where dedupe_key is not null do nothing
            returning seq, id, org_id, repo_id, type, ordering_key),
          msgs as (
            insert into webhook_messages (endpoint_id, event_seq, org_id, ordering_key)
            select w.id, ins.seq, ins.org_id, ins.ordering_key
            from ins join webhook_endpoints w on w.org_id = ins.org_id and not w.disabled and ins.type is not null
              and (w.event_types is null or ins.type = any(w.event_types))
              and (w.repo_id is null or w.repo_id = ins.repo_id)
            ${
              // an event about an endpoint goes to the others (rare: only then is the input read again)
              excepting
                ? sql`where not exists (select 1 from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
                        as x(id uuid, except_endpoint uuid) where x.id = ins.id and x.except_endpoint = w.id)`
                : sql``
            }
            returning 1)
          select (select count(*)::int from msgs) as n,
            (select string_agg(distinct p.org_id::text, ',') from event_stream_presence p
             where p.until > now() and p.org_id in (select org_id from ins where type is not null)) as streamed`
        if ((fanned[0]?.n ?? 0) > 0) yield* db.notify(DELIVERY_CHANNEL, "due")
        // organizations someone streams: their streams wake at commit (StreamWakeups.ts)
        const streamed = fanned[0]?.streamed
        if (typeof streamed === "string" && streamed !== "") {
          for (const orgId of streamed.split(",")) yield* db.notify(EVENTS_CHANNEL, orgId)
        }
      })

    const toPosition = (row: { xid: string; seq: string | number } | undefined): LogPosition | undefined =>
      row === undefined ? undefined : { xid: String(row.xid), seq: Number(row.seq) }

    // records without a type (timeline only) are never streamed
    const filtered = (filter: StreamFilter) =>
      sql`and type is not null ${filter.repoIds !== undefined ? sql`and repo_id = any(${`{${filter.repoIds.join(",")}}`}::uuid[])` : sql``}
        ${filter.branch !== undefined ? sql`and branch = ${filter.branch}` : sql``}
        ${filter.types !== undefined ? sql`and type = any(${`{${filter.types.join(",")}}`}::text[])` : sql``}`

    const reader: EventReaderShape = {
      head: (orgId) =>
        Effect.map(
          sql<{ xid: string | null; seq: string | number | null; committed: string | null }>`
            select h.xid::text as xid, h.seq,
              (select string_agg(l.id::text, ',') from event_log l
               where l.org_id = ${orgId} and l.xid >= pg_snapshot_xmin(pg_current_snapshot()) and l.type is not null)
                as committed
            from (select 1) one left join lateral (
              select xid, seq from event_log
              where org_id = ${orgId} and xid < pg_snapshot_xmin(pg_current_snapshot()) and type is not null
              order by xid desc, seq desc limit 1) h on true`,
          (rows) => {
            const row = rows[0]
            const position =
              row?.xid != null && row.seq != null ? toPosition({ xid: row.xid, seq: row.seq }) : undefined
            return {
              position: position ?? ORIGIN,
              committed: new Set(row?.committed ? row.committed.split(",") : [])
            }
          }
        ),
      positionOf: (orgId, text) => {
        const id = eventIdOf(text)
        if (id === undefined) return Effect.succeed(undefined)
        return Effect.map(
          sql<{ xid: string; seq: string | number }>`
            select xid::text as xid, seq from event_log where id = ${id} and org_id = ${orgId}`,
          (rows) => toPosition(rows[0])
        )
      },
      after: (orgId, after, filter, limit) =>
        Effect.map(
          // the order is the column's (xid8, numeric): the text of an xid sorts "1000" before "999", so the output's
          // text has a name of its own (an ORDER BY name matches an output column before an input column)
          sql<{ seq: string | number; id: string; xid_text: string; type: string; body: string }>`
            select seq, id, xid::text as xid_text, type, body from event_log
            where org_id = ${orgId} and xid < pg_snapshot_xmin(pg_current_snapshot())
              and (xid, seq) > (${after.xid}::xid8, ${after.seq}) ${filtered(filter)}
            order by event_log.xid, event_log.seq limit ${limit}`,
          (rows) =>
            rows.map((r) => ({ seq: Number(r.seq), id: r.id, xid: String(r.xid_text), type: r.type, body: r.body }))
        ),
      unsettled: (orgId, after, filter) =>
        Effect.map(
          sql<{ unsettled: boolean }>`
            select exists (select 1 from event_log
              where org_id = ${orgId} and (xid, seq) > (${after.xid}::xid8, ${after.seq}) ${filtered(filter)})
              as unsettled`,
          (rows) => rows[0]?.unsettled === true
        ),
      // a record of a pull request's timeline stays while its entry is in a queue and for `days` after it ended: a
      // timeline is never cut while it is read, and goes whole (docs/decisions.md, "Retention")
      prune: (days) =>
        Effect.map(
          sql<{ seq: string }>`
            delete from event_log where seq in (
              select l.seq from event_log l
              where l.created_at < now() - make_interval(days => ${days})
                and (l.entry_id is null or not exists (
                  select 1 from entries e where e.id = l.entry_id
                    and (e.ended_at is null or e.ended_at >= now() - make_interval(days => ${days}))))
              order by l.seq limit 5000)
            returning seq`,
          (rows) => rows.length
        )
    }

    return Context.make(EventLog, { append }).pipe(Context.add(EventReader, reader))
  })
)
