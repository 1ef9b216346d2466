import { edenGC } from "bun:jsc"
import { Layer } from "effect"
import { RuntimeHost, type RuntimeHostShape } from "./RuntimeHost.ts"

/** The RuntimeHost port over Bun (its SHA-1 into a buffer, its collector). Wired by the composition root only. */
export const bunRuntime: RuntimeHostShape = {
  sha1Into: (input, out) => {
    Bun.SHA1.hash(input, out)
  },
  collectYoung: () => {
    edenGC()
  },
  collectAll: () => {
    Bun.gc(true)
  }
}

export const BunRuntimeLive = Layer.succeed(RuntimeHost, bunRuntime)
