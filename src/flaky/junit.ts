/**
 * Streaming JUnit XML parser (semantics §8, contract §3 "upload").
 *
 * Pipeline: bytes → (optional gunzip, see `gunzipIfNeeded`) → streaming TextDecoder → `XmlCharFilter` (drops a BOM
 * and every character XML 1.0 forbids) → saxes → one `JunitResult` per `testcase` element (plus retry results, below).
 * Memory stays flat: the input is fed in slices of `SLICE` characters and results are handed out after every slice.
 *
 * Security: no DTD at all. A DOCTYPE is refused, so are entity references other than the 5 predefined ones (saxes
 * never expands custom entities); numeric character references are decoded (those naming a character XML forbids are
 * dropped like the raw characters).
 *
 * Retry representation: every testcase element yields exactly one *primary* result (`retry: false`). Surefire
 * `flakyFailure`/`flakyError`/`rerunFailure`/`rerunError` children yield one extra result each, right after the
 * primary one, with `status: "failed"`, `retry: true` and their own `message`/`text`. `attempts` is the number of runs
 * the testcase element stands for (1 + retry children) and is the same on all of its results; `attempt` is the 1-based
 * chronological position of a result: flaky attempts come before the final (primary) run, rerun attempts after the
 * first (primary) run. Repeated testcase elements of the same test (web-test-runner, pytest-rerunfailures style) are
 * simply separate primary results; the caller sees them in `index` order.
 */

import type { SaxesTagPlain } from "saxes"
import { SaxesParser } from "saxes"

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

export type JunitSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array> | ReadableStream<Uint8Array> | Uint8Array

export interface JunitOptions {
  /** cap on `text` and `message` in UTF-8 bytes (default 8 KiB) */
  readonly maxTextBytes?: number
}

export const MAX_TEXT_BYTES = 8 * 1024
/** characters handed to saxes at a time */
const SLICE = 64 * 1024
/** bytes handed to the TextDecoder at a time */
const BYTE_SLICE = 64 * 1024

// ---------------------------------------------------------------------------------------------------------------
// Character filter
// ---------------------------------------------------------------------------------------------------------------

// C0 controls except tab, LF, CR; U+FFFE/U+FFFF; surrogates (lone ones are detected in `filter`).
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const SUSPECT = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF\uD800-\uDFFF]/

/** Streaming filter: strips a leading BOM and drops characters XML 1.0 forbids, keeping surrogate pairs intact. */
export class XmlCharFilter {
  private start = true
  private pendingHigh = ""

  push(chunk: string): string {
    let s = this.pendingHigh + chunk
    this.pendingHigh = ""
    if (this.start && s.length > 0) {
      this.start = false
      if (s.charCodeAt(0) === 0xfeff) s = s.slice(1)
    }
    if (s.length === 0) return s
    const last = s.charCodeAt(s.length - 1)
    if (last >= 0xd800 && last <= 0xdbff) {
      // may be completed by the next chunk
      this.pendingHigh = s.slice(-1)
      s = s.slice(0, -1)
    }
    return SUSPECT.test(s) ? filterSlow(s) : s
  }

  /** end of input: a pending high surrogate is lone, so it is dropped */
  end(): string {
    this.pendingHigh = ""
    return ""
  }
}

const filterSlow = (s: string): string => {
  let out = ""
  let from = 0
  const n = s.length
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i)
    let drop = false
    if (c < 0x20) drop = c !== 0x09 && c !== 0x0a && c !== 0x0d
    else if (c === 0xfffe || c === 0xffff) drop = true
    else if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0
      if (d >= 0xdc00 && d <= 0xdfff) i++
      else drop = true
    } else if (c >= 0xdc00 && c <= 0xdfff) drop = true
    if (drop) {
      out += s.slice(from, i)
      from = i + 1
    }
  }
  return from === 0 ? s : out + s.slice(from)
}

const isXmlChar = (c: number): boolean =>
  c === 0x9 ||
  c === 0xa ||
  c === 0xd ||
  (c >= 0x20 && c <= 0xd7ff) ||
  (c >= 0xe000 && c <= 0xfffd) ||
  (c >= 0x10000 && c <= 0x10ffff)

// ---------------------------------------------------------------------------------------------------------------
// Attribute helpers
// ---------------------------------------------------------------------------------------------------------------

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

