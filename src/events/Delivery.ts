import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Duration, Effect, FiberSet, Layer, Queue, Stream } from "effect"
import { Database } from "../kernel/Database.ts"
import { EventLog, type NewEvent } from "../kernel/EventLog.ts"
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
 * Order and head-of-line waits (issue #34): the messages of one ordering key (a pull request, a queue, a run) go in
 * log order, each after the one before it was delivered or given up. A healthy endpoint gets the head of each key
 * and, behind it, the key's next messages one after another in the same claim (a chain, stopped by the first that
 * fails). When an endpoint stops answering, it is probed instead of retried message by message: one message at a
 * time, every `probeWait` (5 s while it has just started failing, longer the longer it fails, at most 5 min, and
 * never before a Retry-After). When a probe is delivered, the messages that failed during the outage are due at once
 * and its backlog drains, in order. A failure while the endpoint answers other messages is the message's own: it
 * waits on its own schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h) and holds back only its key.
 *
 * Times come from Effect's `Clock` (tests step a test clock through the schedule instead of sleeping).
 */

/** Standard Webhooks / Svix schedule: the waits before the 2nd..8th attempts of a message. */
export const RETRY_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000
] as const
/** The schedule's whole span (27 h 35 min 5 s): a message gives up once it failed for that long, 8 attempts at least. */
export const RETRY_SPAN_MS = RETRY_SCHEDULE_MS.reduce((a, b) => a + b, 0)
/** A 2xx within this is a success; anything slower is a failed attempt. */
export const ATTEMPT_TIMEOUT_MS = 15_000
/** An endpoint failing for this long without one success is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3_600_000
/** The probes of a failing endpoint: a tenth of how long it has failed, from PROBE_MIN_MS to PROBE_MAX_MS. */
export const PROBE_MIN_MS = 5_000
export const PROBE_MAX_MS = 5 * 60_000
/** What an attempt keeps of the receiver's answer (bytes of its body), and how many attempts a message keeps. */
export const RESPONSE_BODY_CAP = 4096
export const ATTEMPTS_KEPT = 20
const LEASE_MS = 60_000
/** Keys sent at once (each a chain of its messages, one after another), and a chain's length. */
const MAX_IN_FLIGHT = 128
const CHAIN = 32
const MAX_RETRY_AFTER_MS = 24 * 3_600_000
/** A stopping worker lets its attempts in flight finish this long, then ends them (recorded as interrupted). */
const STOP_GRACE_MS = 3_000
/** The delivery loop's wait while messages are in flight, and its longest wait with none due. */
const BUSY_WAIT = Duration.seconds(1)
const IDLE_WAIT = Duration.seconds(30)

/** The wait before attempt `attempts + 1` (attempts made so far), ±10% jitter; the last step once past the schedule. */
export const retryDelay = (attempts: number, random: number): number => {
  const base = RETRY_SCHEDULE_MS[Math.min(attempts, RETRY_SCHEDULE_MS.length) - 1] ?? RETRY_SCHEDULE_MS[0]
  return Math.round(base * (0.9 + 0.2 * random))
}

/** The wait before the next probe of an endpoint that has failed for `failingForMs`. */
export const probeWait = (failingForMs: number): number =>
  Math.round(Math.min(PROBE_MAX_MS, Math.max(PROBE_MIN_MS, failingForMs / 10)))

/** Whether a message that failed its `attempts`-th attempt, first tried `failingForMs` ago, is given up. */
export const retriesExhausted = (attempts: number, failingForMs: number): boolean =>
  attempts > RETRY_SCHEDULE_MS.length && failingForMs >= RETRY_SPAN_MS * 0.9

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
  readonly head_seq: string | number
  readonly attempts: number
  readonly first_attempt_at: Date | string | null
  readonly id: string
  readonly type: string
  readonly body: string
  readonly url: string
  readonly description: string
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
  readonly requestHeaders: Readonly<Record<string, string>>
  readonly responseBody: string | null
  /** the server stopped during the attempt (not the receiver's failure) */
  readonly interrupted: boolean
}

/** A finished attempt, or a message of a chain that was not attempted (its lease is given back). */
type Done =
  | {
      readonly _tag: "Attempt"
      readonly msg: Claimed
      readonly out: Outcome
      readonly started: number
      readonly at: number
    }
  | { readonly _tag: "Skipped"; readonly msg: Claimed }

