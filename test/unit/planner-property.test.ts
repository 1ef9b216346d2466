import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import type { Entry, ImpactedTargets, PlannerConfig, QueueState, StepResult } from "../../src/queue/planner/index.ts"
import { type Kit, makeKit, submitted } from "../support/plannerKit.ts"

type Action =
  | { t: "submit"; pr: number; prio: number; noBatch: boolean }
  | { t: "cancel"; pr: number }
  | { t: "restart"; pr: number }
  | { t: "complete"; k: number; flaky: boolean }
  | { t: "tick"; minutes: number }
  | { t: "push" }
  | { t: "state"; state: "running" | "paused" | "draining" }
  | { t: "toggle"; field: "batch" | "canOptimisticallyMerge" | "mode" }
  | { t: "more" }
  | { t: "targets"; pr: number; targets: ImpactedTargets }
  | { t: "head"; pr: number }
  /** new submissions that arrive together: stepped at once as the runner does (`stepMany`) */
  | { t: "burst"; prs: number[]; prio: number; noBatch: boolean }

const PRS = 10
const TARGETS = ["a", "b", "c", "d", "e"]

const targetsArb: fc.Arbitrary<ImpactedTargets> = fc.oneof(
  { weight: 1, arbitrary: fc.constant("ALL" as const) },
  { weight: 8, arbitrary: fc.uniqueArray(fc.constantFrom(...TARGETS), { maxLength: 2 }) }
)

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant("submit" as const),
      pr: fc.integer({ min: 1, max: PRS }),
      prio: fc.constantFrom(0, 10, 100, 100, 100, 200),
      noBatch: fc.boolean()
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant("burst" as const),
      prs: fc.uniqueArray(fc.integer({ min: 1, max: PRS }), { minLength: 1, maxLength: 5 }),
      prio: fc.constantFrom(10, 100, 200),
      noBatch: fc.boolean()
    })
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("cancel" as const), pr: fc.integer({ min: 1, max: PRS }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("restart" as const), pr: fc.integer({ min: 1, max: PRS }) }) },
  {
    weight: 10,
    arbitrary: fc.record({
      t: fc.constant("complete" as const),
      k: fc.nat(5),
      flaky: fc.boolean()
    })
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("tick" as const), minutes: fc.integer({ min: 1, max: 400 }) }) },
  { weight: 1, arbitrary: fc.constant({ t: "push" as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("state" as const),
      state: fc.constantFrom("running" as const, "paused" as const, "draining" as const)
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("toggle" as const),
      field: fc.constantFrom("batch" as const, "canOptimisticallyMerge" as const, "mode" as const)
    })
  },
  { weight: 1, arbitrary: fc.constant({ t: "more" as const }) },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant("targets" as const),
      pr: fc.integer({ min: 1, max: PRS }),
      targets: targetsArb
    })
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("head" as const), pr: fc.integer({ min: 1, max: PRS }) }) }
)

const configArb: fc.Arbitrary<Partial<PlannerConfig>> = fc.record({
  mode: fc.constantFrom("single" as const, "single" as const, "parallel" as const),
  concurrency: fc.integer({ min: 1, max: 4 }),
  bisectionConcurrency: fc.integer({ min: 0, max: 2 }),
  pendingFailureDepth: fc.integer({ min: 0, max: 2 }),
  canOptimisticallyMerge: fc.boolean(),
  batch: fc.boolean(),
  batchingMinSize: fc.integer({ min: 2, max: 4 }),
  batchingMaxWaitTimeMinutes: fc.integer({ min: 0, max: 10 }),
  directMergeMode: fc.constantFrom("off" as const, "always" as const),
  optimizationMode: fc.constantFrom("off" as const, "bisection_skip_redundant_tests" as const),
  testingTimeoutMinutes: fc.constantFrom(60, 300)
})

/** A setting over its whole range in contract.md (1..4294967295), extremes included. */
const MAX_U32 = 4294967295
const u32Arb = fc.oneof(
  fc.constantFrom(1, 2, MAX_U32 - 1, MAX_U32),
  fc.integer({ min: 1, max: 8 }),
  fc.integer({ min: 1, max: MAX_U32 })
)

