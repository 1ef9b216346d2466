/**
 * The live stream GET /v1/events/stream (issue #17): Server-Sent Events read from the event log; a client that
 * reconnects with Last-Event-ID gets every event after that one, once, in order; filters; the per-organization bound.
 * The servers here read the log without a wake-up only every 10 minutes (EVENT_STREAM_POLL_MS), so every event a
 * stream gets after its first read came through a wake-up: in-process, or from another instance through
 * PostgreSQL's NOTIFY (events/StreamWakeups.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as SqlClient from "@effect/sql/SqlClient"
import { SQL } from "bun"
import { Effect } from "effect"
import { spawnServer } from "../support/process.ts"
import {
  databases,
  freshPostgres,
  pgUrl,
  startTestServer,
  TEST_TOKEN,
  type TestServer,
  tempDir
} from "../support/server.ts"

const NO_POLL_MS = 600_000

interface SseEvent {
  readonly id: string
  readonly event: string
  readonly data: { readonly type: string; readonly data: Record<string, unknown> }
}

/** An open stream: `next` resolves with the next event as it arrives (comments and heartbeats skipped). */
const openStream = async (
  server: { readonly url: string; readonly token: string },
  query = "",
  headers: Record<string, string> = {}
) => {
  const controller = new AbortController()
  const response = await fetch(`${server.url}/v1/events/stream${query}`, {
    headers: { "x-api-token": server.token, ...headers },
    signal: controller.signal
  })
  const reader = response.body?.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  const next = async (): Promise<SseEvent> => {
    for (;;) {
      const end = buffer.indexOf("\n\n")
      if (end >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const fields = new Map<string, string>()
        for (const line of block.split("\n")) {
          if (line.startsWith(":") || line === "") continue
          const i = line.indexOf(":")
          fields.set(line.slice(0, i), line.slice(i + 1).trimStart())
        }
        if (!fields.has("data")) continue
        return {
          id: fields.get("id") ?? "",
          event: fields.get("event") ?? "",
          data: JSON.parse(fields.get("data") ?? "{}") as SseEvent["data"]
        }
      }
      if (reader === undefined) throw new Error(`no body (status ${response.status})`)
      const { done, value } = await reader.read()
      if (done) throw new Error("the stream ended")
      buffer += decoder.decode(value, { stream: true })
    }
  }
  const take = async (n: number) => {
    const out: Array<SseEvent> = []
    for (let i = 0; i < n; i++) out.push(await next())
    return out
  }
  return { response, next, take, close: () => controller.abort() }
}

