import { AppConfigLive } from "./config.ts"
import { startServer } from "./server.ts"

/** `bun src/main.ts`: the server, configured from the environment (contract.md §5). */
const server = await startServer(AppConfigLive).catch((error: unknown) => {
  process.stderr.write(
    `${JSON.stringify({ level: "ERROR", time: new Date().toISOString(), message: "greenline could not start", cause: String(error instanceof Error ? error.message : error) })}\n`
  )
  process.exit(1)
})

let stopping = false
const shutdown = (signal: string) => {
  if (stopping) return
  stopping = true
  process.stdout.write(
    `${JSON.stringify({ level: "INFO", time: new Date().toISOString(), message: `${signal}: shutting down` })}\n`
  )
  server.stop().then(
    () => process.exit(0),
    () => process.exit(1)
  )
}
process.on("SIGTERM", () => shutdown("SIGTERM"))
process.on("SIGINT", () => shutdown("SIGINT"))
