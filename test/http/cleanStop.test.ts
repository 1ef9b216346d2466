import { describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Subprocess } from "bun"
import { seededDataDir } from "../support/pgliteSeed.ts"

/**
 * `npm start` (npm → scripts/bun.mjs → Bun) stops cleanly: a signal to the npm process reaches Bun, and npm ends
 * only once Bun has ended, so the embedded database is free again the moment npm has exited.
 */

const ROOT = path.join(import.meta.dir, "..", "..")

interface Started {
  readonly child: Subprocess<"ignore", "pipe", "pipe">
  readonly output: () => string
}

/** `npm start` on `dataDir`; resolves once the server listens, or fails with what it wrote. */
const npmStart = async (dataDir: string): Promise<Started> => {
  const child: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn(["npm", "start", "--silent"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      PORT: "0",
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
})
