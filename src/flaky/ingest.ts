import { copyText } from "../kernel/pgCopy.ts"
import type { RuntimeHostShape } from "../kernel/RuntimeHost.ts"
import type { NewTestCases, ResultBatch, ResultContext } from "./FlakyRepo.ts"
import { JunitError, type JunitResult } from "./junit/model.ts"
import { gunzipIfNeeded, JunitStreamParser } from "./junit/sources.ts"
import { failureGroupKey } from "./normalize.ts"
import { IdSet, uuidString, writeUuid } from "./testCaseIdsBinary.ts"

/**
 * The upload pipeline's JavaScript side: parts → gunzip → JUnit parser → one stored row per result, made while the
 * database loads the rows already made.
 *
 * On PostgreSQL the rows are written straight into COPY text bytes (`rows`), handed to the COPY in chunks of about
 * `COPY_CHUNK` bytes: no object per row outlives its parsing slice, and the whole upload is never held in memory.
 * Test cases not known to exist go into a second buffer (`cases`, COPY rows of the staging table); when it passes
 * `CASES_LIMIT` the COPY of results ends there, the cases are merged, and a new COPY goes on (so a huge first upload
 * stays bounded too). On PGlite (no COPY) the same rows are gathered as column batches for multi-row inserts.
 */

/** Input bytes parsed per step (a plain part is one 20 MiB array: it is parsed a slice at a time). */
const INPUT_SLICE = 64 * 1024
/**
 * Input bytes between two young-generation collections. Parsing makes short-lived strings much faster than the
 * collector comes back for them on its own, and the process keeps the memory it grew to: an eden collection (a few
 * milliseconds) every 2 MiB of input and one full collection at the end of a large upload keep the peak lower.
 */
const GC_EVERY_BYTES = 2 * 1024 * 1024
/** Input of at least this size gets one full collection once parsed, before the classification allocates more. */
const GC_AFTER_BYTES = 8 * 1024 * 1024
/** COPY data handed to the database at a time. */
export const COPY_CHUNK = 256 * 1024
/** Staged new test cases (COPY bytes) that end a COPY segment. */
export const CASES_LIMIT = 2 * 1024 * 1024

const TAB = 9
const NL = 10

/** A growable byte buffer, emptied and reused. */
export class ByteWriter {
  private buf: Buffer
  private off = 0
  /**
   * @param size the first buffer's size
   * @param expected the size the writer is expected to reach: doubling stops there (a buffer filled up to a limit
   *   is not grown to twice the limit for the last row); past it, doubling goes on
   */
  constructor(
    size = 64 * 1024,
    private readonly expected = 0
  ) {
    this.buf = Buffer.allocUnsafe(size)
  }
  get length(): number {
    return this.off
  }
  private room(n: number): void {
    if (this.off + n <= this.buf.length) return
    const size = this.buf.length
    const grown = size < this.expected ? Math.min(size * 2, this.expected) : size * 2
    const next = Buffer.allocUnsafe(Math.max(grown, this.off + n))
    this.buf.copy(next, 0, 0, this.off)
    this.buf = next
  }
  byte(c: number): void {
    this.room(1)
    this.buf[this.off++] = c
  }
  /** a string of ASCII characters only */
  ascii(s: string): void {
    const n = s.length
    this.room(n)
    if (n > 64) {
      this.off += this.buf.write(s, this.off, "latin1")
      return
    }
    // short strings: a loop costs less than the call into the runtime
    const buf = this.buf
    let o = this.off
    for (let i = 0; i < n; i++) buf[o++] = s.charCodeAt(i)
    this.off = o
  }
  utf8(s: string): void {
    this.room(s.length * 3)
    this.off += this.buf.write(s, this.off, "utf8")
  }
  /** a value of COPY's text format (escaped) */
  text(s: string): void {
    const n = s.length
    if (n <= 64) {
      // plain ASCII without a character COPY escapes: byte by byte
      this.room(n)
      const buf = this.buf
      let o = this.off
      let i = 0
      for (; i < n; i++) {
        const c = s.charCodeAt(i)
        if (c >= 0x80 || c === 0x5c || c === 0x09 || c === 0x0a || c === 0x0d) break
        buf[o++] = c
      }
      if (i === n) {
        this.off = o
        return
      }
    }
    this.utf8(copyText(s))
  }
  int16(n: number): void {
    this.room(2)
    this.buf.writeInt16BE(n, this.off)
    this.off += 2
  }
  int32(n: number): void {
    this.room(4)
    this.buf.writeInt32BE(n, this.off)
    this.off += 4
  }
  /** a value of COPY's binary format: its length, then its UTF-8 bytes */
  field(s: string): void {
    const n = s.length
    this.room(4 + n * 3)
    const buf = this.buf
    const at = this.off
    let o = at + 4
    let i = 0
    if (n <= 64) {
      for (; i < n; i++) {
        const c = s.charCodeAt(i)
        if (c >= 0x80) break
        buf[o++] = c
      }
    }
    if (i < n) o += buf.write(i === 0 ? s : s.slice(i), o, "utf8")
    buf.writeInt32BE(o - at - 4, at)
    this.off = o
  }
  /** a non-negative integer in decimal */
  int(n: number): void {
    this.room(16)
    let digits = 1
    for (let x = n; x >= 10; x = Math.floor(x / 10)) digits++
    let o = this.off + digits
    this.off = o
    let x = n
    do {
      this.buf[--o] = 48 + (x % 10)
      x = Math.floor(x / 10)
    } while (x > 0)
  }
  /** a UUID given as its 16 bytes, as text */
  uuid(b: Uint8Array): void {
    this.room(36)
    this.off = writeUuid(b, this.buf, this.off)
  }
  bytes(b: Uint8Array): void {
    this.room(b.length)
    this.buf.set(b, this.off)
    this.off += b.length
  }
  /** the bytes written so far; valid until the next write or `reset` */
  view(): Uint8Array {
    return this.buf.subarray(0, this.off)
  }
  reset(): void {
    this.off = 0
  }
  /** Empties the writer and lets its buffer go (it gets a new one if written to again). */
  release(): void {
    this.off = 0
    this.buf = Buffer.allocUnsafe(0)
  }
}

