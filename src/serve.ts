import { Layer, Runtime } from "effect"
import { AppConfig } from "./config.ts"
import { describeCause } from "./kernel/errors.ts"
import { currentParentPid } from "./kernel/libc.ts"
import type { RunningServer } from "./server.ts"
import { checkSurroundings, EXIT_CONFIG, readSettings } from "./startup.ts"

/** The server, configured from the environment (contract.md §5): `bun src/main.ts` (main.ts), `greenline serve`. */

/** How long a stop may take before the process ends regardless (below Docker's default 10 s grace period). */
const STOP_GRACE_MS = 8_000

const log = (level: "INFO" | "ERROR", message: string, extra: Record<string, unknown> = {}) => {
  const line = `${JSON.stringify({ level, time: new Date().toISOString(), message, ...extra })}\n`
  if (level === "ERROR") process.stderr.write(line)
  else process.stdout.write(line)
}

// The signal handlers come first: a signal that arrives while the server starts is not the runtime's default (an
// abrupt end) but a stop as soon as the server is up (or at the deadline).
let server: RunningServer | undefined
let stopping = false
const stop = (running: RunningServer) =>
  running.stop().then(
    () => process.exit(0),
    () => process.exit(1)
  )
const shutdown = (signal: string) => {
  if (stopping) return
  stopping = true
  log("INFO", `${signal}: shutting down`)
  // a stop that hangs (a runner that does not yield, a database that does not close) must not outlive the grace
  // period a supervisor gives and be killed half-way: the process ends itself before
  setTimeout(() => {
    log("ERROR", `the server did not stop within ${STOP_GRACE_MS} ms: exiting`)
    process.exit(1)
  }, STOP_GRACE_MS)
  if (server !== undefined) void stop(server)
}
process.on("SIGTERM", () => shutdown("SIGTERM"))
process.on("SIGINT", () => shutdown("SIGINT"))
process.on("SIGHUP", () => shutdown("SIGHUP"))

/**
 * A launcher that may die without passing anything on (`npm start`'s npm, killed with SIGKILL; scripts/bun.mjs) names
 * itself in GREENLINE_PARENT_PID: the server then stops as soon as that parent is gone, as on SIGTERM, instead of
 * living on, adopted by init, with the port and the database. The variable is removed from the environment, so the
 * processes the server starts do not inherit it; a server whose parent is not the one named (the variable was
 * inherited from some other tree of processes) ignores it.
 */
const PARENT_POLL_MS = 200
const followParent = () => {
  const named = Number(process.env.GREENLINE_PARENT_PID ?? "")
  delete process.env.GREENLINE_PARENT_PID
  if (!Number.isInteger(named) || named <= 1 || currentParentPid() !== named) return
  const timer = setInterval(() => {
    if (currentParentPid() === named) return
    clearInterval(timer)
    shutdown("parent process exited")
  }, PARENT_POLL_MS)
  timer.unref()
}
followParent()

// Every setting first, then what they point at (the address, the database), before anything is opened or written:
// a refusal names each variable with its value and what it takes, and leaves the data directory untouched. The
// server's modules are loaded only then, so a refusal comes within a fraction of a second.
function refuse(problems: ReadonlyArray<string>, what: string): never {
  for (const problem of problems) log("ERROR", problem, { refused: problem.split(/[= (:]/, 1)[0] })
  log("ERROR", `greenline could not start: ${what} (above); nothing was changed`)
  process.exit(EXIT_CONFIG)
}
const settings = await readSettings()
if (!settings.ok) refuse(settings.problems, `${settings.problems.length} setting(s) refused`)
const config = settings.value
const surroundings = await checkSurroundings(config)
if (surroundings.length > 0) refuse(surroundings, "the settings point at what cannot be used")
const { startServer } = await import("./server.ts")

server = await startServer(Layer.succeed(AppConfig, config)).catch((error: unknown) => {
  // with what caused it (a driver's "too many clients already" under a generic "Failed to acquire connection"),
  // without the stack traces
  const cause = Runtime.isFiberFailure(error)
    ? describeCause(error[Runtime.FiberFailureCauseId])
        .split("\n")
        .filter((line) => line.trim() !== "" && !/^\s+at /.test(line))
        .join("; ")
    : String(error instanceof Error ? error.message : error)
  log("ERROR", "greenline could not start", { cause })
  process.exit(1)
})
if (stopping) void stop(server)
