/**
 * Failure message grouping key (semantics §8 `most_common_failures`): strips what varies from run to run so that
 * equal failures group together, collapses whitespace and truncates to a summary.
 *
 * Replacements, in this order (placeholders are stable tokens):
 *   UUIDs → `<uuid>`, timestamps (ISO 8601, RFC 1123, `Jan 2 15:04:05`, bare dates and clock times) → `<time>`,
 *   temporary paths (`/tmp/…`, `/var/folders/…`, `/private/var/…`, `C:\…\Temp\…`, `$TMPDIR…`) → `<tmp>`,
 *   memory addresses `0x…` → `<addr>`, hex ids of ≥ 7 digits containing a digit → `<hex>`,
 *   durations (`12ms`, `1.5s`, `300µs`, `2m30s`, `1h`) → `<duration>`, other numbers → `<n>`.
 */

export const MAX_SUMMARY_CHARS = 200

const MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
const DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"
const UNIT = "(?:ns|us|µs|μs|ms|secs?|seconds?|s|mins?|minutes?|m|hours?|h)"

const RULES: ReadonlyArray<readonly [RegExp, string]> = [
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, "<uuid>"],
  // ISO 8601 date-time (with optional fraction and offset)
  [
    /\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?)?(?!\w)/g,
    "<time>"
  ],
  // RFC 1123 / RFC 2822 and `date` style
  [
    new RegExp(
      `\\b(?:${DAY},?\\s+)?(?:\\d{1,2}\\s+${MONTH}\\s+\\d{4}|${MONTH}\\s+\\d{1,2}(?:,?\\s+\\d{4})?)(?:\\s+\\d{1,2}:\\d{2}(?::\\d{2}(?:\\.\\d+)?)?)?(?:\\s+(?:GMT|UTC|[+-]\\d{4}|[A-Z]{3,4}))?(?:\\s+\\d{4})?\\b`,
      "g"
    ),
    "<time>"
  ],
  // clock times
  [/\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b/g, "<time>"],
  // temporary paths
  [/(?:\/private)?\/var\/folders\/[^\s'"`)\]>,;]+/g, "<tmp>"],
  [/(?:\/private)?\/(?:tmp|var\/tmp)\/[^\s'"`)\]>,;]+/g, "<tmp>"],
  [/\$TMPDIR[^\s'"`)\]>,;]*/g, "<tmp>"],
  [/\b[A-Za-z]:\\(?:[^\s'"`\\]+\\)*?(?:Temp|tmp)\\[^\s'"`)\]>,;]+/gi, "<tmp>"],
  // memory addresses
  [/\b0x[0-9a-f]+\b/gi, "<addr>"],
  // hex ids (commit shas, object ids): at least 7 hex digits, at least one digit
  [/\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b/gi, "<hex>"],
  // durations, also compound ones like 2m30s
  [new RegExp(`\\b\\d+(?:\\.\\d+)?\\s?${UNIT}(?:\\d+(?:\\.\\d+)?${UNIT})*(?![\\w])`, "g"), "<duration>"],
  // remaining numbers (not inside identifiers)
  [/(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])/gi, "<n>"],
  [/(?<=[_\-/:#])\d+\b/g, "<n>"]
]

/** Truncates to at most `max` UTF-16 units without splitting a surrogate pair. */
const truncate = (s: string, max: number): string => {
  if (s.length <= max) return s
  let end = max
  const c = s.charCodeAt(end - 1)
  if (c >= 0xd800 && c <= 0xdbff) end--
  return s.slice(0, end)
}

/** The grouping key of a failure message; "" for an empty message. */
export const normalizeFailureMessage = (message: string): string => {
  // only the head of a huge message matters for a ≤ 200 char key; keep some slack for what the rules shrink
  let s = message.length > 4096 ? message.slice(0, 4096) : message
  for (const [re, token] of RULES) s = s.replace(re, token)
  s = s.replace(/\s+/g, " ").trim()
  return truncate(s, MAX_SUMMARY_CHARS)
}

/**
 * The grouping key for a failure: its `message`, or when that is empty, the first non-blank line of the failure
 * body.
 */
export const failureGroupKey = (message: string, text = ""): string => {
  const key = normalizeFailureMessage(message)
  if (key !== "") return key
  const firstLine = text.split(/\r?\n/).find((l) => l.trim() !== "") ?? ""
  return normalizeFailureMessage(firstLine)
}
