import { afterAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Subprocess } from "bun"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { removeDir } from "../support/tmp.ts"

/**
 * Crash and restart of the embedded database (issue 38): the data directory's lock is released by the operating
 * system when its holder dies, so a server killed with SIGKILL (its whole process group) can always be started again
 * at once, a lock file that names some live process that is not a Greenline server blocks nothing, and two servers on
 * one data directory are still refused. Every write a killed server acknowledged is there after the restart.
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const TOKEN = "crash-restart-token-0123456789abcdef0123456789"
const CYCLES = 20

interface Started {
  readonly child: Subprocess<"ignore", "pipe", "pipe">
  readonly url: string
  readonly stderr: () => string
}

const groups = new Set<number>()
const killGroup = (pid: number) => {
  try {
    process.kill(-pid, "SIGKILL")
  } catch {}
}
process.once("exit", () => {
  for (const pid of groups) killGroup(pid)
})

/** The server as the container and `npm start` run it, in a process group of its own (`detached`). */
const spawn = (dataDir: string): Subprocess<"ignore", "pipe", "pipe"> => {
  const child = Bun.spawn([process.execPath, "--max-http-header-size=65536", "src/main.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      DATABASE_URL: "",
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "error",
      BOOTSTRAP_TOKEN: TOKEN,
      GIT_POLL_MS: "60000"
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true
  })
  groups.add(child.pid)
  void child.exited.then(() => groups.delete(child.pid))
  return child
}

const drain = (stream: ReadableStream<Uint8Array>, keep: (text: string) => void) => {
  void (async () => {
    const reader = stream.getReader()
    const decoder = new TextDecoder()
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }))
      if (done) return
      keep(decoder.decode(value, { stream: true }))
    }
  })()
}

/** Starts a server on `dataDir`; resolves once it listens, or fails with what it wrote. */
const start = async (dataDir: string): Promise<Started> => {
  const child = spawn(dataDir)
  let errors = ""
  drain(child.stderr, (t) => {
    errors = (errors + t).slice(-20_000)
  })
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  let text = ""
  const stuck = setTimeout(() => killGroup(child.pid), 60_000)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) {
        await child.exited
        throw new Error(`the server exited (${child.exitCode}) before listening:\n${text}\n${errors}`)
      }
      text += decoder.decode(value, { stream: true })
      const port = /"message":"greenline listening","port":(\d+)/.exec(text)?.[1]
      if (port !== undefined) {
        reader.releaseLock()
        drain(child.stdout, () => {})
        return { child, url: `http://127.0.0.1:${port}`, stderr: () => errors }
      }
    }
  } finally {
    clearTimeout(stuck)
  }
}

const killed = async (server: Started) => {
  killGroup(server.child.pid)
  await server.child.exited
}

const post = async (url: string, op: string, body: unknown) => {
  const r = await fetch(`${url}/v1/${op}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-token": TOKEN },
    body: JSON.stringify(body)
  })
  return { status: r.status, body: (await r.json()) as Record<string, unknown> }
}

const key = (i: number) => ({ repo: { host: "local", owner: "crash", name: `repo-${i}` }, targetBranch: "main" })

describe("crash and restart (PGlite)", () => {
  const dirs: Array<string> = []
  afterAll(() => {
    for (const dir of dirs) removeDir(dir)
  })

  test(`${CYCLES} times: SIGKILL of the server's process group, a start 0.5 s later succeeds, and acknowledged writes survive`, async () => {
    const dataDir = await seededDataDir()
    dirs.push(dataDir)
    const acknowledged: Array<number> = []
    const starts: Array<number> = []
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      const began = performance.now()
      const server = await start(dataDir)
      starts.push(Math.round(performance.now() - began))
      // one write answered before the kill, and others in flight when it comes (at a different moment each cycle)
      const made = await post(server.url, "createQueue", key(cycle))
      expect(made.status).toBe(200)
      acknowledged.push(cycle)
      for (let k = 1; k <= 3; k++) void post(server.url, "createQueue", key(1000 + cycle * 10 + k)).catch(() => {})
      await Bun.sleep((cycle * 37) % 120)
      await killed(server)
      await Bun.sleep(500)
    }
    const last = await start(dataDir)
    try {
      for (const i of acknowledged) expect((await post(last.url, "getQueue", key(i))).status).toBe(200)
    } finally {
      await killed(last)
    }
    console.log(`starts after SIGKILL (ms): ${starts.join(", ")}`)
  }, 300_000)

  test("a lock file naming a live process that is not a Greenline server does not block a start", async () => {
    const dataDir = await seededDataDir()
    dirs.push(dataDir)
    // this test process is alive, and it is not a server: the old pid lock refused to start here
    fs.writeFileSync(path.join(dataDir, "greenline.lock"), `${process.pid}\n`)
    const server = await start(dataDir)
    await killed(server)
  })

  test("two servers on one data directory: the second is refused, naming the first", async () => {
    const dataDir = await seededDataDir()
    dirs.push(dataDir)
    const first = await start(dataDir)
    try {
      const second = await start(dataDir).then(
        async (s) => {
          await killed(s)
          return "started"
        },
        (e: Error) => e.message
      )
      expect(second).toContain(`is in use by process ${first.child.pid}`)
      // the refused start touched nothing: the first still answers
      expect((await post(first.url, "createQueue", key(1))).status).toBe(200)
    } finally {
      await killed(first)
    }
  })
})
