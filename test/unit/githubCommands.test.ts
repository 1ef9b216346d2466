import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import {
  commandLine,
  type ParsedComment,
  parseComment,
  parsePriority,
  type QueueCommand
} from "../../src/github/commands.ts"

const merge = (priority?: number, noBatch?: true): ParsedComment => ({
  _tag: "Command",
  command: { _tag: "Merge", priority, noBatch },
  line: expect.any(String) as unknown as string
})

describe("parseComment", () => {
  test("plain commands", () => {
    expect(parseComment("/trunk merge")).toEqual(merge())
    expect(parseComment("/trunk cancel")).toEqual({
      _tag: "Command",
      command: { _tag: "Cancel" },
      line: "/trunk cancel"
    })
    expect(parseComment("  /Trunk MERGE  ")).toEqual(merge())
  })

  test("priorities by number and by name, in every spelling", () => {
    expect(parseComment("/trunk merge -p high")).toEqual(merge(10))
    expect(parseComment("/trunk merge --priority urgent")).toEqual(merge(0))
    expect(parseComment("/trunk merge --priority=LOW")).toEqual(merge(200))
    expect(parseComment("/trunk merge -p=medium")).toEqual(merge(100))
    expect(parseComment("/trunk merge -p 0")).toEqual(merge(0))
    expect(parseComment("/trunk merge -p 255")).toEqual(merge(255))
    expect(parseComment("/trunk merge -p 007")).toEqual(merge(7))
    expect(parseComment("/trunk merge --no-batch -p 42")).toEqual(merge(42, true))
    expect(parseComment("/trunk merge -p 42 --no-batch")).toEqual(merge(42, true))
  })

  test("invalid commands say why", () => {
    const cases: ReadonlyArray<[string, string]> = [
      ["/trunk", "needs a command"],
      ["/trunk merg", "unknown command `merg`"],
      ["/trunk merge -p 256", "`256` is not a priority"],
      ["/trunk merge -p -1", "`-1` is not a priority"],
      ["/trunk merge -p 1.5", "`1.5` is not a priority"],
      ["/trunk merge -p asap", "`asap` is not a priority"],
      ["/trunk merge -p", "`-p` needs a value"],
      ["/trunk merge --priority=", "`--priority` needs a value"],
      ["/trunk merge -p 1 -p 2", "given twice"],
      ["/trunk merge --no-batch --no-batch", "`--no-batch` is given twice"],
      ["/trunk merge --no-batch=yes", "unknown option `--no-batch=yes`"],
      ["/trunk merge now", "unknown option `now`"],
      ["/trunk cancel please", "takes no options"]
    ]
    for (const [body, reason] of cases) {
      const parsed = parseComment(body)
      expect(parsed._tag).toBe("Invalid")
      if (parsed._tag === "Invalid") {
        expect(parsed.message).toContain(reason)
        expect(parsed.message).toContain("usage:")
      }
    }
  })

  test("comments without a command", () => {
    for (const body of [
      "",
      "LGTM",
      "please /trunk merge this",
      "/trunkmerge",
      "/trunk-merge",
      "> /trunk merge",
      "```\n/trunk merge\n```",
      "~~~sh\n/trunk cancel\n~~~\nthanks",
      "`/trunk merge`"
    ]) {
      expect(parseComment(body)).toEqual({ _tag: "None" })
    }
  })

  test("the first command line wins; text around it is ignored", () => {
    expect(parseComment("Tests look fine.\n\n/trunk merge -p low\n/trunk cancel")).toEqual(merge(200))
    expect(parseComment("```\n/trunk cancel\n```\n/trunk merge")).toEqual(merge())
    expect(parseComment("/trunk cancel\r\nthanks")).toEqual({
      _tag: "Command",
      command: { _tag: "Cancel" },
      line: "/trunk cancel"
    })
  })
})

