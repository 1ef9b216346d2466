/**
 * The JUnit parser's model (semantics §8, contract §3 "upload"; design notes: docs/architecture.md, "JUnit parser"):
 * what a result and a file's summary are, the error of an unreadable file, the options, and how attribute values
 * (timestamps, durations, lines, texts) become a result's fields. The scanner (scanner.ts) fills results; the
 * sources (sources.ts) feed it bytes.
 */

export type JunitStatus = "passed" | "failed" | "skipped"

export interface JunitResult {
  /** testcase `name`; "" when missing (then `ignored` is true) */
  readonly name: string
  /** testcase `classname` (or `class`), "" when missing */
  readonly classname: string
  /** testcase `file`, else the innermost enclosing suite's `file`/`filepath`, else "" */
  readonly file: string
  /** name of the outermost `testsuite` element ("" when the testcase is not in a suite) */
  readonly parent: string
  /** names of the enclosing `testsuite` elements, outermost first (the `testsuites` root is not included) */
  readonly suitePath: readonly string[]
  readonly status: JunitStatus
  /** true for the extra failed attempts coming from flakyFailure/flakyError/rerunFailure/rerunError */
  readonly retry: boolean
  /** number of runs this testcase element stands for: 1 + its flaky/rerun children */
  readonly attempts: number
  /** 1-based chronological position of this result among `attempts` */
  readonly attempt: number
  /** `message` attribute of the deciding result element (failure/error, else skipped), "" if none; ≤ 8 KiB */
  readonly message: string
  /** `type` attribute of the deciding result element, "" if none */
  readonly type: string
  /** body of the deciding result element (CDATA, text, nested stackTrace; not system-out/err), trimmed, ≤ 8 KiB */
  readonly text: string
  /** `time` (seconds) × 1000; 0 when missing or unparseable */
  readonly durationMs: number
  /** epoch ms from the testcase `timestamp`, else the innermost suite's; undefined when missing/unparseable/zero */
  readonly timestamp?: number
  /** testcase `id` attribute, if any */
  readonly id?: string
  /** testcase `line` attribute, if a positive integer */
  readonly line?: number
  /** testcase without a name: not a test, the caller counts it as `ignored` and stores nothing */
  readonly ignored: boolean
  /** 0-based ordinal of the testcase element in the file */
  readonly index: number
}

export interface JunitSummary {
  /** testcase elements seen */
  testcases: number
  /** primary results of named testcases, by status */
  passed: number
  failed: number
  skipped: number
  /** testcase elements without a name */
  ignored: number
  /** extra failed attempts (retry results) */
  retries: number
}

/** An unreadable JUnit file. `line` is 1-based; 0 when the problem is not at a position (e.g. bad gzip data). */
export class JunitError extends Error {
  readonly _tag = "JunitError"
  readonly line: number
  readonly column: number
  constructor(line: number, message: string, column = 0) {
    super(message)
    this.name = "JunitError"
    this.line = line
    this.column = column
  }
}

export interface JunitOptions {
  /** cap on `text` and `message` in UTF-8 bytes (default 8 KiB) */
  readonly maxTextBytes?: number
  /**
   * Receives each result as soon as it is parsed, instead of `take()`: the object is reused for the next result
   * (copy what must be kept). For a pipeline that consumes results at once, it saves an object per result.
   */
  readonly onResult?: (result: JunitResult) => void
}

export const MAX_TEXT_BYTES = 8 * 1024

const ISO_RE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?\s*(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/
const MIN_TIME = Date.UTC(1970, 0, 2)
const MAX_TIME = Date.UTC(9999, 11, 31)

/** Parses a JUnit timestamp: ISO 8601 (no offset = UTC), RFC 1123 and whatever `Date.parse` knows; zero → undefined. */
let lastStampRaw: string | undefined
let lastStamp: number | undefined

/** `parseTimestampOnce`, remembering the last answer (a suite's testcases share their suite's timestamp). */
export const parseTimestamp = (raw: string | undefined): number | undefined => {
  if (raw === undefined) return undefined
  if (raw === lastStampRaw) return lastStamp
  const t = parseTimestampOnce(raw)
  lastStampRaw = raw
  lastStamp = t
  return t
}

const parseTimestampOnce = (raw: string | undefined): number | undefined => {
  if (raw === undefined) return undefined
  const s = raw.trim()
  if (s === "") return undefined
  let t: number
  const m = ISO_RE.exec(s)
  if (m) {
    const num = (i: number): number => Number(m[i] ?? "0")
    const frac = m[7] ? Number(`0.${m[7]}`) * 1000 : 0
    t = Date.UTC(num(1), num(2) - 1, num(3), num(4), num(5), num(6)) + Math.floor(frac)
    if (m[9] !== undefined) {
      const off = (num(10) * 60 + num(11)) * 60_000
      t += m[9] === "+" ? -off : off
    }
    const month = num(2)
    const day = num(3)
    if (month < 1 || month > 12 || day < 1 || day > 31 || num(4) > 24 || num(5) > 59 || num(6) > 60) return undefined
  } else {
    t = Date.parse(s)
  }
  if (!Number.isFinite(t) || t < MIN_TIME || t > MAX_TIME) return undefined
  return t
}

export const parseDurationMs = (raw: string | undefined): number => {
  if (raw === undefined) return 0
  const s = raw.trim()
  if (s === "") return 0
  const n = Number(s)
  if (!Number.isFinite(n) || n < 0) return 0
  return Math.round(n * 1_000_000) / 1000
}

export const parseLine = (raw: string | undefined): number | undefined => {
  if (raw === undefined) return undefined
  const n = Number(raw.trim())
  return Number.isInteger(n) && n > 0 ? n : undefined
}

const utf8 = new TextEncoder()

/** Truncates to at most `maxBytes` UTF-8 bytes without splitting a character. */
export const truncateUtf8 = (s: string, maxBytes: number): string => {
  if (s.length * 3 <= maxBytes) return s
  const bytes = utf8.encode(s)
  if (bytes.length <= maxBytes) return s
  let end = maxBytes
  // back off continuation bytes (10xxxxxx)
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--
  return new TextDecoder().decode(bytes.subarray(0, end))
}
