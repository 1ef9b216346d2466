/**
 * A deterministic fake shell for the planner, used by the unit tests and the simulator: a fake Git (commit SHAs
 * are hashes of base + PR head, so the same PR on the same base gives the same SHA), automatic answers to
 * BuildRun / Merge / TryDirectMerge, and pre-generated run ids. Not used by the service.
 */

import { isTerminal } from "../../src/queue/planner/context.ts"
import { laneOf } from "../../src/queue/planner/lanes.ts"
import { initialState, step, stepMany } from "../../src/queue/planner/step.ts"
import type {
  Command,
  ImpactedTargets,
  PlannerConfig,
  PlannerEvent,
  QueueState,
  Run,
  RunItem,
  StepResult
} from "../../src/queue/planner/types.ts"
import { plannerConfig } from "../../src/queue/runner/index.ts"
import { defaultQueueConfig } from "../../src/queue/schemas.ts"

/** FNV-1a based 40-hex-digit fake SHA. */
export const fakeSha = (s: string): string => {
  let out = ""
  let h = 0x811c9dc5
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i)
      h = Math.imul(h, 0x01000193) >>> 0
    }
    h ^= round
    h = Math.imul(h, 0x01000193) >>> 0
    out += h.toString(16).padStart(8, "0")
  }
  return out
}

export const applyItem = (base: string, it: RunItem): string => fakeSha(`${base}|${it.prNumber}|${it.headSha}`)

export const commitsOf = (baseSha: string, items: readonly RunItem[]): string[] => {
  const out: string[] = []
  let cur = baseSha
  for (const it of items) {
    cur = applyItem(cur, it)
    out.push(cur)
  }
  return out
}

/** The planner configuration of a new queue (contract.md §2 defaults). */
export const defaultConfig: PlannerConfig = plannerConfig(defaultQueueConfig("main"))

export interface KitOptions {
  /** answer BuildRun with RunBuilt at once (default true) */
  readonly autoBuild?: boolean
  /** answer Merge at once with a compare-and-swap on the fake target (default true) */
  readonly autoMerge?: boolean
  /** answer TryDirectMerge (default: not merged) */
  readonly directMerge?: (prNumber: number) => boolean
  /** PRs whose application conflicts (RunBuildFailed with START_TEST_RUN_MERGE_CONFLICT) */
  readonly conflicts?: ReadonlySet<number>
  /** check every step is pure: stepping a JSON copy of the state, and the same state again, gives the same result */
  readonly checkPurity?: boolean
}

export interface Kit {
  state: QueueState
  now: number
  /** the real target branch of the fake Git */
  target: string
  readonly results: StepResult[]
  readonly commands: Command[]
  /** every run record ever reported, latest version */
  readonly allRuns: Map<string, Run>
  /** commits every succeeded run built, for the one promise */
  readonly verifiedCommits: Set<string>
  /** the targets the fake Git moved to by Merge */
  readonly mergedTo: string[]
  /** planner events; impacted targets may be given as lists, reduced to lanes as the shell does (`laneOf`) */
  /** (a list: events that arrived together, stepped as the runner steps a run of new submissions, `stepMany`) */
  send: (ev: PlannerEvent | TargetsInput | ReadonlyArray<PlannerEvent>) => StepResult[]
  nextId: () => string
  /** the target lists last set per entry id */
  readonly targets: Map<string, ImpactedTargets>
}

/** `setImpactedTargets` as the shell receives it: the list itself. */
export interface TargetsInput {
  readonly _tag: "ImpactedTargetsSet"
  readonly prNumber: number
  readonly sha: string
  readonly targets: ImpactedTargets
}

const isBurst = (ev: PlannerEvent | TargetsInput | ReadonlyArray<PlannerEvent>): ev is ReadonlyArray<PlannerEvent> =>
  Array.isArray(ev)

const isTargetsInput = (ev: PlannerEvent | TargetsInput | ReadonlyArray<PlannerEvent>): ev is TargetsInput =>
  "targets" in ev

