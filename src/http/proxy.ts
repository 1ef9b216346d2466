/**
 * How a request reached the server. Behind a TLS-terminating proxy the connection is plain http from the proxy, so
 * the scheme, host and client address the browser used are in the proxy's X-Forwarded-Proto, X-Forwarded-Host and
 * X-Forwarded-For; they count only with TRUST_PROXY (anyone can send them to a server reached directly).
 */

/** The connection's peer address of each request being served (Bun's `requestIP`), noted by the server. */
const peers = new WeakMap<Request, string>()

export const notePeer = (request: Request, address: string | undefined) => {
  if (address !== undefined) peers.set(request, address)
}

/** The first entry of a comma-separated header (a proxy behind another appends; the first is the browser's side). */
const first = (value: string | null) => {
  const v = value?.split(",")[0]?.trim()
  return v === undefined || v === "" ? undefined : v
}

export interface ProxyView {
  /** http or https, as the browser used it. */
  readonly scheme: (request: Request) => "http" | "https"
  /** `scheme://host[:port]` as the browser addressed the request. */
  readonly origin: (request: Request) => string
  /** The client's address: the last X-Forwarded-For entry (the one the trusted proxy added), else the peer's. */
  readonly clientAddress: (request: Request) => string | undefined
}

export const makeProxyView = (trustProxy: boolean): ProxyView => {
  const scheme = (request: Request): "http" | "https" => {
    const forwarded = trustProxy ? first(request.headers.get("x-forwarded-proto"))?.toLowerCase() : undefined
    if (forwarded === "https" || forwarded === "http") return forwarded
    return new URL(request.url).protocol === "https:" ? "https" : "http"
  }
  return {
    scheme,
    origin: (request) => {
      const host =
        (trustProxy ? first(request.headers.get("x-forwarded-host")) : undefined) ??
        request.headers.get("host") ??
        new URL(request.url).host
      try {
        return new URL(`${scheme(request)}://${host}`).origin
      } catch {
        return "null"
      }
    },
    clientAddress: (request) => {
      if (trustProxy) {
        const last = request.headers.get("x-forwarded-for")?.split(",").at(-1)?.trim()
        if (last !== undefined && last !== "") return last
      }
      return peers.get(request)
    }
  }
}
