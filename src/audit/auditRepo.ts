import { createHash } from "node:crypto"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { Actor, Role } from "../tenancy/principal.ts"
import { AuditPageTokenInvalid } from "./errors.ts"
import type { AuditEventView, ListAuditEventsRequest } from "./schemas.ts"

/** One change to record: who, in which role, what, on what, allowed or refused, from where. */
export interface AuditEvent {
  readonly orgId: string
  readonly actor: Actor
  readonly role: Role
  /** the operation's name */
  readonly action: string
  readonly target: string
  readonly outcome: "allowed" | "refused"
  readonly sourceIp: string | undefined
}

interface Row {
  readonly id: string | number | bigint
  readonly at: Date | string
  readonly actor_kind: "token" | "person"
  readonly actor_id: string
  readonly actor_name: string
  readonly actor_email: string | null
  readonly role: string
  readonly action: string
  readonly target: string
  readonly outcome: "allowed" | "refused"
  readonly source_ip: string | null
}

const MAX_TARGET = 500

export const insertEvent = (sql: SqlClient.SqlClient, e: AuditEvent) => {
  const actorId = e.actor.kind === "token" ? e.actor.id : e.actor.subject
  const email = e.actor.kind === "person" ? (e.actor.email ?? null) : null
  return sql`insert into audit_events
               (org_id, actor_kind, actor_id, actor_name, actor_email, role, action, target, outcome, source_ip)
             values (${e.orgId}, ${e.actor.kind}, ${actorId}, ${e.actor.name}, ${email}, ${e.role}, ${e.action},
                     ${e.target.slice(0, MAX_TARGET)}, ${e.outcome}, ${e.sourceIp ?? null})`
}

// ---- pages: the flaky-test lists' shape; a token holds the query's hash, the offset and the newest id of the
// first page, so the pages of one listing stay the same while new events arrive

const hashOf = (parts: ReadonlyArray<unknown>) =>
  createHash("sha256").update(JSON.stringify(parts)).digest("base64url").slice(0, 22)

const tokenOf = (q: string, o: number, top: string) =>
  Buffer.from(JSON.stringify({ q, o, t: top }), "utf8").toString("base64url")

const readToken = (token: string, q: string): { o: number; t: string } | undefined => {
  if (!/^[A-Za-z0-9_-]+$/.test(token)) return undefined
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as {
      q?: unknown
      o?: unknown
      t?: unknown
    }
    if (
      parsed.q === q &&
      typeof parsed.o === "number" &&
      Number.isSafeInteger(parsed.o) &&
      parsed.o >= 0 &&
      typeof parsed.t === "string" &&
      /^[0-9]{1,19}$/.test(parsed.t)
    ) {
      return { o: parsed.o, t: parsed.t }
    }
  } catch {
    // not a token of ours
  }
  return undefined
}

const view = (r: Row): AuditEventView => ({
  id: String(r.id),
  at: new Date(r.at).toISOString(),
  actor: {
    kind: r.actor_kind,
    id: r.actor_id,
    name: r.actor_name,
    ...(r.actor_email === null ? {} : { email: r.actor_email })
  },
  role: (["read", "write", "maintain", "admin"] as const).find((x) => x === r.role) ?? "read",
  action: r.action,
  target: r.target,
  outcome: r.outcome,
  sourceIp: r.source_ip
})

/** One page of an organization's events, newest first. */
export const listEvents = (sql: SqlClient.SqlClient, orgId: string, req: ListAuditEventsRequest) =>
  Effect.gen(function* () {
    const size = req.page_query?.page_size ?? 50
    const q = hashOf([
      orgId,
      req.actor ?? null,
      req.action ?? null,
      req.outcome ?? null,
      req.target?.toLowerCase() ?? null,
      req.start_time === undefined ? null : Date.parse(req.start_time),
      req.end_time === undefined ? null : Date.parse(req.end_time),
      size
    ])
    const given = req.page_query?.page_token ?? ""
    let offset = 0
    let top: string
    if (given === "") {
      const [newest] = yield* sql<{ id: string | null }>`
        select max(id)::text as id from audit_events where org_id = ${orgId}`
      top = newest?.id ?? "0"
    } else {
      const read = readToken(given, q)
      if (read === undefined) {
        return yield* new AuditPageTokenInvalid({ message: "the page_token was not issued for this query" })
      }
      offset = read.o
      top = read.t
    }
    const conditions = [sql`org_id = ${orgId}`, sql`id <= ${top}::bigint`]
    if (req.actor !== undefined) conditions.push(sql`(actor_id = ${req.actor} or actor_name = ${req.actor})`)
    if (req.action !== undefined) conditions.push(sql`action = ${req.action}`)
    if (req.outcome !== undefined) conditions.push(sql`outcome = ${req.outcome}`)
    if (req.target !== undefined) {
      conditions.push(sql`strpos(lower(target), ${req.target.toLowerCase()}) > 0`)
    }
    if (req.start_time !== undefined) conditions.push(sql`at >= ${new Date(req.start_time)}`)
    if (req.end_time !== undefined) conditions.push(sql`at < ${new Date(req.end_time)}`)
    const where = sql.and(conditions)
    const [counted] = yield* sql<{ n: number | string }>`select count(*)::int as n from audit_events where ${where}`
    const total = Number(counted?.n ?? 0)
    const rows = yield* sql<Row>`
      select id, at, actor_kind, actor_id, actor_name, actor_email, role, action, target, outcome, source_ip
      from audit_events where ${where}
      order by id desc limit ${size} offset ${offset}`
    const pages = Math.ceil(total / size)
    return {
      events: rows.map(view),
      page: {
        total_rows: total,
        total_pages: pages,
        next_page_token: offset + size < total ? tokenOf(q, offset + size, top) : "",
        prev_page_token: offset > 0 ? tokenOf(q, Math.max(0, offset - size), top) : "",
        last_page_token: pages > 0 ? tokenOf(q, (pages - 1) * size, top) : "",
        page_index: Math.floor(offset / size)
      }
    }
  })

/** Removes up to `batch` events older than `days`; returns how many (retention: the only delete the table allows). */
export const pruneEvents = (sql: SqlClient.SqlClient, days: number, batch = 10_000) =>
  sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`select set_config('greenline.audit_prune', 'on', true)`
      const rows = yield* sql<{ id: string }>`
        delete from audit_events where id in (
          select id from audit_events where at < now() - make_interval(days => ${days}) order by id limit ${batch})
        returning id`
      return rows.length
    })
  )
