import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Duration, Effect, FiberSet, Layer, Queue, Stream } from "effect"
import { Database } from "../kernel/Database.ts"
import { refusedAddress } from "./address.ts"
import { DELIVERY_CHANNEL, EventReader, messageId } from "./EventLogLive.ts"
import { EventsEnv } from "./EventsEnv.ts"
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
const MAX_IN_FLIGHT = 128
const MAX_RETRY_AFTER_MS = 24 * 3_600_000
/** The delivery loop's wait while messages are in flight, and its longest wait with none due. */
const BUSY_WAIT = Duration.seconds(1)
const IDLE_WAIT = Duration.seconds(30)

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

/** The worker's figures for GET /metrics. */
export interface DeliveryStats {
  /** attempts made by this instance since it started */
  readonly attempts: ReadonlyArray<{ readonly endpoint: string; readonly outcome: string; readonly value: number }>
  /** messages waiting for a retry (all instances) */
  readonly retryQueueDepth: number
  /** age of the oldest message not delivered yet, 0 when none */
  readonly oldestUndeliveredSeconds: number
}

export interface DeliveryShape {
  /** One pass: takes the messages due at the Clock's now, sends them and records the outcomes. The number sent. */
  readonly deliverDue: Effect.Effect<number, SqlError>
  readonly stats: () => DeliveryStats
}

export class Delivery extends Context.Tag("greenline/WebhookDelivery")<Delivery, DeliveryShape>() {}

