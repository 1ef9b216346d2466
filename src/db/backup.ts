import * as fs from "node:fs"
import * as path from "node:path"
import * as Reactivity from "@effect/experimental/Reactivity"
import type { PGlite } from "@electric-sql/pglite"
import { Effect } from "effect"
import { lockDataDir } from "./dataDirLock.ts"
import { type EmbeddedPglite, openPglite } from "./pglite.ts"

/**
 * Backups of the embedded database (`greenline backup <file>`, `greenline restore <file>`).
 *
 * A backup is PGlite's dump of its data directory, a gzipped tar (what `PGlite.create({ loadDataDir })` loads), made
 * while the process that holds the database runs no statement and no transaction (it holds the one connection,
 * `EmbeddedPglite.exclusive`), after a CHECKPOINT: a state between two transactions, so it is consistent while the
 * server serves. The process that holds the database makes it: `greenline backup` asks the running server through
 * its control socket, `greenline.sock` in the data directory (HTTP over a Unix socket, reachable by whoever may read
 * the data directory, the same people who could copy the database files), or opens the database itself when no
 * server runs.
 *
 * A restore loads a backup into a data directory that has no database yet, and checks that it is Greenline's.
 * PostgreSQL is backed up with its own tools (pg_dump; docs/operations.md).
 */

export const CONTROL_SOCKET = "greenline.sock"

/** The longest Unix socket path (sun_path: 108 bytes on Linux, 104 on macOS, with the closing NUL). */
const MAX_SOCKET_PATH = process.platform === "darwin" ? 103 : 107

/** What a backup holds: the newest migration of its schema (0 for a database Greenline never migrated). */
export interface BackupInfo {
  readonly bytes: number
  readonly migration: number
}

const latestMigration = async (db: PGlite): Promise<number> => {
  const exists = await db.query<{ t: string | null }>("select to_regclass('greenline_migrations')::text as t")
  if (exists.rows[0]?.t == null) return 0
  const r = await db.query<{ id: number | null }>("select max(migration_id) as id from greenline_migrations")
  return Number(r.rows[0]?.id ?? 0)
}

/** Dumps the database between two transactions: a CHECKPOINT first, so the files hold every committed change. */
export const dumpEmbedded = (embedded: EmbeddedPglite) =>
  embedded.exclusive(async (db) => {
    await db.exec("checkpoint")
    const migration = await latestMigration(db)
    const blob = await db.dumpDataDir("gzip")
    return { blob, migration }
  })

/** Writes `data` to `file` through a temporary file beside it, so that an interrupted backup leaves no torn file. */
export const writeAtomically = async (file: string, data: Blob | Response): Promise<number> => {
  const target = path.resolve(file)
  fs.mkdirSync(path.dirname(target), { recursive: true })
  const temporary = `${target}.partial-${process.pid}`
  try {
    // readable by its owner only: a backup holds token hashes and webhook secrets
    fs.writeFileSync(temporary, "", { mode: 0o600 })
    const bytes = data instanceof Response ? await Bun.write(temporary, data) : await Bun.write(temporary, data)
    fs.chmodSync(temporary, 0o600)
    const fd = fs.openSync(temporary, "r")
    try {
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(temporary, target)
    return bytes
  } catch (error) {
    fs.rmSync(temporary, { force: true })
    throw error
  }
}

/**
 * The control socket of the process that holds the embedded database: `GET /backup` answers a backup. Bound once the
 * data directory's lock is held, so a socket file found there is stale and replaced. A data directory whose path is
 * too long for a Unix socket gets none (a warning says so): `greenline backup` then needs the server stopped.
 */
export const serveControlSocket = (dataDir: string, embedded: EmbeddedPglite) =>
  Effect.acquireRelease(
    Effect.gen(function* () {
      const socket = path.resolve(dataDir, CONTROL_SOCKET)
      fs.rmSync(socket, { force: true })
      if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
        yield* Effect.logWarning(
          `the data directory's path is too long for a Unix socket (${socket}): \`greenline backup\` works only while no server runs`
        )
        return undefined
      }
      const server = yield* Effect.try(() =>
        Bun.serve({
          unix: socket,
          fetch: async (request) => {
            const url = new URL(request.url)
            if (request.method === "GET" && url.pathname === "/backup") {
              const { blob, migration } = await Effect.runPromise(dumpEmbedded(embedded))
              return new Response(blob, {
                headers: {
                  "content-type": "application/gzip",
                  "greenline-migration": String(migration),
                  "greenline-pid": String(process.pid)
                }
              })
            }
            if (request.method === "GET" && url.pathname === "/status") {
              return Response.json({ pid: process.pid })
            }
            return new Response("not found\n", { status: 404 })
          },
          error: (error) => new Response(`${error.message}\n`, { status: 500 })
        })
      ).pipe(
        Effect.tap(() => Effect.sync(() => fs.chmodSync(socket, 0o600))),
        Effect.catchAll((error) =>
          Effect.as(Effect.logWarning(`could not open the control socket ${socket}: ${String(error)}`), undefined)
        )
      )
      return server === undefined ? undefined : { server, socket }
    }),
    (bound) =>
      Effect.sync(() => {
        if (bound === undefined) return
        void bound.server.stop(true)
        fs.rmSync(bound.socket, { force: true })
      })
  )

