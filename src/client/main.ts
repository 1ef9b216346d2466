import { isApiCommand, runApiCommand } from "./commands.ts"
import { type ClientIo, defaultIo, type Env, EXIT_CODES_HELP } from "./io.ts"
import { runTest } from "./test.ts"
import { runUpload } from "./upload.ts"

/**
 * The `greenline` CI client: one file (`GET /cli/greenline.mjs`, built by `bun build` from these sources) that runs
 * on plain Node.js ≥ 20 or Bun, with no checkout of Greenline and no dependencies.
 */

export const CLIENT_VERSION = "0.1.0"

/** Each command of the client with its one-line description (the server's CLI shows the same). */
export const CLIENT_COMMANDS = {
  upload: "Upload JUnit XML results; exit 0 when every failure is quarantined",
  test: "Run a test command, upload the JUnit files it wrote, pass when it failed only on quarantined tests",
  "quarantine list": "List the repository's quarantined tests",
  "quarantine set": "Quarantine a test always, never, or automatically (auto)",
  "queue status": "Show a merge queue and the pull requests in it",
  submit: "Submit a pull request to a merge queue",
  cancel: "Take a pull request out of a merge queue"
} as const

export const CLIENT_USAGE = `greenline ${CLIENT_VERSION}: the Greenline CI client

usage: greenline <command> [options]     (greenline <command> --help for its options)

${Object.entries(CLIENT_COMMANDS)
  .map(([name, description]) => `  ${name.padEnd(17)}${description}`)
  .join("\n")}

Every command reads the server and token from --url/--token or GREENLINE_URL/GREENLINE_TOKEN, and the
repository from --repo or GREENLINE_REPO (host/owner/name, e.g. github.com/acme/web). It gives up connecting
after 10 s and waiting for an answer after 60 s (--connect-timeout, --timeout), and tries again after connection
errors, 429 and 5xx (--retries, 3 by default) when that is safe.

${EXIT_CODES_HELP}`

/** Runs the client on `argv` (the arguments after the program); resolves with the exit code. */
export const runClient = async (argv: ReadonlyArray<string>, env: Env, io: ClientIo = defaultIo()): Promise<number> => {
  const [first, second] = argv
  if (first === undefined || first === "--help" || first === "-h" || first === "help") {
    io.out(CLIENT_USAGE)
    return first === undefined ? 2 : 0
  }
  if (first === "--version" || first === "-v") {
    io.out(CLIENT_VERSION)
    return 0
  }
  if (first === "upload") return runUpload(argv.slice(1), env, io)
  if (first === "test") return runTest(argv.slice(1), env, io)
  const two = `${first} ${second ?? ""}`
  if (isApiCommand(two)) return runApiCommand(two, argv.slice(2), env, io)
  if (isApiCommand(first)) return runApiCommand(first, argv.slice(1), env, io)
  io.err(`greenline: unknown command ${[first, second].filter(Boolean).join(" ")}`)
  io.err(CLIENT_USAGE)
  return 2
}
