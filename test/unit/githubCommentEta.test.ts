/**
 * The estimate line of the queue's GitHub comment (issue #35, src/github/feedback.ts): the median and the range in
 * words, shown for a PR still in the queue only.
 */
import { describe, expect, test } from "bun:test"
import { durationWords, etaSentence, renderComment } from "../../src/github/feedback.ts"

const MIN = 60_000
const now = Date.parse("2026-11-29T14:00:00Z")
const eta = { now, mergeAt: now + 40 * MIN, earliest: now + 25 * MIN, latest: now + 70 * MIN }

describe("the comment's estimate", () => {
  test("durations in words", () => {
    expect(durationWords(20_000)).toBe("under a minute")
    expect(durationWords(40 * MIN)).toBe("40 min")
    expect(durationWords(70 * MIN)).toBe("1 h 10 min")
    expect(durationWords(180 * MIN)).toBe("3 h")
  })

  test("about the median, between the range's ends, as of when it was estimated", () => {
    expect(etaSentence(eta)).toBe(
      "Expected to merge in about 40 min (between 25 min and 1 h 10 min), as of 2026-11-29 14:00 UTC."
    )
  })

  test("a PR in the queue gets the line; a merged one does not; without an estimate none", () => {
    expect(renderComment("main", "pending", "", eta)).toContain("between 25 min and 1 h 10 min")
    expect(renderComment("main", "merged", "", eta)).not.toContain("Expected to merge")
    expect(renderComment("main", "pending", "")).not.toContain("Expected to merge")
  })
})
