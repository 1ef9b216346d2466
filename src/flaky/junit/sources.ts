/**
 * The JUnit parser's sources: a file's bytes in any encoding (UTF-8 as it is, UTF-16 and declared encodings decoded
 * first), decoded text, streams and iterables, gzip; the convenience functions over them. Each feeds the scanner
 * (scanner.ts) and hands out its results (model.ts).
 */
import { JunitError, type JunitOptions, type JunitResult, type JunitSummary } from "./model.ts"
import { JunitByteParser, WINDOW, XmlCharFilter } from "./scanner.ts"

export type JunitSource = AsyncIterable<Uint8Array> | Iterable<Uint8Array> | ReadableStream<Uint8Array> | Uint8Array

/** characters (or bytes) handed to the parser at a time by the convenience functions */
const SLICE = 64 * 1024

const utf8Encoder = new TextEncoder()

/**
 * Synchronous push parser over already decoded text. `write` strings, `end()` once, and `take()` the results produced
 * so far after each call. Throws `JunitError` on malformed input.
 */
export class JunitPushParser {
  private readonly core: JunitByteParser
  private readonly filter = new XmlCharFilter()

  constructor(options: JunitOptions = {}) {
    this.core = new JunitByteParser(options)
  }

  get summary(): JunitSummary {
    return this.core.summary
  }

  write(chunk: string): void {
    // lone surrogates and the BOM go here: they cannot be encoded as UTF-8
    const s = this.filter.push(chunk)
    if (s.length > 0) this.core.push(utf8Encoder.encode(s))
  }

  end(): void {
    this.filter.end()
    this.core.end()
  }

  /** results produced since the last call */
  take(): JunitResult[] {
    return this.core.take()
  }
}

const ENCODING_RE = /^<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']/

/** `TextDecoder` over any WHATWG label (bun-types narrows the label to a few names) */
const decoderFor = (label: string): TextDecoder =>
  new (TextDecoder as unknown as new (label: string) => TextDecoder)(label)

/** A decoder for files that are not UTF-8: UTF-16 by BOM, else the XML declaration's encoding if the runtime knows it. */
const pickDecoder = (head: Uint8Array): TextDecoder | undefined => {
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
      // unknown label: UTF-8
    }
  }
  return undefined
}

const concat = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

/**
 * Push parser over the bytes of a file in any encoding: UTF-8 goes to `JunitByteParser` as it is (a UTF-8 BOM is
 * dropped); UTF-16 (by BOM) and other declared encodings are decoded and re-encoded as UTF-8 first.
 */
export class JunitStreamParser {
  private readonly core: JunitByteParser
  private head: Uint8Array | undefined
  private sniffed = false
  private decoder: TextDecoder | undefined
  private filter: XmlCharFilter | undefined

  constructor(options: JunitOptions = {}) {
    this.core = new JunitByteParser(options)
  }

  get summary(): JunitSummary {
    return this.core.summary
  }

  push(chunk: Uint8Array): void {
    if (!this.sniffed) {
      // collect enough bytes to sniff the encoding
      this.head = this.head === undefined ? chunk : concat(this.head, chunk)
      if (this.head.length < 256) return
      this.sniff()
      return
    }
    this.feed(chunk)
  }

  end(): void {
    if (!this.sniffed) this.sniff()
    if (this.decoder !== undefined) {
      const s = (this.filter as XmlCharFilter).push(this.decoder.decode())
      if (s.length > 0) this.core.push(utf8Encoder.encode(s))
    }
    this.core.end()
  }

  take(): JunitResult[] {
    return this.core.take()
  }

  private sniff(): void {
    const head = this.head ?? new Uint8Array(0)
    this.head = undefined
    this.sniffed = true
    this.decoder = pickDecoder(head)
    if (this.decoder !== undefined) this.filter = new XmlCharFilter()
    const bom = this.decoder === undefined && head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf
    this.feed(bom ? head.subarray(3) : head)
  }

  private feed(chunk: Uint8Array): void {
    if (this.decoder === undefined) {
      this.core.push(chunk)
      return
    }
    for (let i = 0; i < chunk.length; i += WINDOW) {
      const text = this.decoder.decode(chunk.subarray(i, i + WINDOW), { stream: true })
      const s = (this.filter as XmlCharFilter).push(text)
      if (s.length > 0) this.core.push(utf8Encoder.encode(s))
    }
  }
}

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

/**
 * Streams results, one testcase element at a time (see the module comment for retries). The generator's return
 * value is the summary. Throws `JunitError` for an unreadable file; results already yielded stay valid but the
 * caller should discard the upload (contract: nothing of that upload is stored).
 */
export async function* junitResults(
  source: JunitSource,
  options: JunitOptions = {}
): AsyncGenerator<JunitResult, JunitSummary, undefined> {
  const parser = new JunitStreamParser(options)
  for await (const chunk of byteChunks(source)) {
    for (let i = 0; i < chunk.length; i += SLICE) {
      parser.push(chunk.subarray(i, i + SLICE))
      yield* parser.take()
    }
  }
  parser.end()
  yield* parser.take()
  return parser.summary
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
