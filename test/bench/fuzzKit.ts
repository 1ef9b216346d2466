import * as net from "node:net"
import { gzipSync } from "node:zlib"

/**
 * The fuzzer's parts, shared by `npm run fuzz` (test/bench/fuzz.ts) and its seeded slice in `npm test`
 * (test/http/fuzz.test.ts): requests made from our own OpenAPI document, valid and mutated, sent over HTTP (or a raw
 * socket for broken framing), and the check of every answer: no 5xx, every error in the contract's envelope, no
 * error body echoing more than a few hundred bytes.
 */

/** The organization's slug the requests name (`org_url_slug`): BOOTSTRAP_ORG of the server. */
export const fuzzOrg = { slug: "default" }

// ---- seeded randomness (mulberry32)

export class Rng {
  private state: number
  constructor(seed: number) {
    this.state = seed >>> 0
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(n: number): number {
    return Math.floor(this.next() * n)
  }
  pick<A>(xs: ReadonlyArray<A>): A {
    return xs[this.int(xs.length)] as A
  }
  chance(p: number): boolean {
    return this.next() < p
  }
}

// ---- the OpenAPI document

type Json = null | boolean | number | string | Json[] | { [k: string]: Json }
interface JsonSchema {
  readonly $ref?: string
  readonly type?: string
  readonly properties?: Record<string, JsonSchema>
  readonly required?: ReadonlyArray<string>
  readonly items?: JsonSchema
  readonly anyOf?: ReadonlyArray<JsonSchema>
  readonly oneOf?: ReadonlyArray<JsonSchema>
  readonly enum?: ReadonlyArray<Json>
  readonly minimum?: number
  readonly maximum?: number
  readonly minLength?: number
  readonly maxLength?: number
  readonly format?: string
}
export interface OpenApiDoc {
  readonly paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: JsonSchema }> } }>>
  readonly components: { readonly schemas: Record<string, JsonSchema> }
}

export interface Operation {
  readonly path: string
  readonly method: "GET" | "POST"
  readonly kind: "json" | "query" | "multipart"
  readonly schema: JsonSchema | undefined
}

export const operationsOf = (doc: OpenApiDoc): ReadonlyArray<Operation> => {
  const out: Array<Operation> = []
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const content = op.requestBody?.content ?? {}
      const kind = content["multipart/form-data"] ? "multipart" : method === "get" ? "query" : "json"
      out.push({
        path,
        method: method.toUpperCase() as "GET" | "POST",
        kind,
        schema: content["application/json"]?.schema
      })
    }
  }
  return out
}

/** Values a field of this name takes when it is valid: the document's enums are plain strings. */
const KNOWN: Record<string, ReadonlyArray<Json>> = {
  state: ["running", "paused", "draining", "PAUSED"],
  mode: ["single", "parallel"],
  mergeMethod: ["merge_commit", "squash", "rebase"],
  directMergeMode: ["off", "always"],
  optimizationMode: ["off", "bisection_skip_redundant_tests"],
  override: ["always_quarantine", "never_quarantine", "unspecified"],
  status: ["flaky", "broken"],
  priority: ["urgent", "high", "medium", "low", 0, 42, 255, null],
  host: ["local"],
  owner: ["fuzz"],
  name: ["a", "b", "c"],
  targetBranch: ["main", "dev", "release/1"],
  number: [1, 2, 3, "4", 4294967295],
  test_id: ["00000000-0000-4000-8000-000000000000"],
  test_case_id: ["00000000-0000-4000-8000-000000000000"],
  start_time: ["2026-01-01T00:00:00Z"],
  end_time: ["2026-01-03T00:00:00Z"],
  page_token: [""],
  page_size: [1, 10, 100],
  impactedTargets: [["a", "b"], "ALL", []]
}

export class Generator {
  constructor(
    private readonly doc: OpenApiDoc,
    private readonly rng: Rng
  ) {}

  resolve(schema: JsonSchema): JsonSchema {
    let s = schema
    for (let i = 0; i < 10 && s.$ref !== undefined; i++) {
      const name = s.$ref.split("/").pop() ?? ""
      s = { ...(this.doc.components.schemas[name] ?? {}), ...s, $ref: undefined }
    }
    return s
  }