/** A part that could not be read, with its index. */
export class PartFailure {
  readonly _tag = "PartFailure"
  constructor(
    readonly index: number,
    readonly error: unknown
  ) {}
}

export interface IngestPart {
  readonly bytes: Uint8Array
}

/** The first line of `s` that is not blank, trimmed; "" when there is none. */
const firstLine = (s: string): string => {
  let from = 0
  while (from < s.length) {
    let to = s.indexOf("\n", from)
    if (to < 0) to = s.length
    const line = s.slice(from, to).trim()
    if (line !== "") return line
    from = to + 1
  }
  return ""
}

/** A failure's one-line summary: the first line of its message, else of its body; at most 200 characters. */
const summaryOf = (message: string, text: string): string => {
  const line = firstLine(message) || firstLine(text)
  return line.length > 200 ? `${line.slice(0, 199)}…` : line
}

// COPY binary format: a header, then per row the number of fields and each field as length and bytes (-1: NULL),
// then -1 as the trailer. The fields of `COPY_RESULTS_BINARY`: test_case_id, ord, status, retry, failure_key,
// failure_summary, then the upload's: repo_id, upload_id, run_at, sha, branch, pr_number, infra.
const BINARY_HEADER = Buffer.from([
  0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0
])
const RESULT_FIELDS = 13
const binaryText = (s: string): Buffer => {
  const bytes = Buffer.from(s, "utf8")
  const out = Buffer.alloc(4 + bytes.length)
  out.writeInt32BE(bytes.length, 0)
  bytes.copy(out, 4)
  return out
}
const STATUS_BYTES = {
  passed: binaryText("passed"),
  failed: binaryText("failed"),
  skipped: binaryText("skipped")
} as const
const RETRY_BYTES = [Buffer.from([0, 0, 0, 1, 0]), Buffer.from([0, 0, 0, 1, 1])] as const
const NO_FAILURE = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
/** 2000-01-01T00:00:00Z, PostgreSQL's epoch */
const PG_EPOCH_MS = 946_684_800_000

/** The upload's constant fields of a result row, in COPY binary format. */
const binarySuffix = (c: ResultContext): Buffer => {
  const uuid = (id: string) => Buffer.concat([Buffer.from([0, 0, 0, 16]), Buffer.from(id.replace(/-/g, ""), "hex")])
  const int64 = (n: bigint) => {
    const b = Buffer.alloc(12)
    b.writeInt32BE(8, 0)
    b.writeBigInt64BE(n, 4)
    return b
  }
  return Buffer.concat([
    uuid(c.repoId),
    uuid(c.uploadId),
    int64(BigInt(c.runAt.getTime() - PG_EPOCH_MS) * 1000n),
    binaryText(c.sha),
    binaryText(c.branch),
    c.prNumber === null ? Buffer.from([0xff, 0xff, 0xff, 0xff]) : int64(BigInt(c.prNumber)),
    Buffer.from([0, 0, 0, 1, 0])
  ])
}

interface Columns {
  testCaseIds: string[]
  statuses: Array<"passed" | "failed" | "skipped">
  retries: boolean[]
  failureKeys: Array<string | null>
  failureSummaries: Array<string | null>
  ords: number[]
}

interface CaseColumns {
  ids: string[]
  names: string[]
  classnames: string[]
  files: string[]
  parents: string[]
}