/** The worker's figures for GET /metrics. */
export interface DeliveryStats {
  /** attempts made by this instance since it started */
  readonly attempts: ReadonlyArray<{ readonly endpoint: string; readonly outcome: string; readonly value: number }>
  /** messages waiting for a retry (all instances) */
  readonly retryQueueDepth: number
  /** age of the oldest message not delivered yet, 0 when none */
  readonly oldestUndeliveredSeconds: number
  /** endpoints failing now (probed), all instances */
  readonly failingEndpoints: number
  /** messages given up by this instance since it started, by endpoint */
  readonly retriesExhausted: ReadonlyArray<{ readonly endpoint: string; readonly value: number }>
  /** endpoints this instance disabled since it started, by why (gone, failing) */
  readonly endpointsDisabled: ReadonlyArray<{ readonly reason: string; readonly value: number }>
}

export interface DeliveryShape {
  /** One pass: takes the messages due at the Clock's now, sends them and records the outcomes. The number sent. */
  readonly deliverDue: Effect.Effect<number, SqlError>
  readonly stats: () => DeliveryStats
}

export class Delivery extends Context.Tag("greenline/WebhookDelivery")<Delivery, DeliveryShape>() {}

const iso = (ms: number) => new Date(ms).toISOString()
const ms = (d: Date | string | null) => (d === null ? null : new Date(d).getTime())

/** The operational events (docs/api-extensions.md, "Events and webhooks"): to the organization's other endpoints. */
export const endpointEvent = (
  orgId: string,
  type: "webhook_endpoint.disabled" | "webhook_endpoint.retries_exhausted",
  endpoint: { readonly id: string; readonly url: string; readonly description: string },
  at: number,
  data: Readonly<Record<string, unknown>>
): NewEvent => ({
  orgId,
  type,
  at,
  data: {
    endpoint: { id: endpoint.id, url: endpoint.url, description: endpoint.description },
    timestamp: iso(at),
    ...data
  },
  repoId: null,
  branch: null,
  orderingKey: `endpoint:${endpoint.id}`,
  exceptEndpointId: endpoint.id
})