  /** A value that the schema accepts (mostly: refinements the document cannot say are hit by chance). */
  valid(schema: JsonSchema, name = "", depth = 0): Json {
    const known = name === "org_url_slug" ? [fuzzOrg.slug] : KNOWN[name]
    if (known !== undefined && this.rng.chance(0.9)) return this.rng.pick(known)
    const s = this.resolve(schema)
    const alternatives = s.anyOf ?? s.oneOf
    if (alternatives !== undefined) return this.valid(this.rng.pick(alternatives), name, depth + 1)
    if (s.enum !== undefined) return this.rng.pick(s.enum)
    switch (s.type) {
      case "object": {
        const out: Record<string, Json> = {}
        const required = new Set(s.required ?? [])
        for (const [key, sub] of Object.entries(s.properties ?? {})) {
          if (required.has(key) || this.rng.chance(0.5)) out[key] = this.valid(sub, key, depth + 1)
        }
        return out
      }
      case "array": {
        const n = depth > 4 ? 0 : this.rng.int(3)
        return Array.from({ length: n }, () => this.valid(s.items ?? {}, name, depth + 1))
      }
      case "integer":
      case "number": {
        const min = s.minimum ?? 1
        const max = Math.min(s.maximum ?? 1000, min + 1000)
        return min + this.rng.int(max - min + 1)
      }
      case "boolean":
        return this.rng.chance(0.5)
      case "string": {
        if (s.format === "uuid") return "00000000-0000-4000-8000-000000000001"
        const len = Math.max(s.minLength ?? 1, 1 + this.rng.int(Math.min(12, s.maxLength ?? 12)))
        return "x".repeat(len)
      }
      case "null":
        return null
      default:
        return this.rng.pick([1, "x", true, null, {}])
    }
  }
}

// ---- mutations

/** Strings no field should take, or that PostgreSQL cannot store. */
export const nastyStrings = (rng: Rng): string => {
  switch (rng.int(12)) {
    case 0:
      return "\u0000"
    case 1:
      return `x/\u0000`
    case 2:
      return "\ud800"
    case 3:
      return "\udc00x"
    case 4:
      return "x".repeat(10_000)
    case 5:
      return "𝟘".repeat(1 + rng.int(300))
    case 6:
      return "x".repeat(1 + rng.int(2_000_000))
    case 7:
      return "' or 1=1; drop table queues; --"
    case 8:
      return "../../../../etc/passwd"
    case 9:
      return "\u202e\ufeff\u200b"
    case 10:
      return ""
    default:
      return " "
  }
}

const extremeNumbers = [0, -1, -0, 1e308, -1e308, 4294967296, 2 ** 53 + 1, 0.5, 1e-320, 255.5, 4294967295]

/** Nested `depth` deep, as JSON text (built without recursion). */
export const deepJson = (depth: number, open = "[", close = "]") => `${open.repeat(depth)}${close.repeat(depth)}`
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`

/** The paths of an object's fields (not into arrays), for mutating one of them. */
const fieldPaths = (value: Json, prefix: ReadonlyArray<string> = []): Array<ReadonlyArray<string>> => {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return []
  const out: Array<ReadonlyArray<string>> = []
  for (const [k, v] of Object.entries(value)) {
    out.push([...prefix, k])
    out.push(...fieldPaths(v, [...prefix, k]))
  }
  return out
}
const setAt = (root: Json, path: ReadonlyArray<string>, v: Json | undefined) => {
  let node = root as Record<string, Json>
  for (const k of path.slice(0, -1)) node = node[k] as Record<string, Json>
  const last = path[path.length - 1] as string
  if (v === undefined) delete node[last]
  else node[last] = v
}

export interface FuzzRequest {
  readonly category: string
  readonly method: string
  /** path and query */
  readonly target: string
  readonly headers: Record<string, string>
  readonly body?: Uint8Array | string | (() => ReadableStream<Uint8Array>) | undefined
  /** raw bytes over a socket instead of fetch (broken framing) */
  readonly raw?: string | undefined
  /** the token is left off (or replaced) by the mutation */
  readonly noToken?: boolean
}

const MiB = 1024 * 1024
const encoder = new TextEncoder()

let bombCache: Uint8Array | undefined
/** 3 MB or so of gzip expanding to 1 GiB of `<testcase/>`. */
export const bigBomb = (): Uint8Array => {
  if (bombCache === undefined) {
    const unit = Buffer.from("<testcase/>".repeat(Math.floor((64 * MiB) / 11)))
    const one = gzipSync(unit, { level: 9 })
    // concatenated gzip members are one gzip stream: 16 × 64 MiB
    const parts: Array<Buffer> = [gzipSync(Buffer.from("<testsuites><testsuite>"))]
    for (let i = 0; i < 16; i++) parts.push(one)
    bombCache = new Uint8Array(Buffer.concat(parts))
  }
  return bombCache
}
/** A small bomb: 2 million `<testcase/>` (22 MB) in about 20 KB. */
let smallBombCache: Uint8Array | undefined
export const smallBomb = (): Uint8Array => {
  smallBombCache ??= new Uint8Array(
    gzipSync(Buffer.from(`<testsuite>${"<testcase/>".repeat(2_000_000)}</testsuite>`), { level: 9 })
  )
  return smallBombCache
}

const junitDocs = [
  `<?xml version="1.0"?><testsuite name="s"><testcase name="t1" classname="c"/><testcase name="t2"><failure message="m">x</failure></testcase></testsuite>`,
  `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;"><!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]><testsuite><testcase name="&lol4;"/></testsuite>`,
  `<?xml version="1.0"?><!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&xxe;"/></testsuite>`,
  `<?xml version="1.0"?><!DOCTYPE foo SYSTEM "http://127.0.0.1:1/evil.dtd"><testsuite><testcase name="a"/></testsuite>`,
  `<testsuite><testcase name="nul&#0;here" classname="\u0000"/><testcase name="\ud800"/></testsuite>`,
  `<testsuite><testcase name="a"`,
  `not xml at all`,
  `<testsuite>${"<x>".repeat(10_000)}</testsuite>`,
  `<testsuites><testsuite timestamp="+275760-09-13T00:00:00.000Z"><testcase name="t" time="1e308"/></testsuite></testsuites>`
]

