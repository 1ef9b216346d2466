import { describe, expect, test } from "bun:test"
import type { Command, ImpactedTargets } from "../../src/queue/planner/index.ts"
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

const submit = (kit: Kit, pr: number, priority = 100) =>
  kit.send({
    _tag: "Submitted",
    entryId: `e${pr}`,
    prNumber: pr,
    headSha: `head${pr}`,
    priority,
    noBatch: false,
    ready: true
  })
const builds = (kit: Kit, from = 0) =>
  kit.commands.slice(from).filter((c): c is Extract<Command, { _tag: "BuildRun" }> => c._tag === "BuildRun")
const merges = (kit: Kit) => kit.commands.filter((c): c is Extract<Command, { _tag: "Merge" }> => c._tag === "Merge")
const items = (kit: Kit, runId: string) => runById(kit, runId).items.map((i) => i.prNumber)

describe("optimistic merging and pendingFailureDepth", () => {
  test("a passing run merges every entry ahead of it in its chain", () => {
    const kit = makeKit({ concurrency: 3, canOptimisticallyMerge: true })
    for (const pr of [1, 2, 3]) submit(kit, pr)
    const r3 = runOf(kit, 3)
    pass(kit, r3)
    expect(merges(kit)).toHaveLength(1)
    expect(merges(kit)[0]!.entryIds).toEqual(["e1", "e2", "e3"])
    expect([1, 2, 3].map((p) => stateOf(kit, p))).toEqual(["merged", "merged", "merged"])
    expect(lastTransition(kit, 1)!.verifiedByTestRun).toBe(r3)
    expect(kit.state.runs).toHaveLength(0)
    expect(kit.target).toBe(runById(kit, r3).commits[2]!)
  })

  test("flaky failure: PR1's run fails, PR2's run containing PR1 passes => both land", () => {
    const kit = makeKit({ concurrency: 2, canOptimisticallyMerge: true, pendingFailureDepth: 1 })
    submit(kit, 1)
    submit(kit, 2)
    const r2 = runOf(kit, 2)
    fail(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("pending_failure")
    expect(runOf(kit, 2)).toBe(r2) // kept running, not rebuilt
    expect(items(kit, r2)).toEqual([1, 2])
    pass(kit, r2)
    expect(stateOf(kit, 1)).toBe("merged")
    expect(stateOf(kit, 2)).toBe("merged")
    expect(lastTransition(kit, 1)!.verifiedByTestRun).toBe(r2)
    expect(lastTransition(kit, 1)!.from).toBe("pending_failure")
  })

  test("without pendingFailureDepth the run behind is rebuilt at once", () => {
    const kit = makeKit({ concurrency: 2, canOptimisticallyMerge: true })
    submit(kit, 1)
    submit(kit, 2)
    const r2 = runOf(kit, 2)
    fail(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("failed")
    expect(runOf(kit, 2)).not.toBe(r2)
    expect(items(kit, runOf(kit, 2))).toEqual([2])
  })

  test("pendingFailureDepth without optimistic merging: the failure stands once the held runs finish", () => {
    const kit = makeKit({ concurrency: 3, pendingFailureDepth: 1 })
    for (const pr of [1, 2, 3]) submit(kit, pr)
    const [r2, r3] = [runOf(kit, 2), runOf(kit, 3)]
    const before = kit.commands.length
    fail(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("pending_failure")
    // the first run behind is held, the second is rebuilt without PR 1 (on top of PR 2)
    expect(runOf(kit, 2)).toBe(r2)
    expect(runOf(kit, 3)).not.toBe(r3)
    expect(builds(kit, before).map((b) => b.run.items.map((i) => i.prNumber))).toEqual([[2, 3]])
    pass(kit, r2)
    expect(stateOf(kit, 1)).toBe("failed")
    expect(items(kit, runOf(kit, 2))).toEqual([2])
    expect(merges(kit)).toHaveLength(0)
  })

  test("a held run that also fails: the failure stands", () => {
    const kit = makeKit({ concurrency: 2, canOptimisticallyMerge: true, pendingFailureDepth: 1 })
    submit(kit, 1)
    submit(kit, 2)
    const r2 = runOf(kit, 2)
    fail(kit, runOf(kit, 1))
    fail(kit, r2)
    expect(stateOf(kit, 1)).toBe("failed")
    expect(stateOf(kit, 2)).toBe("testing")
    const back = transitions(kit).filter((t) => t.prNumber === 2 && t.from === "pending_failure")
    expect(back.map((t) => [t.to, t.reason])).toEqual([["pending", "PREREQUISITE_MERGE_ITEM_FAILED"]])
    expect(items(kit, runOf(kit, 2))).toEqual([2])
  })
})

describe("parallel mode", () => {
  const targets = (kit: Kit, pr: number, t: ImpactedTargets) =>
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: pr, sha: `head${pr}`, targets: t })

  const worked = () => {
    const kit = makeKit({ mode: "parallel", concurrency: 4 })
    const spec: [number, ImpactedTargets][] = [
      [1, ["frontend"]],
      [2, ["backend"]],
      [3, ["frontend", "backend"]],
      [4, ["docs"]]
    ]
    for (const [pr] of spec) {
      submit(kit, pr)
      expect(stateOf(kit, pr)).toBe("not_ready")
    }
    for (const [pr, t] of spec) targets(kit, pr, t)
    return kit
  }

  test("worked example: A, B, D alone on the tip, C on A and B", () => {
    const kit = worked()
    expect(items(kit, runOf(kit, 1))).toEqual([1])
    expect(items(kit, runOf(kit, 2))).toEqual([2])
    expect(items(kit, runOf(kit, 4))).toEqual([4])
    const c = runById(kit, runOf(kit, 3))
    expect(c.items.map((i) => i.prNumber)).toEqual([1, 2, 3])
    expect(c.dependentPrs).toEqual([1, 2])
    expect(kit.state.runs.every((r) => r.baseSha === kit.state.targetSha)).toBe(true)
  })

  test("B fails: only C is rebuilt, on A only", () => {
    const kit = worked()
    const [ra, rd] = [runOf(kit, 1), runOf(kit, 4)]
    const before = kit.commands.length
    fail(kit, runOf(kit, 2))
    expect(stateOf(kit, 2)).toBe("failed")
    const b = builds(kit, before)
    expect(b.map((x) => x.run.items.map((i) => i.prNumber))).toEqual([[1, 3]])
    expect(b[0]!.run.dependentPrs).toEqual([1])
    expect(runOf(kit, 1)).toBe(ra)
    expect(runOf(kit, 4)).toBe(rd)
  })

  test("disjoint lanes merge independently; a lane on an older tip merges with rebaseOnto", () => {
    const kit = worked()
    const [ra, rb, rc, rd] = [1, 2, 3, 4].map((p) => runOf(kit, p)) as [string, string, string, string]
    pass(kit, rd)
    expect(stateOf(kit, 4)).toBe("merged")
    expect(merges(kit)[0]!.rebaseOnto).toBe(false)
    pass(kit, rb)
    expect(stateOf(kit, 2)).toBe("merged")
    expect(merges(kit)[1]!.rebaseOnto).toBe(true)
    // C's run is not rebuilt because lanes landed
    expect(runOf(kit, 3)).toBe(rc)
    pass(kit, rc)
    expect(stateOf(kit, 3)).toBe("tests_passed") // waits for A
    pass(kit, ra)
    expect([1, 3].map((p) => stateOf(kit, p))).toEqual(["merged", "merged"])
    expect(kit.state.entries).toHaveLength(0)
  })

  test("entries without impacted targets for their head stay not_ready", () => {
    const kit = makeKit({ mode: "parallel", concurrency: 2 })
    submit(kit, 1)
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: 1, sha: "other", targets: ["x"] })
    expect(stateOf(kit, 1)).toBe("not_ready")
    targets(kit, 1, [])
    expect(stateOf(kit, 1)).toBe("testing")
  })

  test("mode switch with active runs goes through switching_modes", () => {
    const kit = makeKit({ concurrency: 2 })
    submit(kit, 1)
    submit(kit, 2)
    kit.send({ _tag: "ConfigChanged", config: { ...kit.state.config, mode: "parallel" } })
    expect(kit.state.config.state).toBe("switching_modes")
    expect(kit.state.config.mode).toBe("single")
    submit(kit, 3)
    expect(stateOf(kit, 3)).toBe("pending")
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("merged")
    pass(kit, runOf(kit, 2))
    expect(stateOf(kit, 2)).toBe("merged")
    expect(kit.state.config.state).toBe("running")
    expect(kit.state.config.mode).toBe("parallel")
    expect(stateOf(kit, 3)).toBe("not_ready")
  })

  test("direct merge when alone in its lane", () => {
    const kit = makeKit(
      { mode: "parallel", concurrency: 2, directMergeMode: "always" },
      { directMerge: (p) => p === 2 }
    )
    submit(kit, 1)
    targets(kit, 1, ["a"])
    submit(kit, 2)
    targets(kit, 2, ["b"])
    expect(stateOf(kit, 2)).toBe("merged")
    expect(lastTransition(kit, 2)!.reason).toBe("MERGE_GRAPH_DIRECT_MERGE")
  })
})