const emptyColumns = (): Columns => ({
  testCaseIds: [],
  statuses: [],
  retries: [],
  failureKeys: [],
  failureSummaries: [],
  ords: []
})
const emptyCases = (): CaseColumns => ({ ids: [], names: [], classnames: [], files: [], parents: [] })

/**
 * The stored rows of one upload, made from its parsed results: counts, ids, failure keys; COPY bytes (`copy` mode)
 * or column batches. Test cases outside `known` are staged once each.
 */
export class UploadRows {
  tests = 0
  passed = 0
  failed = 0
  skipped = 0
  ignored = 0
  /** failed primary results (retries not counted) */
  failedPrimary = 0
  /** test cases of this upload that were not in `known` */
  readonly fresh = new IdSet()
  /** test cases with a failed result (retries included) */
  readonly failing = new IdSet()
  /** COPY text rows of `test_results` (copy mode) */
  readonly rows = new ByteWriter(COPY_CHUNK + 64 * 1024)
  /** COPY text rows of the staging table of new test cases (copy mode): a COPY segment ends past `CASES_LIMIT` */
  readonly cases = new ByteWriter(64 * 1024, CASES_LIMIT + 256 * 1024)
  private columns = emptyColumns()
  private caseColumns = emptyCases()
  private ord = 0
  private readonly suffix: Uint8Array

  constructor(
    /** the test case id of a result, as 16 bytes (valid until the next call) */
    private readonly idOf: (r: JunitResult) => Uint8Array,
    private readonly known: IdSet,
    readonly context: ResultContext,
    readonly copy: boolean
  ) {
    // the upload's constant fields, after the per-row ones
    this.suffix = binarySuffix(context)
  }

  /** Lets the COPY buffers go once every row was sent (the counts and id sets stay). */
  releaseBuffers(): void {
    this.rows.release()
    this.cases.release()
  }

  /** rows gathered in batch mode */
  get batchLength(): number {
    return this.columns.testCaseIds.length
  }

  /** The batch gathered so far (batch mode), and a new empty one. */
  takeBatch(): { results: ResultBatch; cases: NewTestCases } {
    const results = this.columns
    const c = this.caseColumns
    this.columns = emptyColumns()
    this.caseColumns = emptyCases()
    return { results, cases: { ...c, lastFailureAt: c.ids.map(() => null) } }
  }

  add(r: JunitResult): void {
    if (r.ignored || r.name === "") {
      if (!r.retry) this.ignored++
      return
    }
    const id = this.idOf(r)
    const status = r.status
    if (!r.retry) {
      this.tests++
      if (status === "passed") this.passed++
      else if (status === "failed") {
        this.failed++
        this.failedPrimary++
      } else this.skipped++
    }
    if (!this.known.has(id) && this.fresh.add(id)) this.addCase(id, r)
    if (status === "failed") this.failing.add(id)
    const key = status === "failed" ? failureGroupKey(r.message, r.text) : null
    const summary = status === "failed" ? summaryOf(r.message, r.text) : null
    const ord = this.ord++
    if (this.copy) {
      const w = this.rows
      w.int16(RESULT_FIELDS)
      w.int32(16)
      w.bytes(id)
      w.int32(4)
      w.int32(ord)
      w.bytes(STATUS_BYTES[status])
      w.bytes(RETRY_BYTES[r.retry ? 1 : 0])
      if (key === null || summary === null) w.bytes(NO_FAILURE)
      else {
        w.field(key)
        w.field(summary)
      }
      w.bytes(this.suffix)
      return
    }
    const c = this.columns
    c.testCaseIds.push(uuidString(id))
    c.statuses.push(status)
    c.retries.push(r.retry)
    c.failureKeys.push(key)
    c.failureSummaries.push(summary)
    c.ords.push(ord)
  }

  private addCase(id: Uint8Array, r: JunitResult): void {
    if (this.copy) {
      const w = this.cases
      w.uuid(id)
      w.byte(TAB)
      w.text(r.name)
      w.byte(TAB)
      w.text(r.classname)
      w.byte(TAB)
      w.text(r.file)
      w.byte(TAB)
      w.text(r.parent)
      w.byte(NL)
      return
    }
    const c = this.caseColumns
    c.ids.push(uuidString(id))
    c.names.push(r.name)
    c.classnames.push(r.classname)
    c.files.push(r.file)
    c.parents.push(r.parent)
  }
}

/**
 * Test cases one upload may hold (all its parts). A report this large is already far past any real suite; a gzip
 * bomb of `<testcase/>` (a few MB expanding to a GiB: tens of millions of rows) is refused by `countTestcases`
 * before a row is written, within seconds, instead of filling the database for minutes and rolling back.
 */
export const MAX_UPLOAD_TESTCASES = 1_000_000

const TESTCASE_TAG = Buffer.from("<testcase")