const metadataOf = (rng: Rng, mutate: boolean): string => {
  const meta: Record<string, Json> = {
    repo: { host: "local", owner: "fuzz", name: rng.pick(["a", "b", "c"]) },
    org_url_slug: fuzzOrg.slug,
    sha: "f".repeat(40),
    branch: "main"
  }
  if (!mutate) return JSON.stringify(meta)
  switch (rng.int(8)) {
    case 0:
      meta.run_at = rng.pick([
        "+275760-09-13T00:00:00.000Z",
        "-271821-04-20T00:00:00.000Z",
        "0000-01-01T00:00:00Z",
        "x"
      ])
      break
    case 1:
      meta.branch = nastyStrings(rng)
      break
    case 2:
      meta.variant = nastyStrings(rng)
      break
    case 3:
      return `{"repo":${deepJson(10_000)}}`
    case 4:
      meta.pr_number = rng.pick(extremeNumbers)
      break
    case 5:
      return "{"
    case 6:
      meta.job_name = { deep: JSON.parse(deepJson(20)) as Json }
      break
    default:
      delete meta.sha
  }
  return JSON.stringify(meta)
}

const multipart = (boundary: string, parts: ReadonlyArray<{ name: string; filename?: string; body: Uint8Array }>) => {
  const chunks: Array<Uint8Array> = []
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename === undefined ? "" : `; filename="${p.filename}"`}`
    chunks.push(encoder.encode(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n\r\n`), p.body)
    chunks.push(encoder.encode("\r\n"))
  }
  chunks.push(encoder.encode(`--${boundary}--\r\n`))
  return new Uint8Array(Buffer.concat(chunks))
}

export interface Mix {
  /** requests carrying 20 MiB bodies or bombs (slow): their share */
  readonly heavy: number
}

