import * as path from "node:path"
import type { Subprocess } from "bun"

/** A Greenline server in its own process (`bun src/main.ts`), for crash and multi-instance tests. */

const ROOT = path.join(import.meta.dir, "..", "..")

export interface ServerProcess {
  readonly url: string
  readonly pid: number
  readonly kill: (signal?: NodeJS.Signals) => Promise<void>
  readonly post: (op: string, body: unknown) => Promise<{ status: number; body: unknown }>
  /** Resolves at the next event the server streams (GET /v1/events/stream: a pull request or a run changed, in any
   * instance on its database), or after `maxMs`: the scenario language's signal that the queue moved. */
  readonly nextRound: (maxMs: number) => Promise<void>
  /** The end of what the server wrote to stderr. */
  readonly stderr: () => string
}

/** Servers still running when the test process exits (a test that failed before its own kill) are killed then. */
const running = new Set<Subprocess>()
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/** `root`: the checkout whose server to run (bench:api-compare runs another commit's); this one by default. */
export const spawnServer = async (
  env: Record<string, string>,
  token: string,
  root: string = ROOT
): Promise<ServerProcess> => {
  const child: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn([process.execPath, "src/main.ts"], {
    cwd: root,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "error", BOOTSTRAP_TOKEN: token, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  running.add(child)
  void child.exited.then(() => running.delete(child))
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  let buffered = ""
  let port: number | undefined
  const deadline = performance.now() + 60_000
  while (port === undefined) {
    if (performance.now() > deadline) throw new Error("the server did not start")
    const { done, value } = await reader.read()
    if (done) throw new Error(`the server exited: ${await new Response(child.stderr).text()}`)
    buffered += decoder.decode(value, { stream: true })
    const match = /"message":"greenline listening","port":(\d+)/.exec(buffered)
    if (match?.[1] !== undefined) port = Number(match[1])
  }
  // keep draining stdout and stderr so the child never blocks on a full pipe (what it logs to stderr is kept, the
  // last 64 KiB, for a failing test to show)
  void (async () => {
    for (;;) {
      const { done } = await reader.read().catch(() => ({ done: true }))
      if (done) return
    }
  })()
  let stderrTail = ""
  void (async () => {
    const errors = child.stderr.getReader()
    const errorDecoder = new TextDecoder()
    for (;;) {
      const { done, value } = await errors.read().catch(() => ({ done: true, value: undefined }))
      if (done) return
      stderrTail = (stderrTail + errorDecoder.decode(value, { stream: true })).slice(-65_536)
    }
  })()
  const url = `http://127.0.0.1:${port}`
  const events = watchEvents(url, token, child.exited)
  return {
    url,
    pid: child.pid,
    kill: async (signal = "SIGKILL") => {
      child.kill(signal)
      await child.exited
    },
    nextRound: events.next,
    stderr: () => stderrTail,
    post: async (op, body) => {
      const r = await fetch(`${url}/v1/${op}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-token": token },
        body: JSON.stringify(body)
      })
      return { status: r.status, body: await r.json() }
    }
  }
}

/**
 * The server's event stream, read from the first `next` on until the server exits: each event wakes those waiting.
 * A stream that ends early (the server was killed) leaves `next` to its timeout.
 */
const watchEvents = (url: string, token: string, exited: Promise<unknown>) => {
  let waiters: Array<() => void> = []
  let opened = false
  const controller = new AbortController()
  void exited.then(() => controller.abort())
  const read = async () => {
    const response = await fetch(`${url}/v1/events/stream`, {
      headers: { "x-api-token": token },
      signal: controller.signal
    })
    const reader = response.body?.getReader()
    const decoder = new TextDecoder()
    let buffered = ""
    for (;;) {
      const chunk = await reader?.read()
      if (chunk === undefined || chunk.done) return
      buffered += decoder.decode(chunk.value, { stream: true })
      // an event ends with a blank line; comments (": ...", the heartbeat) wake nobody
      const blocks = buffered.split("\n\n")
      buffered = blocks.pop() ?? ""
      if (blocks.some((b) => /^event:/m.test(b))) {
        const woken = waiters
        waiters = []
        for (const wake of woken) wake()
      }
    }
  }
  const next = (maxMs: number) => {
    if (!opened) {
      opened = true
      void read().catch(() => undefined)
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, maxMs)
      waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
  return { next }
}
