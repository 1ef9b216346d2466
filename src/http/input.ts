import { unstorableReason } from "../queue/schemas.ts"
import type { ErrorDetail } from "./errors.ts"

/**
 * Checks a request's decoded JSON (or query) before any schema sees it, without recursion: nesting deeper than
 * `MAX_DEPTH`, and strings or keys that PostgreSQL cannot store (NUL in text and jsonb; lone UTF-16 surrogates,
 * which jsonb refuses and text would silently replace). Every string of a request can reach SQL or a jsonb column
 * (the settings' free-form fields do), so one walk covers all of them, whatever the schema of the field.
 */

/** Deeper than any request of the API (the free-form `batchingRules` included). */
export const MAX_DEPTH = 32

const MAX_PATH_CHARS = 200
const pathOf = (parts: ReadonlyArray<string | number>) => {
  const path = parts.map(String).join(".")
  return path.length > MAX_PATH_CHARS ? `${path.slice(0, MAX_PATH_CHARS)}…` : path
}

/** The first problem found in `value`, or undefined. */
export const checkInput = (value: unknown): ErrorDetail | undefined => {
  const stack: Array<{ value: unknown; path: ReadonlyArray<string | number> }> = [{ value, path: [] }]
  for (;;) {
    const item = stack.pop()
    if (item === undefined) return undefined
    const v = item.value
    if (typeof v === "string") {
      const reason = unstorableReason(v)
      if (reason !== undefined) return { path: pathOf(item.path), message: reason }
      continue
    }
    if (v === null || typeof v !== "object") continue
    if (item.path.length >= MAX_DEPTH) {
      return { path: pathOf(item.path.slice(0, 8)), message: `is nested more than ${MAX_DEPTH} levels deep` }
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: [...item.path, i] })
      continue
    }
    const keys = Object.keys(v)
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i] as string
      const reason = unstorableReason(key)
      if (reason !== undefined) return { path: pathOf(item.path), message: `has a key that ${reason}` }
      stack.push({ value: (v as Record<string, unknown>)[key], path: [...item.path, key] })
    }
  }
}