/** One request: an operation of the document, valid or mutated one way. */
export const makeRequest = (gen: Generator, rng: Rng, ops: ReadonlyArray<Operation>, mix: Mix): FuzzRequest => {
  const op = rng.pick(ops)
  const json = { "content-type": "application/json" }
  if (op.kind === "multipart") return uploadRequest(rng, mix, op.path)
  if (op.kind === "query") {
    const q = rng.pick([
      "",
      "?repo=fuzz/a",
      "?repo=x/%00",
      "?repo=%ff%fe",
      "?repo=%ud800",
      `?repo=${"a".repeat(5000)}`,
      "?repo=fuzz/a&repo=fuzz/b&repoHost=local",
      "?repoHost=%00",
      "?__proto__=x&constructor=y",
      "?repo=%F0%9F%98%80/%ED%A0%80"
    ])
    return {
      category: q === "" || q === "?repo=fuzz/a" ? "valid" : "query string",
      method: "GET",
      target: `${op.path}${q}`,
      headers: {}
    }
  }
  const body = gen.valid(op.schema ?? {})
  const kind = rng.int(100)
  if (kind < 25)
    return { category: "valid", method: op.method, target: op.path, headers: json, body: JSON.stringify(body) }
  const paths = fieldPaths(body)
  const path = paths.length > 0 ? rng.pick(paths) : undefined
  if (kind < 35 && path !== undefined) {
    setAt(body, path, rng.pick([1, "1", true, null, [], {}, [1, 2], "x", -5] as ReadonlyArray<Json>))
    return { category: "wrong type", method: op.method, target: op.path, headers: json, body: JSON.stringify(body) }
  }
  if (kind < 42 && path !== undefined) {
    setAt(body, path, undefined)
    return { category: "missing field", method: op.method, target: op.path, headers: json, body: JSON.stringify(body) }
  }
  if (kind < 50 && path !== undefined) {
    const n = rng.pick(extremeNumbers)
    setAt(body, path, n)
    const text = JSON.stringify(body).replace(JSON.stringify(n), rng.pick(["1e999", "-1e999", "1e308", String(n)]))
    return { category: "extreme number", method: op.method, target: op.path, headers: json, body: text }
  }
  if (kind < 64 && path !== undefined) {
    setAt(body, path, nastyStrings(rng))
    return { category: "nasty string", method: op.method, target: op.path, headers: json, body: JSON.stringify(body) }
  }
  if (kind < 68) {
    // invalid UTF-8 inside a string
    const text = JSON.stringify(body)
    const at = text.indexOf('"main"')
    const bytes = encoder.encode(text)
    const out =
      at < 0
        ? bytes
        : Buffer.concat([
            bytes.subarray(0, at + 1),
            Buffer.from([0xff, 0xc0, 0xed, 0xa0, 0x80]),
            bytes.subarray(at + 1)
          ])
    return { category: "invalid UTF-8", method: op.method, target: op.path, headers: json, body: new Uint8Array(out) }
  }
  if (kind < 73) {
    const deep = rng.pick([deepJson(10_000), deepObject(10_000), deepJson(33), deepJson(100_000)])
    const text =
      path !== undefined && rng.chance(0.7)
        ? (() => {
            setAt(body, path, "__DEEP__")
            return JSON.stringify(body).replace('"__DEEP__"', deep)
          })()
        : JSON.stringify({ ...(body as object), batchingRules: "__DEEP__" }).replace('"__DEEP__"', deep)
    return { category: "deep JSON", method: op.method, target: op.path, headers: json, body: text }
  }
  if (kind < 77) {
    const text = JSON.stringify(body)
    const dup = rng.pick([
      `{"__proto__":{"polluted":1},${text.slice(1)}`,
      `{"constructor":{"prototype":{"x":1}},${text.slice(1)}`,
      `${text.slice(0, -1)}${text.length > 2 ? "," : ""}"repo":{"host":"local","owner":"fuzz","name":"dup"},"repo":1}`,
      `{"__proto__":null,${text.slice(1)}`,
      `{"\\u0000":1,${text.slice(1)}`
    ])
    return { category: "duplicate/__proto__ keys", method: op.method, target: op.path, headers: json, body: dup }
  }
  if (kind < 81) {
    const type = rng.pick([
      "text/plain",
      "application/xml",
      "multipart/form-data; boundary=x",
      "application/x-www-form-urlencoded",
      "application/json; charset=latin1",
      "",
      "application/json-patch+json"
    ])
    return {
      category: "content type",
      method: op.method,
      target: op.path,
      headers: type === "" ? {} : { "content-type": type },
      body: JSON.stringify(body)
    }
  }
  if (kind < 85) {
    const text = JSON.stringify(body)
    return {
      category: "empty/truncated body",
      method: op.method,
      target: op.path,
      headers: json,
      body: rng.pick(["", text.slice(0, rng.int(text.length)), "null", "[]", "1", '"x"', "{,}"])
    }
  }
  if (kind < 89) {
    const bad = rng.pick([
      { m: "GET", t: op.path },
      { m: "PUT", t: op.path },
      { m: "DELETE", t: op.path },
      { m: "PATCH", t: op.path },
      { m: "OPTIONS", t: op.path },
      { m: "POST", t: `${op.path}/` },
      { m: "POST", t: `/v1/../v1${op.path.slice(3)}` },
      { m: "POST", t: `/v1//${op.path.slice(4)}` },
      { m: "POST", t: `${op.path}%00` },
      { m: "POST", t: `${op.path}?${"x=1&".repeat(500)}` },
      { m: "POST", t: `/v1/${"x".repeat(3000)}` },
      { m: "POST", t: "/v1/openapi.json" },
      { m: "GET", t: "/ci/output/00000000-0000-4000-8000-000000000000" },
      { m: "POST", t: "/github/webhooks" }
    ])
    return {
      category: "odd method/path",
      method: bad.m,
      target: bad.t,
      headers: json,
      body: bad.m === "GET" || bad.m === "OPTIONS" ? undefined : JSON.stringify(body)
    }
  }
  if (kind < 93) {
    const token = rng.pick([
      undefined,
      "",
      "x",
      "Bearer",
      "Bearer ",
      `Bearer ${"a".repeat(4000)}`,
      "Basic dXNlcjpwYXNz",
      "bearer   spaced  token",
      "\t"
    ])
    const headers: Record<string, string> = { ...json }
    if (token !== undefined) headers.authorization = token
    if (rng.chance(0.3)) headers["x-api-token"] = rng.pick(["", " ", "nope", "x".repeat(8000)])
    return {
      category: "odd token",
      method: op.method,
      target: op.path,
      headers,
      body: JSON.stringify(body),
      noToken: true
    }
  }
  if (kind < 95) {
    // headers over 16 KiB: ours (envelope); over the runtime's limit: the runtime's own 431
    const size = rng.pick([17_000, 40_000, 200_000])
    return {
      category: "large headers",
      method: op.method,
      target: op.path,
      headers: { ...json, "x-pad": "p".repeat(size) },
      body: JSON.stringify(body)
    }
  }
  if (kind < 97) return rawRequest(rng, op.path)
  if (kind < 99 && rng.chance(mix.heavy * 20)) return bigBody(rng, op.path, body)
  return { category: "valid", method: op.method, target: op.path, headers: json, body: JSON.stringify(body) }
}

