/**
 * The live stream's resume (issue #34, defect 1): resuming after event k yields exactly the events k+1… that match
 * the stream's filters, in the log's order, for every k, with filters on and off, on both databases, across
 * transaction ids of different lengths (999 → 1000). The log's order is (xid, seq); an xid as text sorts "1000"
 * before "999", which is what the stream did.
 *
 * - A property test over logs of events written with chosen transaction ids on both sides of 9→10, 99→100,
 *   999→1000 and 9999→10000 (rows of `event_log` with an explicit `xid`, below every running transaction's, so
 *   settled): every resume position, through the stream and through the reader page by page.
 * - Events written through the API by real transactions whose ids cross a power of ten: the transaction id counter
 *   is advanced to just below it first (with PGlite always; with PostgreSQL, whose counter is the whole cluster's,
 *   when the next power of ten is within reach: the property test covers the ordering either way).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import fc from "fast-check"
import { EventReader, type LogPosition, messageId, type StreamFilter } from "../../src/events/EventLogLive.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"
import { openStream } from "../support/sse.ts"

const NO_POLL_MS = 600_000
const TYPES = ["queue.updated", "queue.state_changed"] as const
/** transaction ids on both sides of each length boundary, all below the counter once it passed 10,100 */
const XIDS = [10, 100, 1000, 10_000].flatMap((b) => [b - 2, b - 1, b, b + 1])
/** the PostgreSQL counter is advanced to the next power of ten only when it is this close (3 µs per id) */
const PG_REACH = 2_000_000

interface Logged {
  readonly id: string
  readonly xid: bigint
  readonly seq: number
  readonly type: string
  readonly repo: number
  readonly sentinel: boolean
}

const inOrder = (events: ReadonlyArray<Logged>) =>
  [...events].sort((a, b) => (a.xid === b.xid ? a.seq - b.seq : a.xid < b.xid ? -1 : 1))

interface Filter {
  readonly types?: ReadonlyArray<string>
  readonly repo?: number
}
const FILTERS: ReadonlyArray<Filter> = [{}, { types: ["queue.state_changed"] }, { repo: 0 }, { types: TYPES, repo: 1 }]
const matches = (f: Filter, e: Logged) =>
  (f.types === undefined || f.types.includes(e.type)) && (f.repo === undefined || f.repo === e.repo)

/** Advances the transaction id counter until the next id is at least `target` (subtransactions that each write). */
const advanceXid = (server: TestServer, target: bigint) =>
  server.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      for (;;) {
        const [row] = yield* sql<{ xid: string }>`select pg_current_xact_id()::text as xid`
        const left = target - BigInt(row?.xid ?? "0")
        if (left <= 0n) return
        const n = Number(left > 50_000n ? 50_000n : left)
        yield* sql.unsafe(`do $$ begin
          create temp table if not exists xid_burn (x int);
          for i in 1..${n} loop begin insert into xid_burn values (i); exception when others then null; end; end loop;
          truncate xid_burn; end $$`)
      }
    })
  )

const currentXid = (server: TestServer) =>
  server.run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(sql<{ xid: string }>`select pg_current_xact_id()::text as xid`, (rows) => BigInt(rows[0]?.xid ?? "0"))
    )
  )

