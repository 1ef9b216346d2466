import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import { layerPgliteAt } from "../../src/db/Database.ts"
import { tempDir } from "./tmp.ts"

/**
 * A migrated, empty embedded database, dumped once per test process: each in-memory PGlite of a test starts from it
 * (AppConfig.embeddedSeed, layerPgliteMemory) instead of running initdb and every migration again, which costs
 * seconds of CPU per server. The migrations themselves still run for real, here.
 */
let seed: Promise<Blob> | undefined

export const pgliteSeed = (): Promise<Blob> => {
  seed ??= (async () => {
    const dir = tempDir("greenline-seed-")
    try {
      await Effect.runPromise(Effect.scoped(Layer.build(layerPgliteAt(dir))))
      const { PGlite } = await import("@electric-sql/pglite")
      const db = await PGlite.create(path.join(dir, "pg"))
      const dump = await db.dumpDataDir("none")
      await db.close()
      return dump
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })()
  return seed
}
