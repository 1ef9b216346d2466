import { describe, expect, test } from "bun:test"
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import {
  JunitError,
  type JunitResult,
  type JunitSummary,
  parseTimestamp,
  truncateUtf8
} from "../../src/flaky/junit/model.ts"
import { gunzipIfNeeded, isGzip, junitResults, parseJunit, parseJunitString } from "../../src/flaky/junit/sources.ts"

const FIXTURES = new URL("../fixtures/junit/", import.meta.url)
const fixturePath = (name: string): string => fileURLToPath(new URL(name, FIXTURES))
const fixture = (name: string): string => readFileSync(fixturePath(name), "utf8")
const fixtureBytes = (name: string): Uint8Array<ArrayBuffer> => new Uint8Array(readFileSync(fixturePath(name)))

type Counts = JunitSummary

interface Expectation {
  readonly counts?: Counts
  /** malformed: the JunitError line */
  readonly errorLine?: number
  readonly check?: (results: JunitResult[]) => void
}

const primary = (rs: JunitResult[]): JunitResult[] => rs.filter((r) => !r.retry)
const byName = (rs: JunitResult[], name: string): JunitResult[] => rs.filter((r) => r.name === name)
const one = (rs: JunitResult[], name: string): JunitResult => {
  const found = byName(primary(rs), name)
  expect(found.length).toBe(1)
  return found[0] as JunitResult
}

const c = (testcases: number, passed: number, failed: number, skipped: number, ignored = 0, retries = 0): Counts => ({
  testcases,
  passed,
  failed,
  skipped,
  ignored,
  retries
})

