/**
 * The planner's notes are data (planner/types.ts, Comment and SetStatus); the local records' text is the runner's
 * (runner/feedback.ts, noteText). A note saved in an outbox by an earlier version carries its text instead: it is
 * read back as data.
 */
import { describe, expect, test } from "bun:test"
import type { Comment, EntryState, SetStatus } from "../../src/queue/planner/index.ts"
import { noteData, noteText } from "../../src/queue/runner/feedback.ts"

const STATES: ReadonlyArray<EntryState> = [
  "not_ready",
  "pending",
  "testing",
  "tests_passed",
  "pending_failure",
  "merged",
  "failed",
  "cancelled"
]
const WITH_REASON = new Set<EntryState>(["pending_failure", "failed", "cancelled"])

describe("notes", () => {
  test("a note as data is left as it is", () => {
    const note: Comment = { _tag: "Comment", prNumber: 1, entryId: "e", to: "failed", reason: "MERGE_CONFLICT" }
    expect(noteData(note)).toBe(note)
  })

  test("an old note's text (a comment's body, a status's description) is read back as its state and reason", () => {
    for (const to of STATES) {
      const reason = WITH_REASON.has(to) ? "TEST_RUN_REQUIRED_STATUS_FAILED" : ""
      const text = noteText(to, reason)
      const comment = { _tag: "Comment", prNumber: 1, entryId: "e", body: text } as unknown as Comment
      expect(noteData(comment)).toMatchObject({ to, reason })
      const status = {
        _tag: "SetStatus",
        prNumber: 1,
        headSha: "h",
        state: "queued",
        description: text
      } as unknown as SetStatus
      expect(noteData(status)).toMatchObject({ to, reason })
      expect(noteText(noteData(status).to, noteData(status).reason)).toBe(text)
    }
  })

  test("an old status whose text is unknown keeps what its state says", () => {
    const status = { _tag: "SetStatus", prNumber: 1, headSha: "h", state: "testing", description: "?" }
    expect(noteData(status as unknown as SetStatus)).toMatchObject({ to: "testing", reason: "" })
  })
})