export const DeliveryLive = Layer.scoped(
  Delivery,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const config = yield* EventsEnv
    const reader = yield* EventReader
    const log = yield* EventLog

    // what GET /metrics shows (registered by the metrics adapter): attempts by endpoint and outcome, messages given up,
    // endpoints disabled, and gauges read from the database every few seconds by the worker
    const counter = <K extends string>() => {
      const counts = new Map<string, Record<K, string> & { value: number }>()
      return {
        inc: (labels: Record<K, string>) => {
          const key = JSON.stringify(labels)
          const entry = counts.get(key) ?? { ...labels, value: 0 }
          entry.value++
          counts.set(key, entry)
        },
        values: () => [...counts.values()]
      }
    }
    const deliveries = counter<"endpoint" | "outcome">()
    const exhausted = counter<"endpoint">()
    const disabledCount = counter<"reason">()
    const gauges = { retryDepth: 0, oldestSeconds: 0, failing: 0 }
    const stats = (): DeliveryStats => ({
      attempts: deliveries.values(),
      retryQueueDepth: gauges.retryDepth,
      oldestUndeliveredSeconds: gauges.oldestSeconds,
      failingEndpoints: gauges.failing,
      retriesExhausted: exhausted.values(),
      endpointsDisabled: disabledCount.values()
    })

    /**
     * Takes what is due at `now`, leased for LEASE_MS: of each healthy endpoint and ordering key the head when due,
     * with the next `CHAIN - 1` messages of its key behind it; of each failing endpoint whose probe is due and that
     * has nothing in flight, one head (the one scheduled earliest: the probes go round the keys). A head's row lock
     * guards its key: the messages behind it are taken only with it. The lease is checked again under the row lock:
     * an instance whose snapshot predates another's claim sees the head free in `heads`, waits for that claim's lock,
     * and must then find it leased (PostgreSQL re-evaluates only the locking query's own conditions on the new row).
     */
    const claim = (now: number, limit: number) =>
      sql<Claimed>`
        with heads as (
          select distinct on (m.endpoint_id, m.ordering_key) m.endpoint_id, m.ordering_key, m.event_seq,
            m.next_attempt_at, m.locked_until
          from webhook_messages m where m.status = 'pending'
          order by m.endpoint_id, m.ordering_key, m.event_seq),
        picked as (
          (select h.endpoint_id, h.ordering_key, h.event_seq, ${CHAIN}::int as chain
           from heads h join webhook_endpoints w on w.id = h.endpoint_id
           where not w.disabled and w.failing_since is null and h.next_attempt_at <= ${iso(now)}
             and (h.locked_until is null or h.locked_until < ${iso(now)})
           order by h.next_attempt_at, h.event_seq
           limit ${limit})
          union all
          (select distinct on (h.endpoint_id) h.endpoint_id, h.ordering_key, h.event_seq, 1::int as chain
           from heads h join webhook_endpoints w on w.id = h.endpoint_id
           where not w.disabled and w.failing_since is not null
             and coalesce(w.probe_at, h.next_attempt_at) <= ${iso(now)}
             and not exists (select 1 from webhook_messages x where x.endpoint_id = h.endpoint_id
                               and x.status = 'pending' and x.locked_until >= ${iso(now)})
           order by h.endpoint_id, h.next_attempt_at, h.event_seq)),
        locked as (
          select m.endpoint_id, m.ordering_key, m.event_seq, p.chain from webhook_messages m
          join picked p on p.endpoint_id = m.endpoint_id and p.event_seq = m.event_seq
          where m.status = 'pending' and (m.locked_until is null or m.locked_until < ${iso(now)})
          for update of m skip locked),
        chained as (
          select l.endpoint_id, l.event_seq as head_seq, c.event_seq from locked l
          cross join lateral (
            select x.event_seq from webhook_messages x
            where x.endpoint_id = l.endpoint_id and x.ordering_key = l.ordering_key and x.status = 'pending'
              and x.event_seq >= l.event_seq
            order by x.event_seq limit l.chain) c)
        update webhook_messages m set locked_until = ${iso(now + LEASE_MS)}
        from chained c, event_log e, webhook_endpoints w
        where m.endpoint_id = c.endpoint_id and m.event_seq = c.event_seq
          and e.seq = m.event_seq and w.id = m.endpoint_id
        returning m.endpoint_id, m.event_seq, c.head_seq, m.attempts, m.first_attempt_at, e.id, e.type, e.body,
          w.url, w.description, w.secret, w.previous_secret, w.previous_secret_until, w.failing_since`

    /** The claimed messages as chains: per endpoint and head, in log order. */
    const chainsOf = (claimed: ReadonlyArray<Claimed>): ReadonlyArray<ReadonlyArray<Claimed>> => {
      const chains = new Map<string, Array<Claimed>>()
      for (const c of claimed) {
        const key = `${c.endpoint_id} ${c.head_seq}`
        const list = chains.get(key) ?? []
        list.push(c)
        chains.set(key, list)
      }
      return [...chains.values()].map((list) => list.sort((a, b) => Number(a.event_seq) - Number(b.event_seq)))
    }

    /**
     * When the next message can be claimed (ms), null when none is pending: a healthy endpoint's heads at their next
     * attempt or when their lease ends; a failing endpoint's probe, or the end of the lease of what it has in flight.
     */
    const nextDue = Effect.map(
      sql<{ due: Date | string | null }>`
        with heads as (
          select distinct on (m.endpoint_id, m.ordering_key) m.endpoint_id, m.next_attempt_at, m.locked_until
          from webhook_messages m where m.status = 'pending'
          order by m.endpoint_id, m.ordering_key, m.event_seq),
        healthy as (
          select min(greatest(h.next_attempt_at, coalesce(h.locked_until, h.next_attempt_at))) as due
          from heads h join webhook_endpoints w on w.id = h.endpoint_id and not w.disabled and w.failing_since is null),
        failing as (
          select min(greatest(coalesce(w.probe_at, h.first), coalesce(h.leased, h.first))) as due
          from webhook_endpoints w join (
            select endpoint_id, min(next_attempt_at) as first, max(locked_until) as leased
            from webhook_messages where status = 'pending' group by endpoint_id) h on h.endpoint_id = w.id
          where not w.disabled and w.failing_since is not null)
        select least((select due from healthy), (select due from failing)) as due`,
      (rows) => {
        const due = rows[0]?.due
        return due === null || due === undefined ? null : new Date(due).getTime()
      }
    )

    /** Reads at most RESPONSE_BODY_CAP bytes of an answer's body, as text; the rest is not read. */
    const bodyOf = async (response: Response): Promise<string | null> => {
      const reader = response.body?.getReader()
      if (reader === undefined) return null
      const chunks: Array<Uint8Array> = []
      let size = 0
      try {
        while (size < RESPONSE_BODY_CAP) {
          const { done, value } = await reader.read()
          if (done) break
          chunks.push(value)
          size += value.byteLength
        }
      } catch {
        // what came before the error is kept
      } finally {
        await reader.cancel().catch(() => {})
      }
      const all = new Uint8Array(Math.min(size, RESPONSE_BODY_CAP))
      let offset = 0
      for (const c of chunks) {
        const part = c.subarray(0, Math.max(0, all.length - offset))
        all.set(part, offset)
        offset += part.length
      }
      return new TextDecoder("utf-8", { fatal: false }).decode(all)
    }

    // a stopping worker takes nothing new (`closing`), and ends the attempts still in flight after its grace
    // (`stopping`: they are recorded as interrupted)
    let closing = false
    const stopping = new AbortController()

    const send = (msg: Claimed, now: number): Effect.Effect<Outcome> =>
      Effect.promise(async (): Promise<Outcome> => {
        const started = performance.now()
        const elapsed = () => Math.round(performance.now() - started)
        const url = new URL(msg.url)
        const secrets = [msg.secret]
        if (msg.previous_secret !== null && new Date(msg.previous_secret_until ?? 0).getTime() > now) {
          secrets.push(msg.previous_secret)
        }
        const headers = signedHeaders(secrets, messageId(msg.id), Math.floor(now / 1000), msg.body)
        const failed = (error: string, interrupted = false): Outcome => ({
          status: null,
          error,
          durationMs: elapsed(),
          retryAfter: null,
          requestHeaders: headers,
          responseBody: null,
          interrupted
        })
        if (!config.webhookAllowPrivate) {
          const refused = await refusedAddress(url)
          if (refused !== undefined) return failed(refused)
        }
        const timeout = AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)
        try {
          const response = await fetch(url, {
            method: "POST",
            headers,
            body: msg.body,
            redirect: "manual",
            signal: AbortSignal.any([timeout, stopping.signal])
          })
          const responseBody = await bodyOf(response)
          const ok = response.status >= 200 && response.status < 300
          return {
            status: response.status,
            error: ok
              ? null
              : response.status >= 300 && response.status < 400
                ? "redirects are not followed"
                : `the receiver answered ${response.status}`,
            durationMs: elapsed(),
            retryAfter: response.headers.get("retry-after"),
            requestHeaders: headers,
            responseBody,
            interrupted: false
          }
        } catch (e) {
          if (stopping.signal.aborted && !timeout.aborted) return failed("the server stopped during the attempt", true)
          const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
          return failed(timedOut ? `no answer within ${ATTEMPT_TIMEOUT_MS / 1000} s` : String(e))
        }
      })

    const isSuccess = (out: Outcome) => out.status !== null && out.status >= 200 && out.status < 300

    /**
     * Sends a chain's messages one after another, each handed to `done` as it ends; stops at the first that is not
     * delivered (the rest are handed over as skipped: their lease is given back), when the worker stops, or when
     * the chain's lease is running out.
     */
    const sendChain = (chain: ReadonlyArray<Claimed>, claimedAt: number, done: (d: Done) => Effect.Effect<void>) =>
      Effect.gen(function* () {
        let i = 0
        for (; i < chain.length; i++) {
          const msg = chain[i] as Claimed
          const started = yield* Clock.currentTimeMillis
          if (i > 0 && (closing || started - claimedAt > LEASE_MS - ATTEMPT_TIMEOUT_MS - 5_000)) break
          const out = yield* send(msg, started)
          yield* done({ _tag: "Attempt", msg, out, started, at: yield* Clock.currentTimeMillis })
          if (!isSuccess(out)) {
            i++
            break
          }
        }
        for (; i < chain.length; i++) yield* done({ _tag: "Skipped", msg: chain[i] as Claimed })
      })

    /**
     * Records finished attempts, many in one transaction of a fixed number of statements (with PGlite every
     * transaction takes turns with the queue's runners): the attempts, the messages' new state, the endpoints' health
     * (and, for an endpoint that answers again, the messages that failed during its outage: due at once), and the
     * operational events; 410 and five days of failures disable an endpoint, with a log line.
     */
    const record = (batch: ReadonlyArray<Done>) =>
      Effect.gen(function* () {
        if (batch.length === 0) return
        const attempts: Array<Record<string, unknown>> = []
        const messages: Array<Record<string, unknown>> = []
        const skipped: Array<Record<string, unknown>> = []
        // per endpoint: its latest success; its first failure that the endpoint may be to blame for, with the
        // longest Retry-After
        const successes = new Map<string, number>()
        const failures = new Map<string, { started: number; at: number; retryAfter: number }>()
        const disabled = new Map<string, { reason: string; msg: Claimed; at: number }>()
        const givenUp: Array<{ msg: Claimed; out: Outcome; at: number; count: number }> = []
        for (const d of batch) {
          if (d._tag === "Attempt" && isSuccess(d.out)) {
            successes.set(d.msg.endpoint_id, Math.max(successes.get(d.msg.endpoint_id) ?? 0, d.at))
          }
        }
        for (const d of batch) {
          if (d._tag === "Skipped") {
            skipped.push({ endpoint_id: d.msg.endpoint_id, event_seq: d.msg.event_seq })
            continue
          }
          const { msg, out, at, started } = d
          const when = iso(at)
          const count = msg.attempts + 1
          const first = ms(msg.first_attempt_at) ?? started
          attempts.push({
            endpoint_id: msg.endpoint_id,
            event_seq: msg.event_seq,
            at: when,
            http_status: out.status,
            duration_ms: out.durationMs,
            error: out.error,
            request_headers: JSON.stringify(out.requestHeaders),
            response_body: out.responseBody,
            interrupted: out.interrupted
          })
          const base = {
            endpoint_id: msg.endpoint_id,
            event_seq: msg.event_seq,
            attempts: count,
            first_attempt_at: iso(first),
            last_attempt_at: when
          }
          if (out.interrupted) {
            // the server stopped: due again at once (another instance, or this one when it is back)
            deliveries.inc({ endpoint: msg.endpoint_id, outcome: "interrupted" })
            messages.push({ ...base, status: "pending", next_attempt_at: when, ended_at: null })
            continue
          }
          if (isSuccess(out)) {
            deliveries.inc({ endpoint: msg.endpoint_id, outcome: "delivered" })
            messages.push({ ...base, status: "delivered", next_attempt_at: null, ended_at: when })
            continue
          }
          if (out.status === 410) {
            deliveries.inc({ endpoint: msg.endpoint_id, outcome: "gone" })
            messages.push({ ...base, status: "failed", next_attempt_at: null, ended_at: when })
            disabled.set(msg.endpoint_id, { reason: "the receiver answered 410 Gone", msg, at })
            continue
          }
          deliveries.inc({ endpoint: msg.endpoint_id, outcome: "failed" })
          const after = out.status === 429 || out.status === 503 ? retryAfterMs(out.retryAfter, at) : undefined
          if (retriesExhausted(count, at - first)) {
            messages.push({ ...base, status: "failed", next_attempt_at: null, ended_at: when })
            givenUp.push({ msg, out, at, count })
          } else {
            const wait = after ?? retryDelay(count, Math.random())
            messages.push({ ...base, status: "pending", next_attempt_at: iso(at + wait), ended_at: null })
          }
          // the endpoint's failure unless it delivered another message meanwhile (then the message's own)
          const success = successes.get(msg.endpoint_id)
          if (success !== undefined && success >= started) continue
          const known = failures.get(msg.endpoint_id)
          failures.set(msg.endpoint_id, {
            started: Math.min(known?.started ?? started, started),
            at: Math.max(known?.at ?? at, at),
            retryAfter: Math.max(known?.retryAfter ?? 0, after ?? 0)
          })
          const since = ms(msg.failing_since)
          if (since !== null && at - since >= DISABLE_AFTER_MS && !disabled.has(msg.endpoint_id)) {
            disabled.set(msg.endpoint_id, { reason: "every delivery failed for 5 days", msg, at })
          }
        }
        const healthy = [...successes].map(([id, at]) => ({ id, at: iso(at) }))
        // (an endpoint that failed after its last success in the batch is failing again)
        const failing = [...failures].map(([id, f]) => ({
          id,
          started: iso(f.started),
          at: iso(f.at),
          min_s: PROBE_MIN_MS / 1000,
          max_s: PROBE_MAX_MS / 1000,
          after_s: f.retryAfter / 1000
        }))
        const events: Array<NewEvent> = []
        const newlyDisabled = yield* sql.withTransaction(
          Effect.gen(function* () {
            // the attempts of messages that still exist: an endpoint deleted while its messages were being sent
            // took them with it (its delete waits for these rows, or came first and they are skipped)
            if (attempts.length > 0) {
              yield* sql`insert into webhook_attempts (endpoint_id, event_seq, at, http_status, duration_ms, error,
                           request_headers, response_body, interrupted)
                         select v.endpoint_id, v.event_seq, v.at, v.http_status, v.duration_ms, v.error,
                           v.request_headers, v.response_body, v.interrupted
                         from jsonb_to_recordset(${JSON.stringify(attempts)}::jsonb) as v(endpoint_id uuid,
                           event_seq bigint, at timestamptz, http_status int, duration_ms int, error text,
                           request_headers text, response_body text, interrupted boolean)
                         join webhook_messages m on m.endpoint_id = v.endpoint_id and m.event_seq = v.event_seq
                         for key share of m`
              yield* sql`update webhook_messages m set status = v.status, attempts = v.attempts, locked_until = null,
                           next_attempt_at = coalesce(v.next_attempt_at, m.next_attempt_at), ended_at = v.ended_at,
                           first_attempt_at = coalesce(m.first_attempt_at, v.first_attempt_at),
                           last_attempt_at = v.last_attempt_at
                         from jsonb_to_recordset(${JSON.stringify(messages)}::jsonb) as v(endpoint_id uuid,
                           event_seq bigint, attempts int, status text, next_attempt_at timestamptz, ended_at timestamptz,
                           first_attempt_at timestamptz, last_attempt_at timestamptz)
                         where m.endpoint_id = v.endpoint_id and m.event_seq = v.event_seq`
            }
            if (skipped.length > 0) {
              yield* sql`update webhook_messages m set locked_until = null
                         from jsonb_to_recordset(${JSON.stringify(skipped)}::jsonb) as v(endpoint_id uuid, event_seq bigint)
                         where m.endpoint_id = v.endpoint_id and m.event_seq = v.event_seq and m.status = 'pending'`
            }
            if (healthy.length > 0) {
              // an endpoint that answers again: what failed during its outage is due now, and its backlog drains
              yield* sql`update webhook_messages m set next_attempt_at = v.at
                         from jsonb_to_recordset(${JSON.stringify(healthy)}::jsonb) as v(id uuid, at timestamptz),
                           webhook_endpoints w
                         where w.id = v.id and w.failing_since is not null and m.endpoint_id = v.id
                           and m.status = 'pending' and m.next_attempt_at > v.at
                           and m.last_attempt_at >= w.failing_since`
              yield* sql`update webhook_endpoints w set failing_since = null, probe_at = null,
                           last_success_at = greatest(w.last_success_at, v.at)
                         from jsonb_to_recordset(${JSON.stringify(healthy)}::jsonb) as v(id uuid, at timestamptz)
                         where w.id = v.id`
            }
            if (failing.length > 0) {
              // failing (again): the next probe a tenth of the outage away (5 s to 5 min), never before a Retry-After;
              // unless a delivery to it was recorded since the attempt began (the failure was the message's own)
              yield* sql`update webhook_endpoints w set
                           failing_since = coalesce(w.failing_since, v.at),
                           probe_at = v.at + make_interval(secs => greatest(v.after_s, least(v.max_s, greatest(v.min_s,
                             extract(epoch from (v.at - coalesce(w.failing_since, v.at))) / 10))))
                         from jsonb_to_recordset(${JSON.stringify(failing)}::jsonb) as v(id uuid, started timestamptz,
                           at timestamptz, min_s float8, max_s float8, after_s float8)
                         where w.id = v.id and (w.last_success_at is null or w.last_success_at < v.started)`
            }
            const gone: Array<string> = []
            for (const [endpointId, { reason, at }] of disabled) {
              const rows = yield* sql`update webhook_endpoints set disabled = true, disabled_reason = ${reason},
                                        updated_at = ${iso(at)}
                                      where id = ${endpointId} and not disabled returning id`
              if (rows.length > 0) gone.push(endpointId)
            }
            // the operational events, to the organization's other endpoints (and the live stream)
            const orgs = yield* orgsOf([...new Set([...gone, ...givenUp.map((g) => g.msg.endpoint_id)])])
            for (const id of gone) {
              const d = disabled.get(id)
              const orgId = orgs.get(id)
              if (d === undefined || orgId === undefined) continue
              events.push(
                endpointEvent(orgId, "webhook_endpoint.disabled", endpointOf(d.msg), d.at, {
                  reason: d.reason,
                  disabled_by: "greenline"
                })
              )
            }
            for (const g of givenUp) {
              const orgId = orgs.get(g.msg.endpoint_id)
              if (orgId === undefined) continue
              events.push(
                endpointEvent(orgId, "webhook_endpoint.retries_exhausted", endpointOf(g.msg), g.at, {
                  message: { id: messageId(g.msg.id), event_type: g.msg.type },
                  attempts: g.count,
                  last_attempt: { at: iso(g.at), status: g.out.status, error: g.out.error }
                })
              )
            }
            yield* log.append(events)
            return gone
          })
        )
        for (const g of givenUp) exhausted.inc({ endpoint: g.msg.endpoint_id })
        for (const endpointId of newlyDisabled) {
          const reason = disabled.get(endpointId)?.reason ?? ""
          disabledCount.inc({ reason: reason.includes("410") ? "gone" : "failing" })
          yield* Effect.logWarning(`webhook endpoint ${endpointId} disabled: ${reason}`).pipe(
            Effect.annotateLogs({ endpointId, reason })
          )
        }
      })

    const endpointOf = (msg: Claimed) => ({ id: msg.endpoint_id, url: msg.url, description: msg.description })
    const orgsOf = (endpointIds: ReadonlyArray<string>) =>
      endpointIds.length === 0
        ? Effect.succeed(new Map<string, string>())
        : Effect.map(
            sql<{ id: string; org_id: string }>`
              select id, org_id from webhook_endpoints where id = any(${`{${endpointIds.join(",")}}`}::uuid[])`,
            (rows) => new Map(rows.map((r) => [r.id, r.org_id]))
          )

    const deliverDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* claim(now, MAX_IN_FLIGHT)
      const done: Array<Done> = []
      yield* Effect.forEach(
        chainsOf(claimed),
        (chain) => sendChain(chain, now, (d) => Effect.sync(() => done.push(d))),
        { concurrency: "unbounded", discard: true }
      )
      yield* record(done)
      return done.filter((d) => d._tag === "Attempt").length
    })

    const refreshGauges = Effect.gen(function* () {
      const rows = yield* sql<{ retrying: number; oldest: Date | string | null; failing: number }>`
        select count(*) filter (where attempts > 0)::int as retrying, min(created_at) as oldest,
          (select count(*)::int from webhook_endpoints where failing_since is not null and not disabled) as failing
        from webhook_messages where status = 'pending'`
      const row = rows[0]
      gauges.retryDepth = row?.retrying ?? 0
      gauges.oldestSeconds = row?.oldest == null ? 0 : Math.max(0, (Date.now() - new Date(row.oldest).getTime()) / 1000)
      gauges.failing = row?.failing ?? 0
    })

    /** Bounded records: each message keeps its latest ATTEMPTS_KEPT attempts (the rest go with the log's retention). */
    const trimAttempts = sql`
      delete from webhook_attempts a where a.id in (
        select id from (
          select x.id, row_number() over (partition by x.endpoint_id, x.event_seq order by x.id desc) as n
          from webhook_attempts x join webhook_messages m
            on m.endpoint_id = x.endpoint_id and m.event_seq = x.event_seq and m.attempts > ${ATTEMPTS_KEPT}) r
        where r.n > ${ATTEMPTS_KEPT})`

    if (config.webhookWorker) {
      // How long a wake-up and a finished attempt wait for company, so that one claim and one transaction serve
      // many messages: with PGlite every statement takes turns on its one connection with the queue's runners.
      const gather = Duration.millis(db.kind === "pglite" ? 250 : 20)
      const wake = yield* Queue.sliding<void>(1)
      const finished = yield* Queue.unbounded<Done>()
      const sending = yield* FiberSet.make()
      // chains being sent, and finished attempts not recorded yet
      let inFlight = 0
      let unrecorded = 0
      // the wait after a pass: a second while messages are sent; when none was due, until the next one is (a new
      // message, a replay and a finished attempt wake the loop sooner), at most IDLE_WAIT
      const pass = Effect.gen(function* () {
        const free = MAX_IN_FLIGHT - inFlight
        if (free <= 0 || closing) return BUSY_WAIT
        const now = yield* Clock.currentTimeMillis
        const claimed = yield* claim(now, free)
        if (claimed.length === 0) {
          const due = yield* nextDue
          return due === null
            ? IDLE_WAIT
            : Duration.millis(Math.min(Math.max(due - now, 0), Duration.toMillis(IDLE_WAIT)))
        }
        const chains = chainsOf(claimed)
        inFlight += chains.length
        // each chain in a fiber of its own: a slow receiver holds its own keys, not the loop
        for (const chain of chains) {
          yield* FiberSet.run(
            sending,
            sendChain(chain, now, (d) =>
              Effect.zipRight(
                Effect.sync(() => unrecorded++),
                Queue.offer(finished, d)
              )
            ).pipe(
              Effect.catchAllCause((cause) => Effect.logError("webhook delivery failed", cause)),
              Effect.ensuring(Effect.sync(() => inFlight--))
            )
          )
        }
        return BUSY_WAIT
      })
      // what finished is recorded in batches; then the loop looks for what is due next (the next of each order)
      const recorder = Effect.gen(function* () {
        const first = yield* Queue.takeBetween(finished, 1, 1024)
        // a moment for the attempts sent together to finish together: one transaction and one claim for them all
        yield* Effect.sleep(gather)
        const batch = [...first, ...(yield* Queue.takeUpTo(finished, 1024))]
        // a record begun is finished (a stop waits for it): its attempts happened
        yield* Effect.uninterruptible(
          record(batch).pipe(
            Effect.catchAllCause((cause) => Effect.logError("recording webhook attempts failed", cause)),
            Effect.ensuring(Effect.sync(() => (unrecorded -= batch.length)))
          )
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
      // retention: the log and what hangs off it, older than EVENT_RETENTION_DAYS; each message's latest attempts
      yield* Effect.forkScoped(
        Effect.forever(
          reader.prune(config.eventRetentionDays).pipe(
            Effect.repeat({ while: (n) => n > 0 }),
            Effect.zipRight(trimAttempts),
            Effect.catchAllCause((cause) => Effect.logError("event log retention failed", cause)),
            Effect.zipRight(Effect.sleep(Duration.minutes(10)))
          )
        )
      )
      // A stop (SIGTERM): no new claims; the attempts in flight get STOP_GRACE_MS to finish, then are ended and
      // recorded as interrupted, their messages due at once (not after their lease); everything that finished is
      // recorded before the loop's fibers go. (Finalizers run last added first: this one before those fibers end.)
      const until = (done: () => boolean, within: number) =>
        Effect.gen(function* () {
          const deadline = Date.now() + within
          while (!done() && Date.now() < deadline) yield* Effect.sleep(Duration.millis(20))
        })
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          closing = true
          yield* until(() => inFlight === 0, STOP_GRACE_MS)
          stopping.abort()
          yield* until(() => inFlight === 0 && unrecorded === 0, 10_000)
        }).pipe(Effect.withClock(Clock.make()))
      )
    }

    return { deliverDue, stats }
  })
)
