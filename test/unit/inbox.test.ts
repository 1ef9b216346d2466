/**
 * A queue's inbox on PostgreSQL (src/queue/store.ts): a round removes exactly the events it read. Sequence numbers
 * are taken when a row is inserted, not when its transaction commits, so an event can become visible after one with
 * a higher number was read: it must still be there for the next round (a status report lost this way left its run
 * testing for good).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, type Layer, ManagedRuntime } from "effect"
import pg from "pg"
import { layerPostgres } from "../../src/db/Database.ts"
import { initialState, type PlannerConfig } from "../../src/queue/planner/index.ts"
import { makeStore } from "../../src/queue/store.ts"
import { freshPostgres, pgUrl } from "../support/server.ts"

const describePg = pgUrl ? describe : describe.skip

const config: PlannerConfig = {
  state: "running",
  mode: "single",
  concurrency: 1,
  bisectionConcurrency: 0,
  testingTimeoutMinutes: 60,
  notReadyTimeoutHours: 24,
  pendingFailureDepth: 0,
  canOptimisticallyMerge: false,
  batch: false,
  batchingMaxWaitTimeMinutes: 0,
  batchingMinSize: 1,
  directMergeMode: "off",
  optimizationMode: "off",
  mergeMethod: "squash"
}

describePg("queue inbox (PostgreSQL)", () => {
  let db: Awaited<ReturnType<typeof freshPostgres>>
  let runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>
  let other: pg.Client
  const queueId = crypto.randomUUID()
  const owner = "inbox-test"

  beforeAll(async () => {
    db = await freshPostgres()
    runtime = ManagedRuntime.make(layerPostgres(db.url) as Layer.Layer<SqlClient.SqlClient, unknown>)
    const orgId = crypto.randomUUID()
    const repoId = crypto.randomUUID()
    await runtime.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`insert into organizations (id, slug) values (${orgId}, 'inbox')`
        yield* sql`insert into repositories (id, org_id, host, owner, name) values (${repoId}, ${orgId}, 'local', 'acme', 'inbox')`
        yield* sql`insert into queues (id, repo_id, branch, config) values (${queueId}, ${repoId}, 'main', '{}'::jsonb)`
        yield* makeStore(sql).insertRuntime(queueId, initialState(config, null))
        yield* sql`update queue_runtime set owner = ${owner}, fencing = 1 where queue_id = ${queueId}`
      })
    )
    other = new pg.Client({ connectionString: db.url })
    await other.connect()
  })
  afterAll(async () => {
    await other?.end()
    await runtime?.dispose()
    await db?.drop()
  })

  test("an event committed after a later-numbered one was read stays for the next round", async () => {
    const store = Effect.map(SqlClient.SqlClient, makeStore)
    const status = (sha: string) => JSON.stringify({ _tag: "StatusReported", sha })
    // a status report that takes its sequence number first and commits last
    await other.query("begin")
    await other.query("insert into queue_events (queue_id, event) values ($1, $2::jsonb)", [queueId, status("a")])
    await runtime.runPromise(
      Effect.flatMap(store, (s) => s.enqueueEvent(queueId, { _tag: "StatusReported", sha: "b" }))
    )
    const read = await runtime.runPromise(Effect.flatMap(store, (s) => s.readInbox(queueId, 1000)))
    expect(read.map((e) => e.event)).toEqual([{ _tag: "StatusReported", sha: "b" }])
    await other.query("commit")
    // the round that read "b" is persisted after "a" committed
    const saved = await runtime.runPromise(
      Effect.flatMap(store, (s) =>
        s.persistStep(queueId, owner, 1, {
          state: initialState(config, null),
          outbox: [],
          transitions: [],
          runChanges: [],
          processed: read.map((e) => e.seq)
        })
      )
    )
    expect(saved).toBe(true)
    const next = await runtime.runPromise(Effect.flatMap(store, (s) => s.readInbox(queueId, 1000)))
    expect(next.map((e) => e.event)).toEqual([{ _tag: "StatusReported", sha: "a" }])
  })
})