const bigBody = (rng: Rng, path: string, body: Json): FuzzRequest => {
  const text = JSON.stringify(body)
  const size = rng.pick([20 * MiB, 20 * MiB + 1, 21 * MiB])
  const padded = () => {
    const out = new Uint8Array(size).fill(0x20)
    out.set(encoder.encode(text.slice(0, -1)), 0)
    out[size - 1] = 0x7d // }
    return out
  }
  const json = { "content-type": "application/json" }
  if (rng.chance(0.5)) return { category: "20 MiB body", method: "POST", target: path, headers: json, body: padded() }
  // chunked: no Content-Length, counted as it streams
  return {
    category: "20 MiB body, chunked",
    method: "POST",
    target: path,
    headers: json,
    body: () => {
      const bytes = padded()
      let at = 0
      return new ReadableStream<Uint8Array>({
        pull(controller) {
          if (at >= bytes.length) return controller.close()
          const end = Math.min(bytes.length, at + MiB)
          controller.enqueue(bytes.subarray(at, end))
          at = end
        }
      })
    }
  }
}

const rawRequest = (rng: Rng, path: string): FuzzRequest => {
  const raw = rng.pick([
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}`,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    `GARBAGE\r\n\r\n`,
    `POST ${path} HTTP/9.9\r\nHost: x\r\n\r\n`,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"repo":`,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nBad Header: y\r\nContent-Length: 2\r\n\r\n{}`,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`
  ])
  return { category: "raw framing", method: "RAW", target: path, headers: {}, raw }
}

