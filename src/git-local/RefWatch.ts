import * as fs from "node:fs"
import * as path from "node:path"
import { Duration, Effect, Fiber, type Scope } from "effect"

/**
 * Push detection for the local Git provider (#37): one poll shared by every queue of the instance, at most every
 * `everyMs`, that looks at the files behind the refs each queue watches (its target branch, its entries' PR heads)
 * instead of asking git. A ref update writes the loose ref through a lock file renamed over it (a new inode), and
 * `git pack-refs` rewrites `packed-refs` (a reftable repository its `reftable/tables.list`): a `stat` of those files
 * tells whether a watched ref may have moved, at a few microseconds a file and no process. A watcher is told of a
 * change; the queue then asks git what moved, as before. So an idle queue costs one `stat` per poll, not a round.
 */

interface Watcher {
  readonly gitDir: string
  readonly refs: () => ReadonlyArray<string>
  readonly changed: () => void
  last: string
}

/** The file's identity and last change, or "-" when it does not exist. */
const stamp = (file: string): string => {
  try {
    const s = fs.statSync(file, { bigint: true })
    return `${s.ino}:${s.mtimeNs}:${s.size}`
  } catch {
    return "-"
  }
}

export interface RefWatch {
  /**
   * Watches `refs` (full names, read again at each poll) of the bare repository `gitDir` until the scope closes;
   * `changed` is called (synchronously, from the poll) when one of them may have moved.
   */
  readonly watch: (
    gitDir: string,
    refs: () => ReadonlyArray<string>,
    changed: () => void
  ) => Effect.Effect<void, never, Scope.Scope>
  /** One pass of the poll now (tests step it instead of waiting for the timer). */
  readonly check: () => void
  /** How many watchers are registered. */
  readonly size: () => number
}

export const makeRefWatch = (everyMs: number): RefWatch => {
  const watchers = new Set<Watcher>()
  let fiber: Fiber.RuntimeFiber<void, never> | undefined

  const fingerprint = (gitDir: string, refs: ReadonlyArray<string>, dirStamps: Map<string, string>) => {
    let dirPart = dirStamps.get(gitDir)
    if (dirPart === undefined) {
      dirPart = `${stamp(path.join(gitDir, "packed-refs"))}|${stamp(path.join(gitDir, "reftable", "tables.list"))}`
      dirStamps.set(gitDir, dirPart)
    }
    let out = dirPart
    for (const ref of refs) out += `|${ref}=${stamp(path.join(gitDir, ref))}`
    return out
  }

  const check = () => {
    // a repository's packed refs are looked at once per pass, however many queues watch it
    const dirStamps = new Map<string, string>()
    const moved: Array<Watcher> = []
    for (const w of watchers) {
      const now = fingerprint(w.gitDir, w.refs(), dirStamps)
      if (now !== w.last) {
        w.last = now
        moved.push(w)
      }
    }
    for (const w of moved) w.changed()
  }

  const loop: Effect.Effect<void, never> = Effect.forever(
    Effect.zipRight(Effect.sleep(Duration.millis(everyMs)), Effect.sync(check))
  )

  const watch = (gitDir: string, refs: () => ReadonlyArray<string>, changed: () => void) =>
    Effect.asVoid(
      Effect.acquireRelease(
        Effect.sync(() => {
          const w: Watcher = { gitDir, refs, changed, last: fingerprint(gitDir, refs(), new Map()) }
          watchers.add(w)
          // the poll runs while someone watches: it is the provider's, not any one queue's
          if (fiber === undefined) fiber = Effect.runFork(loop)
          return w
        }),
        (w) =>
          Effect.suspend(() => {
            watchers.delete(w)
            if (watchers.size > 0 || fiber === undefined) return Effect.void
            const f = fiber
            fiber = undefined
            return Fiber.interrupt(f)
          })
      )
    )

  return { watch, check, size: () => watchers.size }
}