export const makeKit = (config: Partial<PlannerConfig> = {}, opts: KitOptions = {}, initialTarget = "base"): Kit => {
  const target = fakeSha(initialTarget)
  let n = 0
  const kit: Kit = {
    state: initialState({ ...defaultConfig, ...config }, target),
    now: 1_000_000,
    target,
    results: [],
    commands: [],
    allRuns: new Map(),
    verifiedCommits: new Set([target]),
    mergedTo: [],
    nextId: () => `run${++n}`,
    targets: new Map(),
    send: (input) => {
      let ev: PlannerEvent | ReadonlyArray<PlannerEvent>
      if (isBurst(input)) ev = input
      else if (isTargetsInput(input)) {
        const entry = kit.state.entries.find(
          (e) => e.prNumber === input.prNumber && e.headSha === input.sha && !isTerminal(e)
        )
        if (entry !== undefined) kit.targets.set(entry.id, input.targets)
        const lane = laneOf(kit.state, input.prNumber, input.targets, (id) => kit.targets.get(id))
        ev = { _tag: "ImpactedTargetsSet", prNumber: input.prNumber, sha: input.sha, lane }
      } else ev = input
      const out: StepResult[] = []
      const queue: Array<PlannerEvent | ReadonlyArray<PlannerEvent>> = [ev]
      for (let guard = 0; queue.length > 0 && guard < 10_000; guard++) {
        const e = queue.shift()!
        const start = n
        const before = kit.state
        const beforeJson = opts.checkPurity ? JSON.stringify(before) : ""
        const r = isBurst(e) ? stepMany(before, e, kit.now, kit.nextId) : step(before, e, kit.now, kit.nextId)
        if (opts.checkPurity && !isBurst(e)) {
          const json = JSON.stringify(r)
          const end = n
          n = start
          const again = JSON.stringify(step(before, e, kit.now, kit.nextId))
          n = start
          const fresh = JSON.stringify(step(JSON.parse(beforeJson), e, kit.now, kit.nextId))
          n = end
          if (JSON.stringify(before) !== beforeJson) throw new Error("step mutated its input")
          if (again !== json || fresh !== json) throw new Error(`step is not pure for ${e._tag}`)
        }
        kit.state = r.state
        kit.results.push(r)
        out.push(r)
        for (const run of r.runChanges) {
          kit.allRuns.set(run.id, run)
          if (run.status === "succeeded") for (const c of run.commits) kit.verifiedCommits.add(c)
        }
        for (const c of r.commands) {
          kit.commands.push(c)
          if (c._tag === "BuildRun" && opts.autoBuild !== false) {
            const conflict = c.run.items.find((it) => opts.conflicts?.has(it.prNumber))
            if (conflict !== undefined) {
              queue.push({
                _tag: "RunBuildFailed",
                runId: c.run.id,
                entryId: conflict.entryId,
                reason: "START_TEST_RUN_MERGE_CONFLICT"
              })
            } else {
              const commits = commitsOf(c.run.baseSha, c.run.items)
              queue.push({ _tag: "RunBuilt", runId: c.run.id, testBranchSha: commits[commits.length - 1]!, commits })
            }
          } else if (c._tag === "Merge" && opts.autoMerge !== false) {
            if (c.expectedSha !== kit.target) {
              queue.push({
                _tag: "MergeFailed",
                runId: c.runId,
                entryIds: c.entryIds,
                reason: "TARGET_MOVED",
                actualTargetSha: kit.target
              })
            } else {
              kit.target = c.rebaseOnto ? fakeSha(`${kit.target}+${c.newSha}`) : c.newSha
              kit.mergedTo.push(kit.target)
              queue.push({ _tag: "MergeSucceeded", runId: c.runId, entryIds: c.entryIds, newSha: kit.target })
            }
          } else if (c._tag === "TryDirectMerge") {
            const ok = opts.directMerge?.(c.prNumber) ?? false
            if (ok && c.expectedSha === kit.target) {
              kit.target = fakeSha(`${kit.target}|direct|${c.headSha}`)
              kit.mergedTo.push(kit.target)
              queue.push({ _tag: "DirectMergeResult", entryId: c.entryId, merged: true, newSha: kit.target })
            } else queue.push({ _tag: "DirectMergeResult", entryId: c.entryId, merged: false, newSha: null })
          }
        }
      }
      return out
    }
  }
  return kit
}

// ---------------------------------------------------------------- queries the planner tests share

export const entryOf = (kit: Kit, pr: number) => kit.state.entries.find((e) => e.prNumber === pr)
export const transitionsOf = (kit: Kit) => kit.results.flatMap((r) => r.transitions)
/** The PR's state: from the state while it is active, else its last transition. */
export const stateOf = (kit: Kit, pr: number) => {
  const e = entryOf(kit, pr)
  if (e !== undefined) return e.state
  return transitionsOf(kit)
    .filter((t) => t.prNumber === pr)
    .at(-1)?.to
}
export const lastTransition = (kit: Kit, pr: number) =>
  transitionsOf(kit)
    .filter((t) => t.prNumber === pr)
    .at(-1)
export const runOf = (kit: Kit, pr: number): string => {
  const id = entryOf(kit, pr)?.runId
  if (id === null || id === undefined) throw new Error(`PR ${pr} has no run`)
  return id
}
export const runById = (kit: Kit, id: string) => kit.state.runs.find((r) => r.id === id) ?? kit.allRuns.get(id)!
export const pass = (kit: Kit, runId: string) =>
  kit.send({ _tag: "RunCompleted", runId, outcome: "succeeded", reason: "" })
/** PR `pr` submitted (entry `e<pr>`, head `h<pr>`, medium priority, ready). */
export const submitted = (pr: number): PlannerEvent => ({
  _tag: "Submitted",
  entryId: `e${pr}`,
  prNumber: pr,
  headSha: `h${pr}`,
  priority: 100,
  noBatch: false,
  ready: true
})
/** PRs `1..count` submitted one at a time, each passing `minutes` after it was submitted (a queue with a history). */
export const passOneByOne = (kit: Kit, count: number, minutes = 30) => {
  for (let pr = 1; pr <= count; pr++) {
    kit.send(submitted(pr))
    kit.now += minutes * 60_000
    pass(kit, runOf(kit, pr))
  }
}
export const fail = (kit: Kit, runId: string) =>
  kit.send({ _tag: "RunCompleted", runId, outcome: "failed", reason: "TEST_RUN_REQUIRED_STATUS_FAILED" })
