import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { Database } from "../kernel/Database.ts"
import { EventLog } from "../kernel/EventLog.ts"
import { type Organization, Tenancy } from "../tenancy/Tenancy.ts"
import { namesPrivateHost } from "./address.ts"
import { endpointEvent } from "./Delivery.ts"
import { DELIVERY_CHANNEL, eventIdOf, messageId } from "./EventLogLive.ts"
import { EventsEnv } from "./EventsEnv.ts"
import { type EventsError, EventsNotFound, InvalidEventsPageToken, InvalidEventsRequest } from "./errors.ts"
import type {
  CreateWebhookEndpointRequest,
  ListWebhookDeliveriesRequest,
  ReplayWebhookMessagesRequest,
  UpdateWebhookEndpointRequest,
  WebhookEndpoint,
  WebhookMessage
} from "./schemas.ts"
import { newSecret } from "./signing.ts"

/** The webhook endpoints API (extension, issue #17): endpoints of the caller's organization, their messages, replay. */

/** How long the previous secret still signs (beside the new one) after a rotation. */
export const ROTATION_OVERLAP_HOURS = 24

interface EndpointRow {
  readonly id: string
  readonly url: string
  readonly description: string
  readonly event_types: ReadonlyArray<string> | string | null
  readonly repo_host: string | null
  readonly repo_owner: string | null
  readonly repo_name: string | null
  readonly disabled: boolean
  readonly disabled_reason: string | null
  readonly created_at: Date | string
  readonly updated_at: Date | string
  readonly failing_since: Date | string | null
  readonly probe_at: Date | string | null
  readonly last_success_at: Date | string | null
  readonly pending: number | string
  readonly failed: number | string
}

/** A text[] as the driver hands it back: an array (pg) or its literal (some PGlite paths). */
const textArray = (value: ReadonlyArray<string> | string | null): ReadonlyArray<string> | null => {
  if (value === null) return null
  if (typeof value !== "string") return value
  const inner = value.replace(/^\{|\}$/g, "")
  return inner === "" ? [] : inner.split(",").map((s) => s.replace(/^"|"$/g, ""))
}

const endpointOf = (r: EndpointRow): WebhookEndpoint => ({
  id: r.id,
  url: r.url,
  description: r.description,
  eventTypes: textArray(r.event_types),
  repo: r.repo_host === null ? null : { host: r.repo_host, owner: r.repo_owner ?? "", name: r.repo_name ?? "" },
  disabled: r.disabled,
  disabledReason: r.disabled_reason,
  createdAt: new Date(r.created_at).toISOString(),
  updatedAt: new Date(r.updated_at).toISOString(),
  health: {
    state: r.disabled ? "disabled" : r.failing_since === null ? "healthy" : "failing",
    failingSince: isoOrNull(r.failing_since),
    nextProbeAt: r.disabled || r.failing_since === null ? null : isoOrNull(r.probe_at),
    lastSuccessAt: isoOrNull(r.last_success_at),
    pending: Number(r.pending),
    failed: Number(r.failed)
  }
})

const isoOrNull = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString())

const pgTextArray = (values: ReadonlyArray<string>) => `{${values.map((v) => `"${v}"`).join(",")}}`

const endpointNotFound = (id: string) => new EventsNotFound({ message: `no webhook endpoint ${id}` })
const invalidRequest = (message: string, details: ReadonlyArray<{ path: string; message: string }>) =>
  new InvalidEventsRequest({ message, details })

export interface WebhooksShape {
  readonly create: (
    org: Organization,
    req: typeof CreateWebhookEndpointRequest.Type
  ) => Effect.Effect<WebhookEndpoint & { readonly secret: string }, EventsError | SqlError>
  readonly list: (org: Organization) => Effect.Effect<ReadonlyArray<WebhookEndpoint>, SqlError>
  readonly update: (
    org: Organization,
    req: typeof UpdateWebhookEndpointRequest.Type
  ) => Effect.Effect<WebhookEndpoint, EventsError | SqlError>
  readonly remove: (org: Organization, id: string) => Effect.Effect<void, EventsError | SqlError>
  readonly rotate: (
    org: Organization,
    id: string
  ) => Effect.Effect<{ id: string; secret: string }, EventsError | SqlError>
  readonly deliveries: (
    org: Organization,
    req: typeof ListWebhookDeliveriesRequest.Type
  ) => Effect.Effect<
    { readonly messages: ReadonlyArray<WebhookMessage>; readonly page: { readonly next_page_token: string } },
    EventsError | SqlError
  >
  readonly replay: (
    org: Organization,
    req: typeof ReplayWebhookMessagesRequest.Type
  ) => Effect.Effect<{ readonly replayed: number }, EventsError | SqlError>
}

export class Webhooks extends Context.Tag("greenline/Webhooks")<Webhooks, WebhooksShape>() {}

const pageToken = (endpointId: string, seq: number) => Buffer.from(`${endpointId}:${seq}`).toString("base64url")
const readPageToken = (endpointId: string, token: string): number | undefined => {
  const text = Buffer.from(token, "base64url").toString("utf8")
  const [id, seq] = text.split(":")
  const n = Number(seq)
  return id === endpointId && Number.isSafeInteger(n) && n > 0 ? n : undefined
}