const uploadRequest = (rng: Rng, mix: Mix, path: string): FuzzRequest => {
  const kind = rng.int(10)
  const boundary = `fuzz${rng.int(1e9)}`
  const headers = { "content-type": `multipart/form-data; boundary=${boundary}` }
  const metadata = (mutate: boolean) => ({ name: "metadata", body: encoder.encode(metadataOf(rng, mutate)) })
  const junit = (body: Uint8Array | string) => ({
    name: "junit",
    filename: "r.xml",
    body: typeof body === "string" ? encoder.encode(body) : body
  })
  if (kind < 3)
    return {
      category: "upload valid",
      method: "POST",
      target: path,
      headers,
      body: multipart(boundary, [metadata(false), junit(junitDocs[0] as string)])
    }
  if (kind < 5)
    return {
      category: "upload XML",
      method: "POST",
      target: path,
      headers,
      body: multipart(boundary, [metadata(false), junit(rng.pick(junitDocs))])
    }
  if (kind < 7)
    return {
      category: "upload metadata",
      method: "POST",
      target: path,
      headers,
      body: multipart(boundary, [metadata(true), junit(junitDocs[0] as string)])
    }
  if (kind < 9) {
    const body = multipart(boundary, [metadata(false), junit(junitDocs[0] as string)])
    const variant = rng.int(6)
    const h =
      variant === 0
        ? { "content-type": "multipart/form-data" }
        : variant === 1
          ? { "content-type": `multipart/form-data; boundary=${"b".repeat(500)}` }
          : variant === 2
            ? { "content-type": `multipart/form-data; boundary="` }
            : headers
    const b =
      variant === 3
        ? body.subarray(0, body.length - 10)
        : variant === 4
          ? encoder.encode(`--${boundary}\r\n\r\n`)
          : variant === 5
            ? new Uint8Array(0)
            : body
    return { category: "upload malformed multipart", method: "POST", target: path, headers: h, body: b }
  }
  const heavy = rng.chance(mix.heavy * 10)
  const bomb = heavy ? bigBomb() : smallBomb()
  return {
    category: heavy ? "upload gzip bomb 1 GiB" : "upload gzip bomb 22 MB",
    method: "POST",
    target: path,
    headers,
    body: multipart(boundary, [metadata(false), junit(bomb)])
  }
}

// ---- sending and checking

export interface Outcome {
  readonly category: string
  readonly status: number
  /** what is wrong with the answer, if anything */
  readonly problem?: string | undefined
  /** the runtime answered by itself (broken framing): no envelope possible */
  readonly runtime?: boolean
  /** the connection failed (the server gone?) */
  readonly connectionError?: boolean
}

const MAX_ERROR_BODY = 8 * 1024
const REQUEST_TIMEOUT_MS = 180_000

const checkAnswer = (category: string, status: number, contentType: string | null, text: string): Outcome => {
  if (status >= 500) return { category, status, problem: `5xx: ${text.slice(0, 300)}` }
  if (status < 400) return { category, status }
  if (text.length > MAX_ERROR_BODY) return { category, status, problem: `error body of ${text.length} bytes` }
  if (!contentType?.includes("application/json"))
    return { category, status, problem: `error with content type ${contentType}: ${text.slice(0, 100)}` }
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }
    if (typeof body.error?.code !== "string" || typeof body.error.message !== "string") {
      return { category, status, problem: `error outside the envelope: ${text.slice(0, 200)}` }
    }
    if (status === 405 && body.error.code !== "METHOD_NOT_ALLOWED")
      return { category, status, problem: `405 with ${body.error.code}` }
  } catch {
    return { category, status, problem: `error body is not JSON: ${text.slice(0, 200)}` }
  }
  return { category, status }
}

const sendRaw = (url: URL, raw: string): Promise<{ status: number; text: string }> =>
  new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname)
    let data = ""
    const done = () => {
      socket.destroy()
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data)
      const end = data.indexOf("\r\n\r\n")
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(data.slice(0, end))?.[1] ?? 0)
      // the first answer only (a second may follow for the bytes after it)
      const body = end < 0 ? "" : data.slice(end + 4, end + 4 + length)
      resolve({ status: m ? Number(m[1]) : 0, text: body })
    }
    socket.setTimeout(3000, done)
    socket.on("data", (d) => {
      data += d.toString("latin1")
      if (/\r\n\r\n/.test(data)) setTimeout(done, 50)
    })
    socket.on("error", done)
    socket.on("close", done)
    socket.write(raw)
    // a request that waits for more body: end our side
    setTimeout(() => socket.end(), 200)
  })

export const send = async (base: string, token: string, req: FuzzRequest): Promise<Outcome> => {
  const url = new URL(base)
  if (req.raw !== undefined) {
    const { status, text } = await sendRaw(url, req.raw)
    // no answer, or the runtime's own (no body): the request never reached the application
    if (status === 0 || text === "") return { category: req.category, status, runtime: true }
    return checkAnswer(req.category, status, "application/json", text)
  }
  const headers: Record<string, string> = { ...req.headers }
  if (!req.noToken) headers["x-api-token"] = token
  const body = typeof req.body === "function" ? req.body() : req.body
  try {
    const response = await fetch(`${base}${req.target}`, {
      method: req.method,
      headers,
      body: body as RequestInit["body"],
      // a streamed body (chunked) needs this in Node; Bun ignores it
      ...(typeof req.body === "function" ? { duplex: "half" } : {}),
      // an answer that never comes is a finding too (a hung request)
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    } as RequestInit)
    const text = await response.text()
    if (response.status === 431 && text === "") return { category: req.category, status: 431, runtime: true }
    return checkAnswer(req.category, response.status, response.headers.get("content-type"), text)
  } catch (e) {
    if (e instanceof DOMException && e.name === "TimeoutError") {
      return { category: req.category, status: 0, problem: `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` }
    }
    // the server may close a connection it refused (413, 431) while the body is still being sent
    return { category: req.category, status: 0, connectionError: true, problem: String(e).slice(0, 200) }
  }
}