/** Configurations drawn over the full bounds (the numeric settings of updateQueue). */
const fullBoundsConfigArb: fc.Arbitrary<Partial<PlannerConfig>> = fc.record({
  mode: fc.constantFrom("single" as const, "parallel" as const),
  concurrency: u32Arb,
  bisectionConcurrency: u32Arb,
  pendingFailureDepth: u32Arb,
  canOptimisticallyMerge: fc.boolean(),
  batch: fc.boolean(),
  batchingMinSize: u32Arb,
  batchingMaxWaitTimeMinutes: u32Arb,
  notReadyTimeoutHours: u32Arb,
  directMergeMode: fc.constantFrom("off" as const, "always" as const),
  optimizationMode: fc.constantFrom("off" as const, "bisection_skip_redundant_tests" as const),
  testingTimeoutMinutes: u32Arb
})

const key = (e: Entry) => [e.priority, e.seq] as const
const keyLe = (a: Entry, b: Entry) => a.priority < b.priority || (a.priority === b.priority && a.seq <= b.seq)

const intersects = (a: ImpactedTargets | null, b: ImpactedTargets | null) =>
  a === null || b === null || a === "ALL" || b === "ALL" ? true : a.some((x) => b.includes(x))

interface World {
  kit: Kit
  bad: Set<number>
  conflicts: Set<number>
  heads: Map<number, number>
  submissions: Map<number, number>
  submitted: Set<string>
  everLocked: Set<string>
  mergedOnce: Set<string>
  maxConcurrency: number
  maxBisection: number
  targets: Map<string, ImpactedTargets>
}

const headOf = (w: World, pr: number) => `h${pr}.${w.heads.get(pr) ?? 0}`

/** Check the invariants on one step's result, given the state before it. */
const checkStep = (w: World, before: QueueState, r: StepResult) => {
  const kit = w.kit
  for (const t of r.transitions) {
    if (t.to === "merged") {
      expect(w.mergedOnce.has(t.entryId)).toBe(false)
      w.mergedOnce.add(t.entryId)
      // a bad PR never merges
      const pr = t.prNumber
      const e = before.entries.find((x) => x.id === t.entryId)
      if (e !== undefined && ((w.bad.has(pr) && e.headSha === headOf(w, pr)) || w.conflicts.has(pr))) {
        throw new Error(`bad PR ${pr} merged`)
      }
    }
    if (t.to === "testing" || t.to === "tests_passed" || t.to === "pending_failure") w.everLocked.add(t.entryId)
  }
  for (const c of r.commands) {
    if (c._tag === "Merge") {
      const run = kit.allRuns.get(c.runId)!
      expect(run.status).toBe("succeeded")
      expect(run.commits).toContain(c.newSha)
      expect(c.expectedSha).toBe(r.state.targetSha!)
      if (!c.rebaseOnto) expect(kit.verifiedCommits.has(c.newSha)).toBe(true)
    }
  }
  const s = r.state
  // slots
  const main = s.runs.filter((x) => x.queueType === "main" && (x.status === "building" || x.status === "in_progress"))
  const bis = s.runs.filter(
    (x) => x.queueType === "bisection" && (x.status === "building" || x.status === "in_progress")
  )
  if (w.maxBisection > 0) {
    expect(main.length).toBeLessThanOrEqual(w.maxConcurrency)
    expect(bis.length).toBeLessThanOrEqual(w.maxBisection)
  } else expect(main.length + bis.length).toBeLessThanOrEqual(w.maxConcurrency)
  // entry / run consistency
  for (const e of s.entries) {
    if (e.state === "testing") {
      const run = s.runs.find((x) => x.id === e.runId)
      expect(run?.status === "building" || run?.status === "in_progress").toBe(true)
    }
    if (e.state === "tests_passed") expect(s.runs.find((x) => x.id === e.runId)?.status).toBe("succeeded")
    if (e.state === "pending" || e.state === "not_ready") expect(e.runId).toBeNull()
  }
  // testing order: a run never starts for an entry while a never-tested pending entry with a better key waits
  // behind it (single mode)
  if (s.config.mode === "single") {
    for (const c of r.commands) {
      if (c._tag !== "BuildRun" || c.run.queueType !== "main") continue
      const firstId = c.run.testedEntryIds[0]!
      const pos = s.entries.findIndex((e) => e.id === firstId)
      const x = s.entries[pos]!
      const wasFresh = before.entries.some((e) => e.id === firstId && e.state === "pending" && !e.segment)
      if (!wasFresh) continue
      for (let j = pos + 1; j < s.entries.length; j++) {
        const y = s.entries[j]!
        if (y.state === "pending" && !w.everLocked.has(y.id) && y.segment === null) {
          if (!keyLe(x, y) && !w.everLocked.has(x.id)) throw new Error(`order ${key(x)} before ${key(y)}`)
        }
      }
    }
  }
  // parallel: a run contains only entries its tested entry depends on
  if (s.config.mode === "parallel") {
    for (const run of s.runs) {
      const tested = s.entries.find((e) => e.id === run.testedEntryIds[0])
      if (tested === undefined) continue
      let acc: ImpactedTargets | null = w.targets.get(tested.id) ?? null
      const deps = run.items.filter(
        (it) => !run.testedEntryIds.includes(it.entryId) && !run.mergedEntryIds.includes(it.entryId)
      )
      for (let k = deps.length - 1; k >= 0; k--) {
        const t = w.targets.get(deps[k]!.entryId) ?? null
        if (!intersects(acc, t)) throw new Error(`run ${JSON.stringify(run)} ${JSON.stringify(s.entries)}`)
        acc = acc === "ALL" || t === "ALL" || acc === null || t === null ? "ALL" : [...acc, ...t]
      }
    }
  }
}