const EXPECTED: Record<string, Expectation> = {
  "bazel-test-xml.xml": {
    counts: c(1, 0, 1, 0),
    check: (rs) => {
      const r = one(rs, "bazel/failing_absl_test")
      expect(r.status).toBe("failed")
      expect(r.message).toBe("exited with error code 1")
      expect(r.classname).toBe("")
      expect(r.parent).toBe("bazel/failing_absl_test")
    }
  },
  "corrupt-truncated.xml": { errorLine: 11 },
  "go-junit-report-pass-fail-skip.xml": {
    counts: c(5, 2, 1, 2),
    check: (rs) => {
      const r = one(rs, "TestOne")
      expect(r.status).toBe("failed")
      expect(r.classname).toBe("package/fail")
      expect(r.parent).toBe("package/fail")
      expect(r.text).toContain("fail_test.go:6: Error message")
      expect(r.durationMs).toBe(151)
      expect(r.timestamp).toBe(Date.UTC(2022, 0, 1))
      expect(one(rs, "TestSkip").status).toBe("skipped")
      expect(one(rs, "TestSkip").message).toBe("Skipped")
      expect(one(rs, "TestPassLog").status).toBe("passed")
    }
  },
  "go-junit-report-repeated-names.xml": {
    counts: c(3, 3, 0, 0),
    check: (rs) => {
      expect(byName(rs, "TestRepeat").length).toBe(3)
      expect(rs.map((r) => r.index)).toEqual([0, 1, 2])
    }
  },
  "gotestsum-junitxml.xml": {
    counts: c(60, 42, 13, 5),
    check: (rs) => {
      const main = one(rs, "TestMain")
      expect(main.status).toBe("failed")
      expect(main.classname).toBe("")
      // zero timestamps 0001-01-01T00:00:00Z are not dates
      expect(rs.every((r) => r.timestamp === undefined)).toBe(true)
      expect(byName(rs, "TestNestedSuccess/a/sub").length).toBe(2)
    }
  },
  "gtest-style-trunk-fixture.xml": {
    counts: c(1, 0, 1, 0),
    check: (rs) => {
      const r = one(rs, "Hello")
      expect(r).toMatchObject({
        classname: "HelloTest",
        file: "trunk/hello_world/cc/hello_test.cc",
        line: 9,
        parent: "HelloTest",
        suitePath: ["HelloTest"],
        message: "Failure at 1:00",
        durationMs: 1,
        timestamp: Date.UTC(2024, 11, 10, 1)
      })
    }
  },
  "jest-junit-empty-classname.xml": {
    counts: c(2, 2, 0, 0),
    check: (rs) => {
      expect(rs.map((r) => [r.name, r.classname, r.parent])).toEqual([
        ["Load widget via link", "", "widget.test.js"],
        ["Mount iframe", "", "widget.test.js"]
      ])
      expect(rs[0]?.durationMs).toBe(272)
    }
  },
  "minimal-attributes.xml": {
    counts: c(4, 1, 2, 1),
    check: (rs) => {
      expect(rs.map((r) => [r.name, r.status])).toEqual([
        ["test_name", "passed"],
        ["skipped_test", "skipped"],
        ["failed_test", "failed"],
        ["error_test", "failed"]
      ])
      expect(rs.every((r) => r.parent === "" && r.durationMs === 0 && r.timestamp === undefined)).toBe(true)
    }
  },
  "mocha-junit-reporter.xml": {
    counts: c(109, 109, 0, 0),
    check: (rs) => {
      // RFC 1123 suite timestamp "Sat, 03 Dec 2022 23:10:07 GMT"
      expect(rs[0]?.timestamp).toBe(Date.UTC(2022, 11, 3, 23, 10, 7))
      expect(rs[0]?.name).toBe("parse a simple bib file")
      expect(rs[0]?.parent).toBe("Mocha Tests")
    }
  },
  "multiple-results-per-testcase.xml": {
    counts: c(4, 1, 2, 1),
    check: (rs) => {
      expect(one(rs, "test that errors")).toMatchObject({ status: "failed", message: "test failure" })
      expect(one(rs, "test that fails").status).toBe("failed")
      expect(one(rs, "test that is skipped").status).toBe("skipped")
      expect(one(rs, "test that succeeds").status).toBe("passed")
    }
  },
  "nested-testsuites.xml": {
    counts: c(5, 5, 0, 0),
    check: (rs) => {
      expect(one(rs, "TestCase3")).toMatchObject({
        parent: "Project Test Suite",
        suitePath: ["Project Test Suite", "TestSuite2", "TestSuite2.1"],
        file: "/somepath",
        line: 40,
        classname: "someName"
      })
      expect(one(rs, "TestCase5").suitePath).toEqual(["Project Test Suite"])
      expect(one(rs, "TestCase1").suitePath).toEqual(["Project Test Suite", "TestSuite1"])
    }
  },
  "nextest-basic.xml": {
    counts: c(3, 2, 1, 0),
    check: (rs) => {
      const r = one(rs, "test_failure")
      expect(r.status).toBe("failed")
      expect(r.text).toStartWith("thread 'test_failure' panicked at tests/parry3d.rs:154:5:")
      expect(r.timestamp).toBe(Date.parse("2024-12-02T20:06:10.513Z"))
      expect(r.classname).toBe("oxidized_navigation::parry3d")
    }
  },
  "no-attributes.xml": {
    counts: c(4, 0, 0, 0, 4),
    check: (rs) => {
      expect(rs.length).toBe(4)
      expect(rs.every((r) => r.ignored && r.name === "")).toBe(true)
    }
  },
  "pytest-basic.xml": {
    counts: c(4, 2, 2, 0),
    check: (rs) => {
      const r = one(rs, "test_which_fails")
      expect(r.message).toBe("AssertionError: assert 'test' == 'xyz'\n  - xyz\n  + test")
      expect(r.text).toContain(">       assert event['attr'] == 'xyz'")
      expect(r.timestamp).toBe(Date.UTC(2020, 9, 12, 18, 46, 11, 226))
    }
  },
  "pytest-file-line-skip-fail.xml": {
    counts: c(5, 3, 1, 1),
    check: (rs) => {
      expect(one(rs, "test_check_shape_compatibility")).toMatchObject({
        file: "test/test_spark.py",
        line: 1412,
        status: "passed",
        durationMs: 6435
      })
      expect(one(rs, "test_rsh_events").message).toContain("AssertionError: 143 != 0")
      expect(one(rs, "test_get_available_devices").message).toBe(
        "get_available_devices only supported in Spark 3.0 and above"
      )
    }
  },
  "quick-junit-flaky-and-rerun.xml": {
    counts: c(6, 2, 3, 1, 0, 4),
    check: (rs) => {
      const t4 = byName(rs, "testcase4")
      expect(t4.map((r) => [r.status, r.retry, r.attempt, r.attempts])).toEqual([
        ["passed", false, 3, 3],
        ["failed", true, 1, 3],
        ["failed", true, 2, 3]
      ])
      expect(t4[1]?.text).toBe("this is a flaky failure description")
      expect(t4[1]?.type).toBe("flaky failure type")
      // nested stackTrace is part of the body, system-out/err are not
      expect(t4[2]?.text).toContain("flaky error description")
      expect(t4[2]?.text).toContain("flaky stack trace")
      expect(t4[2]?.text).not.toContain("flaky system output")
      const t5 = byName(rs, "testcase5")
      expect(t5.map((r) => [r.status, r.retry, r.attempt])).toEqual([
        ["failed", false, 1],
        ["failed", true, 2],
        ["failed", true, 3]
      ])
      expect(t5[0]?.text).toBe("main test failure description")
      expect(one(rs, "testcase3").status).toBe("skipped")
      expect(one(rs, "testcase3").timestamp).toBe(Date.parse("2021-04-01T18:52:41.000Z"))
      expect(one(rs, "testcase0").timestamp).toBe(Date.parse("2021-04-01T18:52:39.000Z"))
      expect(one(rs, "testcase2")).toMatchObject({ status: "failed", type: "error type" })
    }
  },
  "repeated-testcase-attempts.xml": {
    counts: c(3, 1, 2, 0),
    check: (rs) => {
      expect(rs.map((r) => r.status)).toEqual(["passed", "failed", "failed"])
      expect(rs.every((r) => r.name === "test_success_first" && r.line === 15 && !r.retry)).toBe(true)
      expect(rs[0]?.file).toBe("/home/runner/work/tests/test_order.py")
    }
  },
  "surefire-flakyFailure.xml": {
    counts: c(1, 1, 0, 0, 0, 1),
    check: (rs) => {
      expect(rs.map((r) => [r.status, r.retry, r.attempt, r.attempts])).toEqual([
        ["passed", false, 2, 2],
        ["failed", true, 1, 2]
      ])
      const retry = rs[1] as JunitResult
      expect(retry.message).toBe("\nExpected: <false>\n     but: was <true>")
      expect(retry.type).toBe("java.lang.AssertionError")
      expect(retry.text).toStartWith("java.lang.AssertionError:")
      expect(retry.text).not.toContain("Some error output here")
      expect(retry.parent).toBe("io.sodadata.dependson.soda.integrations.msteams.MicrosoftTeamsCrudTest")
    }
  },
  "unicode-astral-chars.xml": {
    counts: c(7, 1, 4, 2),
    check: (rs) => {
      expect(rs[0]?.name).toBe("test 1 헴䜝헱홐㣇㿷䔭𒍺𡓿𠄉㦓")
      expect(rs[0]?.classname).toBe("")
      expect(rs[0]?.file).toBe("test/test-1.py")
      expect(one(rs, "test 4").message).toBe("Some unsupported unicode characters: 헴䜝헱홐㣇㿷䔭𒍺𡓿𠄉㦓")
    }
  },
  "web-test-runner-retries-duplicate-testcase.xml": { errorLine: 9 },
  "xml-entities-in-names.xml": {
    counts: c(4, 0, 2, 2),
    check: (rs) => {
      expect(rs.map((r) => r.name)).toEqual([
        'Test with "quotes" in the test name',
        "Test with 'apostrophe' in the test name",
        "Test with & in the test name",
        "Test with < and > in the test name"
      ])
      expect(rs[2]?.message).toBe("A message with &")
      expect(rs[3]?.text).toBe("Content with < and >")
    }
  }
}

