import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Duration, Effect, FiberSet, Layer, Queue, Stream } from "effect"
import { AppConfig } from "../config.ts"
import { Database } from "../db/Database.ts"
import { Metrics } from "../metrics/Metrics.ts"
import { Counter, Gauge } from "../metrics/registry.ts"
import { refusedAddress } from "./address.ts"
import { DELIVERY_CHANNEL, EventReader, messageId } from "./EventLogLive.ts"
import { signedHeaders } from "./signing.ts"

/**
 * The webhook delivery worker. Messages live in `webhook_messages`; any instance takes the due ones with
 * `FOR UPDATE SKIP LOCKED` and a lease (`locked_until`), so each is sent by one instance at a time, and a message
 * whose sender died is taken again when its lease ends (same `webhook-id`: receivers deduplicate on it). Sending
 * happens outside any transaction, in fibers of its own, so a slow receiver holds only its own messages.
 *
 * Times come from Effect's `Clock` (tests step a test clock through the retry schedule instead of sleeping).
 */

/** Standard Webhooks / Svix schedule: the waits before the 2nd..8th attempts. */
export const RETRY_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000
] as const
/** A 2xx within this is a success; anything slower is a failed attempt. */
export const ATTEMPT_TIMEOUT_MS = 15_000
/** An endpoint failing for this long without one success is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3_600_000
const LEASE_MS = 60_000
const MAX_IN_FLIGHT = 32
const MAX_RETRY_AFTER_MS = 24 * 3_600_000

/** The wait before attempt `attempts + 1` (attempts made so far), ±10% jitter; undefined when none is left. */
export const retryDelay = (attempts: number, random: number): number | undefined => {
  const base = RETRY_SCHEDULE_MS[attempts - 1]
  return base === undefined ? undefined : Math.round(base * (0.9 + 0.2 * random))
}

/** A Retry-After header (seconds or an HTTP date) as milliseconds from `now`, when it says something usable. */
export const retryAfterMs = (header: string | null, now: number): number | undefined => {
  if (header === null) return undefined
  const seconds = Number(header.trim())
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - now
  return Number.isFinite(ms) && ms >= 0 ? Math.min(ms, MAX_RETRY_AFTER_MS) : undefined
}

interface Claimed {
  readonly endpoint_id: string
  readonly event_seq: string | number
  readonly attempts: number
  readonly id: string
  readonly body: string
  readonly url: string
  readonly secret: string
  readonly previous_secret: string | null
  readonly previous_secret_until: Date | string | null
  readonly failing_since: Date | string | null
}

interface Outcome {
  readonly status: number | null
  readonly error: string | null
  readonly durationMs: number
  readonly retryAfter: string | null
}

export interface DeliveryShape {
  /** One pass: takes the messages due at the Clock's now, sends them and records the outcomes. The number sent. */
  readonly deliverDue: Effect.Effect<number, SqlError>
}

export class Delivery extends Context.Tag("greenline/WebhookDelivery")<Delivery, DeliveryShape>() {}