export const DeliveryLive = Layer.scoped(
  Delivery,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const config = yield* EventsEnv
    const reader = yield* EventReader

    // what GET /metrics shows (registered by the metrics adapter): attempts by endpoint and outcome, and two gauges
    // read from the database every few seconds by the worker
    const counts = new Map<string, { endpoint: string; outcome: string; value: number }>()
    const deliveries = {
      inc: (labels: { endpoint: string; outcome: string }) => {
        const key = `${labels.endpoint} ${labels.outcome}`
        const entry = counts.get(key) ?? { ...labels, value: 0 }
        entry.value++
        counts.set(key, entry)
      }
    }
    const gauges = { retryDepth: 0, oldestSeconds: 0 }
    const stats = (): DeliveryStats => ({
      attempts: [...counts.values()],
      retryQueueDepth: gauges.retryDepth,
      oldestUndeliveredSeconds: gauges.oldestSeconds
    })

    // The due messages: of each endpoint and ordering key only the oldest pending one (the head: a later message of
    // the same pull request waits until the earlier one is delivered or given up), not leased, oldest due first.
    const claim = (now: number, limit: number) =>
      sql<Claimed>`
        with heads as (
          select distinct on (m.endpoint_id, m.ordering_key) m.endpoint_id, m.event_seq
          from webhook_messages m where m.status = 'pending'
          order by m.endpoint_id, m.ordering_key, m.event_seq),
        due as (
          select m.endpoint_id, m.event_seq from webhook_messages m
          join heads h on h.endpoint_id = m.endpoint_id and h.event_seq = m.event_seq
          join webhook_endpoints w on w.id = m.endpoint_id and not w.disabled
          where m.status = 'pending' and m.next_attempt_at <= ${new Date(now).toISOString()}
            and (m.locked_until is null or m.locked_until < ${new Date(now).toISOString()})
          order by m.next_attempt_at, m.event_seq
          limit ${limit}
          for update of m skip locked)
        update webhook_messages m set locked_until = ${new Date(now + LEASE_MS).toISOString()}
        from due, event_log e, webhook_endpoints w
        where m.endpoint_id = due.endpoint_id and m.event_seq = due.event_seq
          and e.seq = m.event_seq and w.id = m.endpoint_id
        returning m.endpoint_id, m.event_seq, m.attempts, e.id, e.body, w.url, w.secret, w.previous_secret,
          w.previous_secret_until, w.failing_since`

    /**
     * When the next message can be claimed (ms), null when none is pending: of each endpoint and ordering key the
     * head, as `claim` takes them, at its next attempt or when its lease ends.
     */
    const nextDue = Effect.map(
      sql<{ due: Date | string | null }>`
        with heads as (
          select distinct on (m.endpoint_id, m.ordering_key) m.endpoint_id, m.next_attempt_at, m.locked_until
          from webhook_messages m where m.status = 'pending'
          order by m.endpoint_id, m.ordering_key, m.event_seq)
        select min(greatest(h.next_attempt_at, coalesce(h.locked_until, h.next_attempt_at))) as due
        from heads h join webhook_endpoints w on w.id = h.endpoint_id and not w.disabled`,
      (rows) => {
        const due = rows[0]?.due
        return due === null || due === undefined ? null : new Date(due).getTime()
      }
    )

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

    interface Done {
      readonly msg: Claimed
      readonly out: Outcome
      readonly at: number
    }

    /**
     * Records finished attempts, many in one transaction of a fixed number of statements (with PGlite every
     * transaction takes turns with the queue's runners): the attempts, the messages' new state, and the endpoints'
     * failure streaks; 410 and five days of failures disable an endpoint, with a log line.
     */
    const record = (batch: ReadonlyArray<Done>) =>
      Effect.gen(function* () {
        if (batch.length === 0) return
        const attempts: Array<Record<string, unknown>> = []
        const messages: Array<Record<string, unknown>> = []
        const healthy = new Set<string>()
        const failing = new Map<string, string>()
        const disabled = new Map<string, string>()
        for (const { msg, out, at } of batch) {
          const when = new Date(at).toISOString()
          const count = msg.attempts + 1
          attempts.push({
            endpoint_id: msg.endpoint_id,
            event_seq: msg.event_seq,
            at: when,
            http_status: out.status,
            duration_ms: out.durationMs,
            error: out.error
          })
          const key = { endpoint: msg.endpoint_id }
          const base = { endpoint_id: msg.endpoint_id, event_seq: msg.event_seq, attempts: count }
          if (out.status !== null && out.status >= 200 && out.status < 300) {
            deliveries.inc({ ...key, outcome: "delivered" })
            messages.push({ ...base, status: "delivered", next_attempt_at: null, ended_at: when })
            if (msg.failing_since !== null) healthy.add(msg.endpoint_id)
            continue
          }
          if (out.status === 410) {
            deliveries.inc({ ...key, outcome: "gone" })
            messages.push({ ...base, status: "failed", next_attempt_at: null, ended_at: when })
            disabled.set(msg.endpoint_id, "the receiver answered 410 Gone")
            continue
          }
          deliveries.inc({ ...key, outcome: "failed" })
          const wait =
            out.status === 429 || out.status === 503
              ? (retryAfterMs(out.retryAfter, at) ?? retryDelay(count, Math.random()))
              : retryDelay(count, Math.random())
          messages.push(
            wait === undefined
              ? { ...base, status: "failed", next_attempt_at: null, ended_at: when }
              : { ...base, status: "pending", next_attempt_at: new Date(at + wait).toISOString(), ended_at: null }
          )
          if (msg.failing_since === null) failing.set(msg.endpoint_id, when)
          else if (at - new Date(msg.failing_since).getTime() >= DISABLE_AFTER_MS) {
            disabled.set(msg.endpoint_id, "every delivery failed for 5 days")
          }
        }
        yield* sql.withTransaction(
          Effect.gen(function* () {
            // the attempts of messages that still exist: an endpoint deleted while its messages were being sent
            // took them with it (its delete waits for these rows, or came first and they are skipped)
            yield* sql`insert into webhook_attempts (endpoint_id, event_seq, at, http_status, duration_ms, error)
                       select v.endpoint_id, v.event_seq, v.at, v.http_status, v.duration_ms, v.error
                       from jsonb_to_recordset(${JSON.stringify(attempts)}::jsonb) as v(endpoint_id uuid,
                         event_seq bigint, at timestamptz, http_status int, duration_ms int, error text)
                       join webhook_messages m on m.endpoint_id = v.endpoint_id and m.event_seq = v.event_seq
                       for key share of m`
            yield* sql`update webhook_messages m set status = v.status, attempts = v.attempts, locked_until = null,
                         next_attempt_at = coalesce(v.next_attempt_at, m.next_attempt_at), ended_at = v.ended_at
                       from jsonb_to_recordset(${JSON.stringify(messages)}::jsonb) as v(endpoint_id uuid,
                         event_seq bigint, attempts int, status text, next_attempt_at timestamptz, ended_at timestamptz)
                       where m.endpoint_id = v.endpoint_id and m.event_seq = v.event_seq`
            if (healthy.size > 0 || failing.size > 0) {
              const streaks = [
                ...[...healthy].filter((id) => !failing.has(id)).map((id) => ({ id, since: null })),
                ...[...failing].map(([id, since]) => ({ id, since }))
              ]
              yield* sql`update webhook_endpoints w set failing_since = case when v.since is null then null
                                                                        else coalesce(w.failing_since, v.since) end
                         from jsonb_to_recordset(${JSON.stringify(streaks)}::jsonb) as v(id uuid, since timestamptz)
                         where w.id = v.id`
            }
            for (const [endpointId, reason] of disabled) {
              yield* sql`update webhook_endpoints set disabled = true, disabled_reason = ${reason}, updated_at = now()
                         where id = ${endpointId} and not disabled`
            }
          })
        )
        for (const [endpointId, reason] of disabled) {
          yield* Effect.logWarning(`webhook endpoint ${endpointId} disabled: ${reason}`).pipe(
            Effect.annotateLogs({ endpointId, reason })
          )
        }
      })

    const attempt = (msg: Claimed) =>
      Effect.gen(function* () {
        const out = yield* send(msg, yield* Clock.currentTimeMillis)
        return { msg, out, at: yield* Clock.currentTimeMillis } satisfies Done
      })

    const deliverDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* claim(now, MAX_IN_FLIGHT)
      const done = yield* Effect.forEach(claimed, attempt, { concurrency: "unbounded" })
      yield* record(done)
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
      // How long a wake-up and a finished attempt wait for company, so that one claim and one transaction serve
      // many messages: with PGlite every statement takes turns on its one connection with the queue's runners.
      const gather = Duration.millis(db.kind === "pglite" ? 250 : 20)
      const wake = yield* Queue.sliding<void>(1)
      const finished = yield* Queue.unbounded<Done>()
      const sending = yield* FiberSet.make()
      let inFlight = 0
      // the wait after a pass: a second while messages are sent; when none was due, until the next one is (a new
      // message, a replay and a finished attempt wake the loop sooner), at most IDLE_WAIT
      const pass = Effect.gen(function* () {
        const free = MAX_IN_FLIGHT - inFlight
        if (free <= 0) return BUSY_WAIT
        const now = yield* Clock.currentTimeMillis
        const claimed = yield* claim(now, free)
        if (claimed.length === 0) {
          const due = yield* nextDue
          return due === null
            ? IDLE_WAIT
            : Duration.millis(Math.min(Math.max(0, due - now), Duration.toMillis(IDLE_WAIT)))
        }
        inFlight += claimed.length
        // each message in a fiber of its own: a slow receiver holds its own slot, not the loop
        for (const msg of claimed) {
          yield* FiberSet.run(
            sending,
            attempt(msg).pipe(
              Effect.flatMap((done) => Queue.offer(finished, done)),
              Effect.catchAllCause((cause) =>
                Effect.zipRight(
                  Effect.sync(() => inFlight--),
                  Effect.logError("webhook delivery failed", cause)
                )
              )
            )
          )
        }
        return BUSY_WAIT
      })
      // what finished is recorded in batches; then the loop looks for what is due next (the next of each order)
      const recorder = Effect.gen(function* () {
        const first = yield* Queue.takeBetween(finished, 1, 256)
        // a moment for the attempts sent together to finish together: one transaction and one claim for them all
        yield* Effect.sleep(gather)
        const batch = [...first, ...(yield* Queue.takeUpTo(finished, 256))]
        yield* record(batch).pipe(
          Effect.catchAllCause((cause) => Effect.logError("recording webhook attempts failed", cause)),
          Effect.ensuring(Effect.sync(() => (inFlight -= batch.length)))
        )
        yield* Queue.offer(wake, undefined)
      })
      yield* Effect.forkScoped(Effect.forever(recorder))
      yield* Effect.forkScoped(db.listen(DELIVERY_CHANNEL).pipe(Stream.runForEach(() => Queue.offer(wake, undefined))))
      yield* Effect.forkScoped(
        Effect.forever(
          pass.pipe(
            Effect.catchAllCause((cause) =>
              Effect.as(Effect.logError("webhook delivery pass failed", cause), BUSY_WAIT)
            ),
            Effect.flatMap((wait) => Effect.raceFirst(Queue.take(wake), Effect.sleep(wait))),
            Effect.zipRight(Effect.sleep(gather))
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

    return { deliverDue, stats }
  })
)
