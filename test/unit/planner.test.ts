import { describe, expect, test } from "bun:test"
import type { Command, Entry, EntryState, PlannerConfig, Transition } from "../../src/queue/planner/index.ts"
import { type Kit, makeKit } from "../support/plannerKit.ts"

const submit = (kit: Kit, pr: number, opts: { priority?: number; noBatch?: boolean; ready?: boolean } = {}) =>
  kit.send({
    _tag: "Submitted",
    entryId: `e${pr}`,
    prNumber: pr,
    headSha: `head${pr}`,
    priority: opts.priority ?? 100,
    noBatch: opts.noBatch ?? false,
    ready: opts.ready ?? true
  })

const entry = (kit: Kit, pr: number): Entry | undefined => kit.state.entries.find((e) => e.prNumber === pr)

const transitions = (kit: Kit): Transition[] => kit.results.flatMap((r) => r.transitions)

/** the last known state of a PR, including terminal ones */
const stateOf = (kit: Kit, pr: number): EntryState | undefined => {
  const e = entry(kit, pr)
  if (e !== undefined) return e.state
  const ts = transitions(kit).filter((t) => t.prNumber === pr)
  return ts[ts.length - 1]?.to
}

const lastTransition = (kit: Kit, pr: number): Transition | undefined => {
  const ts = transitions(kit).filter((t) => t.prNumber === pr)
  return ts[ts.length - 1]
}

const runOf = (kit: Kit, pr: number): string => {
  const id = entry(kit, pr)?.runId
  if (id === null || id === undefined) throw new Error(`PR ${pr} has no run`)
  return id
}

const itemsOf = (kit: Kit, runId: string): number[] => {
  const r = kit.state.runs.find((x) => x.id === runId) ?? kit.allRuns.get(runId)
  return r === undefined ? [] : r.items.map((it) => it.prNumber)
}

const pass = (kit: Kit, runId: string) => kit.send({ _tag: "RunCompleted", runId, outcome: "succeeded", reason: "" })
const fail = (kit: Kit, runId: string, reason = "TEST_RUN_REQUIRED_STATUS_FAILED") =>
  kit.send({ _tag: "RunCompleted", runId, outcome: "failed", reason })

const builds = (kit: Kit, from = 0): Extract<Command, { _tag: "BuildRun" }>[] =>
  kit.commands.slice(from).filter((c): c is Extract<Command, { _tag: "BuildRun" }> => c._tag === "BuildRun")

const merges = (kit: Kit): Extract<Command, { _tag: "Merge" }>[] =>
  kit.commands.filter((c): c is Extract<Command, { _tag: "Merge" }> => c._tag === "Merge")

const activeRuns = (kit: Kit) => kit.state.runs.filter((r) => r.status === "building" || r.status === "in_progress")

const kitWith = (cfg: Partial<PlannerConfig>, prs: number[]) => {
  const kit = makeKit(cfg)
  for (const pr of prs) submit(kit, pr)
  return kit
}