export const WebhooksLive = Layer.effect(
  Webhooks,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const tenancy = yield* Tenancy
    const config = yield* EventsEnv
    const db = yield* Database
    const log = yield* EventLog

    const checkUrl = (url: string) =>
      !config.webhookAllowPrivate && namesPrivateHost(new URL(url))
        ? Effect.fail(
            invalidRequest("the URL names a private or loopback address", [
              {
                path: "url",
                message: "must be a public address (WEBHOOK_ALLOW_PRIVATE=true allows private ones)"
              }
            ])
          )
        : Effect.void

    const selectEndpoints = (orgId: string, id?: string) =>
      sql<EndpointRow>`
        select w.id, w.url, w.description, w.event_types, r.host as repo_host, r.owner as repo_owner,
               r.name as repo_name, w.disabled, w.disabled_reason, w.created_at, w.updated_at,
               w.failing_since, w.probe_at, w.last_success_at, c.pending, c.failed
        from webhook_endpoints w left join repositories r on r.id = w.repo_id
        cross join lateral (
          select count(*) filter (where m.status = 'pending')::int as pending,
                 count(*) filter (where m.status = 'failed')::int as failed
          from webhook_messages m where m.endpoint_id = w.id) c
        where w.org_id = ${orgId} ${id === undefined ? sql`` : sql`and w.id = ${id}`}
        order by w.created_at, w.id`

    const owned = (org: Organization, id: string) =>
      Effect.flatMap(selectEndpoints(org.id, id), (rows) =>
        rows[0] === undefined ? Effect.fail(endpointNotFound(id)) : Effect.succeed(rows[0])
      )

    return {
      create: (org, req) =>
        Effect.gen(function* () {
          yield* checkUrl(req.url)
          let repoId: string | null = null
          if (req.repo !== undefined) {
            const repo = yield* tenancy.findRepo(org, req.repo)
            if (Option.isNone(repo)) {
              return yield* new EventsNotFound({
                message: `repository ${req.repo.host}/${req.repo.owner}/${req.repo.name} not found`
              })
            }
            repoId = repo.value.id
          }
          const id = crypto.randomUUID()
          const secret = newSecret()
          const types =
            req.eventTypes === undefined || req.eventTypes === null ? null : pgTextArray([...new Set(req.eventTypes)])
          yield* sql`insert into webhook_endpoints (id, org_id, url, description, event_types, repo_id, secret)
                     values (${id}, ${org.id}, ${req.url}, ${req.description ?? ""}, ${types}::text[], ${repoId}, ${secret})`
          const row = yield* owned(org, id)
          return { ...endpointOf(row), secret }
        }),

      list: (org) => Effect.map(selectEndpoints(org.id), (rows) => rows.map(endpointOf)),

      update: (org, req) =>
        Effect.gen(function* () {
          const before = yield* owned(org, req.id)
          if (req.url !== undefined) yield* checkUrl(req.url)
          const types =
            req.eventTypes === undefined || req.eventTypes === null ? null : pgTextArray([...new Set(req.eventTypes)])
          yield* sql`update webhook_endpoints set
                       url = coalesce(${req.url ?? null}, url),
                       description = coalesce(${req.description ?? null}, description),
                       event_types = case when ${req.eventTypes !== undefined} then ${types}::text[] else event_types end,
                       disabled = coalesce(${req.disabled ?? null}::boolean, disabled),
                       disabled_reason = case when ${req.disabled === false} then null
                                              when ${req.disabled === true} then 'disabled through the API'
                                              else disabled_reason end,
                       failing_since = case when ${req.disabled === false} then null else failing_since end,
                       probe_at = case when ${req.disabled === false} then null else probe_at end,
                       updated_at = now()
                     where id = ${req.id} and org_id = ${org.id}`
          const after = yield* owned(org, req.id)
          if (req.disabled === true && !before.disabled) {
            // told to the organization's other endpoints, as when Greenline disables one
            const at = yield* Clock.currentTimeMillis
            yield* log.append([
              endpointEvent(org.id, "webhook_endpoint.disabled", after, at, {
                reason: "disabled through the API",
                disabled_by: "api"
              })
            ])
          }
          return endpointOf(after)
        }),

      remove: (org, id) =>
        Effect.gen(function* () {
          const rows = yield* sql`delete from webhook_endpoints where id = ${id} and org_id = ${org.id} returning id`
          if (rows.length === 0) return yield* endpointNotFound(id)
        }),

      rotate: (org, id) =>
        Effect.gen(function* () {
          const secret = newSecret()
          const rows = yield* sql`
            update webhook_endpoints set previous_secret = secret, secret = ${secret},
              previous_secret_until = now() + make_interval(hours => ${ROTATION_OVERLAP_HOURS}), updated_at = now()
            where id = ${id} and org_id = ${org.id} returning id`
          if (rows.length === 0) return yield* endpointNotFound(id)
          return { id, secret }
        }),

      deliveries: (org, req) =>
        Effect.gen(function* () {
          yield* owned(org, req.endpointId)
          const size = req.page_query?.page_size ?? 50
          const token = req.page_query?.page_token ?? ""
          let before = Number.MAX_SAFE_INTEGER
          if (token !== "") {
            const seq = readPageToken(req.endpointId, token)
            if (seq === undefined) {
              return yield* new InvalidEventsPageToken({
                message: "the page_token was not issued for this query (a token of this endpoint's deliveries)"
              })
            }
            before = seq
          }
          const rows = yield* sql<{
            event_seq: string | number
            id: string
            type: string
            occurred_at: Date | string
            status: "pending" | "delivered" | "failed"
            next_attempt_at: Date | string
            attempts: unknown
          }>`
            select m.event_seq, e.id, e.type, e.occurred_at, m.status,
              case when w.failing_since is not null and w.probe_at > m.next_attempt_at then w.probe_at
                   else m.next_attempt_at end as next_attempt_at,
              (select coalesce(json_agg(json_build_object('at', a.at, 'status', a.http_status,
                        'durationMs', a.duration_ms, 'error', a.error, 'requestHeaders', a.request_headers,
                        'responseBody', a.response_body, 'interrupted', a.interrupted) order by a.id), '[]'::json)
               from webhook_attempts a where a.endpoint_id = m.endpoint_id and a.event_seq = m.event_seq) as attempts
            from webhook_messages m join event_log e on e.seq = m.event_seq join webhook_endpoints w on w.id = m.endpoint_id
            where m.endpoint_id = ${req.endpointId} and m.event_seq < ${before}
              ${req.status === undefined ? sql`` : sql`and m.status = ${req.status}`}
            order by m.event_seq desc limit ${size + 1}`
          const page = rows.slice(0, size)
          const last = page[page.length - 1]
          const messages = page.map((r): WebhookMessage => {
            const attempts = (typeof r.attempts === "string" ? JSON.parse(r.attempts) : r.attempts) as ReadonlyArray<{
              at: string
              status: number | null
              durationMs: number
              error: string | null
              requestHeaders: string | null
              responseBody: string | null
              interrupted: boolean | null
            }>
            return {
              id: messageId(r.id),
              eventType: r.type,
              timestamp: new Date(r.occurred_at).toISOString(),
              status: r.status,
              nextAttemptAt: r.status === "pending" ? new Date(r.next_attempt_at).toISOString() : null,
              attempts: attempts.map((a) => ({
                at: new Date(a.at).toISOString(),
                status: a.status,
                durationMs: a.durationMs,
                error: a.error,
                requestHeaders:
                  a.requestHeaders === null ? null : (JSON.parse(a.requestHeaders) as Record<string, string>),
                responseBody: a.responseBody,
                interrupted: a.interrupted === true
              }))
            }
          })
          return {
            messages,
            page: {
              next_page_token:
                rows.length > size && last !== undefined ? pageToken(req.endpointId, Number(last.event_seq)) : ""
            }
          }
        }),

      replay: (org, req) =>
        Effect.gen(function* () {
          if (req.since === undefined && req.messageIds === undefined) {
            return yield* invalidRequest("replayWebhookMessages needs since or messageIds", [
              { path: "since", message: "since or messageIds is required" }
            ])
          }
          yield* owned(org, req.endpointId)
          const ids = (req.messageIds ?? []).map(eventIdOf).filter((id): id is string => id !== undefined)
          // the events of the organization the endpoint wants (type and repository), sent again from the start; with
          // onlyFailed, the endpoint's messages that were given up
          const rows = yield* sql<{ n: number }>`
            with picked as (
              select e.seq, e.org_id, e.ordering_key from event_log e join webhook_endpoints w on w.id = ${req.endpointId}
              where e.org_id = ${org.id} and e.type is not null
                and (w.event_types is null or e.type = any(w.event_types))
                and (w.repo_id is null or w.repo_id = e.repo_id)
                ${req.since !== undefined ? sql`and e.occurred_at >= ${new Date(req.since).toISOString()}` : sql``}
                ${req.messageIds !== undefined ? sql`and e.id = any(${`{${ids.join(",")}}`}::uuid[])` : sql``}
                ${
                  req.onlyFailed === true
                    ? sql`and exists (select 1 from webhook_messages f where f.endpoint_id = w.id
                            and f.event_seq = e.seq and f.status = 'failed')`
                    : sql``
                }),
            upserted as (
              insert into webhook_messages (endpoint_id, event_seq, org_id, ordering_key)
              select ${req.endpointId}, p.seq, p.org_id, p.ordering_key from picked p
              on conflict (endpoint_id, event_seq) do update set status = 'pending', attempts = 0,
                next_attempt_at = now(), locked_until = null, ended_at = null, first_attempt_at = null
              returning 1)
            select count(*)::int as n from upserted`
          const replayed = rows[0]?.n ?? 0
          if (replayed > 0) yield* db.notify(DELIVERY_CHANNEL, "due")
          return { replayed }
        })
    } satisfies WebhooksShape
  })
)
