import type Pg from "pg"

/** Server-side prepared statements for the statements sent again and again (docs/architecture.md). */
export interface StatementNamer {
  /** The name to prepare `text` under, or undefined to send it unnamed. */
  readonly nameOf: (text: string) => string | undefined
  /** Never prepare `text` again. */
  readonly refuse: (text: string) => void
  readonly size: () => number
}

export const makeStatementNamer = (options: {
  readonly minUses: number
  readonly maxNames: number
}): StatementNamer => {
  const names = new Map<string, string>()
  const uses = new Map<string, number>()
  const refused = new Set<string>()
  let counter = 0
  return {
    nameOf: (text) => {
      const name = names.get(text)
      if (name !== undefined) return name
      if (names.size >= options.maxNames || refused.has(text)) return undefined
      const used = (uses.get(text) ?? 0) + 1
      if (used < options.minUses) {
        // texts seen once are remembered in a bounded map (statements with a variable number of parameters)
        if (uses.size >= 10_000) uses.clear()
        uses.set(text, used)
        return undefined
      }
      uses.delete(text)
      const fresh = `greenline_${++counter}`
      names.set(text, fresh)
      return fresh
    },
    refuse: (text) => {
      names.delete(text)
      if (refused.size < 10_000) refused.add(text)
    },
    size: () => names.size
  }
}

type Callback = (error: (Error & { code?: string }) | null, result: unknown) => void
type QueryFn = (config: unknown, values?: unknown, callback?: unknown) => unknown

/** The error codes after which a prepared statement is run unnamed instead (see above). */
const UNPREPARABLE = new Set(["0A000", "26000"])

/**
 * Makes `client` send the statements `namer` names as prepared statements. Only the call shape the SQL client uses
 * for statements (`query(text, values, callback)` with at least one value) is changed; every other call (streams,
 * `rowMode`, statements without parameters, promises) goes through as it is.
 */
export const prepareStatements = (client: Pg.ClientBase, namer: StatementNamer) => {
  const target = client as unknown as { query: QueryFn }
  const original = target.query.bind(client) as QueryFn
  target.query = (config, values, callback) => {
    if (typeof config !== "string" || !Array.isArray(values) || values.length === 0 || typeof callback !== "function") {
      return original(config, values, callback)
    }
    const name = namer.nameOf(config)
    if (name === undefined) return original(config, values, callback)
    const done = callback as Callback
    return original({ name, text: config, values }, ((error, result) => {
      if (error !== null && error.code !== undefined && UNPREPARABLE.has(error.code)) {
        namer.refuse(config)
        return original(config, values, done)
      }
      done(error, result)
    }) satisfies Callback)
  }
}