describe("parallel mode: fixes", () => {
  test("a lane merging after its dependencies landed through their own lanes replays only its own change", () => {
    const kit = makeKit({ mode: "parallel", concurrency: 4 })
    for (const pr of [1, 2, 3]) submit(kit, pr)
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: 1, sha: "head1", targets: ["a"] })
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: 2, sha: "head2", targets: ["b"] })
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: 3, sha: "head3", targets: ["a", "b"] })
    const [r1, r2, r3] = [1, 2, 3].map((p) => runOf(kit, p)) as [string, string, string]
    const c = runById(kit, r3)
    pass(kit, r2)
    pass(kit, r1)
    expect([1, 2].map((p) => stateOf(kit, p))).toEqual(["merged", "merged"])
    // C's run holds 1 and 2 (merged elsewhere): its remaining item applies onto its own commit after them
    const after = kit.state.runs.find((r) => r.id === r3)!
    expect(after.effectiveBase).toBe(c.commits[1]!)
    pass(kit, r3)
    expect(stateOf(kit, 3)).toBe("merged")
    expect(merges(kit).at(-1)!.rebaseOnto).toBe(true)
  })

  test("a mode switch waits for passed runs to merge before building runs of the new mode", () => {
    const kit = makeKit({ concurrency: 2 })
    submit(kit, 1)
    kit.send({ _tag: "ConfigChanged", config: { ...kit.state.config, mode: "parallel" } })
    submit(kit, 2)
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: 2, sha: "head2", targets: ["b"] })
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("merged")
    expect(kit.state.config.mode).toBe("parallel")
    expect(runById(kit, runOf(kit, 2)).dependentPrs).toEqual([])
  })
})
