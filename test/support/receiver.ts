/**
 * A webhook receiver on a loopback port for the events tests: records every request, answers what the test tells
 * it to, and lets a test wait for a request (a signal, not a poll; the timeout only stops a test that went wrong).
 */

export interface Received {
  readonly id: string
  readonly headers: Record<string, string>
  readonly body: string
  readonly message: { readonly type: string; readonly timestamp: string; readonly data: Record<string, unknown> }
  /** what the receiver answered */
  status: number
}

export type Responder = (r: Received) => Response | Promise<Response>

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  respond: Responder
  /** The first request (already received or to come) for which `match` holds. */
  readonly waitFor: (match: (r: Received) => boolean, what: string, timeoutMs?: number) => Promise<Received>
  /** Waits until `count` requests for which `match` holds have arrived; returns them. */
  readonly waitCount: (
    match: (r: Received) => boolean,
    count: number,
    what: string,
    timeoutMs?: number
  ) => Promise<Array<Received>>
  readonly stop: () => Promise<void>
}

export const startReceiver = (path = "/hook"): Receiver => {
  const received: Array<Received> = []
  const waiters = new Set<() => void>()
  const state: { respond: Responder } = { respond: () => new Response("ok") }
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const body = await request.text()
      const headers: Record<string, string> = {}
      request.headers.forEach((v, k) => {
        headers[k] = v
      })
      const r: Received = {
        id: headers["webhook-id"] ?? "",
        headers,
        body,
        message: JSON.parse(body) as Received["message"],
        status: 0
      }
      const response = await state.respond(r)
      r.status = response.status
      received.push(r)
      for (const w of [...waiters]) w()
      return response
    }
  })
  const waitCount = (match: (r: Received) => boolean, count: number, what: string, timeoutMs = 30_000) =>
    new Promise<Array<Received>>((resolve, reject) => {
      const check = () => {
        const found = received.filter(match)
        if (found.length < count) return false
        waiters.delete(check)
        clearTimeout(timer)
        resolve(found)
        return true
      }
      const timer = setTimeout(() => {
        waiters.delete(check)
        reject(
          new Error(
            `timed out waiting for ${what}; received: ${received.map((r) => `${r.message.type}(${r.status})`).join(" ")}`
          )
        )
      }, timeoutMs)
      if (!check()) waiters.add(check)
    })
  return {
    url: `http://127.0.0.1:${server.port}${path}`,
    received,
    get respond() {
      return state.respond
    },
    set respond(f: Responder) {
      state.respond = f
    },
    waitFor: async (match, what, timeoutMs) => {
      const [first] = await waitCount(match, 1, what, timeoutMs)
      return first as Received
    },
    waitCount,
    stop: async () => {
      await server.stop(true)
    }
  }
}
