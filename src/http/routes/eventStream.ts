import { Effect, Option, Runtime } from "effect"
import {
  EventReader,
  eventIdOf,
  type LogPosition,
  type LogStart,
  messageId,
  type StreamFilter
} from "../../events/EventLogLive.ts"
import { SETTLE_MS, StreamWakeups } from "../../events/StreamWakeups.ts"
import { EVENT_TYPES } from "../../kernel/EventLog.ts"
import { type Organization, Tenancy } from "../../tenancy/Tenancy.ts"
import { ApiError, errorResponse, invalidRequest, notFound } from "../errors.ts"
import { HttpEnv } from "../HttpEnv.ts"

/**
 * `GET /v1/events/stream`: the event log as Server-Sent Events (`id:` the message id, `event:` the type, `data:` the
 * message body), from now or after `Last-Event-ID` (header, or `lastEventId` in the query). Filters in the query:
 * `repo=owner/name` with `repoHost`, `targetBranch`, `eventTypes=a,b`. A comment line every 15 s keeps proxies
 * from closing it. At most EVENT_STREAMS_PER_ORG streams per organization and instance.
 *
 * The stream reads the log (settled rows only, EventLogLive.ts): at once, as fast as the client reads while there is
 * more, and when idle only when woken by an append of its organization on any instance (events/StreamWakeups.ts),
 * with a fallback read every EVENT_STREAM_POLL_MS.
 */

export const STREAM_PATH = "/v1/events/stream"
const HEARTBEAT_MS = 15_000
const BATCH = 200

const sse = (id: string, type: string, body: string) => `id: ${id}\nevent: ${type}\ndata: ${body}\n\n`