for (const db of databases) {
  describe(`live event stream (${db})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer({
        db,
        config: { webhookWorker: false, eventStreamsPerOrg: 3, eventStreamPollMs: NO_POLL_MS }
      })
    })
    afterAll(async () => {
      await server.close()
    })

    let n = 0
    const newQueue = async () => {
      const key = { repo: { host: "local", owner: "acme", name: `stream-${db}-${++n}` }, targetBranch: "main" }
      expect((await server.post("createQueue", key)).status).toBe(200)
      const filter = `?repo=${key.repo.owner}/${key.repo.name}&repoHost=${key.repo.host}&eventTypes=queue.updated`
      const update = async (concurrency: number) =>
        expect((await server.post("updateQueue", { ...key, concurrency })).status).toBe(200)
      return { key, filter, update }
    }
    const concurrencyOf = (e: SseEvent) => (e.data.data.queue as { concurrency: number }).concurrency

    test("a reconnect with Last-Event-ID resumes after that event: no gap, no duplicate", async () => {
      const q = await newQueue()
      const first = await openStream(server, q.filter)
      expect(first.response.headers.get("content-type")).toContain("text/event-stream")
      for (let c = 1; c <= 10; c++) await q.update(c)
      const seen = await first.take(4)
      first.close()
      expect(seen.map(concurrencyOf)).toEqual([1, 2, 3, 4])
      for (const e of seen) {
        expect(e.event).toBe("queue.updated")
        expect(e.id).toMatch(/^msg_[0-9a-f]{32}$/)
      }
      for (let c = 11; c <= 15; c++) await q.update(c)
      const resumed = await openStream(server, q.filter, { "last-event-id": seen[3]?.id ?? "" })
      const rest = await resumed.take(11)
      resumed.close()
      expect(rest.map(concurrencyOf)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
      expect(new Set([...seen, ...rest].map((e) => e.id)).size).toBe(15)
    })

    test("a new stream starts at the end of the log; filters by event type and repository", async () => {
      const q = await newQueue()
      const other = await newQueue()
      await q.update(2)
      const states = await openStream(
        server,
        `?repo=${q.key.repo.owner}/${q.key.repo.name}&repoHost=local&eventTypes=queue.state_changed`
      )
      const all = await openStream(server, q.filter)
      await other.update(3)
      await q.update(4)
      expect((await server.post("updateQueue", { ...q.key, state: "paused" })).status).toBe(200)
      const changed = await states.next()
      expect(changed.event).toBe("queue.state_changed")
      expect(changed.data.data).toMatchObject({ previous_state: "running", state: "paused" })
      const [a, b] = await all.take(2)
      expect([concurrencyOf(a as SseEvent), concurrencyOf(b as SseEvent)]).toEqual([4, 4])
      expect((b?.data.data.queue as { state: string } | undefined)?.state).toBe("paused")
      states.close()
      all.close()
    })

    /**
     * A transaction with an xid, open on the server's database (PostgreSQL) until `commit`: events committed after it
     * began are not readable (settled) while it runs.
     */
    const olderTransaction = async () => {
      const [row] = await server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ name: string }>`select current_database() as name`)
      )
      const url = new URL(pgUrl ?? "")
      url.pathname = `/${row?.name}`
      const client = new SQL(url.toString())
      const connection = await client.reserve()
      await connection`begin`
      await connection`select pg_current_xact_id()`
      return {
        commit: async () => {
          await connection`commit`
        },
        end: async () => {
          connection.release()
          await client.close()
        }
      }
    }

    // an event committed while an older transaction still runs sorts after the settled head a new stream starts at
    if (db === "postgres")
      test("a new stream does not send an event committed before it began behind a transaction still running", async () => {
        const q = await newQueue()
        const older = await olderTransaction()
        try {
          await q.update(2)
          const stream = await openStream(server, q.filter)
          await older.commit()
          await q.update(4)
          expect(concurrencyOf(await stream.next())).toBe(4)
          stream.close()
        } finally {
          await older.end()
        }
      })

    // a resumed stream whose first read finds its events committed but not yet readable gets no wake-up for them
    if (db === "postgres")
      test("a resumed stream gets events that were not yet readable at its first read, without a wake-up", async () => {
        const q = await newQueue()
        const first = await openStream(server, q.filter)
        await q.update(1)
        const [one] = await first.take(1)
        first.close()
        const older = await olderTransaction()
        try {
          await q.update(2)
          await q.update(3)
          const resumed = await openStream(server, q.filter, { "last-event-id": one?.id ?? "" })
          await older.commit()
          expect((await resumed.take(2)).map(concurrencyOf)).toEqual([2, 3])
          resumed.close()
        } finally {
          await older.end()
        }
      })

    test("bad filters are INVALID_REQUEST; streams are bounded per organization", async () => {
      const bad = async (query: string, path: string) => {
        const r = await fetch(`${server.url}/v1/events/stream${query}`, { headers: { "x-api-token": server.token } })
        const body = (await r.json()) as { error: { code: string; details?: Array<{ path: string }> } }
        expect({ query, status: r.status, code: body.error.code, path: body.error.details?.[0]?.path }).toEqual({
          query,
          status: 400,
          code: "INVALID_REQUEST",
          path
        })
      }
      await bad("?eventTypes=nope", "eventTypes")
      await bad("?repo=acme", "repoHost")
      await bad("?repo=a/b/c&repoHost=local", "repoHost")
      const missing = await fetch(`${server.url}/v1/events/stream?repo=acme/none&repoHost=local`, {
        headers: { "x-api-token": server.token }
      })
      expect(missing.status).toBe(404)
      const lastId = await fetch(`${server.url}/v1/events/stream`, {
        headers: { "x-api-token": server.token, "last-event-id": "42" }
      })
      expect(lastId.status).toBe(400)
      const open = [await openStream(server), await openStream(server), await openStream(server)]
      const refused = await fetch(`${server.url}/v1/events/stream`, { headers: { "x-api-token": server.token } })
      expect(refused.status).toBe(429)
      for (const s of open) s.close()
    })
  })
}

describe("live event stream and a stopping server", () => {
  test("stopping ends the open streams instead of waiting for their clients", async () => {
    const server = await startTestServer({ db: "pglite", config: { webhookWorker: false } })
    try {
      const stream = await openStream(server)
      expect(stream.response.status).toBe(200)
      await server.stop()
      await expect(stream.next()).rejects.toThrow("the stream ended")
    } finally {
      await server.close()
    }
  }, 60_000)
})

describe.if(pgUrl !== undefined)("live event stream across instances on one PostgreSQL", () => {
  test("an event appended on another instance wakes the stream", async () => {
    const pg = await freshPostgres()
    const dirs = [tempDir("greenline-git-"), tempDir()]
    const env = {
      DATABASE_URL: pg.url,
      GIT_ROOT: dirs[0] as string,
      DATA_DIR: dirs[1] as string,
      WEBHOOK_WORKER: "false",
      EVENT_STREAM_POLL_MS: String(NO_POLL_MS)
    }
    // one after the other: the first migrates the database (each may take up to a minute to start under load)
    const a = await spawnServer(env, TEST_TOKEN)
    const b = await spawnServer(env, TEST_TOKEN)
    try {
      const key = { repo: { host: "local", owner: "acme", name: "across" }, targetBranch: "main" }
      expect((await a.post("createQueue", key)).status).toBe(200)
      const stream = await openStream(
        { url: a.url, token: TEST_TOKEN },
        `?repo=acme/across&repoHost=local&eventTypes=queue.updated`
      )
      // the stream has made its first read (its answer began) before the other instance appends
      expect(stream.response.status).toBe(200)
      for (const concurrency of [2, 3, 4]) {
        expect((await b.post("updateQueue", { ...key, concurrency })).status).toBe(200)
        const event = await stream.next()
        expect(event.event).toBe("queue.updated")
        expect((event.data.data.queue as { concurrency: number }).concurrency).toBe(concurrency)
      }
      stream.close()
    } finally {
      await a.kill()
      await b.kill()
      await pg.drop()
      for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 240_000)
})
