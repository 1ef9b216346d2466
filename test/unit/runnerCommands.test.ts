import { expect, test } from "bun:test"
import { Cause, FiberId } from "effect"
import { GitError } from "../../src/queue/GitHost.ts"
import type { Command, Run } from "../../src/queue/planner/index.ts"
import { byRun, failedOnHeldLock } from "../../src/queue/runner/commands.ts"

const run = (id: string) => ({ id, branch: `trunk-merge/pr-1/${id}` }) as unknown as Run

test("commands of one run run in their order, one after another; other commands and runs apart", () => {
  const build: Command = { _tag: "BuildRun", run: run("a"), mergeMethod: "merge_commit" } as Command
  const del: Command = { _tag: "DeleteBranch", runId: "a", branch: "trunk-merge/pr-1/a" }
  const otherBuild: Command = { _tag: "BuildRun", run: run("b"), mergeMethod: "merge_commit" } as Command
  const wake: Command = { _tag: "Wake" }
  expect(byRun([build, otherBuild, wake, del])).toEqual([[build, del], [otherBuild], [wake]])
})

test("a command that failed on a ref's lock file is retried with a warning; any other failure is an error", () => {
  const gitFailure = (stderr: string) => new GitError({ args: ["update-ref"], exitCode: 128, stderr, message: "" })
  const locked = gitFailure(
    "fatal: Unable to create '/repo.git/refs/heads/main.lock': File exists.\nAnother git process seems to be running"
  )
  expect(failedOnHeldLock(Cause.die(locked))).toBe(true)
  expect(failedOnHeldLock(Cause.fail(locked))).toBe(true)
  expect(failedOnHeldLock(Cause.die(gitFailure("fatal: not a git repository")))).toBe(false)
  expect(failedOnHeldLock(Cause.die(new Error("boom")))).toBe(false)
  expect(failedOnHeldLock(Cause.parallel(Cause.die(locked), Cause.die(new Error("boom"))))).toBe(false)
  expect(failedOnHeldLock(Cause.interrupt(FiberId.none))).toBe(false)
})
