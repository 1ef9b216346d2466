import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import {
  isUuidV5,
  testCaseId,
  testCaseIdFromRaw,
  testCaseRawKey,
  URL_NAMESPACE,
  uuidV5
} from "../../src/flaky/testCaseIds.ts"
import { IdSet, uuidBytes, uuidString } from "../../src/flaky/testCaseIdsBinary.ts"

const VECTOR = "example_org#example_repo#src/lib.rs#ExampleClass#parent/fact/path#example_name#JUNIT_TESTCASE"

describe("test case ids", () => {
  test("contract vectors", () => {
    expect(testCaseIdFromRaw(VECTOR)).toBe("06cb6db5-f807-5198-b072-af67a0636f8a")
    expect(testCaseIdFromRaw(`${VECTOR}#unix`)).toBe("c869cb93-66e2-516d-a0ea-15ff4b413c3f")
  })

  test("RFC 4122 v5 reference value (Python's uuid5(NAMESPACE_DNS, 'python.org'))", () => {
    expect(uuidV5("python.org", "6ba7b810-9dad-11d1-80b4-00c04fd430c8")).toBe("886313e1-3b8a-5372-9b90-0c9aee199e5d")
    expect(URL_NAMESPACE).toBe("6ba7b811-9dad-11d1-80b4-00c04fd430c8")
  })

  test("the raw key is org#host/owner/name#file#classname#parent#name#JUNIT_TESTCASE[#variant]", () => {
    const key = {
      orgUrlSlug: "acme",
      repo: { host: "github.com", owner: "acme", name: "web" },
      file: "src/a.test.ts",
      classname: "A",
      parent: "suite",
      name: "works"
    }
    expect(testCaseRawKey(key)).toBe("acme#github.com/acme/web#src/a.test.ts#A#suite#works#JUNIT_TESTCASE")
    expect(testCaseRawKey({ ...key, variant: "linux" })).toBe(
      "acme#github.com/acme/web#src/a.test.ts#A#suite#works#JUNIT_TESTCASE#linux"
    )
    expect(testCaseRawKey({ orgUrlSlug: "o", repo: { host: "h", owner: "w", name: "n" }, name: "t" })).toBe(
      "o#h/w/n####t#JUNIT_TESTCASE"
    )
    expect(testCaseId(key)).toBe(testCaseIdFromRaw(testCaseRawKey(key)))
    expect(testCaseId({ ...key, variant: "" })).toBe(testCaseId(key))
    expect(testCaseId({ ...key, variant: "linux" })).not.toBe(testCaseId(key))
  })

  test("a v5 UUID id attribute is kept; with a variant it is hashed with it", () => {
    const given = "06cb6db5-f807-5198-b072-af67a0636f8a"
    const key = { orgUrlSlug: "o", repo: { host: "h", owner: "w", name: "n" }, name: "t", id: given }
    expect(testCaseId(key)).toBe(given)
    expect(testCaseId({ ...key, id: given.toUpperCase() })).toBe(given)
    expect(testCaseId({ ...key, variant: "unix" })).toBe(uuidV5(`${given}#unix`))
    // not v5: ignored
    const v4 = "9b2f4c1e-8a3d-4f6b-9c2e-1d5a7b3c9e0f"
    expect(testCaseId({ ...key, id: v4 })).toBe(testCaseIdFromRaw("o#h/w/n####t#JUNIT_TESTCASE"))
    expect(testCaseId({ ...key, id: "42" })).toBe(testCaseIdFromRaw("o#h/w/n####t#JUNIT_TESTCASE"))
  })

  test("property: ids are v5 UUIDs and deterministic", () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const id = testCaseIdFromRaw(s)
        return isUuidV5(id) && id === testCaseIdFromRaw(s) && id === id.toLowerCase()
      })
    )
  })
})

describe("id bytes and IdSet", () => {
  test("uuidBytes reads a UUID with or without hyphens, either case; uuidString writes it back", () => {
    const id = "06cb6db5-f807-5198-b072-af67a0636f8a"
    const bytes = uuidBytes(id)
    expect(Buffer.from(bytes).toString("hex")).toBe(id.replace(/-/g, ""))
    expect(uuidBytes(id.toUpperCase())).toEqual(bytes)
    expect(uuidBytes(id.replace(/-/g, ""))).toEqual(bytes)
    expect(uuidString(bytes)).toBe(id)
  })

  test("a set of 20,000 ids grows, finds each once, and hands out the ids not in another set in chunks", () => {
    const ids = Array.from({ length: 20_000 }, (_, i) => testCaseIdFromRaw(`t${i}`))
    const set = new IdSet(16)
    const except = new IdSet()
    for (const [i, id] of ids.entries()) {
      expect(set.add(uuidBytes(id))).toBe(true)
      if (i % 3 === 0) except.add(uuidBytes(id))
    }
    for (const id of ids) expect(set.add(uuidBytes(id))).toBe(false)
    expect(set.size).toBe(20_000)
    expect(set.has(uuidBytes(testCaseIdFromRaw("not added")))).toBe(false)
    const chunks = [...set.stringChunks(5000, except)]
    expect(chunks.map((c) => c.length)).toEqual([5000, 5000, 3333])
    expect(chunks.flat().sort()).toEqual(ids.filter((_, i) => i % 3 !== 0).sort())
    expect([...set.stringChunks(5000)].flat().length).toBe(20_000)
  })
})
