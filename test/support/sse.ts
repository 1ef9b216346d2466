/**
 * A client of the live event stream (GET /v1/events/stream) for tests: `next` resolves with the next event as it
 * arrives (comments and heartbeats skipped), and fails when the stream ends or nothing came within `timeoutMs`.
 */

export interface SseEvent {
  readonly id: string
  readonly event: string
  readonly data: { readonly type: string; readonly data: Record<string, unknown> }
}

export interface OpenStream {
  readonly response: Response
  readonly next: (timeoutMs?: number) => Promise<SseEvent>
  readonly take: (n: number) => Promise<Array<SseEvent>>
  readonly close: () => void
}

export const openStream = async (
  server: { readonly url: string; readonly token: string },
  query = "",
  headers: Record<string, string> = {}
): Promise<OpenStream> => {
  const controller = new AbortController()
  const response = await fetch(`${server.url}/v1/events/stream${query}`, {
    headers: { "x-api-token": server.token, ...headers },
    signal: controller.signal
  })
  const reader = response.body?.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  const next = async (timeoutMs = 30_000): Promise<SseEvent> => {
    const deadline = performance.now() + timeoutMs
    for (;;) {
      const end = buffer.indexOf("\n\n")
      if (end >= 0) {
        const block = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const fields = new Map<string, string>()
        for (const line of block.split("\n")) {
          if (line.startsWith(":") || line === "") continue
          const i = line.indexOf(":")
          fields.set(line.slice(0, i), line.slice(i + 1).trimStart())
        }
        if (!fields.has("data")) continue
        return {
          id: fields.get("id") ?? "",
          event: fields.get("event") ?? "",
          data: JSON.parse(fields.get("data") ?? "{}") as SseEvent["data"]
        }
      }
      if (reader === undefined) throw new Error(`no body (status ${response.status})`)
      const left = deadline - performance.now()
      if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`)
      let timer: ReturnType<typeof setTimeout> | undefined
      const chunk = await Promise.race([
        reader.read(),
        new Promise<"timeout">((resolve) => {
          timer = setTimeout(() => resolve("timeout"), left)
        })
      ])
      clearTimeout(timer)
      if (chunk === "timeout") throw new Error(`no event within ${timeoutMs} ms`)
      if (chunk.done) throw new Error("the stream ended")
      buffer += decoder.decode(chunk.value, { stream: true })
    }
  }
  const take = async (n: number) => {
    const out: Array<SseEvent> = []
    for (let i = 0; i < n; i++) out.push(await next())
    return out
  }
  return { response, next, take, close: () => controller.abort() }
}
