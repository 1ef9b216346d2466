import * as net from "node:net"
import * as tls from "node:tls"

/**
 * The CI client's HTTP, on plain Node.js and on Bun without a dependency: a connect timeout apart from the request's,
 * and failures that say what failed (the name could not be resolved, the connection was refused, the certificate was
 * refused, nothing answered in time).
 */

export interface HttpRequest {
  readonly url: string
  readonly method: "GET" | "POST"
  readonly headers: Readonly<Record<string, string>>
  readonly body?: Uint8Array | undefined
  /** until the connection is made (with TLS: until the handshake ended) */
  readonly connectTimeoutMs: number
  /** until the whole answer arrived, from the start */
  readonly timeoutMs: number
}

export interface HttpAnswer {
  readonly status: number
  /** header names in lower case */
  readonly headers: Readonly<Record<string, string>>
  readonly text: string
}

/** Why no answer came. `sent`: the request may have reached the server (it is safe to send again only when idempotent). */
export type FailureKind = "dns" | "refused" | "tls" | "connect-timeout" | "timeout" | "reset" | "other"

export class TransportError extends Error {
  constructor(
    message: string,
    readonly kind: FailureKind,
    readonly sent: boolean
  ) {
    super(message)
  }
}

/** Sends a request and reads its answer: the one transport the client uses (tests replace it, `ClientIo.request`). */
export type Transport = (request: HttpRequest) => Promise<HttpAnswer>

const TLS_CODES =
  /^(CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|ERR_TLS_|ERR_SSL_|HOSTNAME_MISMATCH|EPROTO)/

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`

/** What an error of the connection says, for a person: the cause first, then its code. */
export const describeFailure = (
  error: unknown,
  where: string,
  phase: "connect" | "request"
): { readonly kind: FailureKind; readonly message: string } => {
  const e = error as { code?: unknown; message?: unknown; cause?: unknown; hostname?: unknown }
  const inner = (e?.cause ?? {}) as { code?: unknown; message?: unknown }
  const code = String(e?.code ?? inner.code ?? "")
  const text = String(e?.message ?? inner.message ?? error)
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME" || /getaddrinfo/i.test(text))
    return { kind: "dns", message: `cannot resolve the server's name (${where}): DNS says ${code || text}` }
  if (code === "ECONNREFUSED" || /connection refused/i.test(text))
    return {
      kind: "refused",
      message: `the connection to ${where} was refused (nothing listens there: ${code || text})`
    }
  if (TLS_CODES.test(code) || /certificate|TLS|SSL/i.test(text))
    return { kind: "tls", message: `the TLS connection to ${where} failed: ${text}${code ? ` (${code})` : ""}` }
  if (code === "ETIMEDOUT" || /timed? ?out/i.test(text))
    return phase === "connect"
      ? { kind: "connect-timeout", message: `no connection to ${where}: ${text}` }
      : { kind: "timeout", message: `no answer from ${where}: ${text}` }
  if (code === "ECONNRESET" || code === "EPIPE" || /socket hang up|closed/i.test(text))
    return { kind: "reset", message: `the connection to ${where} was closed before an answer (${code || text})` }
  return { kind: "other", message: `cannot reach ${where}: ${text}${code ? ` (${code})` : ""}` }
}

/**
 * Connects to the server (with TLS: through the handshake, the certificate checked as `fetch` checks it) within
 * `connectTimeoutMs`, and hangs up: what a connection failure is, said apart from a slow answer. `fetch` cannot
 * time its connecting apart from the rest on Bun, and `node:http` on Bun does not tell when it connected.
 */
const probe = (url: URL, connectTimeoutMs: number): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    const secure = url.protocol === "https:"
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1")
    const port = Number(url.port || (secure ? 443 : 80))
    const where = url.host
    const socket = secure
      ? tls.connect({ host, port, ...(net.isIP(host) === 0 ? { servername: host } : {}) })
      : net.connect({ host, port })
    const done = (error?: TransportError) => {
      clearTimeout(timer)
      socket.removeAllListeners()
      socket.on("error", () => undefined)
      socket.destroy()
      if (error === undefined) resolve()
      else reject(error)
    }
    const timer = setTimeout(
      () =>
        done(
          new TransportError(
            `no connection to ${where} within ${seconds(connectTimeoutMs)} (connect timeout${secure ? ", TLS included" : ""})`,
            "connect-timeout",
            false
          )
        ),
      connectTimeoutMs
    )
    socket.once(secure ? "secureConnect" : "connect", () => done())
    socket.once("error", (error) => {
      const { kind, message } = describeFailure(error, where, "connect")
      done(new TransportError(message, kind === "reset" && secure ? "tls" : kind, false))
    })
  })

/**
 * The client's transport on Node.js and Bun: the connection probed first (`probe`: DNS, refused, TLS, connect
 * timeout), then the request with `fetch`, which must answer within `timeoutMs` of the start.
 */
export const nodeTransport: Transport = async (request) => {
  const started = Date.now()
  const url = new URL(request.url)
  const where = url.host
  await probe(url, request.connectTimeoutMs)
  const timedOut = () =>
    new TransportError(
      `no answer from ${where} within ${seconds(request.timeoutMs)} (request timeout)`,
      "timeout",
      true
    )
  const remaining = request.timeoutMs - (Date.now() - started)
  if (remaining <= 0) throw timedOut()
  const signal = AbortSignal.timeout(remaining)
  try {
    const response = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      ...(request.body === undefined ? {} : { body: request.body }),
      signal,
      redirect: "manual"
    })
    const text = await response.text()
    const headers: Record<string, string> = {}
    response.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value
    })
    return { status: response.status, headers, text }
  } catch (error) {
    if (signal.aborted) throw timedOut()
    const { kind, message } = describeFailure(error, where, "request")
    throw new TransportError(message, kind, kind !== "dns" && kind !== "refused" && kind !== "tls")
  }
}

/** A transport over a `fetch` function (tests hand the server's own handler in): no timeouts of its own. */
export const fetchTransport =
  (fetchFn: (input: string, init: RequestInit) => Promise<Response>): Transport =>
  async (request) => {
    let response: Response
    try {
      response = await fetchFn(request.url, {
        method: request.method,
        headers: request.headers,
        ...(request.body === undefined ? {} : { body: request.body })
      })
    } catch (error) {
      const { kind, message } = describeFailure(error, new URL(request.url).host, "connect")
      throw new TransportError(message, kind, kind !== "dns" && kind !== "refused")
    }
    const headers: Record<string, string> = {}
    response.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value
    })
    return { status: response.status, headers, text: await response.text().catch(() => "") }
  }
