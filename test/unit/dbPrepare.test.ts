/**
 * Prepared statements (src/db/prepare.ts): the naming rules, and on a real PostgreSQL that a repeated statement is
 * prepared once per connection, that the SQL client's statements go through it, and that a statement PostgreSQL
 * will not run as prepared any more (its result type changed, or it was deallocated) still answers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, type Layer, ManagedRuntime } from "effect"
import pg from "pg"
import { layerPostgres } from "../../src/db/Database.ts"
import { makeStatementNamer, prepareStatements } from "../../src/db/prepare.ts"
import { freshPostgres, pgUrl } from "../support/server.ts"

describe("statement names", () => {
  test("a text is named from its second use on, always with the same name", () => {
    const namer = makeStatementNamer({ minUses: 2, maxNames: 10 })
    expect(namer.nameOf("select $1")).toBeUndefined()
    const name = namer.nameOf("select $1")
    expect(name).toBeString()
    expect(namer.nameOf("select $1")).toBe(name)
    expect(namer.nameOf("select $1::int")).toBeUndefined()
    expect(namer.nameOf("select $1::int")).not.toBe(name)
  })

  test("at most maxNames texts are named; the others stay unnamed", () => {
    const namer = makeStatementNamer({ minUses: 1, maxNames: 3 })
    const names = Array.from({ length: 5 }, (_, i) => namer.nameOf(`select ${i} where $1`))
    expect(names.filter((n) => n !== undefined)).toHaveLength(3)
    expect(new Set(names.filter((n) => n !== undefined)).size).toBe(3)
    expect(namer.size()).toBe(3)
  })

  test("a refused text is never named again", () => {
    const namer = makeStatementNamer({ minUses: 1, maxNames: 10 })
    expect(namer.nameOf("select $1")).toBeString()
    namer.refuse("select $1")
    expect(namer.nameOf("select $1")).toBeUndefined()
    expect(namer.size()).toBe(0)
  })
})

const describePg = pgUrl ? describe : describe.skip

describePg("prepared statements on PostgreSQL", () => {
  let db: Awaited<ReturnType<typeof freshPostgres>>
  let client: pg.Client
  beforeAll(async () => {
    db = await freshPostgres()
    client = new pg.Client({ connectionString: db.url })
    await client.connect()
    prepareStatements(client, makeStatementNamer({ minUses: 2, maxNames: 100 }))
    await client.query("create table items (id int primary key, label text)")
    await client.query("insert into items values (1, 'one'), (2, 'two')")
  })
  afterAll(async () => {
    await client?.end()
    await db?.drop()
  })

  const query = (text: string, values: ReadonlyArray<unknown>) =>
    new Promise<ReadonlyArray<Record<string, unknown>>>((resolve, reject) => {
      client.query(text, [...values], (error, result) => (error ? reject(error) : resolve(result.rows)))
    })
  const prepared = async () =>
    (await client.query("select statement from pg_prepared_statements")).rows.map((r) => String(r.statement))

  test("a repeated statement is prepared once and answers as before", async () => {
    const text = "select label from items where id = $1"
    expect(await query(text, [1])).toEqual([{ label: "one" }])
    expect(await prepared()).not.toContain(text)
    expect(await query(text, [2])).toEqual([{ label: "two" }])
    expect(await prepared()).toContain(text)
    expect(await query(text, [1])).toEqual([{ label: "one" }])
    expect((await prepared()).filter((s) => s === text)).toHaveLength(1)
  })

  test("statements without parameters are never prepared (they may hold several statements)", async () => {
    const text = "select 1 as a; select 2 as b"
    for (let i = 0; i < 3; i++) await client.query(text)
    expect(await prepared()).not.toContain(text)
  })

  test("a prepared statement whose result type changed answers unnamed", async () => {
    const text = "select * from items where id = $1"
    await query(text, [1])
    await query(text, [1])
    expect(await prepared()).toContain(text)
    await client.query("alter table items add column extra int default 7")
    expect(await query(text, [1])).toEqual([{ id: 1, label: "one", extra: 7 }])
    expect(await query(text, [2])).toEqual([{ id: 2, label: "two", extra: 7 }])
  })

  test("a prepared statement deallocated behind the client's back answers unnamed", async () => {
    const text = "select label from items where id = $1 and label is not null"
    await query(text, [1])
    await query(text, [1])
    await client.query("deallocate all")
    expect(await query(text, [2])).toEqual([{ label: "two" }])
    expect(await query(text, [1])).toEqual([{ label: "one" }])
  })

  test("the SQL client's pool prepares its repeated statements", async () => {
    const runtime = ManagedRuntime.make(layerPostgres(db.url) as Layer.Layer<SqlClient.SqlClient, unknown>)
    try {
      const statements = await runtime.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          // one connection for the whole check: the statement and pg_prepared_statements must see the same session
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              for (const id of [1, 2, 1]) {
                const rows = yield* sql<{ label: string }>`select label from items where id = ${id} and id > ${0}`
                expect(rows).toHaveLength(1)
              }
              return yield* sql<{ statement: string }>`select statement from pg_prepared_statements`
            })
          )
        })
      )
      expect(statements.map((s) => s.statement)).toContain("select label from items where id = $1 and id > $2")
    } finally {
      await runtime.dispose()
    }
  })
})
