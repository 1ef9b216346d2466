import { expect, test } from "bun:test"
import type { Command, Run } from "../../src/queue/planner/index.ts"
import { byRun } from "../../src/queue/runner/commands.ts"

const run = (id: string) => ({ id, branch: `trunk-merge/pr-1/${id}` }) as unknown as Run

test("commands of one run run in their order, one after another; other commands and runs apart", () => {
  const build: Command = { _tag: "BuildRun", run: run("a"), mergeMethod: "merge_commit" } as Command
  const del: Command = { _tag: "DeleteBranch", runId: "a", branch: "trunk-merge/pr-1/a" }
  const otherBuild: Command = { _tag: "BuildRun", run: run("b"), mergeMethod: "merge_commit" } as Command
  const wake: Command = { _tag: "Wake" }
  expect(byRun([build, otherBuild, wake, del])).toEqual([[build, del], [otherBuild], [wake]])
})