/** Counts per category: requests, 2xx, 4xx, 5xx, answers outside the envelope, runtime's own, connection errors. */
export class Tally {
  readonly rows = new Map<
    string,
    { n: number; ok: number; c4: number; c5: number; bad: number; runtime: number; conn: number }
  >()
  readonly problems: Array<string> = []
  add(o: Outcome) {
    const row = this.rows.get(o.category) ?? { n: 0, ok: 0, c4: 0, c5: 0, bad: 0, runtime: 0, conn: 0 }
    row.n++
    if (o.runtime) row.runtime++
    else if (o.connectionError) row.conn++
    else if (o.status >= 500) row.c5++
    else if (o.status >= 400) row.c4++
    else row.ok++
    if (o.problem !== undefined) {
      row.bad += o.status >= 500 || o.connectionError ? 0 : 1
      if (this.problems.length < 50) this.problems.push(`${o.category} → ${o.status}: ${o.problem}`)
    }
    this.rows.set(o.category, row)
  }
  total() {
    const t = { n: 0, ok: 0, c4: 0, c5: 0, bad: 0, runtime: 0, conn: 0 }
    for (const r of this.rows.values()) for (const k of Object.keys(t) as Array<keyof typeof t>) t[k] += r[k]
    return t
  }
  table(): string {
    const head = "| category | requests | 2xx | 4xx | 5xx | outside envelope | runtime's own | connection closed |"
    const lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    const rows = [...this.rows.entries()].sort(([a], [b]) => a.localeCompare(b))
    for (const [k, r] of rows)
      lines.push(`| ${k} | ${r.n} | ${r.ok} | ${r.c4} | ${r.c5} | ${r.bad} | ${r.runtime} | ${r.conn} |`)
    const t = this.total()
    lines.push(`| **total** | ${t.n} | ${t.ok} | ${t.c4} | ${t.c5} | ${t.bad} | ${t.runtime} | ${t.conn} |`)
    return lines.join("\n")
  }
}

// ---- the state made before a run, which the run must leave intact

export const KEEP = { repo: { host: "local", owner: "keep", name: "state" }, targetBranch: "main" }

