import { describe, expect, test } from "bun:test"
import type { Command } from "../../src/queue/planner/index.ts"
import {
  fail,
  type Kit,
  lastTransition,
  makeKit,
  pass,
  runById,
  runOf,
  stateOf,
  transitionsOf as transitions
} from "../support/plannerKit.ts"

const submit = (kit: Kit, pr: number, opts: { priority?: number; noBatch?: boolean } = {}) =>
  kit.send({
    _tag: "Submitted",
    entryId: `e${pr}`,
    prNumber: pr,
    headSha: `head${pr}`,
    priority: opts.priority ?? 100,
    noBatch: opts.noBatch ?? false,
    ready: true
  })
const builds = (kit: Kit) =>
  kit.commands.filter((c): c is Extract<Command, { _tag: "BuildRun" }> => c._tag === "BuildRun")
const merges = (kit: Kit) => kit.commands.filter((c): c is Extract<Command, { _tag: "Merge" }> => c._tag === "Merge")

/** Drive a CI where the runs containing a bad PR fail and all others pass, until nothing is running. */
const settle = (kit: Kit, bad: ReadonlySet<number>) => {
  for (let guard = 0; guard < 200; guard++) {
    const r = kit.state.runs.find((x) => x.status === "in_progress")
    if (r === undefined) return
    kit.now += 60_000
    if (r.items.some((it) => bad.has(it.prNumber))) fail(kit, r.id)
    else pass(kit, r.id)
  }
}

const batchCfg = { batch: true, batchingMinSize: 4, batchingMaxWaitTimeMinutes: 5, bisectionConcurrency: 2 }

describe("batching", () => {
  test("a batch of 3 passes: one Merge whose newSha is the last commit", () => {
    const kit = makeKit({ ...batchCfg, batchingMinSize: 3 })
    for (const pr of [1, 2, 3]) submit(kit, pr)
    expect(builds(kit)).toHaveLength(1)
    const run = runById(kit, runOf(kit, 1))
    expect(run.testedEntryIds).toEqual(["e1", "e2", "e3"])
    pass(kit, run.id)
    expect(merges(kit)).toHaveLength(1)
    const m = merges(kit)[0]!
    expect(m.entryIds).toEqual(["e1", "e2", "e3"])
    expect(m.newSha).toBe(runById(kit, run.id).commits[2]!)
    expect([1, 2, 3].map((p) => stateOf(kit, p))).toEqual(["merged", "merged", "merged"])
  })

  test("a smaller batch waits for batchingMaxWaitTimeMinutes", () => {
    const kit = makeKit(batchCfg)
    submit(kit, 1)
    submit(kit, 2)
    expect(builds(kit)).toHaveLength(0)
    const wake = kit.results.at(-1)!.commands.find((c) => c._tag === "ScheduleWake")
    expect(wake).toEqual({ _tag: "ScheduleWake", at: kit.now + 5 * 60_000 })
    kit.now += 5 * 60_000
    kit.send({ _tag: "Tick" })
    expect(builds(kit)).toHaveLength(1)
    expect(builds(kit)[0]!.run.testedEntryIds).toEqual(["e1", "e2"])
  })

  test("noBatch entries run alone", () => {
    const kit = makeKit({ ...batchCfg, concurrency: 3 })
    submit(kit, 1)
    submit(kit, 2, { noBatch: true })
    submit(kit, 3)
    // 1 is closed by the noBatch entry behind it, 2 runs alone; 3 waits for more
    expect(builds(kit).map((b) => b.run.testedEntryIds)).toEqual([["e1"], ["e2"]])
    kit.now += 5 * 60_000
    kit.send({ _tag: "Tick" })
    expect(builds(kit).map((b) => b.run.items.map((i) => i.prNumber))).toEqual([[1], [1, 2], [1, 2, 3]])
  })

  test("batches chain like single entries", () => {
    const kit = makeKit({ ...batchCfg, batchingMinSize: 2, concurrency: 2 })
    for (const pr of [1, 2, 3, 4]) submit(kit, pr)
    expect(builds(kit).map((b) => [b.run.items.map((i) => i.prNumber), b.run.testedEntryIds])).toEqual([
      [
        [1, 2],
        ["e1", "e2"]
      ],
      [
        [1, 2, 3, 4],
        ["e3", "e4"]
      ]
    ])
  })

  test("a batch of 4 with one bad PR is bisected", () => {
    const kit = makeKit(batchCfg)
    for (const pr of [1, 2, 3, 4]) submit(kit, pr)
    const parent = runOf(kit, 1)
    fail(kit, parent)
    // halves, as bisection runs
    const bis = kit.state.runs.filter((r) => r.queueType === "bisection")
    expect(bis.map((r) => r.id)).toEqual([`${parent}-bisection-1`, `${parent}-bisection-2`])
    expect(bis[0]!.branch).toBe(`trunk-merge/pr-1/${parent}-bisection-1`)
    expect(bis.map((r) => r.testedEntryIds)).toEqual([
      ["e1", "e2"],
      ["e3", "e4"]
    ])
    expect(transitions(kit).filter((t) => t.reason === "BISECTION_REQUIRED")).toHaveLength(4)
    settle(kit, new Set([3]))
    expect([1, 2, 3, 4].map((p) => stateOf(kit, p))).toEqual(["merged", "merged", "failed", "merged"])
    expect(lastTransition(kit, 3)!.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
    expect(kit.state.runs).toHaveLength(0)
    expect(kit.state.entries).toHaveLength(0)
    // every merge moved the target to a commit a passing run built
    for (const t of kit.mergedTo) expect(kit.verifiedCommits.has(t)).toBe(true)
  })

  test("bisection_skip_redundant_tests saves runs", () => {
    const count = (skip: boolean) => {
      const kit = makeKit({ ...batchCfg, optimizationMode: skip ? "bisection_skip_redundant_tests" : "off" })
      for (const pr of [1, 2, 3, 4]) submit(kit, pr)
      settle(kit, new Set([4]))
      expect([1, 2, 3, 4].map((p) => stateOf(kit, p))).toEqual(["merged", "merged", "merged", "failed"])
      return builds(kit).length
    }
    const off = count(false)
    const on = count(true)
    expect(on).toBeLessThan(off)
    expect(on).toBe(3) // the batch, [1,2], [3]; 4 fails without a run of its own
  })

  test("bisection halves wait for the entries ahead before merging", () => {
    const kit = makeKit({ ...batchCfg, batchingMinSize: 2, concurrency: 2 })
    for (const pr of [1, 2, 3, 4]) submit(kit, pr)
    const first = runOf(kit, 1)
    fail(kit, runOf(kit, 3))
    const half = kit.state.runs.find((r) => r.queueType === "bisection" && r.testedEntryIds[0] === "e3")!
    expect(half.items.map((i) => i.prNumber)).toEqual([1, 2, 3])
    pass(kit, half.id)
    expect(stateOf(kit, 3)).toBe("tests_passed")
    expect(merges(kit)).toHaveLength(0)
    expect(runOf(kit, 1)).toBe(first)
    pass(kit, first)
    expect(merges(kit).map((m) => m.entryIds)).toEqual([["e1", "e2"], ["e3"]])
    settle(kit, new Set([4]))
    expect(stateOf(kit, 4)).toBe("failed")
  })
})