const fixtureNames = readdirSync(fileURLToPath(FIXTURES))
  .filter((f) => f.endsWith(".xml"))
  .sort()

const errorOf = (f: () => unknown): JunitError => {
  try {
    f()
  } catch (e) {
    if (e instanceof JunitError) return e
    throw e
  }
  throw new Error("expected a JunitError")
}

const asyncErrorOf = async (p: Promise<unknown>): Promise<JunitError> => {
  try {
    await p
  } catch (e) {
    if (e instanceof JunitError) return e
    throw e
  }
  throw new Error("expected a JunitError")
}

/** bytes in chunks of `size` */
async function* chunked(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size)
}

const collect = async (source: AsyncIterable<Uint8Array> | Uint8Array) => {
  const results: JunitResult[] = []
  const summary = await parseJunit(source, (r) => {
    results.push(r)
  })
  return { results, summary }
}

describe("junit fixtures", () => {
  test("every fixture has an expectation", () => {
    expect(fixtureNames.length).toBeGreaterThanOrEqual(21)
    expect(fixtureNames.filter((f) => EXPECTED[f] === undefined)).toEqual([])
  })

  for (const name of fixtureNames) {
    const exp = EXPECTED[name] ?? {}
    if (exp.errorLine !== undefined) {
      const line = exp.errorLine
      test(`${name} is refused with its line`, async () => {
        const e = errorOf(() => parseJunitString(fixture(name)))
        expect(e.line).toBe(line)
        expect(e.message.length).toBeGreaterThan(0)
        const e2 = await asyncErrorOf(collect(chunked(fixtureBytes(name), 5)))
        expect(e2.line).toBe(line)
      })
      continue
    }
    test(`${name} parses`, async () => {
      const { results, summary } = parseJunitString(fixture(name))
      if (exp.counts) expect(summary).toEqual(exp.counts)
      expect(results.length).toBe(summary.testcases + summary.retries)
      expect(primary(results).length).toBe(summary.testcases)
      exp.check?.(results)
      // the streaming path over odd chunk sizes gives the same results
      for (const size of [1, 7, 4096]) {
        const streamed = await collect(chunked(fixtureBytes(name), size))
        expect(streamed.summary).toEqual(summary)
        expect(streamed.results).toEqual(results)
      }
    })
  }
})

