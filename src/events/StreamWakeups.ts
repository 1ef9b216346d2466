import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Duration, Effect, Layer, Runtime, Stream } from "effect"
import { Database, RESUMED } from "../kernel/Database.ts"

/**
 * Wake-ups of the live streams (GET /v1/events/stream) when their organization's log grows, instead of each stream
 * polling the log.
 *
 * - An instance with open streams of an organization says so in `event_stream_presence` (a row per organization and
 *   instance, renewed every 30 s, valid 90 s, deleted when its last stream closes).
 * - `append` (EventLogLive.ts) looks at that table in its one statement and, for an organization someone streams,
 *   sends `NOTIFY greenline_events, '<org id>'` in the appending transaction: PostgreSQL delivers it at commit to
 *   every instance (PGlite: in-process, and its one connection makes the stream's read wait for the commit). So an
 *   organization nobody streams costs no NOTIFY (it takes a global lock at commit).
 * - Each instance LISTENs once and wakes its streams of that organization.
 * - A stream still reads the log every EVENT_STREAM_POLL_MS (5 s) without a wake-up: the bound on the delay of an
 *   event whose wake-up was missed (a stream that opened while the event's statement ran, a LISTEN connection that
 *   reconnected). A wake-up whose read finds nothing new while committed events wait to be settled (an older
 *   transaction, of any database of the cluster, still runs) is followed by reads soon after (SETTLE_MS), until they
 *   are.
 */

export const EVENTS_CHANNEL = "greenline_events"

/**
 * After a wake-up, while the log holds committed events of the organization that are not settled yet (an older
 * transaction anywhere in the cluster is still running), the stream reads again after these waits (ms; the last
 * repeats).
 */
export const SETTLE_MS: ReadonlyArray<number> = [20, 50, 100, 250, 500, 1000]

export interface StreamWakeupsShape {
  /**
   * Resolves `true` when an event of the organization may have been appended (here or on another instance), or
   * `false` after `ms` or when `signal` aborts; at once `true` when the organization was woken since `seen` (its
   * `version` before the caller's last read).
   */
  readonly wait: (orgId: string, ms: number, seen: number, signal?: AbortSignal) => Promise<boolean>
  /**
   * How many wake-ups of the organization this instance has had: a stream takes it before it reads and hands it to
   * `wait`, which answers at once when a wake-up came in between (it would be lost otherwise).
   */
  readonly version: (orgId: string) => number
  /** This instance streams the organization's events from now on (recorded before it resolves); call the answer to stop. */
  readonly subscribe: (orgId: string) => Promise<() => void>
  /** Wakes this instance's streams of an organization (what a notification does). */
  readonly wake: (orgId: string) => void
}

export class StreamWakeups extends Context.Tag("greenline/StreamWakeups")<StreamWakeups, StreamWakeupsShape>() {}

const PRESENCE_RENEW = Duration.seconds(30)
const PRESENCE_VALID_SECONDS = 90

export const StreamWakeupsLive = Layer.scoped(
  StreamWakeups,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromise(runtime)
    const instance = crypto.randomUUID()
    const waiters = new Map<string, Set<() => void>>()
    const streams = new Map<string, number>()

    const versions = new Map<string, number>()
    const version = (orgId: string) => versions.get(orgId) ?? 0
    const wake = (orgId: string) => {
      versions.set(orgId, version(orgId) + 1)
      const set = waiters.get(orgId)
      if (set === undefined) return
      waiters.delete(orgId)
      for (const w of set) w()
    }

    const present = (orgIds: ReadonlyArray<string>) =>
      orgIds.length === 0
        ? Effect.void
        : sql`
            insert into event_stream_presence (org_id, instance, until)
            select o, ${instance}, now() + make_interval(secs => ${PRESENCE_VALID_SECONDS})
            from unnest(${`{${orgIds.join(",")}}`}::uuid[]) as o
            on conflict (org_id, instance) do update set until = excluded.until`.pipe(Effect.asVoid)
    const absent = (orgId: string) =>
      Effect.suspend(() =>
        streams.has(orgId)
          ? Effect.void
          : sql`delete from event_stream_presence where org_id = ${orgId} and instance = ${instance}`.pipe(
              Effect.asVoid
            )
      )

    yield* Effect.forkScoped(
      db.listen(EVENTS_CHANNEL).pipe(
        Stream.runForEach((orgId) =>
          // listening again after the database came back: every stream looks (a wake-up may have been missed)
          Effect.sync(() => (orgId === RESUMED ? [...waiters.keys()].forEach(wake) : wake(orgId)))
        )
      )
    )
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.suspend(() => present([...streams.keys()])).pipe(
          Effect.catchAllCause((cause) => Effect.logError("renewing the event streams' presence failed", cause)),
          Effect.zipRight(Effect.sleep(PRESENCE_RENEW))
        )
      )
    )
    // this instance's rows go when it stops (otherwise they expire)
    yield* Effect.addFinalizer(() =>
      sql`delete from event_stream_presence where instance = ${instance}`.pipe(Effect.ignore)
    )

    const wait: StreamWakeupsShape["wait"] = (orgId, ms, seen, signal) =>
      new Promise<boolean>((resolve) => {
        if (signal?.aborted === true) return resolve(false)
        if (version(orgId) !== seen) return resolve(true)
        let set = waiters.get(orgId)
        if (set === undefined) {
          set = new Set()
          waiters.set(orgId, set)
        }
        const done = (woken: boolean) => {
          clearTimeout(timer)
          signal?.removeEventListener("abort", aborted)
          waiters.get(orgId)?.delete(waiter)
          resolve(woken)
        }
        const waiter = () => done(true)
        const aborted = () => done(false)
        const timer = setTimeout(aborted, ms)
        signal?.addEventListener("abort", aborted)
        set.add(waiter)
      })

    const subscribe: StreamWakeupsShape["subscribe"] = async (orgId) => {
      const n = streams.get(orgId) ?? 0
      streams.set(orgId, n + 1)
      if (n === 0) await run(present([orgId]).pipe(Effect.catchAllCause(() => Effect.void)))
      let released = false
      return () => {
        if (released) return
        released = true
        const left = (streams.get(orgId) ?? 1) - 1
        if (left > 0) {
          streams.set(orgId, left)
          return
        }
        streams.delete(orgId)
        void run(absent(orgId).pipe(Effect.catchAllCause(() => Effect.void)))
      }
    }

    return { wait, version, subscribe, wake }
  })
)