export const DeliveryLive = Layer.scoped(
  Delivery,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const config = yield* AppConfig
    const reader = yield* EventReader
    const { registry } = yield* Metrics

    const deliveries = registry.register(
      new Counter("greenline_webhook_deliveries_total", "Webhook delivery attempts by endpoint and outcome")
    )
    const gauges = { retryDepth: 0, oldestSeconds: 0 }
    registry.register(
      new Gauge("greenline_webhook_retry_queue_depth", "Webhook messages waiting for a retry", () => [
        [{}, gauges.retryDepth]
      ])
    )
    registry.register(
      new Gauge(
        "greenline_webhook_oldest_undelivered_seconds",
        "Age of the oldest webhook message not delivered yet (0 when none)",
        () => [[{}, gauges.oldestSeconds]]
      )
    )

    const claim = (now: number, limit: number) =>
      sql<Claimed>`
        with due as (
          select m.endpoint_id, m.event_seq from webhook_messages m
          join webhook_endpoints w on w.id = m.endpoint_id
          where m.status = 'pending' and m.next_attempt_at <= ${new Date(now).toISOString()}
            and (m.locked_until is null or m.locked_until < ${new Date(now).toISOString()})
            and not w.disabled
            and not exists (select 1 from webhook_messages p
                            where p.endpoint_id = m.endpoint_id and p.ordering_key = m.ordering_key
                              and p.status = 'pending' and p.event_seq < m.event_seq)
          order by m.next_attempt_at, m.event_seq
          limit ${limit}
          for update of m skip locked)
        update webhook_messages m set locked_until = ${new Date(now + LEASE_MS).toISOString()}
        from due, event_log e, webhook_endpoints w
        where m.endpoint_id = due.endpoint_id and m.event_seq = due.event_seq
          and e.seq = m.event_seq and w.id = m.endpoint_id
        returning m.endpoint_id, m.event_seq, m.attempts, e.id, e.body, w.url, w.secret, w.previous_secret,
          w.previous_secret_until, w.failing_since`

    const send = (msg: Claimed, now: number): Effect.Effect<Outcome> =>
      Effect.promise(async (): Promise<Outcome> => {
        const started = performance.now()
        const elapsed = () => Math.round(performance.now() - started)
        const url = new URL(msg.url)
        if (!config.webhookAllowPrivate) {
          const refused = await refusedAddress(url)
          if (refused !== undefined) return { status: null, error: refused, durationMs: elapsed(), retryAfter: null }
        }
        const secrets = [msg.secret]
        if (msg.previous_secret !== null && new Date(msg.previous_secret_until ?? 0).getTime() > now) {
          secrets.push(msg.previous_secret)
        }
        const headers = signedHeaders(secrets, messageId(msg.id), Math.floor(now / 1000), msg.body)
        try {
          const response = await fetch(url, {
            method: "POST",
            headers,
            body: msg.body,
            redirect: "manual",
            signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)
          })
          await response.body?.cancel().catch(() => {})
          const ok = response.status >= 200 && response.status < 300
          return {
            status: response.status,
            error: ok
              ? null
              : response.status >= 300 && response.status < 400
                ? "redirects are not followed"
                : `the receiver answered ${response.status}`,
            durationMs: elapsed(),
            retryAfter: response.headers.get("retry-after")
          }
        } catch (e) {
          const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
          return {
            status: null,
            error: timedOut ? `no answer within ${ATTEMPT_TIMEOUT_MS / 1000} s` : String(e),
            durationMs: elapsed(),
            retryAfter: null
          }
        }
      })

    const disable = (endpointId: string, reason: string) =>
      Effect.zipRight(
        sql`update webhook_endpoints set disabled = true, disabled_reason = ${reason}, updated_at = now()
            where id = ${endpointId}`,
        Effect.logWarning(`webhook endpoint ${endpointId} disabled: ${reason}`).pipe(
          Effect.annotateLogs({ endpointId, reason })
        )
      )

    const record = (msg: Claimed, out: Outcome, now: number) =>
      sql.withTransaction(
        Effect.gen(function* () {
          const at = new Date(now).toISOString()
          const attempts = msg.attempts + 1
          const key = { endpoint: msg.endpoint_id }
          yield* sql`insert into webhook_attempts (endpoint_id, event_seq, at, http_status, duration_ms, error)
                     values (${msg.endpoint_id}, ${msg.event_seq}, ${at}, ${out.status}, ${out.durationMs}, ${out.error})`
          const ok = out.status !== null && out.status >= 200 && out.status < 300
          if (ok) {
            deliveries.inc({ ...key, outcome: "delivered" })
            yield* sql`update webhook_messages set status = 'delivered', attempts = ${attempts}, locked_until = null,
                         ended_at = ${at}
                       where endpoint_id = ${msg.endpoint_id} and event_seq = ${msg.event_seq}`
            if (msg.failing_since !== null) {
              yield* sql`update webhook_endpoints set failing_since = null where id = ${msg.endpoint_id}`
            }
            return
          }
          if (out.status === 410) {
            deliveries.inc({ ...key, outcome: "gone" })
            yield* sql`update webhook_messages set status = 'failed', attempts = ${attempts}, locked_until = null,
                         ended_at = ${at}
                       where endpoint_id = ${msg.endpoint_id} and event_seq = ${msg.event_seq}`
            return yield* disable(msg.endpoint_id, "the receiver answered 410 Gone")
          }
          deliveries.inc({ ...key, outcome: "failed" })
          const wait =
            out.status === 429 || out.status === 503
              ? (retryAfterMs(out.retryAfter, now) ?? retryDelay(attempts, Math.random()))
              : retryDelay(attempts, Math.random())
          if (wait === undefined) {
            yield* sql`update webhook_messages set status = 'failed', attempts = ${attempts}, locked_until = null,
                         ended_at = ${at}
                       where endpoint_id = ${msg.endpoint_id} and event_seq = ${msg.event_seq}`
          } else {
            yield* sql`update webhook_messages set attempts = ${attempts}, locked_until = null,
                         next_attempt_at = ${new Date(now + wait).toISOString()}
                       where endpoint_id = ${msg.endpoint_id} and event_seq = ${msg.event_seq}`
          }
          const since = msg.failing_since === null ? now : new Date(msg.failing_since).getTime()
          if (msg.failing_since === null) {
            yield* sql`update webhook_endpoints set failing_since = ${at}
                       where id = ${msg.endpoint_id} and failing_since is null`
          } else if (now - since >= DISABLE_AFTER_MS) {
            yield* disable(msg.endpoint_id, "every delivery failed for 5 days")
          }
        })
      )

    const deliverOne = (msg: Claimed) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const out = yield* send(msg, now)
        yield* record(msg, out, yield* Clock.currentTimeMillis)
      })

    const deliverDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* claim(now, MAX_IN_FLIGHT)
      yield* Effect.forEach(claimed, deliverOne, { concurrency: "unbounded", discard: true })
      return claimed.length
    })

    const refreshGauges = Effect.gen(function* () {
      const rows = yield* sql<{ retrying: number; oldest: Date | string | null }>`
        select count(*) filter (where attempts > 0)::int as retrying, min(created_at) as oldest
        from webhook_messages where status = 'pending'`
      const row = rows[0]
      gauges.retryDepth = row?.retrying ?? 0
      gauges.oldestSeconds = row?.oldest == null ? 0 : Math.max(0, (Date.now() - new Date(row.oldest).getTime()) / 1000)
    })

    if (config.webhookWorker) {
      const wake = yield* Queue.sliding<void>(1)
      const sending = yield* FiberSet.make()
      let inFlight = 0
      // each message in a fiber of its own: a slow receiver holds its own slot, not the loop
      const pass = Effect.gen(function* () {
        const free = MAX_IN_FLIGHT - inFlight
        if (free <= 0) return
        const now = yield* Clock.currentTimeMillis
        const claimed = yield* claim(now, free)
        inFlight += claimed.length
        for (const msg of claimed) {
          yield* FiberSet.run(
            sending,
            deliverOne(msg).pipe(
              Effect.catchAllCause((cause) => Effect.logError("webhook delivery failed", cause)),
              Effect.ensuring(
                Effect.suspend(() => {
                  inFlight--
                  return Queue.offer(wake, undefined)
                })
              )
            )
          )
        }
      })
      yield* Effect.forkScoped(db.listen(DELIVERY_CHANNEL).pipe(Stream.runForEach(() => Queue.offer(wake, undefined))))
      yield* Effect.forkScoped(
        Effect.forever(
          pass.pipe(
            Effect.catchAllCause((cause) => Effect.logError("webhook delivery pass failed", cause)),
            Effect.zipRight(Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.seconds(1))))
          )
        )
      )
      yield* Effect.forkScoped(
        Effect.forever(
          refreshGauges.pipe(
            Effect.catchAllCause(() => Effect.void),
            Effect.zipRight(Effect.sleep(Duration.seconds(5)))
          )
        )
      )
      // retention: the log and what hangs off it, older than EVENT_RETENTION_DAYS
      yield* Effect.forkScoped(
        Effect.forever(
          reader.prune(config.eventRetentionDays).pipe(
            Effect.repeat({ while: (n) => n > 0 }),
            Effect.catchAllCause((cause) => Effect.logError("event log retention failed", cause)),
            Effect.zipRight(Effect.sleep(Duration.minutes(10)))
          )
        )
      )
    }

    return { deliverDue }
  })
)