describe("junit sources", () => {
  test("ReadableStream and whole Uint8Array sources", async () => {
    const bytes = fixtureBytes("quick-junit-flaky-and-rerun.xml")
    const expected = parseJunitString(fixture("quick-junit-flaky-and-rerun.xml"))
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < bytes.length; i += 100) controller.enqueue(bytes.slice(i, i + 100))
        controller.close()
      }
    })
    expect((await collect(stream as unknown as AsyncIterable<Uint8Array>)).results).toEqual(expected.results)
    expect((await collect(bytes)).results).toEqual(expected.results)
  })

  test("the generator returns the summary", async () => {
    const it = junitResults(fixtureBytes("surefire-flakyFailure.xml"))
    let n = 0
    for (;;) {
      const r = await it.next()
      if (r.done) {
        expect(r.value.retries).toBe(1)
        break
      }
      n++
    }
    expect(n).toBe(2)
  })

  test("gzip is detected and decompressed; plain bytes pass through", async () => {
    const bytes = fixtureBytes("mocha-junit-reporter.xml")
    const gz = Bun.gzipSync(bytes)
    expect(isGzip(gz)).toBe(true)
    expect(isGzip(bytes)).toBe(false)
    const viaGzip = await collect(gunzipIfNeeded(chunked(gz, 1000)))
    const plain = await collect(gunzipIfNeeded(chunked(bytes, 3)))
    expect(viaGzip.summary.testcases).toBe(109)
    expect(viaGzip.results).toEqual(plain.results)
    // a 1-byte first chunk still detects the magic number
    expect((await collect(gunzipIfNeeded(chunked(gz, 1)))).summary.passed).toBe(109)
  })

  test("corrupt gzip and gzip bombs are JunitErrors", async () => {
    const gz = Bun.gzipSync(fixtureBytes("mocha-junit-reporter.xml"))
    const broken = gz.slice(0, 40)
    const e = await asyncErrorOf(collect(gunzipIfNeeded(broken)))
    expect(e.line).toBe(0)
    const bomb = Bun.gzipSync(new Uint8Array(4 * 1024 * 1024))
    const e2 = await asyncErrorOf(collect(gunzipIfNeeded(bomb, { maxBytes: 1024 * 1024 })))
    expect(e2.message).toContain("larger than")
  })

  test("UTF-16 with BOM and a declared latin1 encoding", async () => {
    const xml = '<testsuite name="s"><testcase name="café"/></testsuite>'
    const utf16 = new Uint8Array(2 + xml.length * 2)
    utf16[0] = 0xff
    utf16[1] = 0xfe
    for (let i = 0; i < xml.length; i++) utf16[2 + 2 * i] = xml.charCodeAt(i)
    expect((await collect(utf16)).results[0]?.name).toBe("café")
    const latin = `<?xml version="1.0" encoding="ISO-8859-1"?>\n${xml}`
    const bytes = Uint8Array.from(latin, (ch) => ch.charCodeAt(0))
    expect((await collect(bytes)).results[0]?.name).toBe("café")
  })
})

