import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import { ApiFailure } from "./api.ts"

/** Live data: loaded at once, then again every `everyMs` while the page is visible (no reload, no flicker). */
export interface Live<A> {
  readonly data: A | undefined
  readonly error: ApiFailure | undefined
  readonly refresh: () => Promise<void>
}

export const POLL_MS = 2000

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
    } catch (e) {
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
      if (!stopped) timer = setTimeout(tick, everyMs)
    }
    void tick()
    return () => {
      stopped = true
      if (timer !== undefined) clearTimeout(timer)
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
