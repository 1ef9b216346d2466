import { Cause, Effect, ParseResult, Schema } from "effect"

/** One complaint about a request field: the contract's `details` item (`path` dotted, `message` for a person). */
export const ErrorDetail = Schema.Struct({ path: Schema.String, message: Schema.String })
export type ErrorDetail = typeof ErrorDetail.Type

/**
 * Keeps the failures `isExpected` recognises (a feature's domain errors) and turns every other one (a database
 * error, a bug) into a defect, which the HTTP edge answers with 500 INTERNAL and logs.
 */
export const dieUnless =
  <K>(isExpected: (error: unknown) => error is K) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Extract<E, K>, R> =>
    Effect.catchAll(effect, (e) => (isExpected(e) ? Effect.fail(e as Extract<E, K>) : Effect.die(e)))

/** A schema decode failure as the contract's details: one per field, paths dotted (`pr.number`). */
export const describeParseError = (
  error: ParseResult.ParseError
): { readonly message: string; readonly details: ReadonlyArray<ErrorDetail> } => {
  let issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>
  try {
    issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  } catch {
    // formatting the value a client sent recurses into it: a document nested deep enough exhausts the stack
    return {
      message: "invalid request: a value is nested too deeply",
      details: [{ path: "", message: "is nested too deeply" }]
    }
  }
  // a field that is optional or nullable is a union with undefined or null: when the value failed the other member,
  // "Expected undefined, actual …" says nothing the other member's complaint (at the field or inside it) does not
  const pathOf = (issue: ParseResult.ArrayFormatterIssue) => issue.path.map(String)
  const isAlternative = (issue: ParseResult.ArrayFormatterIssue) =>
    /^Expected (undefined|null), actual /.test(issue.message)
  const within = (inner: ReadonlyArray<string>, outer: ReadonlyArray<string>) =>
    inner.length >= outer.length && outer.every((p, i) => inner[i] === p)
  const told = issues.filter(
    (issue) =>
      !isAlternative(issue) || !issues.some((other) => !isAlternative(other) && within(pathOf(other), pathOf(issue)))
  )
  // one detail per field: a union reports each member's complaint, the first says enough
  const seen = new Set<string>()
  const details: Array<ErrorDetail> = []
  for (const issue of told) {
    const path = issue.path.map(String).join(".")
    if (seen.has(path)) continue
    seen.add(path)
    details.push({ path, message: issue._tag === "Missing" ? "is required" : issue.message })
  }
  const first = details[0]
  const message = first
    ? `invalid request: ${first.path === "" ? "" : `${first.path} `}${first.message}`
    : "invalid request"
  return { message, details }
}

/**
 * A cause for the log: Effect's rendering, then the chain of `cause`s of its errors, which that rendering leaves out
 * (an SqlError says "Failed to execute statement"; the database's own message is its cause's).
 */
export const describeCause = (cause: Cause.Cause<unknown>): string => {
  const lines = [Cause.pretty(cause)]
  const errors = [...Cause.failures(cause), ...Cause.defects(cause)]
  for (const error of errors) {
    let inner = (error as { readonly cause?: unknown } | null)?.cause
    for (let depth = 0; inner !== undefined && inner !== null && depth < 5; depth++) {
      lines.push(`caused by: ${inner instanceof Error ? inner.message : String(inner)}`)
      inner = (inner as { readonly cause?: unknown }).cause
    }
  }
  return lines.join("\n")
}
