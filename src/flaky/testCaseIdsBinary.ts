/**
 * Test case ids (contract §3, the same UUID v5 as `testCaseIds.ts`) for the upload pipeline, kept as 16 bytes: hashed with
 * the runtime's SHA-1 (kernel/RuntimeHost.ts) into one reused buffer straight from the key's parts, written to COPY
 * rows as text without making a string, and remembered in `IdSet`, an open-addressing set of 128-bit keys in a typed
 * array (a `Set` of id strings costs ~90 bytes an id and a string per lookup).
 */

import type { RuntimeHostShape } from "../kernel/RuntimeHost.ts"
import type { JunitResult } from "./junit/model.ts"
import { isUuidV5, type RepoRef, repoPath, testCaseId, testCaseRawKey } from "./testCaseIds.ts"

const URL_NAMESPACE_BYTES = Buffer.from("6ba7b8119dad11d180b400c04fd430c8", "hex")
const HEX_CODES = new TextEncoder().encode("0123456789abcdef")
const textBuf = Buffer.alloc(36)

/** Writes the 36 characters of the UUID `b` into `to` at `o`; returns the end. */
export const writeUuid = (b: Uint8Array, to: Uint8Array, o: number): number => {
  for (let i = 0; i < 16; i++) {
    const v = b[i] as number
    to[o++] = HEX_CODES[v >> 4] as number
    to[o++] = HEX_CODES[v & 15] as number
    if (i === 3 || i === 5 || i === 7 || i === 9) to[o++] = 45
  }
  return o
}

/** The UUID `b` as text (one flat string). */
export const uuidString = (b: Uint8Array): string => {
  writeUuid(b, textBuf, 0)
  return textBuf.toString("latin1")
}

/** The value of the hex digit at `s[i]` (0 for anything else). */
const hexAt = (s: string, i: number): number => {
  const c = s.charCodeAt(i) | 0x20
  return c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : 0
}

/** The 16 bytes of a UUID in text form (with or without its hyphens), without making a string. */
export const uuidBytes = (uuid: string, out: Uint8Array = new Uint8Array(16)): Uint8Array => {
  let i = 0
  for (let k = 0; k < 16; k++) {
    if (uuid.charCodeAt(i) === 45) i++
    out[k] = (hexAt(uuid, i) << 4) | hexAt(uuid, i + 1)
    i += 2
  }
  return out
}

/** Writes `s` as UTF-8 at `o` (room checked by the caller); returns the end. ASCII byte by byte, the rest natively. */
const putUtf8 = (buf: Buffer, o: number, s: string): number => {
  const n = s.length
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i)
    if (c >= 0x80) return o + buf.write(i === 0 ? s : s.slice(i), o, "utf8")
    buf[o++] = c
  }
  return o
}

const word = (b: Uint8Array, i: number): number =>
  ((b[i] as number) | ((b[i + 1] as number) << 8) | ((b[i + 2] as number) << 16) | ((b[i + 3] as number) << 24)) >>> 0

/** The share of an `IdSet`'s slots in use above which it doubles (16 bytes a slot: 23 to 46 bytes an id). */
const MAX_LOAD = 0.7

/**
 * A set of UUIDs (version 5: their second word is never 0, which marks an empty slot), 16 bytes a slot, open
 * addressing with linear probing, grown (doubled) when more than 70% of its slots are in use. Ids are SHA-1 bytes,
 * evenly spread: probe sequences stay short at that load.
 */
export class IdSet {
  private slots: Uint32Array
  private mask: number
  private limit: number
  size = 0

  constructor(capacity = 1024) {
    let n = 16
    while (n * MAX_LOAD < capacity) n *= 2
    this.slots = new Uint32Array(n * 4)
    this.mask = n - 1
    this.limit = Math.floor(n * MAX_LOAD)
  }

  private find(w0: number, w1: number, w2: number, w3: number): number {
    const s = this.slots
    let i = (w0 ^ w2) & this.mask
    for (;;) {
      const at = i * 4
      const v1 = s[at + 1] as number
      if (v1 === 0) return -1 - i
      if (v1 === w1 && s[at] === w0 && s[at + 2] === w2 && s[at + 3] === w3) return i
      i = (i + 1) & this.mask
    }
  }

  has(b: Uint8Array): boolean {
    return this.find(word(b, 0), word(b, 4), word(b, 8), word(b, 12)) >= 0
  }

  /** Adds `b`; false when it was there already. */
  add(b: Uint8Array): boolean {
    const w0 = word(b, 0)
    const w1 = word(b, 4)
    const w2 = word(b, 8)
    const w3 = word(b, 12)
    const found = this.find(w0, w1, w2, w3)
    if (found >= 0) return false
    const at = (-1 - found) * 4
    this.slots[at] = w0
    this.slots[at + 1] = w1
    this.slots[at + 2] = w2
    this.slots[at + 3] = w3
    if (++this.size > this.limit) this.grow()
    return true
  }

  private grow(): void {
    const old = this.slots
    this.slots = new Uint32Array(old.length * 2)
    this.mask = this.mask * 2 + 1
    this.limit = Math.floor((this.mask + 1) * MAX_LOAD)
    for (let at = 0; at < old.length; at += 4) {
      const w1 = old[at + 1] as number
      if (w1 === 0) continue
      const w0 = old[at] as number
      const w2 = old[at + 2] as number
      let i = (w0 ^ w2) & this.mask
      while (this.slots[i * 4 + 1] !== 0) i = (i + 1) & this.mask
      this.slots.set(old.subarray(at, at + 4), i * 4)
    }
  }