const run = (
  config: Partial<PlannerConfig>,
  actions: Action[],
  bad: Set<number>,
  conflicts: Set<number>,
  checkPurity = false
) => {
  const kit = makeKit(config, { conflicts, checkPurity })
  const w: World = {
    kit,
    bad,
    conflicts,
    heads: new Map(),
    submissions: new Map(),
    submitted: new Set(),
    everLocked: new Set(),
    mergedOnce: new Set(),
    maxConcurrency: kit.state.config.concurrency,
    maxBisection: kit.state.config.bisectionConcurrency,
    targets: new Map()
  }
  const send = (ev: Parameters<Kit["send"]>[0]) => {
    let before = kit.state
    for (const r of kit.send(ev)) {
      checkStep(w, before, r)
      before = r.state
    }
  }
  const active = (pr: number) => kit.state.entries.find((e) => e.prNumber === pr)
  const complete = (k: number, flaky: boolean) => {
    const runs = kit.state.runs.filter((r) => r.status === "in_progress")
    const r = runs[k % Math.max(1, runs.length)]
    if (r === undefined) return
    const hasBad = r.items.some((it) => bad.has(it.prNumber) && it.headSha === headOf(w, it.prNumber))
    send({
      _tag: "RunCompleted",
      runId: r.id,
      outcome: hasBad || flaky ? "failed" : "succeeded",
      reason: "TEST_RUN_REQUIRED_STATUS_FAILED"
    })
  }
  const setConfig = (patch: Partial<PlannerConfig>) => {
    const cur = kit.state.config
    const base = cur.state === "switching_modes" ? { ...cur, state: "running" as const } : cur
    const mode = kit.state.switching?.mode ?? base.mode
    w.maxConcurrency = Math.max(w.maxConcurrency, patch.concurrency ?? 0)
    send({ _tag: "ConfigChanged", config: { ...base, mode, ...patch } })
  }
  for (const a of actions) {
    switch (a.t) {
      case "submit": {
        const e = active(a.pr)
        let id = e?.id
        if (e === undefined) {
          const n = (w.submissions.get(a.pr) ?? 0) + 1
          w.submissions.set(a.pr, n)
          id = `pr${a.pr}-${n}`
          w.submitted.add(id)
        }
        send({
          _tag: "Submitted",
          entryId: id!,
          prNumber: a.pr,
          headSha: headOf(w, a.pr),
          priority: a.prio,
          noBatch: a.noBatch,
          ready: true
        })
        break
      }
      case "burst": {
        const events = a.prs
          .filter((pr) => active(pr) === undefined)
          .map((pr) => {
            const n = (w.submissions.get(pr) ?? 0) + 1
            w.submissions.set(pr, n)
            const id = `pr${pr}-${n}`
            w.submitted.add(id)
            return {
              _tag: "Submitted" as const,
              entryId: id,
              prNumber: pr,
              headSha: headOf(w, pr),
              priority: a.prio,
              noBatch: a.noBatch,
              ready: true
            }
          })
        if (events.length > 0) send(events)
        break
      }
      case "cancel":
        send({ _tag: "Cancelled", prNumber: a.pr, reason: "API_REQUESTED" })
        break
      case "restart":
        send({ _tag: "RestartRequested", prNumber: a.pr })
        break
      case "complete":
        complete(a.k, a.flaky)
        break
      case "tick":
        kit.now += a.minutes * 60_000
        send({ _tag: "Tick" })
        break
      case "push":
        kit.target = `outside${kit.now}`
        w.kit.verifiedCommits.add(kit.target)
        send({ _tag: "TargetMoved", sha: kit.target })
        break
      case "state":
        setConfig({ state: a.state })
        break
      case "toggle": {
        const c = kit.state.config
        if (a.field === "mode")
          setConfig({ mode: (kit.state.switching?.mode ?? c.mode) === "single" ? "parallel" : "single" })
        else setConfig({ [a.field]: !c[a.field] })
        break
      }
      case "more":
        setConfig({ concurrency: kit.state.config.concurrency + 1 })
        break
      case "targets": {
        const e = active(a.pr)
        if (e !== undefined) w.targets.set(e.id, a.targets)
        send({ _tag: "ImpactedTargetsSet", prNumber: a.pr, sha: headOf(w, a.pr), targets: a.targets })
        break
      }
      case "head": {
        w.heads.set(a.pr, (w.heads.get(a.pr) ?? 0) + 1)
        send({ _tag: "PrHeadMoved", prNumber: a.pr, sha: headOf(w, a.pr) })
        break
      }
    }
  }
  // drain: running, every PR gets targets, no flakes; everything must resolve
  setConfig({ state: "running" })
  for (const e of kit.state.entries) {
    if (e.lane === null) {
      w.targets.set(e.id, ["a"])
      send({ _tag: "ImpactedTargetsSet", prNumber: e.prNumber, sha: e.headSha, targets: ["a"] })
    }
  }
  for (let guard = 0; guard < 500 && kit.state.entries.length > 0; guard++) {
    if (kit.state.runs.some((r) => r.status === "in_progress")) complete(0, false)
    else {
      kit.now += 60 * 60_000
      send({ _tag: "Tick" })
    }
  }
  expect(kit.state.entries.map((e) => [e.prNumber, e.state])).toEqual([])
  // nothing vanished: every submission ended with exactly one terminal transition
  const terminal = new Map<string, number>()
  for (const r of kit.results)
    for (const t of r.transitions)
      if (t.to === "merged" || t.to === "failed" || t.to === "cancelled")
        terminal.set(t.entryId, (terminal.get(t.entryId) ?? 0) + 1)
  for (const id of w.submitted) expect(terminal.get(id)).toBe(1)
  // the fake Git only moved to verified commits (or combinations in parallel mode / outside pushes)
  expect(JSON.parse(JSON.stringify(kit.state))).toEqual(kit.state)
  for (const r of kit.results) for (const t of r.transitions) stats[t.to] = (stats[t.to] ?? 0) + 1
  stats.runs = (stats.runs ?? 0) + kit.allRuns.size
  stats.bisection = (stats.bisection ?? 0) + [...kit.allRuns.values()].filter((r) => r.queueType === "bisection").length
}

