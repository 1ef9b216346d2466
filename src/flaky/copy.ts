import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"

/**
 * PostgreSQL `COPY … FROM STDIN` over the node-postgres connection that `@effect/sql-pg` holds for the current
 * transaction, without `pg-copy-streams`: a minimal node-postgres "submittable" that sends the statement, answers the
 * server's CopyInResponse with the data and CopyDone, and completes on ReadyForQuery (or on the first error).
 *
 * Only inside `sql.withTransaction` on PostgreSQL: `copyClient` is `None` elsewhere (PGlite, or no transaction), and
 * callers then use a multi-row insert instead. The connection object is `@effect/sql-pg`'s, whose `pg` field is the
 * node-postgres `PoolClient`; its shape is checked at run time, so a change there falls back to inserts, not errors.
 */

/** The parts of node-postgres' `Connection` that COPY uses. */
interface PgWire {
  query(text: string): void
  sendCopyFromChunk(chunk: Buffer): void
  endCopyFrom(): void
}

interface PgQueryable {
  query(submittable: object): unknown
}

export interface CopyClient {
  readonly _tag: "CopyClient"
  readonly client: PgQueryable
}

const isQueryable = (v: unknown): v is PgQueryable =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as { query?: unknown }).query === "function" &&
  typeof (v as { connection?: { sendCopyFromChunk?: unknown } }).connection?.sendCopyFromChunk === "function"

/** The node-postgres client of the current transaction, when there is one. */
export const copyClient: Effect.Effect<Option.Option<CopyClient>> = Effect.map(
  Effect.serviceOption(SqlClient.TransactionConnection),
  Option.flatMap(([conn]) => {
    const pg = (conn as unknown as { readonly pg?: unknown }).pg
    return isQueryable(pg) ? Option.some({ _tag: "CopyClient" as const, client: pg }) : Option.none()
  })
)

/** Escapes a value for COPY's text format (`\N` is NULL). */
export const copyText = (value: string): string =>
  /[\\\n\r\t]/.test(value)
    ? value.replace(/[\\\n\r\t]/g, (c) => (c === "\\" ? "\\\\" : c === "\n" ? "\\n" : c === "\r" ? "\\r" : "\\t"))
    : value

/** Runs `statement` (a `COPY … FROM STDIN` in text format) with `data` as its input. */
export const copyIn = (copy: CopyClient, statement: string, data: Uint8Array): Effect.Effect<number, SqlError> =>
  Effect.async<number, SqlError>((resume) => {
    let done = false
    let rows = 0
    const finish = (error: unknown) => {
      if (done) return
      done = true
      resume(
        error === null ? Effect.succeed(rows) : Effect.fail(new SqlError({ cause: error, message: "COPY failed" }))
      )
    }
    const submittable = {
      submit: (connection: PgWire) => {
        connection.query(statement)
      },
      handleCopyInResponse: (connection: PgWire) => {
        // in pieces of at most 1 MiB: each becomes one CopyData message
        const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
        for (let i = 0; i < bytes.length; i += 1 << 20) connection.sendCopyFromChunk(bytes.subarray(i, i + (1 << 20)))
        connection.endCopyFrom()
      },
      handleCommandComplete: (msg: { text?: string }) => {
        const n = Number(/(\d+)\s*$/.exec(msg.text ?? "")?.[1] ?? 0)
        rows = Number.isFinite(n) ? n : 0
      },
      handleReadyForQuery: () => finish(null),
      handleError: (error: unknown) => finish(error),
      handleRowDescription: () => {},
      handleDataRow: () => {},
      handlePortalSuspended: () => {},
      handleEmptyQuery: () => {},
      handleCopyData: () => {}
    }
    try {
      copy.client.query(submittable)
    } catch (e) {
      finish(e)
    }
  })
