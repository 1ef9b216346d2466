import * as path from "node:path"

/**
 * Builds the single-file CI client (`src/client/bin.ts` and what it imports, tinyglobby included) with `bun build`
 * for Node.js: one ES module, no dependencies, runnable as `node greenline.mjs`. The server builds it once, on the
 * first request of `GET /cli/greenline.mjs`; the container image builds it at image build time.
 */
export const CLIENT_ENTRY = path.join(import.meta.dir, "bin.ts")

export const buildClient = async (): Promise<string> => {
  const result = await Bun.build({ entrypoints: [CLIENT_ENTRY], target: "node", format: "esm", minify: false })
  const output = result.outputs[0]
  if (!result.success || output === undefined) {
    throw new Error(`the CI client did not build: ${result.logs.map(String).join("; ")}`)
  }
  const text = await output.text()
  return `#!/usr/bin/env node\n${text.replace(/^#!.*\n/, "")}`
}

let cached: Promise<string> | undefined
/** The built client, built on the first call and kept (a failed build is tried again next time). */
export const clientBundle = (): Promise<string> => {
  cached ??= buildClient().catch((e: unknown) => {
    cached = undefined
    throw e
  })
  return cached
}
