/**
 * The JUnit parser's scanner: the characters XML allows (a streaming filter for decoded text), and the byte parser,
 * a scanner specialised to JUnit over UTF-8 bytes that fills the results of model.ts (docs/architecture.md, "JUnit
 * parser"). The sources (sources.ts) feed it.
 */
import {
  JunitError,
  type JunitOptions,
  type JunitResult,
  type JunitStatus,
  type JunitSummary,
  MAX_TEXT_BYTES,
  parseDurationMs,
  parseLine,
  parseTimestamp,
  truncateUtf8
} from "./model.ts"

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
// Byte parser
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

/** The testcase element being read (one object, reused: testcase elements do not nest). */
interface CaseState {
  // the attributes the results use (undefined: absent)
  name: string | undefined
  classname: string | undefined
  cls: string | undefined
  file: string | undefined
  timestamp: string | undefined
  id: string | undefined
  line: string | undefined
  time: string | undefined
  status: string | undefined
  result: string | undefined
  readonly elements: ResultElement[]
  /** element depth below the testcase element */
  depth: number
  capture: ResultElement | undefined
  captureDepth: number
  excludedDepth: number
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const newResult = (): Mutable<JunitResult> => ({
  name: "",
  classname: "",
  file: "",
  parent: "",
  suitePath: [],
  attempts: 1,
  timestamp: undefined,
  id: undefined,
  line: undefined,
  ignored: false,
  index: 0,
  status: "passed",
  retry: false,
  attempt: 1,
  message: "",
  type: "",
  text: "",
  durationMs: 0
})

const stripPosition = (message: string): string => message.replace(/^\d+:\d+: /, "")

// bytes
const TAB = 0x09
const NL = 0x0a
const CR = 0x0d
const SP = 0x20
const BANG = 0x21
const QUOT = 0x22
const AMP = 0x26
const APOS = 0x27
const DASH = 0x2d
const SLASH = 0x2f
const SEMI = 0x3b
const LT = 0x3c
const EQ = 0x3d
const GT = 0x3e
const QM = 0x3f
const LBRACK = 0x5b
const RBRACK = 0x5d

const isWs = (c: number): boolean => c === SP || c === NL || c === TAB || c === CR
/** XML name characters, approximated on bytes: ASCII letters, digits, `_ : - .`, and every non-ASCII byte */
const isNameByte = (c: number): boolean =>
  (c >= 0x61 && c <= 0x7a) ||
  (c >= 0x41 && c <= 0x5a) ||
  (c >= 0x30 && c <= 0x3a) ||
  c === 0x5f ||
  c === DASH ||
  c === 0x2e ||
  c >= 0x80
const isNameStart = (c: number): boolean =>
  (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || c === 0x3a || c >= 0x80

// modes of the scanner between markup
const M_TEXT = 0
const M_CDATA = 1
const M_COMMENT = 2
const M_PI = 3
const M_DOCTYPE = 4

// which attributes a start tag's values are decoded for
const K_NONE = 0
const K_SUITE = 1
const K_CASE = 2
const K_RESULT = 3

// attribute ids (index into `ATTR_NAMES`)
const A_NAME = 0
const A_CLASSNAME = 1
const A_CLASS = 2
const A_FILE = 3
const A_FILEPATH = 4
const A_TIMESTAMP = 5
const A_ID = 6
const A_LINE = 7
const A_TIME = 8
const A_STATUS = 9
const A_RESULT = 10
const A_MESSAGE = 11
const A_TYPE = 12
const ATTR_NAMES = [
  "name",
  "classname",
  "class",
  "file",
  "filepath",
  "timestamp",
  "id",
  "line",
  "time",
  "status",
  "result",
  "message",
  "type"
]
const ascii = (s: string): Uint8Array => Uint8Array.from(s, (ch) => ch.charCodeAt(0))
const ATTR_BYTES = ATTR_NAMES.map(ascii)
/** attributes wanted, per K_* kind, as bit masks over attribute ids */
const WANTED = [
  0,
  (1 << A_NAME) | (1 << A_FILE) | (1 << A_FILEPATH) | (1 << A_TIMESTAMP),
  (1 << A_NAME) |
    (1 << A_CLASSNAME) |
    (1 << A_CLASS) |
    (1 << A_FILE) |
    (1 << A_TIMESTAMP) |
    (1 << A_ID) |
    (1 << A_LINE) |
    (1 << A_TIME) |
    (1 << A_STATUS) |
    (1 << A_RESULT),
  (1 << A_MESSAGE) | (1 << A_TYPE) | (1 << A_TIME)
]

/** element names that are common enough to be recognised without making a string */
const KNOWN_TAGS = [
  "testsuites",
  "testsuite",
  "testcase",
  "failure",
  "error",
  "skipped",
  "system-out",
  "system-err",
  "properties",
  "property",
  "flakyFailure",
  "flakyError",
  "rerunFailure",
  "rerunError",
  "stackTrace"
].map((name) => ({ name, bytes: ascii(name) }))

const sameBytes = (b: Uint8Array, at: number, n: number, want: Uint8Array): boolean => {
  if (want.length !== n) return false
  for (let k = 0; k < n; k++) if (b[at + k] !== want[k]) return false
  return true
}

const CDATA_OPEN = ascii("<![CDATA[")
const COMMENT_OPEN = ascii("<!--")
const DOCTYPE_OPEN = ascii("<!DOCTYPE")

// flags of a span of bytes
const F_AMP = 1
/** tab, LF or CR */
const F_WS = 2
const F_CR = 4
const F_HIGH = 8

/** Bytes handed to the scanner at a time (a larger chunk is scanned in windows of this size). */
export const WINDOW = 256 * 1024
/** A start tag (with its attributes) may not be longer than this. */
const MAX_TAG_BYTES = 64 * 1024 * 1024
const MAX_ENTITY_BYTES = 64

const utf8Decoder = new TextDecoder("utf-8")

/** Drops U+FFFE/U+FFFF (the only characters XML forbids that decoded UTF-8 can hold besides the C0 controls). */
const dropForbidden = (s: string): string => (SUSPECT.test(s) ? filterSlow(s) : s)

/** true when `w` holds a C0 control character XML forbids (anything below U+0020 but tab, LF and CR) */
const hasForbiddenByte = (w: Uint8Array): boolean => {
  for (let i = 0; i < w.length; i++) {
    const c = w[i] as number
    if (c < SP && c !== NL && c !== CR && c !== TAB) return true
  }
  return false
}

const stripForbiddenBytes = (w: Uint8Array): Uint8Array => {
  const out = new Uint8Array(w.length)
  let n = 0
  for (let i = 0; i < w.length; i++) {
    const c = w[i] as number
    if (c < SP && c !== NL && c !== CR && c !== TAB) continue
    out[n++] = c
  }
  return out.subarray(0, n)
}

const countNewlines = (b: Uint8Array, from: number, to: number): number => {
  let n = 0
  for (let i = from; i < to; i++) if (b[i] === NL) n++
  return n
}

/** The end of a span of UTF-8 bytes moved back so that it does not cut a multi-byte character. */
const utf8Boundary = (b: Uint8Array, start: number, end: number): number => {
  // look at most 3 bytes back for the lead byte of the last character
  for (let k = end - 1; k >= start && k >= end - 3; k--) {
    const c = b[k] as number
    if (c < 0x80) return end
    if (c >= 0xc0) {
      const need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2
      return end - k >= need ? end : k
    }
  }
  return end
}

/** The value of a predefined entity or character reference (already checked by the scanner); "" for one XML forbids. */
const entityValue = (name: string): string => {
  switch (name) {
    case "lt":
      return "<"
    case "gt":
      return ">"
    case "amp":
      return "&"
    case "quot":
      return '"'
    case "apos":
      return "'"
  }
  const code = name[1] === "x" ? Number.parseInt(name.slice(2), 16) : Number.parseInt(name.slice(1), 10)
  return isXmlChar(code) ? String.fromCodePoint(code) : ""
}

/**
 * Expands references and normalizes line ends of decoded text: CR LF and lone CR become LF (text) or a space
 * (attribute values, where tab and LF also become spaces, as XML's attribute-value normalization says).
 */
const ATTR_RE = /&([^;]*);|\r\n?|[\n\t]/g
const TEXT_RE = /&([^;]*);|\r\n?/g
const CDATA_RE = /\r\n?/g
// `entity` is the group of a reference; a line end has none (and CDATA_RE has no group at all: the offset comes)
const attrPart = (_m: string, entity: unknown): string => (typeof entity === "string" ? entityValue(entity) : " ")
const textPart = (_m: string, entity: unknown): string => (typeof entity === "string" ? entityValue(entity) : "\n")

/** One native replace, so that the answer is one flat string (references were checked by the scanner). */
const normalize = (s: string, attribute: boolean, entities: boolean): string =>
  attribute ? s.replace(ATTR_RE, attrPart) : s.replace(entities ? TEXT_RE : CDATA_RE, textPart)

/** The value of hex digit `c` (checked by the scanner). */
const hexDigit = (c: number): number => (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57)

/** Writes the UTF-8 bytes of the code point `c` at `o`; returns the end. */
const putCodePoint = (out: Uint8Array, o: number, c: number): number => {
  if (c < 0x80) {
    out[o++] = c
  } else if (c < 0x800) {
    out[o++] = 0xc0 | (c >> 6)
    out[o++] = 0x80 | (c & 0x3f)
  } else if (c < 0x10000) {
    out[o++] = 0xe0 | (c >> 12)
    out[o++] = 0x80 | ((c >> 6) & 0x3f)
    out[o++] = 0x80 | (c & 0x3f)
  } else {
    out[o++] = 0xf0 | (c >> 18)
    out[o++] = 0x80 | ((c >> 12) & 0x3f)
    out[o++] = 0x80 | ((c >> 6) & 0x3f)
    out[o++] = 0x80 | (c & 0x3f)
  }
  return o
}

/**
 * A streaming JUnit parser over UTF-8 bytes, specialised to what JUnit files need: it checks well-formedness (tags
 * balanced, attributes quoted and unique, names, references) and decodes only the attribute values and text the
 * results use, straight from the bytes. `push` byte chunks, `end()` once, and `take()` the results produced so far
 * after each call. Throws `JunitError` (with the line) on malformed input.
 *
 * Like the XML 1.0 rules the old SAX pipeline followed: C0 control characters XML forbids and U+FFFE/U+FFFF are
 * dropped; there is no DTD (a DOCTYPE is refused, at the line where it ends); only the five predefined entities and
 * numeric character references are known (a reference to a character XML forbids is dropped); line ends are
 * normalized, and attribute values get XML's whitespace normalization.
 */
export class JunitByteParser {
  private readonly maxTextBytes: number
  /** the bytes being scanned: a caller's chunk, or `store` when bytes were carried over */
  private buf: Uint8Array = new Uint8Array(0)
  private view: Buffer = Buffer.alloc(0)
  private store: Uint8Array | undefined
  private len = 0
  private pos = 0
  /** newlines before `buf[0]` */
  private lineBase = 0
  private mode = M_TEXT
  private final = false
  /** a start tag whose end is not in the buffer yet: how far it was scanned, and the open quote there */
  private tagScan = 0
  private tagQuote = 0
  private doctypeQuote = 0
  private doctypeDepth = 0
  private readonly stack: string[] = []
  private sawRoot = false
  private closedRoot = false
  private readonly suites: SuiteFrame[] = []
  /** the testcase element being read, if any (`caseState` while it is open) */
  private current: CaseState | undefined
  private readonly caseState: CaseState = {
    name: undefined,
    classname: undefined,
    cls: undefined,
    file: undefined,
    timestamp: undefined,
    id: undefined,
    line: undefined,
    time: undefined,
    status: undefined,
    result: undefined,
    elements: [],
    depth: 0,
    capture: undefined,
    captureDepth: 0,
    excludedDepth: 0
  }
  private readonly onResult: ((result: JunitResult) => void) | undefined
  /** the object handed to `onResult` each time */
  private readonly scratch = newResult()
  private suitePath: readonly string[] | undefined
  /** attribute values of the start tag being read */
  private readonly av: Array<string | undefined> = new Array(ATTR_NAMES.length).fill(undefined)
  private readonly attrPos = new Int32Array(128)
  /** values with references or line ends, decoded (see `decoded`) */
  private decodeBuf: Buffer = Buffer.allocUnsafe(1024)
  /** the text node being captured: whether it may add to the capture, and how many UTF-16 units it still may */
  private nodeOpen = false
  private nodeAllowed = false
  private nodeRemaining = 0
  private index = 0
  private out: JunitResult[] = []
  readonly summary: JunitSummary = { testcases: 0, passed: 0, failed: 0, skipped: 0, ignored: 0, retries: 0 }

  constructor(options: JunitOptions = {}) {
    this.maxTextBytes = options.maxTextBytes ?? MAX_TEXT_BYTES
    this.onResult = options.onResult
  }

  /** Scans `chunk` (UTF-8). The chunk is read during the call only. */
  push(chunk: Uint8Array): void {
    for (let o = 0; o < chunk.length; o += WINDOW) {
      this.pushWindow(o === 0 && chunk.length <= WINDOW ? chunk : chunk.subarray(o, Math.min(chunk.length, o + WINDOW)))
    }
  }

  end(): void {
    this.final = true
    this.run()
    if (this.mode !== M_TEXT || this.pos < this.len) this.fail(this.len, "unexpected end of the file")
    if (!this.sawRoot) this.fail(this.len, "document must contain a root element.")
    const open = this.stack[this.stack.length - 1]
    if (open !== undefined) this.fail(this.len, `unclosed tag: ${open}`)
  }

  /** results produced since the last call */
  take(): JunitResult[] {
    const out = this.out
    this.out = []
    return out
  }

  // ---- buffer

  private pushWindow(chunk: Uint8Array): void {
    const w = hasForbiddenByte(chunk) ? stripForbiddenBytes(chunk) : chunk
    const rest = this.len - this.pos
    this.lineBase += countNewlines(this.buf, 0, this.pos)
    if (rest === 0) {
      this.buf = w
      this.len = w.length
    } else {
      const need = rest + w.length
      let store = this.store
      if (store === undefined || store.length < need) {
        store = new Uint8Array(Math.max(need, 2 * (store?.length ?? 0), 64 * 1024))
        store.set(this.buf.subarray(this.pos, this.len), 0)
      } else if (this.buf === store) {
        store.copyWithin(0, this.pos, this.len)
      } else {
        store.set(this.buf.subarray(this.pos, this.len), 0)
      }
      store.set(w, rest)
      this.store = store
      this.buf = store
      this.len = need
    }
    this.pos = 0
    this.view = Buffer.from(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength)
    this.run()
  }

  private fail(at: number, message: string): never {
    let lastNl = -1
    for (let i = Math.min(at, this.len) - 1; i >= 0; i--) {
      if (this.buf[i] === NL) {
        lastNl = i
        break
      }
    }
    const line = this.lineBase + countNewlines(this.buf, 0, Math.min(at, this.len)) + 1
    throw new JunitError(line, stripPosition(message), at - lastNl)
  }

  // ---- strings from bytes

  /** bytes [s, e) as a string: latin1 for ASCII, else UTF-8 (invalid sequences become U+FFFD) */
  private str(s: number, e: number, high: boolean): string {
    if (!high) return this.view.toString("latin1", s, e)
    return dropForbidden(utf8Decoder.decode(this.buf.subarray(s, e)))
  }

  private attrValue(s: number, e: number, flags: number): string {
    const high = (flags & F_HIGH) !== 0
    if ((flags & (F_AMP | F_WS)) === 0) return this.str(s, e, high)
    return high ? normalize(this.str(s, e, true), true, true) : this.asciiDecoded(s, e, true, true)
  }

  private textOf(s: number, e: number, entities: boolean): string {
    const b = this.buf
    let flags = 0
    for (let i = s; i < e; i++) {
      const c = b[i] as number
      if (c >= 0x80) flags |= F_HIGH
      else if (c === CR) flags |= F_CR
      else if (c === AMP) flags |= F_AMP
    }
    const high = (flags & F_HIGH) !== 0
    if ((flags & F_CR) === 0 && ((flags & F_AMP) === 0 || !entities)) return this.str(s, e, high)
    return high ? normalize(this.str(s, e, true), false, entities) : this.asciiDecoded(s, e, false, entities)
  }

  /**
   * ASCII bytes [s, e) as a string with references expanded (when `entities`) and line ends normalized, as
   * `normalize` does, but on the bytes (into `decodeBuf`) and decoded once: a string per value, not one per
   * reference and line end. Not for bytes ≥ 0x80: those are decoded first (bad sequences, dropped characters).
   */
  private asciiDecoded(s: number, e: number, attribute: boolean, entities: boolean): string {
    if (this.decodeBuf.length < e - s) {
      this.decodeBuf = Buffer.allocUnsafe(Math.max(e - s, 2 * this.decodeBuf.length))
    }
    const b = this.buf
    const out = this.decodeBuf
    let high = false
    let o = 0
    for (let i = s; i < e; i++) {
      const c = b[i] as number
      if (c === AMP && entities) {
        let j = i + 1
        while (b[j] !== SEMI) j++
        const c1 = b[i + 1] as number
        if (c1 === 0x23) {
          // &#123; or &#x1F; (above U+10FFFF: not a character)
          const hex = b[i + 2] === 0x78
          let code = 0
          for (let k = hex ? i + 3 : i + 2; k < j && code <= 0x10ffff; k++) {
            code = hex ? code * 16 + hexDigit(b[k] as number) : code * 10 + ((b[k] as number) - 0x30)
          }
          // one XML forbids is dropped
          if (isXmlChar(code)) {
            o = putCodePoint(out, o, code)
            if (code >= 0x80) high = true
          }
        } else {
          // lt, gt, amp, quot, apos
          out[o++] = c1 === 0x6c ? LT : c1 === 0x67 ? GT : c1 === 0x71 ? QUOT : b[i + 2] === 0x6d ? AMP : APOS
        }
        i = j
      } else if (c === CR) {
        out[o++] = attribute ? SP : NL
        if (i + 1 < e && b[i + 1] === NL) i++
      } else if (attribute && (c === NL || c === TAB)) {
        out[o++] = SP
      } else {
        out[o++] = c
      }
    }
    // a reference may stand for a character ≥ U+0080 (never one XML forbids)
    return high ? utf8Decoder.decode(out.subarray(0, o)) : out.toString("latin1", 0, o)
  }

  /** an element name at [s, e) */
  private tagName(s: number, e: number): string {
    const n = e - s
    for (const t of KNOWN_TAGS) if (sameBytes(this.buf, s, n, t.bytes)) return t.name
    let high = false
    for (let i = s; i < e; i++) if ((this.buf[i] as number) >= 0x80) high = true
    return this.str(s, e, high)
  }

  // ---- scanning

  private run(): void {
    for (;;) {
      switch (this.mode) {
        case M_TEXT:
          if (!this.text()) return
          if (!this.markup()) return
          break
        case M_CDATA:
          if (!this.cdata()) return
          break
        case M_COMMENT:
          if (!this.skipTo(0x2d2d3e, 3)) return
          break
        case M_PI:
          if (!this.skipTo(0x3f3e, 2)) return
          break
        default:
          this.doctype()
          return
      }
    }
  }

  /** The capture text nodes go to, if any. */
  private capture(): ResultElement | undefined {
    const cur = this.current
    return cur !== undefined && cur.excludedDepth === 0 ? cur.capture : undefined
  }

  /** Adds a piece of a text node to the capture, keeping at most `maxTextBytes + 1` units of each node. */
  private addText(el: ResultElement, s: number, e: number, entities: boolean): void {
    const cap = this.maxTextBytes + 1
    if (!this.nodeOpen) {
      this.nodeOpen = true
      this.nodeAllowed = el.text.length < cap
      this.nodeRemaining = cap
    }
    if (!this.nodeAllowed || this.nodeRemaining <= 0 || e <= s) return
    const t = this.textOf(s, e, entities)
    const piece = t.length > this.nodeRemaining ? t.slice(0, this.nodeRemaining) : t
    el.text += piece
    this.nodeRemaining -= piece.length
  }

  /** `&` at `i`: checks the reference and returns the index after its `;`, or -1 when `bound` comes first */
  private entity(i: number, bound: number): number {
    const b = this.buf
    let j = i + 1
    const limit = Math.min(bound, i + 2 + MAX_ENTITY_BYTES)
    while (j < limit) {
      const c = b[j] as number
      if (c === SEMI) break
      if (isWs(c) || c === LT || c === AMP || c === QUOT || c === APOS || c === GT) {
        this.fail(j, "disallowed character in entity name.")
      }
      j++
    }
    if (j >= limit) {
      if (limit === bound && !this.final) return -1
      this.fail(i, "unterminated entity reference.")
    }
    if (j === i + 1) this.fail(i, "empty entity name.")
    if (b[i + 1] === 0x23) {
      // #123 or #x1F
      const hex = b[i + 2] === 0x78
      let k = hex ? i + 3 : i + 2
      if (k === j) this.fail(i, "malformed character entity.")
      for (; k < j; k++) {
        const c = b[k] as number
        const digit = c >= 0x30 && c <= 0x39
        if (!(digit || (hex && ((c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46))))) {
          this.fail(i, "malformed character entity.")
        }
      }
      return j + 1
    }
    const n = j - i - 1
    const c0 = b[i + 1]
    const ok =
      (n === 2 && (c0 === 0x6c || c0 === 0x67) && b[i + 2] === 0x74) ||
      (n === 3 && c0 === 0x61 && b[i + 2] === 0x6d && b[i + 3] === 0x70) ||
      (n === 4 && c0 === 0x71 && b[i + 2] === 0x75 && b[i + 3] === 0x6f && b[i + 4] === 0x74) ||
      (n === 4 && c0 === 0x61 && b[i + 2] === 0x70 && b[i + 3] === 0x6f && b[i + 4] === 0x73)
    if (!ok) this.fail(i, "undefined entity.")
    return j + 1
  }

  /** Character data up to the next `<`; false when the buffer ends first (the rest is kept for the next chunk). */
  private text(): boolean {
    const b = this.buf
    const len = this.len
    const start = this.pos
    let i = start
    if (this.stack.length === 0) {
      // outside the root element: only white space
      while (i < len) {
        const c = b[i] as number
        if (c === LT) break
        if (!isWs(c)) this.fail(i, "text data outside of root node.")
        i++
      }
      this.pos = i
      return i < len
    }
    while (i < len) {
      const c = b[i] as number
      if (c === LT) break
      if (c === AMP) {
        const j = this.entity(i, len)
        if (j < 0) break
        i = j
        continue
      }
      if (c === GT && i - start >= 2 && b[i - 1] === RBRACK && b[i - 2] === RBRACK) {
        this.fail(i - 2, 'the string "]]>" is disallowed in char data.')
      }
      i++
    }
    const complete = i < len && b[i] === LT
    let end = i
    if (!complete && !this.final && end === len) {
      // keep a CR (its LF may follow) and a cut character for the next chunk
      if (end > start && b[end - 1] === CR) end--
      end = utf8Boundary(b, start, end)
    }
    const el = this.capture()
    if (el !== undefined && end > start) this.addText(el, start, end, true)
    this.pos = end
    if (complete) this.nodeOpen = false
    return complete
  }

  private cdata(): boolean {
    const b = this.buf
    const len = this.len
    const start = this.pos
    let i = start
    while (i + 2 < len && !(b[i] === RBRACK && b[i + 1] === RBRACK && b[i + 2] === GT)) i++
    const el = this.capture()
    if (i + 2 < len) {
      if (el !== undefined) this.addText(el, start, i, false)
      this.pos = i + 3
      this.mode = M_TEXT
      this.nodeOpen = false
      return true
    }
    if (this.final) return false
    let end = Math.max(start, len - 2)
    if (end > start && b[end - 1] === CR) end--
    end = utf8Boundary(b, start, end)
    if (el !== undefined) this.addText(el, start, end, false)
    this.pos = end
    return false
  }

  /** Skips a comment (`-->`) or processing instruction (`?>`), given as the terminator's bytes in an int. */
  private skipTo(terminator: number, n: number): boolean {
    const b = this.buf
    const len = this.len
    const last = terminator & 0xff
    for (let i = this.pos + n - 1; i < len; i++) {
      if (b[i] !== last) continue
      let ok = true
      for (let k = 1; k < n; k++) if (b[i - k] !== ((terminator >> (8 * k)) & 0xff)) ok = false
      if (ok) {
        this.pos = i + 1
        this.mode = M_TEXT
        return true
      }
    }
    this.pos = Math.max(this.pos, len - (n - 1))
    return false
  }

  /** Reads a DOCTYPE declaration to its end, to refuse it there. */
  private doctype(): void {
    const b = this.buf
    for (let i = this.pos; i < this.len; i++) {
      const c = b[i] as number
      if (this.doctypeQuote !== 0) {
        if (c === this.doctypeQuote) this.doctypeQuote = 0
      } else if (c === QUOT || c === APOS) this.doctypeQuote = c
      else if (c === LBRACK) this.doctypeDepth++
      else if (c === RBRACK) this.doctypeDepth--
      else if (c === GT && this.doctypeDepth <= 0) {
        this.fail(i, "DOCTYPE declarations are not allowed in JUnit XML")
      }
    }
    this.pos = this.len
  }

  /** 1: the bytes at `at` start with `want`; 0: they do not; -1: the buffer ends before that is known */
  private startsWith(at: number, want: Uint8Array): number {
    for (let k = 0; k < want.length; k++) {
      if (at + k >= this.len) return -1
      if (this.buf[at + k] !== want[k]) return 0
    }
    return 1
  }

  /** Markup at `<`; false when the buffer ends inside it. */
  private markup(): boolean {
    const p = this.pos
    if (p + 1 >= this.len) return false
    const c = this.buf[p + 1]
    if (c === SLASH) return this.closeTag()
    if (c === BANG) {
      const comment = this.startsWith(p, COMMENT_OPEN)
      if (comment === 1) {
        this.pos = p + 4
        this.mode = M_COMMENT
        return true
      }
      const cdata = this.startsWith(p, CDATA_OPEN)
      if (cdata === 1) {
        if (this.stack.length === 0) this.fail(p, "CDATA section outside of the root element.")
        this.pos = p + 9
        this.mode = M_CDATA
        this.nodeOpen = false
        return true
      }
      const doctype = this.startsWith(p, DOCTYPE_OPEN)
      if (doctype === 1) {
        this.pos = p + 9
        this.mode = M_DOCTYPE
        this.doctypeQuote = 0
        this.doctypeDepth = 0
        return true
      }
      if (comment === -1 || cdata === -1 || doctype === -1) return false
      this.fail(p, "unexpected markup <!.")
    }
    if (c === QM) {
      this.pos = p + 2
      this.mode = M_PI
      return true
    }
    return this.startTag()
  }

  private closeTag(): boolean {
    const b = this.buf
    const p = this.pos
    let i = p + 2
    while (i < this.len && b[i] !== GT) i++
    if (i >= this.len) {
      if (i - p > MAX_TAG_BYTES) this.fail(p, "closing tag too long.")
      return false
    }
    let ne = p + 2
    while (ne < i && isNameByte(b[ne] as number)) ne++
    let k = ne
    while (k < i && isWs(b[k] as number)) k++
    if (ne === p + 2 || k !== i) this.fail(p, "malformed closing tag.")
    const name = this.tagName(p + 2, ne)
    const top = this.stack.pop()
    if (top === undefined) this.fail(p, `unmatched closing tag: ${name}.`)
    if (top !== name) this.fail(p, `unexpected close tag </${name}>, expected </${top}>.`)
    this.pos = i + 1
    this.nodeOpen = false
    this.onClose(name)
    if (this.stack.length === 0) this.closedRoot = true
    return true
  }

  private startTag(): boolean {
    const b = this.buf
    const p = this.pos
    const len = this.len
    let i = this.tagScan > 0 ? p + this.tagScan : p + 1
    let q = this.tagQuote
    while (i < len) {
      const c = b[i] as number
      if (c === LT) break // never in a tag: malformed, reported where the attributes go wrong
      if (q !== 0) {
        if (c === q) q = 0
      } else if (c === GT) break
      else if (c === QUOT || c === APOS) q = c
      i++
    }
    if (i < len && b[i] === LT) {
      let ne = p + 2
      while (ne < i && isNameByte(b[ne] as number)) ne++
      this.attributes(ne, i, K_NONE)
      this.fail(i, "disallowed character.")
    }
    if (i >= len) {
      if (i - p > MAX_TAG_BYTES) this.fail(p, "tag too long.")
      this.tagScan = i - p
      this.tagQuote = q
      return false
    }
    this.tagScan = 0
    this.tagQuote = 0
    const gt = i
    if (!isNameStart(b[p + 1] as number)) this.fail(p + 1, "disallowed character in tag name.")
    let ne = p + 2
    while (ne < gt && isNameByte(b[ne] as number)) ne++
    const name = this.tagName(p + 1, ne)
    const cur = this.current
    let kind = K_NONE
    if (cur === undefined) {
      if (name === "testcase") kind = K_CASE
      else if (name === "testsuite") kind = K_SUITE
    } else if (cur.capture === undefined && cur.depth === 0 && RESULT_ELEMENTS.has(name.toLowerCase())) {
      kind = K_RESULT
    }
    const selfClosing = this.attributes(ne, gt, kind)
    this.pos = gt + 1
    this.nodeOpen = false
    if (this.stack.length === 0) {
      if (this.closedRoot) this.fail(p, "document must contain only one root element.")
      if (!this.sawRoot) {
        this.sawRoot = true
        if (name !== "testsuites" && name !== "testsuite") {
          this.fail(p, `unexpected root element <${name}>, expected <testsuites> or <testsuite>`)
        }
      }
    }
    this.stack.push(name)
    this.onOpen(name, kind)
    if (selfClosing) {
      this.stack.pop()
      this.onClose(name)
      if (this.stack.length === 0) this.closedRoot = true
    }
    return true
  }

  /** The attributes in [s, e) (`e` is the tag's `>`); decodes the ones `kind` wants into `av`. Returns `/>`. */
  private attributes(s: number, e: number, kind: number): boolean {
    const b = this.buf
    const av = this.av
    const wanted = WANTED[kind] as number
    if (wanted !== 0) av.fill(undefined)
    let count = 0
    let i = s
    for (;;) {
      const ws = i
      while (i < e && isWs(b[i] as number)) i++
      if (i >= e) return false
      const c = b[i] as number
      if (c === SLASH) {
        if (i + 1 !== e) this.fail(i, "forward-slash in opening tag not followed by >.")
        return true
      }
      if (i === ws) this.fail(i, "no whitespace between attributes.")
      if (!isNameStart(c)) this.fail(i, "disallowed character in attribute name.")
      const ns = i
      while (i < e && isNameByte(b[i] as number)) i++
      const nl = i - ns
      while (i < e && isWs(b[i] as number)) i++
      if (b[i] !== EQ) this.fail(i, "attribute without value.")
      i++
      while (i < e && isWs(b[i] as number)) i++
      const q = b[i]
      if (q !== QUOT && q !== APOS) this.fail(i, "unquoted attribute value.")
      const vs = i + 1
      let j = vs
      let flags = 0
      for (;;) {
        const v = b[j] as number
        if (v === q) break
        if (v === LT) this.fail(j, "disallowed character.")
        if (v === AMP) {
          const k = this.entity(j, e)
          if (k < 0) this.fail(j, "unterminated entity reference.")
          flags |= F_AMP
          j = k
          continue
        }
        if (v >= 0x80) flags |= F_HIGH
        else if (v < SP) flags |= F_WS
        j++
      }
      // unique names
      if (count > 0) {
        for (let a = 0; a < count; a++) {
          const as = this.attrPos[2 * a] as number
          if (this.attrPos[2 * a + 1] !== nl) continue
          let same = true
          for (let k = 0; k < nl && same; k++) same = b[as + k] === b[ns + k]
          if (same) this.fail(ns, `duplicate attribute: ${this.str(ns, ns + nl, false)}.`)
        }
      }
      if (count < 64) {
        this.attrPos[2 * count] = ns
        this.attrPos[2 * count + 1] = nl
        count++
      }
      if (wanted !== 0) {
        for (let id = 0; id < ATTR_BYTES.length; id++) {
          if ((wanted & (1 << id)) !== 0 && sameBytes(b, ns, nl, ATTR_BYTES[id] as Uint8Array)) {
            av[id] = this.attrValue(vs, j, flags)
            break
          }
        }
      }
      i = j + 1
    }
  }

  // ---- elements

  private onOpen(name: string, kind: number): void {
    const cur = this.current
    const av = this.av
    if (cur !== undefined) {
      cur.depth++
      if (cur.capture !== undefined) {
        if (cur.excludedDepth > 0 || EXCLUDED_TEXT.has(name)) cur.excludedDepth++
        return
      }
      if (kind === K_RESULT) {
        const resultKind = RESULT_ELEMENTS.get(name.toLowerCase())
        if (resultKind !== undefined) {
          cur.capture = {
            kind: resultKind,
            message: truncateUtf8(av[A_MESSAGE] ?? "", this.maxTextBytes),
            type: av[A_TYPE] ?? "",
            durationMs: parseDurationMs(av[A_TIME]),
            text: ""
          }
          cur.captureDepth = cur.depth
          cur.excludedDepth = 0
        }
      }
      return
    }
    if (kind === K_SUITE) {
      this.suitePath = undefined
      this.suites.push({
        name: av[A_NAME] ?? "",
        file: av[A_FILE] || av[A_FILEPATH] || "",
        timestamp: av[A_TIMESTAMP]
      })
    } else if (kind === K_CASE) {
      const c = this.caseState
      c.name = av[A_NAME]
      c.classname = av[A_CLASSNAME]
      c.cls = av[A_CLASS]
      c.file = av[A_FILE]
      c.timestamp = av[A_TIMESTAMP]
      c.id = av[A_ID]
      c.line = av[A_LINE]
      c.time = av[A_TIME]
      c.status = av[A_STATUS]
      c.result = av[A_RESULT]
      c.elements.length = 0
      c.depth = 0
      c.capture = undefined
      c.captureDepth = 0
      c.excludedDepth = 0
      this.current = c
    }
  }

  private onClose(name: string): void {
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
    if (name === "testsuite") {
      this.suites.pop()
      this.suitePath = undefined
    }
  }

  private emit(a: CaseState): void {
    const index = this.index++
    this.summary.testcases++
    let fail: ResultElement | undefined
    let skip: ResultElement | undefined
    let nRetries = 0
    let flakyCount = 0
    for (const el of a.elements) {
      if (el.kind === "fail") fail ??= el
      else if (el.kind === "skip") skip ??= el
      else {
        nRetries++
        if (el.kind === "flaky") flakyCount++
      }
    }
    const skippedByAttr =
      (a.status !== undefined && SKIP_STATUS_ATTR.has(a.status.toLowerCase())) ||
      (a.result !== undefined && SKIP_RESULT_ATTR.has(a.result.toLowerCase()))
    const status: JunitStatus =
      fail !== undefined ? "failed" : skip !== undefined || skippedByAttr ? "skipped" : "passed"
    const deciding = fail ?? skip
    const name = a.name ?? ""
    const ignored = name === ""
    const suites = this.suites
    let file = a.file ?? ""
    let stamp = a.timestamp
    for (let i = suites.length - 1; i >= 0 && (file === "" || stamp === undefined); i--) {
      const s = suites[i]
      if (s === undefined) continue
      if (file === "") file = s.file
      stamp ??= s.timestamp
    }
    // one array per suite nesting, shared by its results (not one per result)
    this.suitePath ??= suites.map((s) => s.name)
    const suitePath = this.suitePath
    const r = this.onResult === undefined ? newResult() : this.scratch
    r.name = name
    r.classname = a.classname ?? a.cls ?? ""
    r.file = file
    r.parent = suitePath[0] ?? ""
    r.suitePath = suitePath
    r.attempts = ignored ? 1 : 1 + nRetries
    r.timestamp = parseTimestamp(stamp)
    r.id = a.id
    r.line = parseLine(a.line)
    r.ignored = ignored
    r.index = index
    r.status = status
    r.retry = false
    r.attempt = flakyCount + 1
    r.message = deciding?.message ?? ""
    r.type = deciding?.type ?? ""
    r.text = deciding ? this.finishText(deciding.text) : ""
    r.durationMs = parseDurationMs(a.time)
    this.deliver(r)
    if (ignored) {
      this.summary.ignored++
      return
    }
    this.summary[status]++
    if (nRetries === 0) return
    let flakyAttempt = 0
    let rerunAttempt = flakyCount + 1
    const base: JunitResult = { ...r }
    for (const el of a.elements) {
      if (el.kind === "fail" || el.kind === "skip") continue
      this.summary.retries++
      const x = this.onResult === undefined ? newResult() : this.scratch
      Object.assign(x, base)
      x.status = "failed"
      x.retry = true
      x.attempt = el.kind === "flaky" ? ++flakyAttempt : ++rerunAttempt
      x.message = el.message
      x.type = el.type
      x.text = this.finishText(el.text)
      x.durationMs = el.durationMs
      this.deliver(x)
    }
  }

  private deliver(r: JunitResult): void {
    if (this.onResult === undefined) this.out.push(r)
    else this.onResult(r)
  }

  private finishText(text: string): string {
    return truncateUtf8(text.trim(), this.maxTextBytes)
  }
}
