import { dlopen, FFIType, type Pointer, read } from "bun:ffi"
import * as fs from "node:fs"

/**
 * The few C library calls Bun and Node.js do not offer: `flock` (the embedded database's lock, db/dataDirLock.ts) and
 * `getppid` (Bun's `process.ppid` is read once, at start, so it never shows that the parent has gone). Through
 * `bun:ffi`, on Linux (glibc or musl) and macOS; `null` elsewhere, and callers fall back.
 */
export interface Libc {
  readonly flock: (fd: number, operation: number) => number
  /** The calling thread's errno, right after a call that failed. */
  readonly errno: () => number
  readonly getppid: () => number
}

export const LOCK_EX = 2
export const LOCK_NB = 4
/** EWOULDBLOCK (EAGAIN) on Linux and on macOS. */
export const EWOULDBLOCK = new Set([11, 35])
/** ENOLCK on Linux and on macOS. */
export const ENOLCK = new Set([37, 77])

let loaded: Libc | null | undefined

export const libc = (): Libc | null => {
  if (loaded !== undefined) return loaded
  loaded = null
  const candidates =
    process.platform === "darwin"
      ? ["libc.dylib", "/usr/lib/libSystem.B.dylib"]
      : process.platform === "linux"
        ? ["libc.so.6", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`, "libc.so"]
        : []
  const errnoSymbol = process.platform === "darwin" ? "__error" : "__errno_location"
  for (const name of candidates) {
    try {
      const lib = dlopen(name, {
        flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
        getppid: { args: [], returns: FFIType.i32 },
        [errnoSymbol]: { args: [], returns: FFIType.ptr }
      })
      const errnoOf = lib.symbols[errnoSymbol] as () => Pointer | null
      loaded = {
        flock: (fd, operation) => lib.symbols.flock(fd, operation) as number,
        getppid: () => lib.symbols.getppid() as number,
        errno: () => {
          const at = errnoOf()
          return at === null ? 0 : read.i32(at, 0)
        }
      }
      return loaded
    } catch {}
  }
  return loaded
}

/** The parent's pid now (after the parent died: 1, or the subreaper that adopted this process). */
export const currentParentPid = (): number => {
  const lib = libc()
  if (lib !== null) return lib.getppid()
  try {
    // Linux without a usable libc: field 4 of /proc/self/stat, after the command name in parentheses
    const stat = fs.readFileSync("/proc/self/stat", "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return process.ppid
  }
}
