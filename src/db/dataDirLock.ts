import * as fs from "node:fs"
import * as path from "node:path"
import { ENOLCK, EWOULDBLOCK, LOCK_EX, LOCK_NB, libc } from "../kernel/libc.ts"

/**
 * The embedded database belongs to one process. It is held by an advisory lock (`flock`) on `greenline.lock` in the
 * data directory, which the operating system releases the moment the holding process ends, however it ends: a
 * server killed with SIGKILL frees its database at once, and no pid has to be trusted (a pid can belong to a process
 * that is still being torn down, or, after a container restart, to some other process). The file only names the
 * holder, for the message; its contents never decide anything. The file is never removed: a process that opened it
 * just before an unlink would lock a file nobody else can see.
 *
 * `flock` is reached through `bun:ffi` (libc on Linux, glibc or musl, and macOS). Where there is none, the lock falls
 * back to a file created exclusively, holding the pid (the old scheme).
 */

/** Raised when the embedded database is held by another process. */
export class DatabaseLocked extends Error {
  override readonly name = "DatabaseLocked"
}

export const LOCK_FILE = "greenline.lock"

const holderOf = (file: string): string => {
  try {
    const pid = Number(fs.readFileSync(file, "utf8").trim().split(/\s+/)[0])
    return Number.isInteger(pid) && pid > 0 ? ` by process ${pid}` : ""
  } catch {
    return ""
  }
}

const inUse = (dir: string, holder: string) =>
  new DatabaseLocked(
    `the embedded database in ${dir} is in use${holder}: stop that server first (or, while it runs, use its admin API or \`greenline backup\`), or set DATABASE_URL to use PostgreSQL`
  )

export interface DataDirLock {
  readonly file: string
  readonly release: () => void
}

/** Takes the data directory's lock, or throws `DatabaseLocked` when another process holds it. */
export const lockDataDir = (dir: string): DataDirLock => {
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, LOCK_FILE)
  const lib = libc()
  if (lib === null) return lockByPidFile(dir, file)
  // O_CLOEXEC (Bun opens with it): the processes the server starts (git, CI) never inherit the lock
  const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644)
  if (lib.flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    const errno = lib.errno()
    fs.closeSync(fd)
    if (ENOLCK.has(errno)) {
      throw new Error(`the file system of ${dir} does not support locks (flock): DATA_DIR must be on a local disk`)
    }
    if (!EWOULDBLOCK.has(errno)) throw new Error(`could not lock ${file} (errno ${errno})`)
    throw inUse(dir, holderOf(file))
  }
  // for the message of whoever finds it held; a stale pid left here by a killed holder means nothing
  fs.ftruncateSync(fd, 0)
  fs.writeSync(fd, `${process.pid}\n`, 0)
  let released = false
  return {
    file,
    release: () => {
      if (released) return
      released = true
      try {
        fs.ftruncateSync(fd, 0)
      } catch {}
      fs.closeSync(fd)
    }
  }
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Without flock: a file created exclusively, holding the pid; a file naming a process that is gone is removed. */
const lockByPidFile = (dir: string, file: string): DataDirLock => {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: "wx" })
      return { file, release: () => fs.rmSync(file, { force: true }) }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
      const pid = Number(fs.readFileSync(file, "utf8").trim())
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) throw inUse(dir, holderOf(file))
      fs.rmSync(file, { force: true })
    }
  }
  throw new DatabaseLocked(`could not lock the embedded database in ${dir}`)
}
