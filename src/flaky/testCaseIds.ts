/**
 * Test case ids (contract §3): UUID v5 in the URL namespace over
 * `org_url_slug#host/owner/name#file#classname#parent#name#JUNIT_TESTCASE`, with `#<variant>` appended when the
 * variant is not empty. A testcase whose JUnit `id` attribute already is a version-5 UUID keeps it (with a variant:
 * UUID v5 of `<id>#<variant>`).
 */
import { createHash } from "node:crypto"

/** RFC 4122 URL namespace */
export const URL_NAMESPACE = "6ba7b811-9dad-11d1-80b4-00c04fd430c8"

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const UUID_V5_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i

export const isUuid = (s: string): boolean => UUID_RE.test(s)

/** true for an RFC 4122 version-5 UUID (any letter case) */
export const isUuidV5 = (s: string): boolean => UUID_V5_RE.test(s)

const uuidBytes = (uuid: string): Uint8Array => {
  if (!isUuid(uuid)) throw new Error(`not a UUID: ${uuid}`)
  return Uint8Array.from(Buffer.from(uuid.replace(/-/g, ""), "hex"))
}

const format = (b: Uint8Array): string => {
  const hex = Buffer.from(b.subarray(0, 16)).toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`
}

/** RFC 4122 §4.3 name-based UUID, SHA-1 (version 5). The name is hashed as UTF-8. */
export const uuidV5 = (name: string, namespace: string = URL_NAMESPACE): string => {
  const digest = createHash("sha1").update(uuidBytes(namespace)).update(name, "utf8").digest()
  const b = Uint8Array.from(digest.subarray(0, 16))
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x50
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80
  return format(b)
}

/** The id of a raw key string, e.g. the contract's vector `example_org#example_repo#src/lib.rs#...#JUNIT_TESTCASE`. */
export const testCaseIdFromRaw = (raw: string): string => uuidV5(raw, URL_NAMESPACE)

export interface RepoRef {
  readonly host: string
  readonly owner: string
  readonly name: string
}

export interface TestCaseKey {
  readonly orgUrlSlug: string
  readonly repo: RepoRef
  /** "" for a missing part */
  readonly file?: string
  readonly classname?: string
  /** outermost testsuite name */
  readonly parent?: string
  readonly name: string
  readonly variant?: string
  /** the testcase's JUnit `id` attribute, if any */
  readonly id?: string
}

export const repoPath = (repo: RepoRef): string => `${repo.host}/${repo.owner}/${repo.name}`

/** `org_url_slug#host/owner/name#file#classname#parent#name#JUNIT_TESTCASE[#variant]` */
export const testCaseRawKey = (k: TestCaseKey): string => {
  const base = [
    k.orgUrlSlug,
    repoPath(k.repo),
    k.file ?? "",
    k.classname ?? "",
    k.parent ?? "",
    k.name,
    "JUNIT_TESTCASE"
  ]
  const variant = k.variant ?? ""
  return variant === "" ? base.join("#") : `${base.join("#")}#${variant}`
}

/** The stable test case id (contract §3), lower-case. */
export const testCaseId = (k: TestCaseKey): string => {
  const variant = k.variant ?? ""
  const given = k.id?.trim()
  if (given !== undefined && isUuidV5(given)) {
    const id = given.toLowerCase()
    return variant === "" ? id : uuidV5(`${id}#${variant}`, URL_NAMESPACE)
  }
  return testCaseIdFromRaw(testCaseRawKey(k))
}
