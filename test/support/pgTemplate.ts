import { Effect, Layer } from "effect"
import { layerPostgres } from "../../src/db/Database.ts"

/**
 * `bun test/support/pgTemplate.ts <url>` runs every migration on the (new, empty) database at <url> and closes its
 * connections: scripts/test.ts makes it once per suite, and freshPostgres copies it (CREATE DATABASE … TEMPLATE).
 */
const url = process.argv[2]
if (url === undefined) throw new Error("usage: bun test/support/pgTemplate.ts <database url>")
await Effect.runPromise(Effect.scoped(Layer.build(layerPostgres(url))))