describe("single mode, predictive testing", () => {
  test("one PR: tested, merged, branch deleted", () => {
    const kit = kitWith({}, [1])
    expect(stateOf(kit, 1)).toBe("testing")
    const run = runOf(kit, 1)
    expect(kit.state.runs[0]!.branch).toBe(`trunk-merge/pr-1/${run}`)
    expect(kit.state.runs[0]!.status).toBe("in_progress")
    pass(kit, run)
    expect(stateOf(kit, 1)).toBe("merged")
    expect(kit.state.entries).toHaveLength(0)
    expect(kit.state.runs).toHaveLength(0)
    expect(kit.target).toBe(kit.state.targetSha!)
    expect(lastTransition(kit, 1)!.verifiedByTestRun).toBe(run)
    expect(kit.commands.some((c) => c._tag === "DeleteBranch" && c.runId === run)).toBe(true)
  })

  test("chain: run k contains every entry ahead", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3, 4])
    expect(itemsOf(kit, runOf(kit, 1))).toEqual([1])
    expect(itemsOf(kit, runOf(kit, 2))).toEqual([1, 2])
    expect(itemsOf(kit, runOf(kit, 3))).toEqual([1, 2, 3])
    expect(stateOf(kit, 4)).toBe("pending")
    expect(kit.state.runs.every((r) => r.dependentPrs.length === 0)).toBe(true)
  })

  test("tests_passed waits for those ahead, then merges in order", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3])
    const [r1, r2, r3] = [runOf(kit, 1), runOf(kit, 2), runOf(kit, 3)]
    pass(kit, r3)
    pass(kit, r2)
    expect(stateOf(kit, 3)).toBe("tests_passed")
    expect(stateOf(kit, 2)).toBe("tests_passed")
    expect(merges(kit)).toHaveLength(0)
    pass(kit, r1)
    // the passed prefix lands in one compare-and-swap to run 3's commit; each PR is still its own commit,
    // verified by its own run
    expect(merges(kit).map((m) => m.entryIds)).toEqual([["e1", "e2", "e3"]])
    expect([1, 2, 3].map((p) => stateOf(kit, p))).toEqual(["merged", "merged", "merged"])
    expect([1, 2, 3].map((p) => lastTransition(kit, p)!.verifiedByTestRun)).toEqual([r1, r2, r3])
    // the final target is run 3's last commit: the tested tree
    expect(kit.target).toBe(kit.allRuns.get(r3)!.commits[2]!)
    expect(builds(kit)).toHaveLength(3)
  })

  test("failure at the head: fails at once, runs behind rebuilt without it", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3])
    const before = kit.commands.length
    fail(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("failed")
    expect(lastTransition(kit, 1)!.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
    const rebuilt = builds(kit, before)
    expect(rebuilt.map((b) => b.run.items.map((i) => i.prNumber))).toEqual([[2], [2, 3]])
    expect(lastTransition(kit, 2)!.to).toBe("testing")
  })

  test("failure in the middle: only runs containing it are rebuilt; it waits in pending_failure", () => {
    const kit = kitWith({ concurrency: 4 }, [1, 2, 3, 4])
    const r1 = runOf(kit, 1)
    const before = kit.commands.length
    fail(kit, runOf(kit, 2))
    expect(stateOf(kit, 2)).toBe("pending_failure")
    const rebuilt = builds(kit, before)
    expect(rebuilt.map((b) => b.run.items.map((i) => i.prNumber))).toEqual([
      [1, 3],
      [1, 3, 4]
    ])
    expect(runOf(kit, 1)).toBe(r1)
    pass(kit, r1)
    expect(stateOf(kit, 1)).toBe("merged")
    expect(stateOf(kit, 2)).toBe("failed")
    expect(lastTransition(kit, 2)!.reason).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")
    pass(kit, runOf(kit, 3))
    pass(kit, runOf(kit, 4))
    expect(stateOf(kit, 4)).toBe("merged")
  })

  test("two failures: the one behind goes back to pending when the one ahead fails", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3])
    fail(kit, runOf(kit, 2))
    expect(itemsOf(kit, runOf(kit, 3))).toEqual([1, 3])
    fail(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("failed")
    const t2 = transitions(kit).filter((t) => t.prNumber === 2)
    expect(t2.some((t) => t.from === "pending_failure" && t.to === "pending")).toBe(true)
    expect(t2.find((t) => t.from === "pending_failure")!.reason).toBe("PREREQUISITE_MERGE_ITEM_FAILED")
    expect(itemsOf(kit, runOf(kit, 2))).toEqual([2])
    expect(itemsOf(kit, runOf(kit, 3))).toEqual([2, 3])
  })

  test("merge conflict: the entry fails, the others are rebuilt without it", () => {
    const kit = makeKit({ concurrency: 3 }, { conflicts: new Set([2]) })
    for (const pr of [1, 2, 3]) submit(kit, pr)
    expect(stateOf(kit, 2)).toBe("pending_failure")
    expect(entry(kit, 2)!.failure!.reason).toBe("START_TEST_RUN_MERGE_CONFLICT")
    expect(itemsOf(kit, runOf(kit, 3))).toEqual([1, 3])
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 2)).toBe("failed")
    pass(kit, runOf(kit, 3))
    expect(stateOf(kit, 3)).toBe("merged")
  })

  test("priority: a higher priority entry goes ahead of entries not yet testing only", () => {
    const kit = kitWith({ concurrency: 1 }, [1, 2, 3])
    submit(kit, 4, { priority: 10 })
    expect(kit.state.entries.map((e) => e.prNumber)).toEqual([1, 4, 2, 3])
    expect(stateOf(kit, 1)).toBe("testing")
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 4)).toBe("testing")
    // changing the priority of a waiting entry re-orders it
    submit(kit, 3, { priority: 5 })
    expect(kit.state.entries.map((e) => e.prNumber)).toEqual([4, 3, 2])
  })

  test("urgent takes the head and restarts the runs it displaced", () => {
    const kit = kitWith({ concurrency: 2 }, [1, 2, 3])
    const r1 = runOf(kit, 1)
    submit(kit, 9, { priority: 0 })
    expect(kit.state.entries.map((e) => e.prNumber)).toEqual([9, 1, 2, 3])
    expect(itemsOf(kit, runOf(kit, 9))).toEqual([9])
    expect(itemsOf(kit, runOf(kit, 1))).toEqual([9, 1])
    expect(runOf(kit, 1)).not.toBe(r1)
    expect(kit.allRuns.get(r1)!.status).toBe("cancelled")
    expect(transitions(kit).find((t) => t.prNumber === 1 && t.from === "testing")!.reason).toBe(
      "SKIP_THE_LINE_INTERRUPTED"
    )
    expect(activeRuns(kit)).toHaveLength(2)
  })

  test("cancel in the middle rebuilds the runs behind that contained it", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3, 4])
    const r1 = runOf(kit, 1)
    const before = kit.commands.length
    kit.send({ _tag: "Cancelled", prNumber: 2, reason: "API_REQUESTED" })
    expect(stateOf(kit, 2)).toBe("cancelled")
    expect(lastTransition(kit, 2)!.reason).toBe("API_REQUESTED")
    expect(builds(kit, before).map((b) => b.run.items.map((i) => i.prNumber))).toEqual([
      [1, 3],
      [1, 3, 4]
    ])
    expect(runOf(kit, 1)).toBe(r1)
  })

  test("restart rebuilds only that entry's run", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3])
    const [r1, r2, r3] = [runOf(kit, 1), runOf(kit, 2), runOf(kit, 3)]
    const before = kit.commands.length
    kit.send({ _tag: "RestartRequested", prNumber: 2 })
    const b = builds(kit, before)
    expect(b).toHaveLength(1)
    expect(b[0]!.run.items.map((i) => i.prNumber)).toEqual([1, 2])
    expect(runOf(kit, 2)).not.toBe(r2)
    expect(runOf(kit, 1)).toBe(r1)
    expect(runOf(kit, 3)).toBe(r3)
    expect(kit.state.entries.map((e) => e.prNumber)).toEqual([1, 2, 3])
  })

  test("timeout fails the run with TEST_RUN_TIMEOUT", () => {
    const kit = kitWith({ testingTimeoutMinutes: 10 }, [1])
    const wake = kit.results.flatMap((r) => r.commands).filter((c) => c._tag === "ScheduleWake")
    expect(wake.length).toBeGreaterThan(0)
    kit.now += 5 * 60_000
    kit.send({ _tag: "Tick" })
    expect(stateOf(kit, 1)).toBe("testing")
    kit.now += 6 * 60_000
    kit.send({ _tag: "Tick" })
    expect(stateOf(kit, 1)).toBe("failed")
    expect(lastTransition(kit, 1)!.reason).toBe("TEST_RUN_TIMEOUT")
  })

  test("paused: no run starts and nothing merges; results are kept", () => {
    const kit = kitWith({ concurrency: 2 }, [1])
    const r1 = runOf(kit, 1)
    kit.send({ _tag: "ConfigChanged", config: { ...kit.state.config, state: "paused" } })
    submit(kit, 2)
    expect(stateOf(kit, 2)).toBe("pending")
    pass(kit, r1)
    expect(stateOf(kit, 1)).toBe("tests_passed")
    expect(merges(kit)).toHaveLength(0)
    kit.send({ _tag: "ConfigChanged", config: { ...kit.state.config, state: "running" } })
    expect(stateOf(kit, 1)).toBe("merged")
    expect(stateOf(kit, 2)).toBe("testing")
  })

  test("draining: passing runs merge, no new run starts", () => {
    const kit = kitWith({ concurrency: 1 }, [1, 2])
    kit.send({ _tag: "ConfigChanged", config: { ...kit.state.config, state: "draining" } })
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("merged")
    expect(stateOf(kit, 2)).toBe("pending")
    submit(kit, 3)
    expect(stateOf(kit, 3)).toBe("pending")
    expect(kit.state.config.state).toBe("draining")
  })

  test("target moved from outside: runs rebuilt on the new tip", () => {
    const kit = kitWith({ concurrency: 2 }, [1, 2])
    const old = [runOf(kit, 1), runOf(kit, 2)]
    kit.target = "outside"
    kit.send({ _tag: "TargetMoved", sha: "outside" })
    expect(runOf(kit, 1)).not.toBe(old[0])
    expect(kit.state.runs.every((r) => r.baseSha === "outside")).toBe(true)
    expect(
      transitions(kit).filter((t) => t.to === "pending" && t.reason === "MANUAL_PUSH_TO_TARGET_BRANCH")
    ).toHaveLength(2)
  })

  test("a failed compare-and-swap is a target move", () => {
    const kit = makeKit({}, { autoMerge: false })
    submit(kit, 1)
    pass(kit, runOf(kit, 1))
    const m = merges(kit)[0]!
    kit.send({ _tag: "MergeFailed", runId: m.runId, entryIds: m.entryIds, reason: "CAS", actualTargetSha: "other" })
    expect(kit.state.targetSha).toBe("other")
    expect(stateOf(kit, 1)).toBe("testing")
    expect(kit.state.runs[0]!.baseSha).toBe("other")
  })

  test("a replayed Merge that finds the target already moved to its commit counts as merged", () => {
    const kit = makeKit({ concurrency: 2 }, { autoMerge: false })
    submit(kit, 1)
    submit(kit, 2)
    pass(kit, runOf(kit, 1))
    const m = merges(kit)[0]!
    kit.send({ _tag: "MergeFailed", runId: m.runId, entryIds: m.entryIds, reason: "CAS", actualTargetSha: m.newSha })
    expect(stateOf(kit, 1)).toBe("merged")
    expect(kit.state.targetSha).toBe(m.newSha)
    // the run behind, built on top of PR 1, is still valid
    expect(kit.state.runs.find((r) => r.testedEntryIds[0] === "e2")!.effectiveBase).toBe(m.newSha)
    // an observed target move to the merge commit while the merge is outstanding does the same
    pass(kit, runOf(kit, 2))
    const m2 = merges(kit)[1]!
    kit.send({ _tag: "TargetMoved", sha: m2.newSha })
    expect(stateOf(kit, 2)).toBe("merged")
  })

  test("no second Merge while one is outstanding; replayed events are harmless", () => {
    const kit = makeKit({ concurrency: 2 }, { autoMerge: false })
    submit(kit, 1)
    submit(kit, 2)
    const r1 = runOf(kit, 1)
    pass(kit, r1)
    pass(kit, runOf(kit, 2))
    kit.send({ _tag: "Tick" })
    expect(merges(kit)).toHaveLength(1)
    const m = merges(kit)[0]!
    kit.send({ _tag: "MergeSucceeded", runId: m.runId, entryIds: m.entryIds, newSha: m.newSha })
    const snapshot = JSON.stringify(kit.state)
    kit.send({ _tag: "MergeSucceeded", runId: m.runId, entryIds: m.entryIds, newSha: m.newSha })
    pass(kit, r1)
    expect(JSON.stringify(kit.state)).toBe(snapshot)
    expect(merges(kit)).toHaveLength(2)
  })

  test("PR head pushed: cancelled with PR_PUSHED_TO", () => {
    const kit = kitWith({ concurrency: 2 }, [1, 2])
    kit.send({ _tag: "PrHeadMoved", prNumber: 1, sha: "new" })
    expect(stateOf(kit, 1)).toBe("cancelled")
    expect(lastTransition(kit, 1)!.reason).toBe("PR_PUSHED_TO")
    expect(itemsOf(kit, runOf(kit, 2))).toEqual([2])
  })

  test("not ready until ready", () => {
    const kit = makeKit()
    submit(kit, 1, { ready: false })
    expect(stateOf(kit, 1)).toBe("not_ready")
    kit.send({ _tag: "ReadinessChanged", prNumber: 1, ready: true })
    expect(stateOf(kit, 1)).toBe("testing")
  })

  test("direct merge when alone", () => {
    const kit = makeKit({ directMergeMode: "always" }, { directMerge: (pr) => pr === 1 })
    submit(kit, 1)
    expect(stateOf(kit, 1)).toBe("merged")
    expect(lastTransition(kit, 1)!.reason).toBe("MERGE_GRAPH_DIRECT_MERGE")
    expect(builds(kit)).toHaveLength(0)
    submit(kit, 2)
    expect(stateOf(kit, 2)).toBe("testing")
  })

  test("state is JSON-serialisable and the input is not mutated", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3])
    const s = kit.state
    const copy = JSON.stringify(s)
    fail(kit, runOf(kit, 2))
    expect(JSON.stringify(s)).toBe(copy)
    expect(JSON.parse(JSON.stringify(kit.state))).toEqual(kit.state)
  })

  test("passed runs count against concurrency: a head that cannot finish bounds the speculation", () => {
    const kit = kitWith({ concurrency: 3 }, [1, 2, 3, 4, 5, 6])
    expect(activeRuns(kit)).toHaveLength(3)
    // the head's run stays in progress (its status never comes); the two behind it pass
    pass(kit, runOf(kit, 2))
    pass(kit, runOf(kit, 3))
    expect(stateOf(kit, 2)).toBe("tests_passed")
    expect(stateOf(kit, 4)).toBe("pending")
    expect(kit.state.runs).toHaveLength(3)
    // the head passes: everything merges and the chain moves on
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 3)).toBe("merged")
    expect(activeRuns(kit)).toHaveLength(3)
  })

  test("run ids come from the generator, one per run, whatever the configured concurrency", async () => {
    const { step, initialState } = await import("../../src/queue/planner/index.ts")
    const { defaultConfig } = await import("../support/plannerKit.ts")
    const max = 4294967295
    let s = initialState({ ...defaultConfig, concurrency: max, bisectionConcurrency: max }, "base")
    let asked = 0
    const newId = () => `id${++asked}`
    for (const pr of [1, 2, 3]) {
      const event = {
        _tag: "Submitted",
        entryId: `e${pr}`,
        prNumber: pr,
        headSha: "h",
        priority: 100,
        noBatch: false,
        ready: true
      } as const
      s = step(s, event, 0, newId).state
    }
    expect(s.runs.map((x) => x.id)).toEqual(["id1", "id2", "id3"])
    expect(asked).toBe(3)
  })
})

