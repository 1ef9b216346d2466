/** The failed tests as a PR's comment tells them (issue #33): marks, the GitHub comment's line, kept by a status. */
import { describe, expect, test } from "bun:test"
import { renderComment } from "../../src/github/feedback.ts"
import { type FailedTest, failedTestsLine, markText } from "../../src/queue/TestVerdicts.ts"

const failed = (name: string, mark: FailedTest["mark"], failureRate = 0, quarantined = false): FailedTest => ({
  testCaseId: name,
  name,
  classname: "app",
  file: "",
  message: "",
  failureKey: null,
  mark,
  failureRate,
  quarantined
})

describe("failed tests in words", () => {
  test("each mark, the known flaky one with its rate and quarantine", () => {
    expect(markText(failed("a", "new"))).toBe("new")
    expect(markText(failed("a", "broken_on_target"))).toBe("broken on the target branch")
    expect(markText(failed("a", "known_flaky", 0.04))).toBe("known flaky, 4% of runs")
    expect(markText(failed("a", "known_flaky", 0.5, true))).toBe("known flaky, 50% of runs, quarantined")
  })

  test("the comment's line: none without failed tests, ten named and the rest counted", () => {
    expect(failedTestsLine([])).toBeNull()
    expect(failedTestsLine([failed("test_x", "new"), failed("test_y", "known_flaky", 0.04)])).toBe(
      "Failed tests: `test_x` (new), `test_y` (known flaky, 4% of runs)"
    )
    const many = Array.from({ length: 12 }, (_, i) => failed(`t${i}`, "new"))
    expect(failedTestsLine(many)).toEndWith("`t9` (new) and 2 more")
    // a backtick in a name cannot end the code span
    expect(failedTestsLine([failed("a`b", "new")])).toBe("Failed tests: `a'b` (new)")
  })

  test("GitHub's comment carries the line only for a failed PR", () => {
    const line = "Failed tests: `test_x` (new)"
    const body = renderComment("main", "failed", "TEST_RUN_REQUIRED_STATUS_FAILED", undefined, line)
    expect(body).toContain(`TEST_RUN_REQUIRED_STATUS_FAILED.\n\n${line}\n`)
    expect(renderComment("main", "merged", "MERGED", undefined, line)).not.toContain(line)
    expect(renderComment("main", "failed", "X", undefined, null)).toBe(renderComment("main", "failed", "X"))
  })
})
