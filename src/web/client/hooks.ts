import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import { ApiFailure } from "./api.ts"

/**
 * Live data: loaded at once, then again on every event of the live stream, or every `everyMs` while the page is
 * visible when there is no stream (no page reload, no flicker: the same components render the new data).
 */
export interface Live<A> {
  readonly data: A | undefined
  readonly error: ApiFailure | undefined
  readonly refresh: () => Promise<void>
}

export const POLL_MS = 2000
/** While the live stream is open, pages reload on its events, and poll only as a safety net. */
const STREAM_POLL_MS = 15_000

/** The event types of GET /v1/events/stream (contract.md §8): any of them may change what a page shows. */
const EVENT_TYPES = [
  "pull_request.submitted",
  "pull_request.queued",
  "pull_request.testing",
  "pull_request.pending_failure",
  "pull_request.failed",
  "pull_request.merged",
  "pull_request.canceled",
  "pull_request_batch.queued",
  "pull_request_batch.testing",
  "pull_request_batch.pending_failure",
  "pull_request_batch.failed",
  "pull_request_batch.merged",
  "pull_request_batch.canceled",
  "test_case.status_changed",
  "test_case.quarantining_setting_changed",
  "queue.updated",
  "queue.state_changed",
  "test_run.started",
  "test_run.completed",
  "queue.created",
  "queue.deleted",
  "webhook_endpoint.disabled",
  "webhook_endpoint.retries_exhausted",
  "queue.frozen",
  "queue.unfrozen"
]

/**
 * The organization's live event stream (Server-Sent Events), opened once for every page. When the server has no
 * stream, or refuses it, the pages poll every POLL_MS instead.
 */
const stream = {
  source: undefined as EventSource | undefined,
  open: false,
  failed: false,
  listeners: new Set<() => void>(),
  /** the connection is lost (issue #33): an open stream broke and is reconnecting, or the server cannot be reached */
  offline: false,
  watchers: new Set<(offline: boolean) => void>(),
  setOffline(offline: boolean) {
    if (this.offline === offline) return
    this.offline = offline
    for (const w of this.watchers) w(offline)
  },
  ensure() {
    if (this.source !== undefined || this.failed || typeof EventSource === "undefined") return
    const source = new EventSource("/v1/events/stream")
    this.source = source
    source.onopen = () => {
      this.open = true
      this.setOffline(false)
    }
    source.onerror = () => {
      // an open stream that breaks: the server stopped or the network went (EventSource reconnects by itself)
      if (this.open) this.setOffline(true)
      // a stream that never opened (404, 401) is given up for polling; an open one reconnects by itself
      if (!this.open || source.readyState === EventSource.CLOSED) {
        source.close()
        this.source = undefined
        this.open = false
        this.failed = true
      }
    }
    const notify = () => {
      for (const listener of this.listeners) listener()
    }
    for (const type of EVENT_TYPES) source.addEventListener(type, notify)
  }
}

/**
 * Whether the server is out of reach (issue #33): the live stream broke (at once when the server closes it), or a
 * page's request failed on the network; back when the stream opens again or a request succeeds.
 */
export const useOffline = (): boolean => {
  const [offline, setOffline] = useState(stream.offline)
  useEffect(() => {
    stream.watchers.add(setOffline)
    return () => {
      stream.watchers.delete(setOffline)
    }
  }, [])
  return offline
}

export const useLive = <A>(load: () => Promise<A>, key: string, everyMs = POLL_MS): Live<A> => {
  const [data, setData] = useState<A | undefined>(undefined)
  const [error, setError] = useState<ApiFailure | undefined>(undefined)
  const generation = useRef(0)
  const loadRef = useRef(load)
  loadRef.current = load

  const refresh = useCallback(async () => {
    const mine = generation.current
    try {
      const value = await loadRef.current()
      if (generation.current !== mine) return
      setData(value)
      setError(undefined)
      if (stream.source === undefined || stream.source.readyState === EventSource.OPEN) stream.setOffline(false)
    } catch (e) {
      if (!(e instanceof ApiFailure) || e.status === 0 || e.status === 503) stream.setOffline(true)
      if (generation.current !== mine) return
      setError(e instanceof ApiFailure ? e : new ApiFailure(0, "NETWORK", String(e), []))
    }
  }, [])

  useEffect(() => {
    generation.current++
    setData(undefined)
    setError(undefined)
    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const tick = async () => {
      if (stopped) return
      if (document.visibilityState !== "hidden") await refresh()
      if (!stopped) timer = setTimeout(tick, stream.open ? Math.max(everyMs, STREAM_POLL_MS) : everyMs)
    }
    // an event reloads at once (events arriving together reload once)
    let pending: ReturnType<typeof setTimeout> | undefined
    const onEvent = () => {
      if (pending === undefined && !stopped) {
        pending = setTimeout(() => {
          pending = undefined
          void refresh()
        }, 100)
      }
    }
    stream.ensure()
    stream.listeners.add(onEvent)
    void tick()
    return () => {
      stopped = true
      stream.listeners.delete(onEvent)
      if (timer !== undefined) clearTimeout(timer)
      if (pending !== undefined) clearTimeout(pending)
    }
  }, [key, everyMs, refresh])

  return { data, error, refresh }
}

/** The current location, following pushState navigation and the back button. */
export const useLocation = () => {
  const [loc, setLoc] = useState(() => ({ pathname: location.pathname, search: location.search }))
  useEffect(() => {
    const update = () => setLoc({ pathname: location.pathname, search: location.search })
    addEventListener("popstate", update)
    addEventListener("greenline:navigate", update)
    return () => {
      removeEventListener("popstate", update)
      removeEventListener("greenline:navigate", update)
    }
  }, [])
  return loc
}

export const navigate = (href: string) => {
  history.pushState(null, "", href)
  dispatchEvent(new Event("greenline:navigate"))
  scrollTo(0, 0)
}

/** Same-site links open in place (a normal click); modified clicks and other sites behave as usual. */
export const interceptLinks = () => {
  document.addEventListener("click", (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return
    const a = (event.target as Element | null)?.closest?.("a")
    if (a === null || a === undefined || a.target !== "" || a.hasAttribute("download")) return
    const url = new URL(a.href, location.href)
    if (url.origin !== location.origin || url.pathname.startsWith("/ci/") || url.pathname.startsWith("/v1/")) return
    if (url.pathname === location.pathname && url.search === location.search && url.hash !== "") return
    event.preventDefault()
    navigate(url.pathname + url.search + url.hash)
  })
}