describe("junit safety", () => {
  test("billion laughs is refused", () => {
    const lol = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<testsuite name="lolz"><testcase name="&lol9;"/></testsuite>`
    const e = errorOf(() => parseJunitString(lol))
    expect(e.message).toContain("DOCTYPE")
    expect(e.line).toBe(12)
  })

  test("external entities are refused", () => {
    const xxe = `<?xml version="1.0"?>
<!DOCTYPE foo [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]>
<testsuite><testcase name="&xxe;"/></testsuite>`
    expect(errorOf(() => parseJunitString(xxe)).message).toContain("DOCTYPE")
    const external = `<?xml version="1.0"?>\n<!DOCTYPE testsuite SYSTEM "http://example.com/junit.dtd">\n<testsuite/>`
    expect(errorOf(() => parseJunitString(external)).line).toBe(2)
  })

  test("custom entity references without a DOCTYPE are refused", () => {
    const e = errorOf(() => parseJunitString('<testsuite>\n<testcase name="a&nbsp;b"/></testsuite>'))
    expect(e.line).toBe(2)
    expect(e.message).toContain("entity")
  })

  test("the five predefined entities and numeric references work", () => {
    const { results } = parseJunitString(
      '<testsuite><testcase name="&lt;&gt;&amp;&quot;&apos; &#65;&#x1F600;"/></testsuite>'
    )
    expect(results[0]?.name).toBe("<>&\"' A😀")
  })

  test("line ends and references: attribute values, text and CDATA (CR LF from Windows too)", async () => {
    const xml =
      '<testsuite name="s">\r\n<testcase name="a\r\nb\rc\nd\te &amp;&#10;f" classname="k&#233;\r\n&#x1F600;">' +
      '<failure message="m\r\n&lt;é&gt;\r">line 1\r\nline 2\r&lt;3&gt;&#13;<![CDATA[\r\nat x\r\n\rat &amp; é\r\n]]>' +
      "</failure></testcase>\r\n</testsuite>"
    const expected = {
      name: "a b c d e &\nf",
      classname: "ké 😀",
      message: "m <é> ",
      text: "line 1\nline 2\n<3>\r\nat x\n\nat &amp; é"
    }
    expect(parseJunitString(xml).results[0]).toMatchObject(expected)
    const bytes = new TextEncoder().encode(xml)
    for (const size of [1, 2, 7]) expect((await collect(chunked(bytes, size))).results[0]).toMatchObject(expected)
  })

  test("a BOM and characters XML forbids are tolerated", async () => {
    const xml =
      '\uFEFF<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="s">\n' +
      '<testcase name="a\u0001b\u001b[31m\uFFFEc\uD800d" classname="k&#27;&#0;">' +
      '<failure message="x\u0000y">body\u0007 &#x1b;[0m</failure></testcase>\n</testsuite>'
    const { results } = parseJunitString(xml)
    expect(results[0]).toMatchObject({ name: "ab[31mcd", classname: "k", message: "xy", text: "body [0m" })
    // the same through the byte path (UTF-8 BOM bytes EF BB BF), one byte at a time
    const bytes = new TextEncoder().encode(xml.replace("\uD800", ""))
    expect(bytes[0]).toBe(0xef)
    const { results: streamed } = await collect(chunked(bytes, 1))
    expect(streamed[0]).toMatchObject({ name: "ab[31mcd", message: "xy" })
  })

  test("surrogate pairs split across writes survive", async () => {
    const xml = '<testsuite><testcase name="😀😀😀"/></testsuite>'
    const bytes = new TextEncoder().encode(xml)
    for (const size of [1, 2, 3, 5]) {
      expect((await collect(chunked(bytes, size))).results[0]?.name).toBe("😀😀😀")
    }
  })

  test("a wrong root element, an empty file and text outside the root are errors", () => {
    expect(errorOf(() => parseJunitString("<assemblies><assembly/></assemblies>")).message).toContain("root")
    expect(errorOf(() => parseJunitString("")).line).toBe(1)
    expect(errorOf(() => parseJunitString("not xml at all")).line).toBe(1)
  })
})

describe("junit details", () => {
  test("failed wins over skipped; status attributes mark skips", () => {
    const { results } = parseJunitString(`<testsuites><testsuite name="a">
      <testcase name="x"><skipped/><error message="e"/></testcase>
      <testcase name="y" status="notrun" result="suppressed"/>
      <testcase name="z" status="run" result="completed"/>
    </testsuite></testsuites>`)
    expect(results.map((r) => r.status)).toEqual(["failed", "skipped", "passed"])
  })

  test("file falls back to the innermost suite file/filepath; id and line attributes", () => {
    const { results } = parseJunitString(`<testsuites>
      <testsuite name="outer" filepath="outer.ts" timestamp="2024-05-06T07:08:09Z">
        <testsuite name="inner" file="inner.ts">
          <testcase name="a" id="ID-1" line="12"/>
          <testcase name="b" file="own.ts" line="0"/>
        </testsuite>
        <testcase name="c" line="x"/>
      </testsuite>
      <testcase name="d"/>
    </testsuites>`)
    expect(results.map((r) => [r.name, r.file, r.parent, r.id, r.line])).toEqual([
      ["a", "inner.ts", "outer", "ID-1", 12],
      ["b", "own.ts", "outer", undefined, undefined],
      ["c", "outer.ts", "outer", undefined, undefined],
      ["d", "", "", undefined, undefined]
    ])
    expect(results[0]?.timestamp).toBe(Date.UTC(2024, 4, 6, 7, 8, 9))
    expect(results[3]?.timestamp).toBeUndefined()
  })

  test("failure text is truncated to 8 KiB without splitting characters", () => {
    const body = "é".repeat(10_000)
    const { results } = parseJunitString(
      `<testsuite><testcase name="a"><failure message="${"m".repeat(20_000)}"><![CDATA[${body}]]></failure></testcase></testsuite>`
    )
    const r = results[0] as JunitResult
    expect(new TextEncoder().encode(r.text).length).toBe(8192)
    expect(r.text).toBe("é".repeat(4096))
    expect(r.message.length).toBe(8192)
    expect(truncateUtf8("a😀", 4)).toBe("a")
    expect(truncateUtf8("a😀", 5)).toBe("a😀")
  })

  test("odd timestamps do not break parsing", () => {
    expect(parseTimestamp("2020-09-04T16:18:04.966371")).toBe(Date.UTC(2020, 8, 4, 16, 18, 4, 966))
    expect(parseTimestamp("2021-04-01T10:52:37.000-08:00")).toBe(Date.UTC(2021, 3, 1, 18, 52, 37))
    expect(parseTimestamp("2024-12-02T20:06:10.512+00:00")).toBe(Date.UTC(2024, 11, 2, 20, 6, 10, 512))
    expect(parseTimestamp("2024-12-02 20:06:10")).toBe(Date.UTC(2024, 11, 2, 20, 6, 10))
    expect(parseTimestamp("Sat, 03 Dec 2022 23:10:07 GMT")).toBe(Date.UTC(2022, 11, 3, 23, 10, 7))
    expect(parseTimestamp("0001-01-01T00:00:00Z")).toBeUndefined()
    expect(parseTimestamp("0001-01-01T00:00:00")).toBeUndefined()
    expect(parseTimestamp("1970-01-01T00:00:00Z")).toBeUndefined()
    expect(parseTimestamp("")).toBeUndefined()
    expect(parseTimestamp(undefined)).toBeUndefined()
    expect(parseTimestamp("yesterday-ish")).toBeUndefined()
    expect(parseTimestamp("2024-13-45T99:99:99")).toBeUndefined()
    const { results } = parseJunitString(
      '<testsuite timestamp="garbage"><testcase name="a" timestamp="0001-01-01T00:00:00"/><testcase name="b" time="abc"/></testsuite>'
    )
    expect(results.map((r) => [r.timestamp, r.durationMs])).toEqual([
      [undefined, 0],
      [undefined, 0]
    ])
  })

  test("a testcase inside a testcase is not a result of its own", () => {
    const { results } = parseJunitString(
      '<testsuite><testcase name="a"><testcase name="b"><failure/></testcase></testcase></testsuite>'
    )
    expect(results.map((r) => [r.name, r.status])).toEqual([["a", "passed"]])
  })
})

// ---------------------------------------------------------------------------------------------------------------
// 20 MiB
// ---------------------------------------------------------------------------------------------------------------

const TARGET_BYTES = 20 * 1024 * 1024

/** streams a generated JUnit file of about 20 MiB; returns the expected counts */
const generate = (): { source: AsyncGenerator<Uint8Array>; expected: () => Counts } => {
  const counts = c(0, 0, 0, 0, 0, 0)
  const enc = new TextEncoder()
  async function* source(): AsyncGenerator<Uint8Array> {
    let bytes = 0
    const emit = (s: string): Uint8Array => {
      const b = enc.encode(s)
      bytes += b.length
      return b
    }
    yield emit('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="big">\n')
    let i = 0
    let suite = 0
    while (bytes < TARGET_BYTES) {
      let chunk = `<testsuite name="suite-${suite}" timestamp="2025-01-01T00:00:00Z" file="src/suite${suite}.ts">\n`
      for (let k = 0; k < 100; k++, i++) {
        counts.testcases++
        const head = `<testcase name="test number ${i} &amp; more" classname="pkg.Class${i % 50}" time="0.${i % 1000}"`
        if (i % 10 === 0) {
          counts.failed++
          chunk += `${head}><failure message="expected ${i} to equal ${i + 1}" type="AssertionError"><![CDATA[Error: expected ${i}\n    at Object.<anonymous> (src/suite${suite}.ts:${k}:7)\n${"    at frame\n".repeat(8)}]]></failure><system-out>${"log line\n".repeat(5)}</system-out></testcase>\n`
        } else if (i % 25 === 1) {
          counts.skipped++
          chunk += `${head}><skipped message="todo"/></testcase>\n`
        } else if (i % 97 === 2) {
          counts.passed++
          counts.retries++
          chunk += `${head}><flakyFailure message="flaky ${i}"><stackTrace>trace</stackTrace></flakyFailure></testcase>\n`
        } else {
          counts.passed++
          chunk += `${head}/>\n`
        }
      }
      chunk += "</testsuite>\n"
      suite++
      yield emit(chunk)
    }
    yield emit("</testsuites>\n")
  }
  return { source: source(), expected: () => counts }
}

describe("junit 20 MiB", () => {
  test("a generated 20 MiB file parses in flat memory and counts right", async () => {
    const { source, expected } = generate()
    let results = 0
    let maxText = 0
    let failed = 0
    const summary = await parseJunit(source, (r) => {
      results++
      if (r.status === "failed" && !r.retry) failed++
      maxText = Math.max(maxText, r.text.length)
    })
    expect(summary).toEqual(expected())
    expect(summary.testcases).toBeGreaterThan(50_000)
    expect(results).toBe(summary.testcases + summary.retries)
    expect(failed).toBe(summary.failed)
    expect(maxText).toBeLessThanOrEqual(8192)
  })
})
