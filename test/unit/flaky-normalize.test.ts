import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import { failureGroupKey, MAX_SUMMARY_CHARS, normalizeFailureMessage } from "../../src/flaky/normalize.ts"

const n = normalizeFailureMessage

describe("failure message normalisation", () => {
  test("numbers", () => {
    expect(n("Expected 5 but got 6")).toBe("Expected <n> but got <n>")
    expect(n("Expected 5 but got 6")).toBe(n("Expected 17 but got -3.5"))
    expect(n("AssertionError: 143 != 0")).toBe("AssertionError: <n> != <n>")
    expect(n("at test_spark.py:821")).toBe("at test_spark.py:<n>")
    expect(n("worker-3 crashed")).toBe("worker-<n> crashed")
    expect(n("utf8 decode failed")).toBe("utf8 decode failed")
  })

  test("uuids, hex ids and addresses", () => {
    expect(n("record 0b4f5b0e-8e43-4a4f-9c2b-3a1b2c3d4e5f not found")).toBe("record <uuid> not found")
    expect(n("<Foo object at 0x7f3a2b1c9d80>")).toBe("<Foo object at <addr>>")
    expect(n("commit 3f2a9c1d4e5 is missing")).toBe("commit <hex> is missing")
    expect(n("sha deadbeefcafe0001 mismatch")).toBe("sha <hex> mismatch")
    // short hex and plain words stay
    expect(n("abc1234 and facade and acceded")).toBe("<hex> and facade and acceded")
    expect(n("id ab12 stays")).toBe("id ab12 stays")
  })

  test("temporary paths", () => {
    expect(n("FileNotFoundError: /tmp/pytest-of-runner/pytest-12/test_x0/data.txt")).toBe("FileNotFoundError: <tmp>")
    expect(n("cannot open /var/folders/xy/k3j2h4g5/T/foo.sock: refused")).toBe("cannot open <tmp> refused")
    expect(n("ENOENT '/private/var/folders/ab/cd/T/tmp-123'")).toBe("ENOENT '<tmp>'")
    expect(n("cannot read /tmp/xyz123")).toBe(n("cannot read /tmp/abc987"))
    expect(n("C:\\Users\\ci\\AppData\\Local\\Temp\\jest_abc\\x.js failed")).toBe("<tmp> failed")
  })

  test("timestamps", () => {
    expect(n("at 2024-01-02T03:04:05.678Z: timeout")).toBe("at <time>: timeout")
    expect(n("started 2024-01-02 03:04:05+01:00 ended")).toBe("started <time> ended")
    expect(n("Date: Sat, 03 Dec 2022 23:10:07 GMT")).toBe("Date: <time>")
    expect(n("[12:34:56.789] boom")).toBe("[<time>] boom")
    expect(n("on 2024-05-06 it broke")).toBe("on <time> it broke")
    expect(n("Jan 2 15:04:05 host kernel: oops")).toBe("<time> host kernel: oops")
  })

  test("durations", () => {
    expect(n("timed out after 12ms")).toBe("timed out after <duration>")
    expect(n("took 1.5s (limit 2 s)")).toBe("took <duration> (limit <duration>)")
    expect(n("waited 2m30s")).toBe("waited <duration>")
    expect(n("Timeout of 5000ms exceeded")).toBe(n("Timeout of 2000ms exceeded"))
  })

  test("whitespace collapses and the summary is at most 200 characters", () => {
    expect(n("  a\n\n\tb   c  ")).toBe("a b c")
    expect(n("")).toBe("")
    const long = n("word ".repeat(1000))
    expect(long.length).toBe(MAX_SUMMARY_CHARS)
    expect(n(`${"x".repeat(199)}😀`).length).toBe(199)
  })

  test("failureGroupKey falls back to the first line of the body", () => {
    expect(failureGroupKey("", "\n\n  Error: boom 42\n  at x")).toBe("Error: boom <n>")
    expect(failureGroupKey("msg 1", "body")).toBe("msg <n>")
    expect(failureGroupKey("", "")).toBe("")
  })

  test("properties: bounded, idempotent, whitespace-free at the ends", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 600 }), (s) => {
        const k = n(s)
        return k.length <= MAX_SUMMARY_CHARS && k === k.trim() && !/\s{2}/.test(k) && n(k) === k
      }),
      { numRuns: 500 }
    )
  })

  test("property: messages differing only in numbers group together", () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (a, b) => n(`expected ${a} items, got ${b}`) === n("expected 1 items, got 2"))
    )
  })
})