export const makeEventStream = Effect.gen(function* () {
  const reader = yield* EventReader
  const wakeups = yield* StreamWakeups
  const tenancy = yield* Tenancy
  const config = yield* HttpEnv
  const runtime = yield* Effect.runtime<never>()
  const run = Runtime.runPromise(runtime)
  const open = new Map<string, number>()
  const streams = new Set<() => void>()
  const subscribers = () => {
    let n = 0
    for (const v of open.values()) n += v
    return n
  }

  const filterOf = (org: Organization, url: URL) =>
    Effect.gen(function* () {
      const q = url.searchParams
      const repo = q.get("repo")
      const repoHost = q.get("repoHost")
      let repoIds: ReadonlyArray<string> | undefined
      if (repo !== null || repoHost !== null) {
        const [owner, name, ...rest] = (repo ?? "").split("/")
        if (repoHost === null || repoHost === "" || !owner || !name || rest.length > 0) {
          return yield* invalidRequest("repo must be owner/name, given with repoHost", [
            { path: repo === null ? "repo" : "repoHost", message: "repo (owner/name) and repoHost go together" }
          ])
        }
        const found = yield* Effect.orDie(tenancy.findRepo(org, { host: repoHost, owner, name }))
        if (Option.isNone(found)) return yield* notFound("NOT_FOUND", `repository ${repoHost}/${repo} not found`)
        repoIds = [found.value.id]
      }
      const branch = q.get("targetBranch") ?? undefined
      const typesText = q.get("eventTypes")
      let types: ReadonlyArray<string> | undefined
      if (typesText !== null) {
        types = typesText.split(",").map((t) => t.trim().toLowerCase())
        const unknown = types.find((t) => !(EVENT_TYPES as ReadonlyArray<string>).includes(t))
        if (unknown !== undefined || types.length === 0) {
          return yield* invalidRequest("unknown event type", [
            { path: "eventTypes", message: `must be a comma-separated list of ${EVENT_TYPES.join(", ")}` }
          ])
        }
      }
      return { repoIds, branch: branch === "" ? undefined : branch, types } satisfies StreamFilter
    })

  const startOf = (org: Organization, request: Request, url: URL) =>
    Effect.gen(function* () {
      const last = request.headers.get("last-event-id") ?? url.searchParams.get("lastEventId")
      if (last === null || last.trim() === "") return yield* Effect.orDie(reader.head(org.id))
      if (eventIdOf(last) === undefined) {
        return yield* invalidRequest("Last-Event-ID is not a message id", [
          { path: "Last-Event-ID", message: "must be an id the stream sent (msg_...)" }
        ])
      }
      const at = yield* Effect.orDie(reader.positionOf(org.id, last))
      // an id the log no longer holds (past retention): from the oldest event kept, so nothing is skipped
      return { position: at ?? { xid: "0", seq: 0 }, committed: new Set<string>() } satisfies LogStart
    })

  const handle = async (request: Request, url: URL, org: Organization): Promise<Response> => {
    const prepared = await run(Effect.either(Effect.all([filterOf(org, url), startOf(org, request, url)])))
    if (prepared._tag === "Left") return errorResponse(prepared.left)
    const [filter, start] = prepared.right
    const count = open.get(org.id) ?? 0
    if (count >= config.eventStreamsPerOrg) {
      return errorResponse(
        new ApiError({
          status: 429,
          code: "RATE_LIMITED",
          message: `at most ${config.eventStreamsPerOrg} event streams per organization`,
          headers: { "retry-after": "30" }
        })
      )
    }
    open.set(org.id, count + 1)
    let closed = false
    let unsubscribe = () => {}
    const stopped = new AbortController()
    let ending: ReadableStreamDefaultController<Uint8Array> | undefined
    const close = () => {
      if (closed) return
      closed = true
      streams.delete(end)
      stopped.abort()
      unsubscribe()
      const n = (open.get(org.id) ?? 1) - 1
      if (n <= 0) open.delete(org.id)
      else open.set(org.id, n)
    }
    /** ends the answer (the server stops) */
    const end = () => {
      close()
      try {
        ending?.close()
      } catch {}
    }
    streams.add(end)
    // from here on, appends of the organization wake this instance (before the first read: nothing falls between)
    unsubscribe = await wakeups.subscribe(org.id)
    let position: LogPosition = start.position
    // events committed before a new stream began that sort after its start (their transaction ended while an older
    // one ran): passed over once, never sent
    const committedBefore = new Set(start.committed)
    const encoder = new TextEncoder()
    request.signal.addEventListener("abort", close)
    const read = <A>(effect: Effect.Effect<A, unknown>) => run(Effect.orDie(effect)).catch(() => undefined)
    // read at once; then when woken, while woken events wait to be settled, and at the fallback poll; a heartbeat
    // does not read
    let mustRead = true
    // the first read settles too: what it finds committed but not yet readable (an older transaction still runs) may
    // never be followed by a wake-up (it was appended before this stream subscribed)
    let settling = true
    let settleStep = 0
    let seen = wakeups.version(org.id)
    let nextPoll = Date.now() + config.eventStreamPollMs
    let nextHeartbeat = Date.now() + HEARTBEAT_MS
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        ending = controller
        controller.enqueue(encoder.encode(`retry: 2000\n: connected\n\n`))
      },
      pull: async (controller) => {
        while (!closed) {
          let settleWait = Number.POSITIVE_INFINITY
          if (mustRead) {
            // a wake-up from now on is seen by the wait below, even if it comes while this reads
            seen = wakeups.version(org.id)
            const events = await read(reader.after(org.id, position, filter, BATCH))
            if (events === undefined) break
            nextPoll = Date.now() + config.eventStreamPollMs
            if (events.length > 0) {
              const last = events[events.length - 1]
              if (last !== undefined) position = { xid: last.xid, seq: last.seq }
              const fresh = events.filter((e) => !committedBefore.delete(e.id))
              if (fresh.length === 0) continue
              controller.enqueue(encoder.encode(fresh.map((e) => sse(messageId(e.id), e.type, e.body)).join("")))
              // there may be more: the next pull reads on
              return
            }
            mustRead = false
            if (settling) {
              const unsettled = await read(reader.unsettled(org.id, position, filter))
              if (unsettled === undefined) break
              settling = unsettled
              if (unsettled) settleWait = SETTLE_MS[Math.min(settleStep++, SETTLE_MS.length - 1)] ?? 1000
            }
          }
          const now = Date.now()
          if (now >= nextHeartbeat) {
            nextHeartbeat = now + HEARTBEAT_MS
            controller.enqueue(encoder.encode(": heartbeat\n\n"))
            return
          }
          const due = Math.min(nextPoll - now, nextHeartbeat - now, settleWait)
          if (await wakeups.wait(org.id, Math.max(0, due), seen, stopped.signal)) {
            settling = true
            settleStep = 0
            mustRead = true
          } else if (due === settleWait || Date.now() >= nextPoll) mustRead = true
        }
        close()
        try {
          controller.close()
        } catch {}
      },
      cancel: close
    })
    return new Response(body, {
      headers: {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        connection: "keep-alive",
        "x-accel-buffering": "no"
      }
    })
  }
  /** Ends every open stream: a stopping server does not wait for its clients to hang up (they reconnect elsewhere). */
  const closeAll = () => {
    for (const end of [...streams]) end()
  }
  /** `subscribers`: streams open on this instance now (GET /metrics). */
  return { handle, subscribers, closeAll }
})
