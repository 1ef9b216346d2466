/**
 * Prepared statements (src/db/prepare.ts): the naming rules, and on a real PostgreSQL that a repeated statement is
 * prepared once per connection, that the SQL client's statements go through it, and that a statement PostgreSQL
 * will not run as prepared any more (its result type changed, or it was deallocated) still answers. On PGlite
 * (src/db/pglite.ts), the same through PREPARE and EXECUTE with literal parameters.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, ManagedRuntime } from "effect"
import pg from "pg"
import { layerPostgres } from "../../src/db/Database.ts"
import { layerPglite } from "../../src/db/pglite.ts"
import { makeStatementNamer, prepareStatements } from "../../src/db/prepare.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"
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

describe("prepared statements on PGlite", () => {
  // from the migrated seed: initdb would cost seconds of CPU, and the statements here do not care what else exists
  const runtime = ManagedRuntime.make(
    Layer.unwrapEffect(
      Effect.map(Effect.promise(pgliteSeed), (seed) => layerPglite(undefined, undefined, seed))
    ) as Layer.Layer<SqlClient.SqlClient, unknown>
  )
  const run = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
    runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, f))
  const prepared = () =>
    run((sql) => sql<{ statement: string }>`select statement from pg_prepared_statements`).then((rows) =>
      rows.map((r) => r.statement.replace(/^prepare \S+ as /i, ""))
    )
  beforeAll(async () => {
    await run((sql) =>
      sql.unsafe(
        "create table things (id int primary key, label text, flag bool, at timestamptz, doc jsonb, big bigint)"
      )
    )
  })
  afterAll(() => runtime.dispose())

  const insert = (row: {
    id: number
    label: string | null
    flag: boolean
    at: Date
    doc: { readonly [k: string]: unknown }
    big: bigint | number
  }) =>
    run(
      (sql) =>
        sql<{ id: number; label: string | null; flag: boolean; at: Date; doc: unknown; big: string | number }>`
          insert into things (id, label, flag, at, doc, big)
          values (${row.id}, ${row.label}, ${row.flag}, ${row.at}, ${JSON.stringify(row.doc)}, ${row.big}) returning *`
    )

  test("a repeated statement is prepared once; its parameters reach it as they would unprepared", async () => {
    const at = new Date("2026-01-02T03:04:05.678Z")
    // the first insert runs unprepared, the others prepared: the values that need quoting come last
    const values = [
      { id: 1, label: null, flag: false, at, doc: {}, big: 5 },
      { id: 2, label: "\u00e9t\u00e9 \u{1F600}", flag: true, at, doc: { nested: { k: null } }, big: -1 },
      { id: 3, label: "it's a 'quoted' \\ value", flag: true, at, doc: { a: [1, "x'y"] }, big: 9007199254740993n }
    ]
    const rows = []
    for (const v of values) rows.push(...(await insert(v)))
    expect(rows.map((r) => [r.id, r.label, r.flag, r.at.toISOString(), r.doc, String(r.big)])).toEqual(
      values.map((v) => [v.id, v.label, v.flag, v.at.toISOString(), v.doc, String(v.big)])
    )
    const statements = await prepared()
    expect(statements.filter((s) => s.includes("insert into things"))).toHaveLength(1)
    // what the prepared statement stored is what a plain read sees
    const read = await run((sql) => sql.unsafe<{ label: string | null }>("select label from things order by id"))
    expect(read.map((r) => r.label)).toEqual(values.map((v) => v.label))
  })

  test("a statement prepared in a transaction that rolled back stays prepared", async () => {
    const select = (sql: SqlClient.SqlClient, id: number) =>
      sql<{ id: number }>`select id from things where id = ${id} and id > ${-100}`
    await run((sql) =>
      sql.withTransaction(Effect.zipRight(Effect.all([select(sql, 1), select(sql, 2)]), Effect.fail("roll back")))
    ).catch(() => undefined)
    expect((await prepared()).some((s) => s.includes("and id > $2"))).toBe(true)
    expect(await run((sql) => select(sql, 2))).toEqual([{ id: 2 }])
  })

  test("a prepared statement whose result type changed, or that was deallocated, answers unprepared", async () => {
    const all = (sql: SqlClient.SqlClient) => sql<Record<string, unknown>>`select * from things where id = ${1}`
    await run(all)
    await run(all)
    expect((await prepared()).some((s) => s.startsWith("select * from things"))).toBe(true)
    await run((sql) => sql.unsafe("alter table things add column extra int default 7"))
    expect((await run(all))[0]?.extra).toBe(7)
    const byLabel = (sql: SqlClient.SqlClient) =>
      sql<{ id: number }>`select id from things where label is null and id = ${1}`
    await run(byLabel)
    await run(byLabel)
    await run((sql) => sql.unsafe("deallocate all"))
    expect(await run(byLabel)).toEqual([{ id: 1 }])
  })
})