describe("not-ready timeout", () => {
  const HOUR = 3_600_000

  test("a not_ready entry is cancelled with NOT_READY_TIMEOUT_EXPIRED after notReadyTimeoutHours, and the runner is woken for it", () => {
    const kit = makeKit({ mode: "parallel", notReadyTimeoutHours: 2 })
    const submittedAt = kit.now
    const [first] = submit(kit, 1)
    expect(kit.state.entries[0]!.state).toBe("not_ready")
    expect(first!.commands).toContainEqual({ _tag: "ScheduleWake", at: submittedAt + 2 * HOUR })
    kit.now = submittedAt + 2 * HOUR - 1
    kit.send({ _tag: "Tick" })
    expect(kit.state.entries[0]!.state).toBe("not_ready")
    kit.now = submittedAt + 2 * HOUR
    const [r] = kit.send({ _tag: "Tick" })
    expect(r!.transitions).toContainEqual(
      expect.objectContaining({ prNumber: 1, to: "cancelled", reason: "NOT_READY_TIMEOUT_EXPIRED" })
    )
    expect(kit.state.entries).toHaveLength(0)
  })

  test("an entry that became ready in time is not cancelled", () => {
    const kit = makeKit({ mode: "parallel", notReadyTimeoutHours: 1 })
    submit(kit, 1)
    kit.now += HOUR / 2
    kit.send({ _tag: "ImpactedTargetsSet", prNumber: 1, sha: "head1", targets: ["x"] })
    kit.now += 2 * HOUR
    kit.send({ _tag: "Tick" })
    expect(kit.state.entries.map((e) => e.state)).toEqual(["testing"])
  })
})