/**
 * Counts the `<testcase` tags of the parts (gunzipped, within the decompressed-bytes cap) without parsing them; throws
 * a `PartFailure` naming the part where the count passes `max`. A plain byte search: far cheaper than the parse.
 */
export const countTestcases = async (parts: ReadonlyArray<IngestPart>, max = MAX_UPLOAD_TESTCASES): Promise<number> => {
  const n = TESTCASE_TAG.length
  let count = 0
  for (let index = 0; index < parts.length; index++) {
    const part = parts[index] as IngestPart
    // the last n - 1 bytes of the previous chunk, for a tag split between two chunks
    let tail: Buffer = Buffer.alloc(0)
    try {
      for await (const chunk of gunzipIfNeeded(part.bytes)) {
        const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        if (tail.length > 0) {
          const seam = Buffer.concat([tail, buf.subarray(0, n - 1)])
          if (seam.indexOf(TESTCASE_TAG) >= 0) count++
        }
        for (let at = buf.indexOf(TESTCASE_TAG); at >= 0; at = buf.indexOf(TESTCASE_TAG, at + n)) count++
        if (count > max) throw new JunitError(0, `the upload holds more than ${max} test cases`)
        tail = Buffer.from(buf.subarray(Math.max(0, buf.length - (n - 1))))
      }
    } catch (e) {
      throw new PartFailure(index, e)
    }
  }
  return count
}

/**
 * Reads the parts one after the other (gunzipped when needed), a slice of input at a time, into `UploadRows`.
 * Errors are `PartFailure`s naming the part.
 */
export class PartsReader {
  private index = 0
  private it: AsyncIterator<Uint8Array> | undefined
  private parser: JunitStreamParser | undefined
  private chunk: Uint8Array | undefined
  private off = 0
  private unhinted = 0
  private total = 0
  /** a COPY segment's header was sent / its trailer was sent (the next call ends the segment) */
  private segmentStarted = false
  private segmentEnded = false
  /** the parts' test cases were counted (before the first row) */
  private counted = false
  private readonly onResult = (r: JunitResult) => this.rows.add(r)
  done = false

  constructor(
    private readonly parts: ReadonlyArray<IngestPart>,
    private readonly rows: UploadRows,
    /** the runtime's collector (kernel/RuntimeHost.ts) */
    private readonly gc: Pick<RuntimeHostShape, "collectYoung" | "collectAll">
  ) {}

  /** Parses one more slice; false once every part has been read. */
  async step(): Promise<boolean> {
    if (this.done) return false
    if (!this.counted) {
      this.counted = true
      try {
        await countTestcases(this.parts)
      } catch (e) {
        this.done = true
        throw e
      }
    }
    try {
      for (;;) {
        const chunk = this.chunk
        if (chunk !== undefined && this.off < chunk.length) {
          const end = Math.min(chunk.length, this.off + INPUT_SLICE)
          const parser = this.parser as JunitStreamParser
          parser.push(chunk.subarray(this.off, end))
          this.unhinted += end - this.off
          this.total += end - this.off
          this.off = end
          if (this.unhinted >= GC_EVERY_BYTES) {
            this.unhinted = 0
            this.gc.collectYoung()
          }
          return true
        }
        this.chunk = undefined
        if (this.it === undefined) {
          const part = this.parts[this.index]
          if (part === undefined) {
            this.done = true
            if (this.total >= GC_AFTER_BYTES) this.gc.collectAll()
            return false
          }
          this.it = gunzipIfNeeded(part.bytes)[Symbol.asyncIterator]()
          this.parser = new JunitStreamParser({ onResult: this.onResult })
        }
        const next = await this.it.next()
        if (next.done) {
          ;(this.parser as JunitStreamParser).end()
          this.it = undefined
          this.parser = undefined
          this.index++
          return true
        }
        this.chunk = next.value
        this.off = 0
      }
    } catch (e) {
      this.done = true
      throw new PartFailure(this.index, e)
    }
  }

  /**
   * The next chunk of COPY data (binary format, `COPY_RESULTS_BINARY`) of results, or null at the end of a COPY
   * segment: every part read, or the staged new test cases reached `CASES_LIMIT` (then `done` is still false: merge
   * them and start another COPY).
   */
  async nextCopyChunk(): Promise<Uint8Array | null> {
    if (this.segmentEnded) {
      this.segmentEnded = false
      return null
    }
    const rows = this.rows.rows
    rows.reset()
    if (!this.segmentStarted) {
      rows.bytes(BINARY_HEADER)
      this.segmentStarted = true
    }
    while (rows.length < COPY_CHUNK) {
      if (this.rows.cases.length >= CASES_LIMIT || !(await this.step())) {
        rows.int16(-1)
        this.segmentStarted = false
        this.segmentEnded = true
        break
      }
    }
    return rows.view()
  }
}