describe("parsePriority", () => {
  test("names and the range 0..255", () => {
    expect(parsePriority("urgent")).toBe(0)
    expect(parsePriority("High")).toBe(10)
    expect(parsePriority("medium")).toBe(100)
    expect(parsePriority("low")).toBe(200)
    expect(parsePriority("256")).toBeUndefined()
    expect(parsePriority("1000")).toBeUndefined()
    expect(parsePriority("+1")).toBeUndefined()
    expect(parsePriority("0x10")).toBeUndefined()
    expect(parsePriority("constructor")).toBeUndefined()
    expect(parsePriority("toString")).toBeUndefined()
  })
})

// ------------------------------------------------------------------ properties

const priorityArb = fc.integer({ min: 0, max: 255 })
const nameArb = fc.constantFrom(["urgent", 0], ["high", 10], ["medium", 100], ["low", 200]) as fc.Arbitrary<
  [string, number]
>

/** A command and one of the many ways to write it. */
const writtenMerge: fc.Arbitrary<{ text: string; command: QueueCommand }> = fc
  .record({
    priority: fc.option(
      fc.oneof(
        priorityArb.map((n) => [String(n), n] as [string, number]),
        nameArb
      ),
      {
        nil: undefined
      }
    ),
    noBatch: fc.boolean(),
    flag: fc.constantFrom("-p", "--priority", "-P", "--PRIORITY"),
    joined: fc.boolean(),
    batchFirst: fc.boolean(),
    upper: fc.boolean(),
    space: fc.constantFrom(" ", "  ", "\t")
  })
  .map(({ priority, noBatch, flag, joined, batchFirst, upper, space }) => {
    const opts: Array<string> = []
    if (priority !== undefined) {
      const value = upper ? priority[0].toUpperCase() : priority[0]
      opts.push(joined ? `${flag}=${value}` : `${flag}${space}${value}`)
    }
    if (noBatch) {
      if (batchFirst) opts.unshift("--no-batch")
      else opts.push("--no-batch")
    }
    const text = [upper ? "/TRUNK" : "/trunk", upper ? "Merge" : "merge", ...opts].join(space)
    return {
      text,
      command: { _tag: "Merge", priority: priority?.[1], noBatch: noBatch ? true : undefined } as QueueCommand
    }
  })

/** Text that never holds a command line (no line starts with a slash) nor opens a code block. */
const prose = fc.array(
  fc.string({ maxLength: 30 }).map((s) => s.replace(/^\s*\//gm, "x").replace(/[`~]/g, "'")),
  { maxLength: 4 }
)

describe("parseComment properties", () => {
  test("every way of writing a merge command reads back as that command", () => {
    fc.assert(
      fc.property(writtenMerge, prose, prose, ({ text, command }, before, after) => {
        const body = [...before, text, ...after].join("\n")
        const parsed = parseComment(body)
        expect(parsed._tag).toBe("Command")
        if (parsed._tag === "Command") expect(parsed.command).toEqual(command)
      }),
      { numRuns: 500 }
    )
  })

  test("numbers outside 0..255 are refused, never clamped", () => {
    fc.assert(
      fc.property(fc.oneof(fc.integer({ min: 256, max: 1_000_000 }), fc.integer({ max: -1 })), (n) => {
        expect(parseComment(`/trunk merge -p ${n}`)._tag).toBe("Invalid")
      })
    )
  })

  test("any text parses without throwing, and text without a /trunk line is no command", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (body) => {
        const parsed = parseComment(body)
        if (!/^\s*\/trunk(\s|$)/im.test(body)) expect(parsed).toEqual({ _tag: "None" })
        if (parsed._tag !== "None") expect(commandLine(body)).toBe(parsed.line)
      }),
      { numRuns: 1000 }
    )
  })

  test("a command inside a code block or a quote is never run", () => {
    fc.assert(
      fc.property(writtenMerge, fc.constantFrom("```", "~~~", "> "), ({ text }, wrap) => {
        const body = wrap === "> " ? `> ${text}` : `${wrap}\n${text}\n${wrap}`
        expect(parseComment(body)).toEqual({ _tag: "None" })
      })
    )
  })
})