/** Asks the process that holds the database in `dataDir` for a backup; `undefined` when no server answers there. */
export const backupThroughServer = async (
  dataDir: string,
  file: string
): Promise<(BackupInfo & { readonly pid: number }) | undefined> => {
  const socket = path.resolve(dataDir, CONTROL_SOCKET)
  if (!fs.existsSync(socket)) return undefined
  let response: Response
  try {
    response = await fetch("http://greenline/backup", { unix: socket })
  } catch {
    return undefined
  }
  if (!response.ok) throw new Error(`the server could not make the backup: ${(await response.text()).trim()}`)
  const migration = Number(response.headers.get("greenline-migration") ?? 0)
  const pid = Number(response.headers.get("greenline-pid") ?? 0)
  const bytes = await writeAtomically(file, response)
  return { bytes, migration, pid }
}

/** Backs up the database in `dataDir` from this process, which takes its lock (no server may hold it). */
export const backupLocally = (dataDir: string, file: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const pgDir = path.join(dataDir, "pg")
      yield* Effect.acquireRelease(
        Effect.try({ try: () => lockDataDir(dataDir), catch: (e) => (e instanceof Error ? e : new Error(String(e))) }),
        (lock) => Effect.sync(() => lock.release())
      )
      if (!fs.existsSync(path.join(pgDir, "PG_VERSION"))) {
        return yield* Effect.fail(new Error(`there is no embedded database in ${dataDir} (DATA_DIR)`))
      }
      const embedded = yield* openPglite(pgDir).pipe(Effect.provide(Reactivity.layer))
      const { blob, migration } = yield* dumpEmbedded(embedded)
      const bytes = yield* Effect.promise(() => writeAtomically(file, blob))
      return { bytes, migration } satisfies BackupInfo
    })
  )

const isGzip = (bytes: Uint8Array) => bytes[0] === 0x1f && bytes[1] === 0x8b

/**
 * Loads the backup `file` into `dataDir`, which must have no database yet, and checks it is Greenline's. The data
 * directory's lock is held meanwhile; a failed restore leaves no database behind.
 */
export const restoreEmbedded = async (dataDir: string, file: string): Promise<BackupInfo> => {
  if (!fs.existsSync(file)) throw new Error(`no backup file ${file}`)
  const bytes = new Uint8Array(await Bun.file(file).arrayBuffer())
  if (bytes.length < 512) throw new Error(`${file} is not a backup of Greenline (a gzipped tar of the database)`)
  const lock = lockDataDir(dataDir)
  const pgDir = path.join(dataDir, "pg")
  let made = false
  try {
    if (fs.existsSync(pgDir) && fs.readdirSync(pgDir).length > 0) {
      throw new Error(
        `${dataDir} already holds a database (${pgDir}): restore into a new data directory, or move that one away first`
      )
    }
    made = true
    const { PGlite } = await import("@electric-sql/pglite")
    let tar: Uint8Array
    try {
      tar = isGzip(bytes) ? Bun.gunzipSync(bytes) : bytes
    } catch (error) {
      throw new Error(
        `${file} is damaged (${error instanceof Error ? error.message : error}): it is not a whole backup`
      )
    }
    const blob = new Blob([tar], { type: "application/x-tar" })
    let db: PGlite
    try {
      db = await PGlite.create({ dataDir: pgDir, loadDataDir: blob })
    } catch (error) {
      throw new Error(`${file} could not be loaded as a database: ${error instanceof Error ? error.message : error}`)
    }
    try {
      const migration = await latestMigration(db)
      if (migration === 0) throw new Error(`${file} holds a database, but not Greenline's (no greenline_migrations)`)
      await db.exec("checkpoint")
      made = false
      return { bytes: bytes.length, migration }
    } finally {
      await db.close()
    }
  } finally {
    if (made) fs.rmSync(pgDir, { recursive: true, force: true })
    lock.release()
  }
}