const parseDurationMs = (raw: string | undefined): number => {
  if (raw === undefined) return 0
  const s = raw.trim()
  if (s === "") return 0
  const n = Number(s)
  if (!Number.isFinite(n) || n < 0) return 0
  return Math.round(n * 1_000_000) / 1000
}

const parseLine = (raw: string | undefined): number | undefined => {
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

// ---------------------------------------------------------------------------------------------------------------
// Push parser
// ---------------------------------------------------------------------------------------------------------------

type ResultKind = "fail" | "skip" | "flaky" | "rerun"

const RESULT_ELEMENTS: ReadonlyMap<string, ResultKind> = new Map([
  ["failure", "fail"],
  ["error", "fail"],
  ["skipped", "skip"],
  ["flakyfailure", "flaky"],
  ["flakyerror", "flaky"],
  ["rerunfailure", "rerun"],
  ["rerunerror", "rerun"]
])

const EXCLUDED_TEXT = new Set(["system-out", "system-err"])
const SKIP_STATUS_ATTR = new Set(["notrun", "skipped", "disabled", "ignored"])
const SKIP_RESULT_ATTR = new Set(["skipped", "suppressed"])

interface SuiteFrame {
  readonly name: string
  readonly file: string
  readonly timestamp: string | undefined
}

interface ResultElement {
  readonly kind: ResultKind
  readonly message: string
  readonly type: string
  readonly durationMs: number
  text: string
}

interface CaseState {
  readonly attrs: Record<string, string>
  readonly elements: ResultElement[]
  /** element depth below the testcase element */
  depth: number
  capture: ResultElement | undefined
  captureDepth: number
  excludedDepth: number
}

const attr = (attrs: Record<string, string>, name: string): string | undefined => attrs[name]

const stripPosition = (message: string): string => message.replace(/^\d+:\d+: /, "")

/**
 * Synchronous push parser over already decoded text. `write` strings, `end()` once, and `take()` the results produced
 * so far after each call. Throws `JunitError` on malformed input.
 */
export class JunitPushParser {
  private readonly sax: SaxesParser<{ xmlns: false }>
  private readonly filter = new XmlCharFilter()
  private readonly maxTextBytes: number
  private readonly suites: SuiteFrame[] = []
  private current: CaseState | undefined
  private suitePath: readonly string[] | undefined
  private sawRoot = false
  private index = 0
  private out: JunitResult[] = []
  readonly summary: JunitSummary = { testcases: 0, passed: 0, failed: 0, skipped: 0, ignored: 0, retries: 0 }

  constructor(options: JunitOptions = {}) {
    this.maxTextBytes = options.maxTextBytes ?? MAX_TEXT_BYTES
    const sax = new SaxesParser<{ xmlns: false }>({ xmlns: false })
    this.sax = sax
    // Numeric references naming a character XML forbids are dropped, like the raw characters (saxes would fail).
    const internals = sax as unknown as { parseEntity?: (entity: string) => string }
    const original = internals.parseEntity
    if (typeof original === "function") {
      internals.parseEntity = (entity: string): string => {
        const m = /^#(?:x([0-9a-fA-F]+)|([0-9]+))$/.exec(entity)
        if (m) {
          const code = m[1] !== undefined ? Number.parseInt(m[1], 16) : Number.parseInt(m[2] ?? "", 10)
          if (!isXmlChar(code)) return ""
        }
        return original.call(sax, entity)
      }
    }
    sax.on("error", (err) => {
      throw new JunitError(sax.line, stripPosition(err.message), sax.column)
    })
    sax.on("doctype", () => {
      throw new JunitError(sax.line, "DOCTYPE declarations are not allowed in JUnit XML", sax.column)
    })
    sax.on("opentag", (tag) => this.onOpen(tag))
    sax.on("closetag", (tag) => this.onClose(tag))
    sax.on("text", (text) => this.onText(text))
    sax.on("cdata", (text) => this.onText(text))
  }

  write(chunk: string): void {
    const s = this.filter.push(chunk)
    if (s.length > 0) this.guard(() => this.sax.write(s))
  }

  end(): void {
    this.filter.end()
    this.guard(() => this.sax.close())
    if (!this.sawRoot) throw new JunitError(this.sax.line, "no root element")
  }

  /** results produced since the last call */
  take(): JunitResult[] {
    const out = this.out
    this.out = []
    return out
  }

  private guard(f: () => unknown): void {
    try {
      f()
    } catch (e) {
      if (e instanceof JunitError) throw e
      const message = e instanceof Error ? stripPosition(e.message) : String(e)
      throw new JunitError(this.sax.line, message, this.sax.column)
    }
  }

  private onOpen(tag: SaxesTagPlain): void {
    const name = tag.name
    const cur = this.current
    if (cur !== undefined) {
      cur.depth++
      if (cur.capture !== undefined) {
        if (cur.excludedDepth > 0 || EXCLUDED_TEXT.has(name)) cur.excludedDepth++
        return
      }
      if (cur.depth === 1) {
        const kind = RESULT_ELEMENTS.get(name.toLowerCase())
        if (kind !== undefined) {
          const el: ResultElement = {
            kind,
            message: truncateUtf8(attr(tag.attributes, "message") ?? "", this.maxTextBytes),
            type: attr(tag.attributes, "type") ?? "",
            durationMs: parseDurationMs(attr(tag.attributes, "time")),
            text: ""
          }
          cur.capture = el
          cur.captureDepth = cur.depth
          cur.excludedDepth = 0
        }
      }
      return
    }
    if (!this.sawRoot) {
      this.sawRoot = true
      if (name !== "testsuites" && name !== "testsuite") {
        throw new JunitError(this.sax.line, `unexpected root element <${name}>, expected <testsuites> or <testsuite>`)
      }
    }
    if (name === "testsuite") {
      const a = tag.attributes
      this.suitePath = undefined
      this.suites.push({
        name: attr(a, "name") ?? "",
        file: attr(a, "file") || attr(a, "filepath") || "",
        timestamp: attr(a, "timestamp")
      })
    } else if (name === "testcase") {
      this.current = {
        attrs: tag.attributes,
        elements: [],
        depth: 0,
        capture: undefined,
        captureDepth: 0,
        excludedDepth: 0
      }
    }
  }

  private onClose(tag: SaxesTagPlain): void {
    const cur = this.current
    if (cur !== undefined) {
      if (cur.depth === 0) {
        this.current = undefined
        this.emit(cur)
        return
      }
      if (cur.capture !== undefined) {
        if (cur.excludedDepth > 0) cur.excludedDepth--
        else if (cur.depth === cur.captureDepth) {
          cur.elements.push(cur.capture)
          cur.capture = undefined
        }
      }
      cur.depth--
      return
    }
    if (tag.name === "testsuite") {
      this.suites.pop()
      this.suitePath = undefined
    }
  }

  private onText(text: string): void {
    const el = this.current?.capture
    if (el === undefined || this.current === undefined || this.current.excludedDepth > 0) return
    // each UTF-16 unit is at least one UTF-8 byte, so capping units at maxTextBytes keeps enough to truncate later
    if (el.text.length >= this.maxTextBytes + 1) return
    el.text += text.length > this.maxTextBytes + 1 ? text.slice(0, this.maxTextBytes + 1) : text
  }

  private emit(cur: CaseState): void {
    const a = cur.attrs
    const index = this.index++
    this.summary.testcases++
    let fail: ResultElement | undefined
    let skip: ResultElement | undefined
    const retries: ResultElement[] = []
    let flakyCount = 0
    for (const el of cur.elements) {
      if (el.kind === "fail") fail ??= el
      else if (el.kind === "skip") skip ??= el
      else {
        retries.push(el)
        if (el.kind === "flaky") flakyCount++
      }
    }
    const skippedByAttr =
      SKIP_STATUS_ATTR.has((attr(a, "status") ?? "").toLowerCase()) ||
      SKIP_RESULT_ATTR.has((attr(a, "result") ?? "").toLowerCase())
    const status: JunitStatus =
      fail !== undefined ? "failed" : skip !== undefined || skippedByAttr ? "skipped" : "passed"
    const deciding = fail ?? skip
    const name = attr(a, "name") ?? ""
    const ignored = name === ""
    const suites = this.suites
    let file = attr(a, "file") ?? ""
    let stamp = attr(a, "timestamp")
    for (let i = suites.length - 1; i >= 0 && (file === "" || stamp === undefined); i--) {
      const s = suites[i]
      if (s === undefined) continue
      if (file === "") file = s.file
      stamp ??= s.timestamp
    }
    // one array per suite nesting, shared by its results (not one per result)
    this.suitePath ??= suites.map((s) => s.name)
    const suitePath = this.suitePath
    const attempts = ignored ? 1 : 1 + retries.length
    const classname = attr(a, "classname") ?? attr(a, "class") ?? ""
    const timestamp = parseTimestamp(stamp)
    const id = attr(a, "id")
    const line = parseLine(attr(a, "line"))
    const parent = suitePath[0] ?? ""
    this.out.push({
      name,
      classname,
      file,
      parent,
      suitePath,
      attempts,
      timestamp,
      id,
      line,
      ignored,
      index,
      status,
      retry: false,
      attempt: flakyCount + 1,
      message: deciding?.message ?? "",
      type: deciding?.type ?? "",
      text: deciding ? this.finishText(deciding.text) : "",
      durationMs: parseDurationMs(attr(a, "time"))
    })
    if (ignored) {
      this.summary.ignored++
      return
    }
    this.summary[status]++
    if (retries.length === 0) return
    const base = { name, classname, file, parent, suitePath, attempts, timestamp, id, line, ignored, index }
    let flakyAttempt = 0
    let rerunAttempt = flakyCount + 1
    for (const el of retries) {
      this.summary.retries++
      this.out.push({
        ...base,
        status: "failed",
        retry: true,
        attempt: el.kind === "flaky" ? ++flakyAttempt : ++rerunAttempt,
        message: el.message,
        type: el.type,
        text: this.finishText(el.text),
        durationMs: el.durationMs
      })
    }
  }

  private finishText(text: string): string {
    return truncateUtf8(text.trim(), this.maxTextBytes)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Byte streams
// ---------------------------------------------------------------------------------------------------------------

const isReadableStream = (s: unknown): s is ReadableStream<Uint8Array> =>
  typeof s === "object" && s !== null && typeof (s as { getReader?: unknown }).getReader === "function"

/** Iterates any supported source as Uint8Array chunks. */
export async function* byteChunks(source: JunitSource): AsyncGenerator<Uint8Array, void, undefined> {
  if (source instanceof Uint8Array) {
    yield source
    return
  }
  if (isReadableStream(source)) {
    const reader = source.getReader()
    try {
      for (;;) {
        const r = await reader.read()
        if (r.done) return
        yield r.value
      }
    } finally {
      reader.releaseLock()
    }
  }
  yield* source
}

const ENCODING_RE = /^<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']/

/** Chooses a decoder: UTF-16 by BOM, else the XML declaration's encoding if the runtime knows it, else UTF-8. */
/** `TextDecoder` over any WHATWG label (bun-types narrows the label to a few names) */
const decoderFor = (label: string): TextDecoder =>
  new (TextDecoder as unknown as new (label: string) => TextDecoder)(label)

const pickDecoder = (head: Uint8Array): TextDecoder => {
  const b0 = head[0]
  const b1 = head[1]
  if (b0 === 0xff && b1 === 0xfe) return decoderFor("utf-16le")
  if (b0 === 0xfe && b1 === 0xff) return decoderFor("utf-16be")
  const ascii = decoderFor("latin1").decode(head.subarray(0, 256))
  const label = ENCODING_RE.exec(ascii)?.[1]?.toLowerCase()
  if (label !== undefined && label !== "utf-8" && label !== "utf8") {
    try {
      return decoderFor(label)
    } catch {
      // unknown label: fall back to UTF-8
    }
  }
  return new TextDecoder("utf-8")
}

/**
 * Streams results, one testcase element at a time (see the module comment for retries). The generator's return
 * value is the summary. Throws `JunitError` for an unreadable file; results already yielded stay valid but the
 * caller should discard the upload (contract: nothing of that upload is stored).
 */
export async function* junitResults(
  source: JunitSource,
  options: JunitOptions = {}
): AsyncGenerator<JunitResult, JunitSummary, undefined> {
  const parser = new JunitPushParser(options)
  let decoder: TextDecoder | undefined
  let head: Uint8Array | undefined
  const feed = (text: string): JunitResult[] => {
    for (let i = 0; i < text.length; i += SLICE) parser.write(text.slice(i, i + SLICE))
    return parser.take()
  }
  const decodeAll = function* (bytes: Uint8Array, dec: TextDecoder): Generator<JunitResult> {
    for (let i = 0; i < bytes.length; i += BYTE_SLICE) {
      yield* feed(dec.decode(bytes.subarray(i, i + BYTE_SLICE), { stream: true }))
    }
  }
  for await (const chunk of byteChunks(source)) {
    if (decoder === undefined) {
      // collect enough bytes to sniff the encoding
      head = head === undefined ? chunk : concat(head, chunk)
      if (head.length < 256) continue
      decoder = pickDecoder(head)
      const h = head
      head = undefined
      yield* decodeAll(h, decoder)
      continue
    }
    yield* decodeAll(chunk, decoder)
  }
  if (decoder === undefined) {
    decoder = pickDecoder(head ?? new Uint8Array(0))
    if (head !== undefined) yield* decodeAll(head, decoder)
  }
  yield* feed(decoder.decode())
  parser.end()
  yield* parser.take()
  return parser.summary
}

const concat = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

/** Callback form of `junitResults`; awaits the callback for each result (back-pressure). */
export const parseJunit = async (
  source: JunitSource,
  onResult: (result: JunitResult) => void | Promise<void>,
  options: JunitOptions = {}
): Promise<JunitSummary> => {
  const it = junitResults(source, options)
  for (;;) {
    const r = await it.next()
    if (r.done) return r.value
    await onResult(r.value)
  }
}

/** Whole-string convenience for tests and small inputs. Throws `JunitError`. */
export const parseJunitString = (
  xml: string,
  options: JunitOptions = {}
): { results: JunitResult[]; summary: JunitSummary } => {
  const parser = new JunitPushParser(options)
  const results: JunitResult[] = []
  for (let i = 0; i < xml.length; i += SLICE) {
    parser.write(xml.slice(i, i + SLICE))
    for (const r of parser.take()) results.push(r)
  }
  parser.end()
  for (const r of parser.take()) results.push(r)
  return { results, summary: parser.summary }
}

// ---------------------------------------------------------------------------------------------------------------
// gzip
// ---------------------------------------------------------------------------------------------------------------

/** true when the bytes start with the gzip magic number 1f 8b */
export const isGzip = (bytes: Uint8Array): boolean => bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b

/** default cap on decompressed bytes (a 20 MiB upload should not expand into a disk-filling bomb) */
export const MAX_DECOMPRESSED_BYTES = 512 * 1024 * 1024

/**
 * Passes plain bytes through unchanged and gunzips a gzip stream (detected by its magic bytes), streaming through
 * `DecompressionStream("gzip")`. Corrupt gzip data or more than `maxBytes` decompressed bytes throw `JunitError`
 * with line 0.
 */
export async function* gunzipIfNeeded(
  source: JunitSource,
  options: { readonly maxBytes?: number } = {}
): AsyncGenerator<Uint8Array, void, undefined> {
  const maxBytes = options.maxBytes ?? MAX_DECOMPRESSED_BYTES
  const it = byteChunks(source)[Symbol.asyncIterator]()
  let head: Uint8Array = new Uint8Array(0)
  let done = false
  while (head.length < 2) {
    const r = await it.next()
    if (r.done) {
      done = true
      break
    }
    head = head.length === 0 ? r.value : concat(head, r.value)
  }
  if (!isGzip(head)) {
    if (head.length > 0) yield head
    if (done) return
    for (;;) {
      const r = await it.next()
      if (r.done) return
      yield r.value
    }
  }
  const compressed = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(head)
      if (done) controller.close()
    },
    async pull(controller) {
      if (done) return
      try {
        const r = await it.next()
        if (r.done) controller.close()
        else controller.enqueue(r.value)
      } catch (e) {
        controller.error(e)
      }
    }
  })
  const gunzip = new DecompressionStream("gzip") as unknown as ReadableWritablePair<Uint8Array, Uint8Array>
  const reader = compressed.pipeThrough(gunzip).getReader()
  let total = 0
  for (;;) {
    let r: Awaited<ReturnType<typeof reader.read>>
    try {
      r = await reader.read()
    } catch (e) {
      if (e instanceof JunitError) throw e
      throw new JunitError(0, `invalid gzip data: ${e instanceof Error ? e.message : String(e)}`)
    }
    if (r.done) return
    total += r.value.length
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined)
      throw new JunitError(0, `decompressed JUnit file is larger than ${maxBytes} bytes`)
    }
    yield r.value
  }
}
