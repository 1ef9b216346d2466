import { describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Subprocess } from "bun"
import { seededDataDir } from "../support/pgliteSeed.ts"

/**
 * `npm start` (npm → its shell, which installs through scripts/bun.mjs, then becomes Bun with `exec`) stops cleanly:
 * a signal to the npm process reaches Bun, and npm ends only once Bun has ended, so the embedded database is free
 * again the moment npm has exited. Killed with SIGKILL, npm passes nothing on: the server, npm's own child, sees its
 * parent gone and stops by itself, freeing the port; the same when scripts/bun.mjs runs Bun as its child.
 */

const ROOT = path.join(import.meta.dir, "..", "..")

interface Started {
  readonly child: Subprocess<"ignore", "pipe", "pipe">
  readonly output: () => string
}

/** `npm start` (or `command`) on `dataDir`; resolves once the server listens, or fails with what it wrote. */
const npmStart = async (
  dataDir: string,
  command: ReadonlyArray<string> = ["npm", "start", "--silent"],
  port = 0
): Promise<Started> => {
  const child: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn([...command], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "error",
      BOOTSTRAP_TOKEN: "clean-stop-token-0123456789abcdef0123456789"
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  let text = ""
  let errors = ""
  void (async () => {
    const reader = child.stderr.getReader()
    const decoder = new TextDecoder()
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }))
      if (done) return
      errors += decoder.decode(value, { stream: true })
    }
  })()
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  // a start that never listens fails with what it wrote, instead of the runner's bare timeout
  const stuck = setTimeout(() => {
    void reader.cancel()
    child.kill("SIGKILL")
  }, 60_000)
  for (;;) {
    const { done, value } = await reader.read()
    if (done) throw new Error(`npm start ended before listening: ${text}\n${errors}`)
    text += decoder.decode(value, { stream: true })
    if (text.includes('"message":"greenline listening"')) break
  }
  clearTimeout(stuck)
  void (async () => {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }))
      if (done) return
      text += decoder.decode(value, { stream: true })
    }
  })()
  return { child, output: () => `${text}\n${errors}` }
}

const stopsAndRestarts = async (signal: "SIGTERM" | "SIGINT") => {
  const dataDir = await seededDataDir()
  try {
    const first = await npmStart(dataDir)
    first.child.kill(signal)
    const code = await Promise.race([
      first.child.exited,
      Bun.sleep(60_000).then(() => `npm did not exit within 60 s of ${signal}:\n${first.output()}`)
    ])
    // the server handles the signal and ends normally: npm ends with its code
    expect({ code, output: code === 0 ? "" : first.output() }).toEqual({ code: 0, output: "" })
    // at once: no "in use by process N"
    const second = await npmStart(dataDir)
    second.child.kill("SIGTERM")
    expect(await second.child.exited).toBe(0)
  } finally {
    // a server left behind by a failing run holds the lock file with its pid
    const lock = path.join(dataDir, "greenline.lock")
    const pid = fs.existsSync(lock) ? Number(fs.readFileSync(lock, "utf8").trim()) : 0
    if (pid > 0) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {}
    }
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

/** The pid in the data directory's lock file: the server's (Bun's) own. */
const serverPid = (dataDir: string) => Number(fs.readFileSync(path.join(dataDir, "greenline.lock"), "utf8").trim())

const parentOf = (pid: number) => {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
}

const answers = (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then(
    () => true,
    () => false
  )

/** SIGKILL of the launcher's process alone: within 10 s nothing answers on the port, and a new start succeeds. */
const killedLauncherFreesThePort = async (command: ReadonlyArray<string>, bunIsChild: boolean) => {
  const dataDir = await seededDataDir()
  const port = freePort()
  try {
    const started = await npmStart(dataDir, command, port)
    const server = serverPid(dataDir)
    if (bunIsChild && process.platform === "linux") {
      // npm's shell became Bun: no wrapper in between
      expect(parentOf(server)).toBe(started.child.pid)
      expect(fs.readlinkSync(`/proc/${server}/exe`)).toContain("bun")
    }
    started.child.kill("SIGKILL")
    await started.child.exited
    const deadline = performance.now() + 10_000
    while ((await answers(port)) && performance.now() < deadline) await Bun.sleep(100)
    expect(await answers(port)).toBe(false)
    // and the database is free: a new start on it succeeds
    const again = await npmStart(dataDir)
    again.child.kill("SIGTERM")
    expect(await again.child.exited).toBe(0)
  } finally {
    const lock = path.join(dataDir, "greenline.lock")
    const pid = fs.existsSync(lock) ? Number(fs.readFileSync(lock, "utf8").trim()) : 0
    if (pid > 0) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {}
    }
    fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

// One CI run saw the first `npm start` of the suite hang for 120 s (not reproduced in many runs since); a second
// attempt, with a fresh data directory, keeps such a start from failing the suite, and the 60 s guards above print
// what npm and the server wrote if it happens again.
describe("clean stops of npm start", () => {
  test(
    "SIGTERM to npm: npm exits only after the server has, and a second npm start succeeds at once",
    async () => {
      await stopsAndRestarts("SIGTERM")
    },
    { retry: 1 }
  )

  test(
    "SIGINT to npm: the same",
    async () => {
      await stopsAndRestarts("SIGINT")
    },
    { retry: 1 }
  )

  test("SIGKILL of npm start's process: Bun is npm's own child, stops by itself, and leaves nothing on the port", async () => {
    await killedLauncherFreesThePort(["npm", "start", "--silent"], true)
  })

  test("SIGKILL of node scripts/bun.mjs running the server: the server stops by itself too", async () => {
    await killedLauncherFreesThePort(["node", "scripts/bun.mjs", "--max-http-header-size=65536", "src/main.ts"], false)
  })
})