export const post = async (base: string, token: string, op: string, body: unknown) => {
  const r = await fetch(`${base}/v1/${op}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-token": token },
    body: JSON.stringify(body)
  })
  return { status: r.status, body: (await r.json()) as unknown }
}

/** Makes the state (a configured queue, flaky settings) and returns its snapshot. */
export const makeState = async (base: string, token: string): Promise<string> => {
  await post(base, token, "createQueue", { ...KEEP, concurrency: 3 })
  await post(base, token, "updateQueue", {
    ...KEEP,
    state: "paused",
    enqueueingLabel: "merge",
    requiredStatuses: ["ci"]
  })
  await post(base, token, "flaky-tests/update-settings", {
    repo: KEEP.repo,
    org_url_slug: fuzzOrg.slug,
    quarantining_enabled: true
  })
  return snapshot(base, token)
}

export const snapshot = async (base: string, token: string): Promise<string> => {
  const queue = await post(base, token, "getQueue", KEEP)
  const settings = await post(base, token, "flaky-tests/get-settings", { repo: KEEP.repo, org_url_slug: fuzzOrg.slug })
  return JSON.stringify({ queue, settings })
}

/** deleteQueue racing the writes on the same queue: every answer 200, 404 or 409. */
export const deleteRace = async (base: string, token: string, name: string): Promise<ReadonlyArray<Outcome>> => {
  const key = { repo: { host: "local", owner: "fuzz", name }, targetBranch: "race" }
  await post(base, token, "createQueue", key)
  const calls: Array<[string, unknown]> = [
    ["submitPullRequest", { ...key, pr: { number: 1 } }],
    ["updateQueue", { ...key, state: "paused", concurrency: 2 }],
    ["deleteQueue", key],
    ["submitPullRequest", { ...key, pr: { number: 2 } }],
    ["cancelPullRequest", { ...key, pr: { number: 1 } }],
    ["deleteQueue", key],
    ["getQueue", key],
    ["createQueue", key]
  ]
  return Promise.all(
    calls.map(([op, body]) =>
      send(base, token, {
        category: "deleteQueue race",
        method: "POST",
        target: `/v1/${op}`,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    )
  )
}

// ---- queues at the edges of their settings

/** The repository of the queues at extreme settings (a real one: their PRs exist, so they can wait in the queue). */
export const EXTREME_REPO = { host: "local", owner: "fuzz", name: "extreme" }

/** The integer settings of updateQueue, from the document: each with its bounds (1 to 2^32 - 1 when none is given). */
const integerSettings = (gen: Generator, doc: OpenApiDoc) => {
  const schema = doc.paths["/v1/updateQueue"]?.post?.requestBody?.content["application/json"]?.schema
  const out: Array<{ readonly name: string; readonly min: number; readonly max: number }> = []
  if (schema === undefined) return out
  for (const [name, sub] of Object.entries(gen.resolve(schema).properties ?? {})) {
    const s = gen.resolve(sub)
    const integer = [s, ...(s.anyOf ?? []), ...(s.oneOf ?? [])]
      .map((x) => gen.resolve(x))
      .find((x) => x.type === "integer")
    if (integer !== undefined) out.push({ name, min: integer.minimum ?? 0, max: integer.maximum ?? 4294967295 })
  }
  return out
}

/**
 * Queues whose every integer setting is at its maximum, or at its minimum, in both modes, each holding PRs (in a
 * parallel queue without impacted targets they wait not ready): what the dashboard's reads and the API's reads then
 * compute (a deadline past the last date a Date holds made getQueueActivity answer 500). Returns their keys.
 */
export const makeExtremeQueues = async (
  base: string,
  token: string,
  doc: OpenApiDoc,
  gen: Generator,
  gitRoot: string
): Promise<ReadonlyArray<{ readonly repo: typeof EXTREME_REPO; readonly targetBranch: string }>> => {
  const { createTestRepo } = await import("../support/git.ts")
  const repo = createTestRepo({ root: gitRoot, repo: EXTREME_REPO })
  for (const n of [1, 2, 3]) repo.createPr(n, { files: { [`x-${n}.txt`]: `${n}\n` } })
  const settings = integerSettings(gen, doc)
  const keys: Array<{ readonly repo: typeof EXTREME_REPO; readonly targetBranch: string }> = []
  for (const edge of ["max", "min"] as const) {
    for (const mode of ["single", "parallel"] as const) {
      const key = { repo: EXTREME_REPO, targetBranch: `${edge}-${mode}` }
      repo.setBranch(key.targetBranch, repo.branchSha("main")!)
      const values = Object.fromEntries(settings.map((s) => [s.name, edge === "max" ? s.max : s.min]))
      await post(base, token, "createQueue", key)
      const updated = await post(base, token, "updateQueue", { ...key, ...values, mode, requiredStatuses: ["ci"] })
      if (updated.status !== 200) throw new Error(`updateQueue ${JSON.stringify(values)}: ${JSON.stringify(updated)}`)
      for (const n of [1, 2, 3]) {
        await post(base, token, "submitPullRequest", { ...key, pr: { number: n }, priority: n === 3 ? "urgent" : 42 })
      }
      keys.push(key)
    }
  }
  return keys
}

/** A read of one of the extreme queues: the dashboard's and the API's. */
export const extremeRequest = (
  rng: Rng,
  keys: ReadonlyArray<{ readonly repo: typeof EXTREME_REPO; readonly targetBranch: string }>
): FuzzRequest => {
  const key = rng.pick(keys)
  const [op, extra] = rng.pick<[string, Record<string, Json>]>([
    ["getQueueActivity", {}],
    ["getQueue", {}],
    ["getSubmittedPullRequest", { pr: { number: 1 + rng.int(3) }, includeTimeline: true }],
    ["getPullRequestActivity", { pr: { number: 1 + rng.int(3) } }],
    ["getQueueHealth", {}],
    ["listQueues", {}]
  ])
  return {
    category: "extreme settings",
    method: "POST",
    target: `/v1/${op}`,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...key, ...extra })
  }
}