for (const db of databases) {
  describe(`live stream resume over every position (${db})`, () => {
    let server: TestServer
    let orgs = 0
    beforeAll(async () => {
      server = await startTestServer({
        db,
        config: { webhookWorker: false, eventStreamsPerOrg: 1000, eventStreamPollMs: NO_POLL_MS }
      })
      // the chosen transaction ids must be below every running transaction's
      await advanceXid(server, 10_100n)
    })
    afterAll(async () => {
      await server.close()
    })

    /** An organization of its own (its log holds only the test's events), a token, and two repositories. */
    const newOrg = async () => {
      const slug = `resume-${db}-${++orgs}-${Math.random().toString(36).slice(2, 8)}`
      const made = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          const org = yield* tenancy.createOrg(slug, true)
          const repos = []
          for (const name of ["zero", "one"]) {
            const repo = yield* tenancy.findRepo(org, { host: "local", owner: slug, name }, { claim: true })
            repos.push(Option.getOrThrow(repo).id)
          }
          const { token } = yield* tenancy.createToken(slug, "resume", "maintain")
          return { org, repos, token }
        })
      )
      return { ...made, slug, client: { url: server.url, token: made.token } }
    }
    type Org = Awaited<ReturnType<typeof newOrg>>

    const queryOf = (org: Org, f: Filter) => {
      const q: Array<string> = []
      if (f.repo !== undefined) q.push(`repo=${org.slug}/${f.repo === 0 ? "zero" : "one"}`, "repoHost=local")
      if (f.types !== undefined) q.push(`eventTypes=${f.types.join(",")}`)
      return q.length === 0 ? "" : `?${q.join("&")}`
    }

    /**
     * Every resume position (before the first event, then after each event, sentinels aside) with every filter:
     * the stream sends exactly the events after it that match, in order, up to the first sentinel that matches.
     */
    const checkEveryPosition = async (org: Org, log: ReadonlyArray<Logged>) => {
      const ordered = inOrder(log)
      const positions = [-1, ...ordered.flatMap((e, i) => (e.sentinel ? [] : [i]))]
      for (const filter of FILTERS) {
        for (const k of positions) {
          const lastEventId = k < 0 ? messageId(crypto.randomUUID()) : messageId(ordered[k]?.id ?? "")
          const expected = ordered
            .slice(k + 1)
            .filter((e) => !e.sentinel && matches(filter, e))
            .map((e) => messageId(e.id))
          const stream = await openStream(org.client, queryOf(org, filter), { "last-event-id": lastEventId })
          const got: Array<string> = []
          try {
            expect(stream.response.status).toBe(200)
            const sentinels = new Set(log.filter((e) => e.sentinel).map((e) => messageId(e.id)))
            for (;;) {
              const e = await stream.next(10_000)
              if (sentinels.has(e.id)) break
              got.push(e.id)
              if (got.length > expected.length) break
            }
          } finally {
            stream.close()
          }
          expect({ filter, k, got }).toEqual({ filter, k, got: expected })
        }
      }
    }

    /** The reader itself, page by page (`limit` events a read) from the log's origin: the whole log, in order. */
    const checkPaging = async (org: Org, log: ReadonlyArray<Logged>, limit: number) => {
      const ordered = inOrder(log)
      for (const filter of FILTERS) {
        const f: StreamFilter = {
          types: filter.types,
          repoIds: filter.repo === undefined ? undefined : [org.repos[filter.repo] as string]
        }
        const got: Array<string> = []
        let position: LogPosition = { xid: "0", seq: 0 }
        for (;;) {
          const page = await server.run(Effect.flatMap(EventReader, (r) => r.after(org.org.id, position, f, limit)))
          if (page.length === 0) break
          got.push(...page.map((e) => e.id))
          const last = page[page.length - 1]
          if (last !== undefined) position = { xid: last.xid, seq: last.seq }
          if (got.length > log.length) break
        }
        expect({ filter, limit, got }).toEqual({
          filter,
          limit,
          got: ordered.filter((e) => matches(filter, e)).map((e) => e.id)
        })
      }
    }

    test("resuming after event k yields exactly the events after k, in order (chosen transaction ids)", async () => {
      const event = fc.record({
        xid: fc.constantFrom(...XIDS),
        type: fc.constantFrom(...TYPES),
        repo: fc.constantFrom(0, 1)
      })
      await fc.assert(
        fc.asyncProperty(
          fc.array(event, { minLength: 1, maxLength: 18 }),
          fc.integer({ min: 1, max: 4 }),
          async (events, limit) => {
            const org = await newOrg()
            // the events in the order given (seq grows), then one sentinel of each type and repository after them all
            const top = Math.max(...XIDS) + 1
            const rows = [
              ...events.map((e) => ({ ...e, sentinel: false })),
              ...TYPES.flatMap((type) => [0, 1].map((repo) => ({ xid: top, type, repo, sentinel: true })))
            ].map((e) => ({ ...e, id: crypto.randomUUID() }))
            const seqs = await server.run(
              Effect.gen(function* () {
                const sql = yield* SqlClient.SqlClient
                const out: Array<number> = []
                for (const r of rows) {
                  const body = JSON.stringify({
                    type: r.type,
                    timestamp: new Date().toISOString(),
                    data: { type: r.type }
                  })
                  const [row] = yield* sql<{ seq: string | number }>`
                  insert into event_log (id, xid, org_id, repo_id, branch, type, ordering_key, occurred_at, body)
                  values (${r.id}, ${String(r.xid)}::xid8, ${org.org.id}, ${org.repos[r.repo] as string}, 'main',
                          ${r.type}, ${`resume:${r.repo}`}, now(), ${body})
                  returning seq`
                  out.push(Number(row?.seq))
                }
                return out
              })
            )
            const log: Array<Logged> = rows.map((r, i) => ({ ...r, xid: BigInt(r.xid), seq: seqs[i] as number }))
            await checkPaging(org, log, limit)
            await checkEveryPosition(org, log)
          }
        ),
        { numRuns: 8 }
      )
    }, 240_000)

    test("events of real transactions whose ids cross a power of ten: every position, every filter", async () => {
      const org = await newOrg()
      const keys = ["zero", "one"].map((name) => ({
        repo: { host: "local", owner: org.slug, name },
        targetBranch: "main"
      }))
      const call = async (op: string, body: unknown) => {
        const r = await server.post(op, body, { "x-api-token": org.token })
        expect({ op, status: r.status }).toEqual({ op, status: 200 })
      }
      for (const key of keys) await call("createQueue", key)
      const now = await currentXid(server)
      const boundary = 10n ** BigInt(now.toString().length)
      if (db === "postgres" && boundary - now > PG_REACH) {
        // the cluster's counter is far from its next power of ten: the chosen ids of the property test cover it
        process.stdout.write(`transaction ids at ${now}: ${boundary} is out of reach; the crossing is not made\n`)
        return
      }
      await advanceXid(server, boundary - 25n)
      // 60 changes, each its own transaction: queue.updated, and queue.state_changed at each pause and resume
      for (let i = 0; i < 60; i++) {
        const key = keys[i % 2] as (typeof keys)[number]
        const step = i % 20
        const change =
          step === 4 || step === 5
            ? { state: "paused" }
            : step === 8 || step === 9
              ? { state: "running" }
              : { concurrency: 1 + (i % 7) }
        await call("updateQueue", { ...key, ...change })
      }
      // the sentinels: a pause of each queue (queue.updated and queue.state_changed of each repository)
      for (const key of keys) await call("updateQueue", { ...key, state: "paused" })
      const rows = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ id: string; xid: string; seq: string | number; type: string; repo_id: string }>`
            select id, xid::text as xid, seq, type, repo_id from event_log
            where org_id = ${org.org.id} and type is not null order by seq`
        )
      )
      const tail = new Set(rows.slice(-4).map((r) => r.id))
      const log: Array<Logged> = rows.map((r) => ({
        id: r.id,
        xid: BigInt(r.xid),
        seq: Number(r.seq),
        type: r.type,
        repo: r.repo_id === org.repos[0] ? 0 : 1,
        sentinel: tail.has(r.id)
      }))
      // the events' transaction ids do cross the boundary
      expect(log.some((e) => e.xid < boundary)).toBe(true)
      expect(log.some((e) => e.xid >= boundary)).toBe(true)
      await checkPaging(org, log, 7)
      await checkEveryPosition(org, log)
    }, 240_000)
  })
}
