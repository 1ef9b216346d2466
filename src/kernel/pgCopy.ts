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
  sendCopyFail(message: string): void
  /** the socket (a node `net.Socket`): its write queue gives back-pressure */
  readonly stream?: {
    readonly writable?: boolean
    readonly writableLength?: number
    write?(data: Uint8Array, callback: (error?: unknown) => void): boolean
    once(event: "drain" | "close", listener: () => void): unknown
    removeListener(event: "drain" | "close", listener: () => void): unknown
  }
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

/**
 * Sends `COPY ... FROM STDIN` through the driver's submittable protocol: `copyIn` writes the data once the server
 * asks for it, `onRows` gets the row count of the command's completion, `finish` the end (null) or the error.
 */
const submitCopy = (
  copy: CopyClient,
  statement: string,
  copyIn: (connection: PgWire) => void,
  onRows: (rows: number) => void,
  finish: (error: unknown) => void
): void => {
  const submittable = {
    submit: (connection: PgWire) => {
      connection.query(statement)
    },
    handleCopyInResponse: copyIn,
    handleCommandComplete: (msg: { text?: string }) => {
      const n = Number(/(\d+)\s*$/.exec(msg.text ?? "")?.[1] ?? 0)
      onRows(Number.isFinite(n) ? n : 0)
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
}

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
    submitCopy(
      copy,
      statement,
      (connection) => {
        // in pieces of at most 1 MiB: each becomes one CopyData message
        const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
        for (let i = 0; i < bytes.length; i += 1 << 20) connection.sendCopyFromChunk(bytes.subarray(i, i + (1 << 20)))
        connection.endCopyFrom()
      },
      (n) => {
        rows = n
      },
      finish
    )
  })

/** Bytes queued on the socket above which a streamed COPY waits for the socket to drain. */
const HIGH_WATER = 1 << 20

/** Message buffers of one streamed COPY: free ones, and those the socket may still be reading. */
interface CopyBuffers {
  free: Buffer[]
  inFlight: Buffer[]
}

/**
 * Sends `chunk` as one CopyData message. Straight on the socket from a few reused message buffers when it can
 * (node-postgres would copy each chunk into a new buffer: 36 MiB of garbage outside the JavaScript heap for a 20 MiB
 * upload); the buffers written are reused once the socket has nothing queued, that is, once it is done with them.
 */
const sendCopyData = (connection: PgWire, chunk: Uint8Array, buffers: CopyBuffers): void => {
  const stream = connection.stream
  if (stream?.write === undefined || stream.writable === false || stream.writableLength === undefined) {
    connection.sendCopyFromChunk(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
    return
  }
  if (stream.writableLength === 0 && buffers.inFlight.length > 0) {
    for (const b of buffers.inFlight) buffers.free.push(b)
    buffers.inFlight = []
  }
  const size = chunk.length + 5
  let msg = buffers.free.pop()
  if (msg === undefined || msg.length < size) msg = Buffer.allocUnsafe(Math.max(size, 320 * 1024))
  msg[0] = 0x64 // 'd'
  msg.writeInt32BE(chunk.length + 4, 1)
  msg.set(chunk, 5)
  buffers.inFlight.push(msg)
  stream.write(msg.subarray(0, size), () => {})
}

const drained = (connection: PgWire): Promise<void> | undefined => {
  const stream = connection.stream
  if (stream === undefined || (stream.writableLength ?? 0) <= HIGH_WATER) return undefined
  return new Promise<void>((resolve) => {
    const done = () => {
      stream.removeListener("drain", done)
      stream.removeListener("close", done)
      resolve()
    }
    stream.once("drain", done)
    stream.once("close", done)
  })
}

/**
 * Runs `statement` (a `COPY … FROM STDIN`) with data pulled from `next` while the server is already loading what was
 * sent: each chunk is sent as soon as `next` makes it (it is copied on sending, so `next` may reuse its buffer), and
 * the next one is asked for once the socket's queue is below 1 MiB. `null` ends the data. When `next` throws, the
 * COPY is aborted (CopyFail, so nothing of it is stored) and the effect fails with `onSourceError` of that error.
 */
export const copyInStream = <E>(
  copy: CopyClient,
  statement: string,
  next: () => Promise<Uint8Array | null>,
  onSourceError: (error: unknown) => E
): Effect.Effect<number, SqlError | E> =>
  Effect.async<number, SqlError | E>((resume) => {
    let done = false
    let stopped = false
    let rows = 0
    let sourceError: { readonly error: unknown } | undefined
    const buffers: CopyBuffers = { free: [], inFlight: [] }
    const finish = (error: unknown) => {
      if (done) return
      done = true
      if (sourceError !== undefined) resume(Effect.fail(onSourceError(sourceError.error)))
      else if (error === null) resume(Effect.succeed(rows))
      else resume(Effect.fail(new SqlError({ cause: error, message: "COPY failed" })))
    }
    const pump = async (connection: PgWire) => {
      try {
        for (;;) {
          if (done) return
          if (stopped) throw new Error("interrupted")
          const chunk = await next()
          if (done) return
          if (chunk === null) break
          if (chunk.length > 0) sendCopyData(connection, chunk, buffers)
          const wait = drained(connection)
          if (wait !== undefined) await wait
        }
        connection.endCopyFrom()
      } catch (error) {
        sourceError = { error }
        if (!done) connection.sendCopyFail(error instanceof Error ? error.message : String(error))
      }
    }
    submitCopy(
      copy,
      statement,
      (connection) => {
        void pump(connection)
      },
      (n) => {
        rows = n
      },
      finish
    )
    return Effect.sync(() => {
      stopped = true
    })
  })
