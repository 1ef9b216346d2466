import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import { layerPgliteAt } from "../../src/db/Database.ts"
import { removeDir, tempDir } from "./tmp.ts"

/**
 * A migrated, empty embedded database, dumped once per test process: each in-memory PGlite of a test starts from it
 * (AppConfig.embeddedSeed, layerPgliteMemory) instead of running initdb and every migration again, which costs
 * seconds of CPU per server. The migrations themselves still run for real, here.
 */
let seed: Promise<Blob> | undefined

export const pgliteSeed = (): Promise<Blob> => {
  // made once for the whole suite by scripts/test.ts, which runs several test processes
  const file = process.env.GREENLINE_TEST_SEED
  if (seed === undefined && file !== undefined && fs.existsSync(file)) {
    seed = Bun.file(file)
      .arrayBuffer()
      .then((bytes) => new Blob([bytes]))
  }
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
      removeDir(dir)
    }
  })()
  return seed
}

let template: Promise<string> | undefined

/**
 * A new DATA_DIR whose embedded database is the migrated seed, for tests of restarts and stops: a server started
 * on an empty DATA_DIR runs initdb and every migration first (about ten seconds of CPU), which only the first-run
 * tests are about. The seed is loaded into one folder per test process, copied for each DATA_DIR.
 */
export const seededDataDir = async (): Promise<string> => {
  template ??= (async () => {
    const dir = tempDir("greenline-seeded-")
    const { PGlite } = await import("@electric-sql/pglite")
    const db = await PGlite.create({ dataDir: path.join(dir, "pg"), loadDataDir: await pgliteSeed() })
    await db.close()
    return dir
  })()
  const source = await template
  const dir = tempDir()
  fs.cpSync(source, dir, { recursive: true })
  return dir
}

// `bun test/support/pgliteSeed.ts <file>` writes the dump to <file> (scripts/test.ts)
if (import.meta.main) {
  const target = process.argv[2]
  if (target === undefined) throw new Error("usage: bun test/support/pgliteSeed.ts <file>")
  await Bun.write(target, await pgliteSeed())
}