const stats: Record<string, number> = {}

describe("planner properties", () => {
  test("invariants hold under random events", () => {
    fc.assert(
      fc.property(
        configArb,
        fc.array(actionArb, { minLength: 1, maxLength: 150 }),
        fc.uniqueArray(fc.integer({ min: 1, max: PRS }), { maxLength: 3 }),
        fc.uniqueArray(fc.integer({ min: 1, max: PRS }), { maxLength: 1 }),
        (config, actions, bad, conflicts) => {
          try {
            run(config, actions, new Set(bad), new Set(conflicts))
          } catch (e) {
            if (process.env.PLANNER_SEED !== undefined) console.log(e)
            throw e
          }
        }
      ),
      {
        numRuns: Number(process.env.PLANNER_RUNS ?? 300),
        ...(process.env.PLANNER_SEED === undefined
          ? {}
          : { seed: Number(process.env.PLANNER_SEED), path: process.env.PLANNER_PATH, endOnFailure: true })
      }
    )
    if (process.env.PLANNER_STATS) console.log(stats)
  })

  test("configurations over the full bounds (1..4294967295) never break a step, and ids are asked once per run", () => {
    fc.assert(
      fc.property(
        fullBoundsConfigArb,
        fc.array(
          actionArb.filter((a) => a.t !== "more" && a.t !== "tick"),
          { minLength: 1, maxLength: 60 }
        ),
        fc.uniqueArray(fc.integer({ min: 1, max: PRS }), { maxLength: 3 }),
        (config, actions, bad) => {
          const kit = makeKit(config)
          let asked = 0
          const next = kit.nextId
          kit.nextId = () => {
            asked++
            return next()
          }
          for (const a of actions) {
            if (a.t === "submit")
              kit.send({
                _tag: "Submitted",
                entryId: `pr${a.pr}-${kit.results.length}`,
                prNumber: a.pr,
                headSha: `h${a.pr}`,
                priority: a.prio,
                noBatch: a.noBatch,
                ready: true
              })
            else if (a.t === "complete") {
              const r = kit.state.runs.filter((x) => x.status === "in_progress")[a.k % 6]
              if (r !== undefined) {
                const failed = a.flaky || r.items.some((it) => bad.includes(it.prNumber))
                kit.send({
                  _tag: "RunCompleted",
                  runId: r.id,
                  outcome: failed ? "failed" : "succeeded",
                  reason: "TEST_RUN_REQUIRED_STATUS_FAILED"
                })
              }
            } else if (a.t === "cancel") kit.send({ _tag: "Cancelled", prNumber: a.pr, reason: "API_REQUESTED" })
            else if (a.t === "restart") kit.send({ _tag: "RestartRequested", prNumber: a.pr })
            else if (a.t === "targets")
              kit.send({ _tag: "ImpactedTargetsSet", prNumber: a.pr, sha: `h${a.pr}`, targets: a.targets })
          }
          kit.send({ _tag: "Tick" })
          // every id asked for named a run, and every run got its own
          expect(asked).toBe(
            kit.allRuns.size - [...kit.allRuns.keys()].filter((id) => id.includes("-bisection-")).length
          )
          // runs are bounded by the entries, not by the configuration
          expect(kit.state.runs.length).toBeLessThanOrEqual(PRS * 2)
        }
      ),
      { numRuns: Number(process.env.PLANNER_RUNS ?? 200) }
    )
  })

  test("new submissions stepped together equal one step each, when nothing starts (a paused queue)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ pr: fc.integer({ min: 1, max: 30 }), prio: fc.constantFrom(0, 10, 100, 200) }), {
          maxLength: 12
        }),
        fc.uniqueArray(fc.record({ pr: fc.integer({ min: 31, max: 60 }), prio: fc.constantFrom(10, 100, 200) }), {
          minLength: 1,
          maxLength: 10,
          selector: (x) => x.pr
        }),
        (before, burst) => {
          const paused = () => {
            const kit = makeKit({ state: "paused" })
            for (const b of before) {
              kit.send({
                _tag: "Submitted",
                entryId: `e${b.pr}`,
                prNumber: b.pr,
                headSha: `h${b.pr}`,
                priority: b.prio,
                noBatch: false,
                ready: true
              })
            }
            return kit
          }
          const events = burst.map((b) => ({
            _tag: "Submitted" as const,
            entryId: `n${b.pr}`,
            prNumber: b.pr,
            headSha: `h${b.pr}`,
            priority: b.prio,
            noBatch: false,
            ready: true
          }))
          const one = paused()
          const each = events.flatMap((e) => one.send(e))
          const all = paused()
          const together = all.send(events)
          expect(all.state.entries).toEqual(one.state.entries)
          expect(together.flatMap((r) => r.transitions)).toEqual(each.flatMap((r) => r.transitions))
          expect(together.flatMap((r) => r.commands)).toEqual(each.flatMap((r) => r.commands))
        }
      ),
      { numRuns: 200 }
    )
  })

  test("a passed run that can no longer merge does not hold a mode switch forever (found by the purity run)", () => {
    // run2 (PR 3 on top of PR 2) passed; PR 2's own run was restarted, so run2 waits for a new run of PR 2, which
    // the switch held back while it waited for run2 to merge
    run(
      { mode: "single", concurrency: 2, bisectionConcurrency: 0, canOptimisticallyMerge: false, batch: false },
      [
        { t: "submit", pr: 2, prio: 0, noBatch: false },
        { t: "submit", pr: 3, prio: 0, noBatch: false },
        { t: "toggle", field: "mode" },
        { t: "restart", pr: 2 }
      ],
      new Set([1]),
      new Set(),
      true
    )
  })

  test("step is pure: same input, same output, input untouched (also from an old state)", () => {
    fc.assert(
      fc.property(configArb, fc.array(actionArb, { minLength: 1, maxLength: 80 }), (config, actions) => {
        run(config, actions, new Set([1]), new Set(), true)
      }),
      { numRuns: 60 }
    )
  })

  test("parallel: disjoint entries never wait for each other", () => {
    fc.assert(
      fc.property(
        fc.array(fc.uniqueArray(fc.constantFrom(...TARGETS), { minLength: 1, maxLength: 2 }), {
          minLength: 1,
          maxLength: 8
        }),
        fc.integer({ min: 1, max: 8 }),
        (targetLists, concurrency) => {
          const kit = makeKit({ mode: "parallel", concurrency })
          targetLists.forEach((t, k) => {
            const pr = k + 1
            kit.send(submitted(pr))
            kit.send({ _tag: "ImpactedTargetsSet", prNumber: pr, sha: `h${pr}`, targets: t })
          })
          // every run contains exactly the transitive dependencies; entries with no dependency run alone
          for (const r of kit.state.runs) {
            const pos = targetLists.length
            const tested = Number(r.testedEntryIds[0]!.slice(1))
            const acc = new Set(targetLists[tested - 1])
            const deps: number[] = []
            for (let p = tested - 1; p >= 1; p--) {
              if (targetLists[p - 1]!.some((x) => acc.has(x))) {
                deps.unshift(p)
                for (const x of targetLists[p - 1]!) acc.add(x)
              }
            }
            expect(r.dependentPrs).toEqual(deps)
            expect(pos).toBeGreaterThan(0)
          }
          // with enough slots every entry is tested at once
          if (concurrency >= targetLists.length) expect(kit.state.runs).toHaveLength(targetLists.length)
          // completing one lane never waits for another: pass every run with no dependency, in reverse
          const alone = kit.state.runs.filter((r) => r.dependentPrs.length === 0).reverse()
          for (const r of alone) {
            kit.send({ _tag: "RunCompleted", runId: r.id, outcome: "succeeded", reason: "" })
            const merged = kit.results
              .at(-1)!
              .transitions.filter((t) => t.to === "merged")
              .map((t) => t.entryId)
            expect(merged).toEqual(r.testedEntryIds.slice())
          }
        }
      ),
      { numRuns: 200 }
    )
  })
})