  /** Adds every id of `other`. */
  addAll(other: IdSet): void {
    const b = new Uint8Array(16)
    const v = new DataView(b.buffer)
    const s = other.slots
    for (let at = 0; at < s.length; at += 4) {
      if (s[at + 1] === 0) continue
      for (let k = 0; k < 4; k++) v.setUint32(4 * k, s[at + k] as number, true)
      this.add(b)
    }
  }

  /** The ids that are not in `except`, as strings, `size` at a time (only those of one chunk are made at once). */
  *stringChunks(size: number, except?: IdSet): Generator<string[], void, undefined> {
    let out: string[] = []
    const b = new Uint8Array(16)
    const v = new DataView(b.buffer)
    const s = this.slots
    for (let at = 0; at < s.length; at += 4) {
      if (s[at + 1] === 0) continue
      for (let k = 0; k < 4; k++) v.setUint32(4 * k, s[at + k] as number, true)
      if (except?.has(b)) continue
      out.push(uuidString(b))
      if (out.length >= size) {
        yield out
        out = []
      }
    }
    if (out.length > 0) yield out
  }
}

/**
 * The id hashing of one user (the flaky service): the runtime's SHA-1 (`sha1Into`, kernel/RuntimeHost.ts) over a
 * hash input it keeps and reuses (namespace bytes, then the name; grown for long names).
 */
export const makeIdHasher = (sha1Into: RuntimeHostShape["sha1Into"]) => {
  let hashInput = Buffer.alloc(4096)
  URL_NAMESPACE_BYTES.copy(hashInput, 0)
  const digest = new Uint8Array(20)
  /** views of `hashInput` by length (a view per hash would be an object per id) */
  let views: Array<Uint8Array | undefined> = []

  /** `hashInput` with room for `n` bytes after the namespace */
  const hashRoom = (n: number): Buffer => {
    if (16 + n > hashInput.length) {
      hashInput = Buffer.alloc(16 + n)
      URL_NAMESPACE_BYTES.copy(hashInput, 0)
      views = []
    }
    return hashInput
  }

  /** Hashes `hashInput[0, end)` into `out` (16 bytes) as a version-5 UUID. */
  const finish = (end: number, out: Uint8Array): Uint8Array => {
    let view = views[end]
    if (view === undefined) {
      view = hashInput.subarray(0, end)
      if (end <= 4096) views[end] = view
    }
    sha1Into(view, digest)
    for (let i = 0; i < 16; i++) out[i] = digest[i] as number
    out[6] = ((out[6] as number) & 0x0f) | 0x50
    out[8] = ((out[8] as number) & 0x3f) | 0x80
    return out
  }

  /** UUID v5 of `name` (URL namespace) as a string. */
  const uuidV5String = (name: string): string => {
    const input = hashRoom(name.length * 3)
    const n = input.write(name, 16, "utf8")
    return uuidString(finish(16 + n, new Uint8Array(16)))
  }

  /**
   * The id of each parsed result, for one upload, as 16 bytes in a buffer reused from call to call (copy it to keep
   * it): the raw key's constant head and tail are encoded once, its parts go straight into the hash input, and a
   * retry (the same testcase again, right after) reuses the previous id.
   */
  const testCaseDigests = (orgUrlSlug: string, repo: RepoRef, variant: string) => {
    const head = Buffer.from(`${orgUrlSlug}#${repoPath(repo)}#`, "utf8")
    const tail = Buffer.from(variant === "" ? "#JUNIT_TESTCASE" : `#JUNIT_TESTCASE#${variant}`, "utf8")
    const out = new Uint8Array(16)
    // the last key's parts (not the result object: a parser may reuse it)
    let known = false
    let lastName = ""
    let lastClassname = ""
    let lastFile = ""
    let lastParent = ""
    let lastId: string | undefined
    return (x: JunitResult): Uint8Array => {
      if (
        known &&
        x.name === lastName &&
        x.classname === lastClassname &&
        x.file === lastFile &&
        x.parent === lastParent &&
        x.id === lastId
      ) {
        return out
      }
      known = true
      lastName = x.name
      lastClassname = x.classname
      lastFile = x.file
      lastParent = x.parent
      lastId = x.id
      const given = x.id?.trim()
      if (given !== undefined && isUuidV5(given)) {
        return uuidBytes(testCaseId({ orgUrlSlug, repo, name: x.name, variant, id: given }), out)
      }
      const { file, classname, parent, name } = x
      const input = hashRoom(
        head.length + tail.length + 3 * (file.length + classname.length + parent.length + name.length + 3)
      )
      let o = 16
      input.set(head, o)
      o += head.length
      o = putUtf8(input, o, file)
      input[o++] = 0x23
      o = putUtf8(input, o, classname)
      input[o++] = 0x23
      o = putUtf8(input, o, parent)
      input[o++] = 0x23
      o = putUtf8(input, o, name)
      input.set(tail, o)
      o += tail.length
      return finish(o, out)
    }
  }

  /** `testCaseId` of testCaseIds.ts, faster. */
  const fastTestCaseId = (key: Parameters<typeof testCaseId>[0]): string => {
    const given = key.id?.trim()
    if (given !== undefined && isUuidV5(given)) return testCaseId(key)
    return uuidV5String(testCaseRawKey(key))
  }

  /** The id of each parsed result of one upload, as a string (see `testCaseDigests`). */
  const testCaseIds = (orgUrlSlug: string, repo: RepoRef, variant: string) => {
    const digests = testCaseDigests(orgUrlSlug, repo, variant)
    return (x: JunitResult): string => uuidString(digests(x))
  }

  return { uuidV5String, testCaseDigests, fastTestCaseId, testCaseIds }
}

export type IdHasher = ReturnType<typeof makeIdHasher>
