import { runClient } from "./main.ts"

/** The entry point of the single-file client (`node greenline.mjs <command>`). */
process.exitCode = await runClient(process.argv.slice(2), process.env)
