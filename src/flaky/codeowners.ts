/**
 * GitHub CODEOWNERS (semantics §8): parsing and matching with GitHub's rules.
 *
 * - `#` starts a comment (whole line or inline) unless escaped as `\#`; blank lines are ignored; `\ ` escapes a space.
 * - A line is a pattern followed by zero or more owners (`@user`, `@org/team`, e-mail). The last matching line wins;
 *   a matching line without owners means the path has no owners.
 * - Patterns follow gitignore with GitHub's exceptions: `*` and `?` do not cross `/`; a pattern without a slash (or
 *   with only a trailing one) matches at any depth; a leading `/` or a slash in the middle anchors at the root;
 *   `dir/` and `/dir/` match everything below the directory, `dir/*` only its direct children; a `**` segment
 *   matches any number of directories (leading, in the middle or trailing); a pattern naming a directory also covers
 *   its contents.
 * - `!` negation is not supported by GitHub: such lines are reported in `errors` and skipped. `[` is literal.
 */

/** where GitHub looks for the file, in order; the first one found wins */
export const locations = [".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"] as const

export interface CodeownersRule {
  /** the pattern as written (escapes kept) */
  readonly pattern: string
  readonly owners: readonly string[]
  /** 1-based line number in the file */
  readonly line: number
  readonly regex: RegExp
}

export interface Codeowners {
  readonly rules: readonly CodeownersRule[]
  readonly errors: readonly { readonly line: number; readonly message: string }[]
}

/** Splits a line into tokens, honouring `\` escapes (kept in the token) and cutting at an unescaped `#`. */
const tokenize = (line: string): string[] => {
  const tokens: string[] = []
  let cur = ""
  for (let i = 0; i < line.length; i++) {
    const c = line[i] ?? ""
    if (c === "\\" && i + 1 < line.length) {
      cur += c + (line[i + 1] ?? "")
      i++
    } else if (c === "#") {
      break
    } else if (c === " " || c === "\t") {
      if (cur !== "") tokens.push(cur)
      cur = ""
    } else {
      cur += c
    }
  }
  if (cur !== "") tokens.push(cur)
  return tokens
}

const escapeRe = (c: string): string => c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")

/** Compiles a CODEOWNERS pattern to an anchored regular expression over a repository-relative path. */
export const compilePattern = (pattern: string): RegExp => {
  let p = pattern
  let anchored = false
  if (p.startsWith("/")) {
    anchored = true
    p = p.slice(1)
  }
  let dirOnly = false
  if (p.endsWith("/") && !p.endsWith("\\/")) {
    dirOnly = true
    p = p.replace(/\/+$/, "")
  }
  if (p.includes("/")) anchored = true
  let body = ""
  let lastSegmentIsStar = false
  for (let i = 0; i < p.length; i++) {
    const c = p[i] ?? ""
    if (c === "\\" && i + 1 < p.length) {
      body += escapeRe(p[i + 1] ?? "")
      i++
      continue
    }
    if (c === "*") {
      if (p[i + 1] === "*") {
        const atStart = i === 0 || p[i - 1] === "/"
        const next = p[i + 2]
        if (atStart && next === "/") {
          body += "(?:.*/)?"
          i += 2
          continue
        }
        if (atStart && next === undefined) {
          body += ".*"
          i += 1
          continue
        }
        body += "[^/]*"
        i += 1
        continue
      }
      body += "[^/]*"
      continue
    }
    if (c === "?") {
      body += "[^/]"
      continue
    }
    body += escapeRe(c)
  }
  if (p === "*" || p.endsWith("/*")) lastSegmentIsStar = !p.endsWith("\\*")
  const prefix = anchored ? "^" : "^(?:.*/)?"
  const suffix = dirOnly ? "/.*$" : lastSegmentIsStar ? "$" : "(?:/.*)?$"
  return new RegExp(prefix + body + suffix)
}

export const parseCodeowners = (text: string): Codeowners => {
  const rules: CodeownersRule[] = []
  const errors: { line: number; message: string }[] = []
  const lines = text.split(/\r?\n|\r/)
  for (let i = 0; i < lines.length; i++) {
    const tokens = tokenize(lines[i] ?? "")
    const [pattern, ...owners] = tokens
    if (pattern === undefined) continue
    const line = i + 1
    if (pattern.startsWith("!")) {
      errors.push({ line, message: `negated patterns are not supported: ${pattern}` })
      continue
    }
    if (pattern === "/") {
      errors.push({ line, message: "empty pattern" })
      continue
    }
    rules.push({ pattern, owners, line, regex: compilePattern(pattern) })
  }
  return { rules, errors }
}

const normalizePath = (path: string): string => path.replace(/^(?:\.\/)+/, "").replace(/^\/+/, "")

/** The rule deciding a path: the last matching one, or undefined. */
export const matchingRule = (co: Codeowners, path: string): CodeownersRule | undefined => {
  const p = normalizePath(path)
  for (let i = co.rules.length - 1; i >= 0; i--) {
    const rule = co.rules[i]
    if (rule?.regex.test(p)) return rule
  }
  return undefined
}

/** Owners of a path; [] when no line matches or the last matching line has no owners. */
export const ownersOf = (co: Codeowners, path: string): readonly string[] => matchingRule(co, path)?.owners ?? []

/**
 * Finds the CODEOWNERS file at a commit: `read` returns a file's text or undefined when it does not exist; the first
 * of `locations` that exists wins.
 */
export const findCodeowners = async (
  read: (path: string) => string | undefined | Promise<string | undefined>
): Promise<{ path: string; codeowners: Codeowners } | undefined> => {
  for (const path of locations) {
    const text = await read(path)
    if (text !== undefined) return { path, codeowners: parseCodeowners(text) }
  }
  return undefined
}
