import { Effect } from "effect"
import type { Entry, Lane, PlannerEvent } from "../planner/index.ts"
import { hashTargets, sharesTarget } from "../targetSets.ts"
import type { RunnerCtx } from "./context.ts"

const isTerminalState = (e: Entry) => e.state === "merged" || e.state === "failed" || e.state === "cancelled"

/**
 * Lanes (parallel mode): reduces the targets stored for a PR's head to its lane, the active entries that share a
 * target with it. The hashed lists of the active entries are kept between calls (ctx.targetHashes).
 */
export const laneEvent = (ctx: RunnerCtx, prNumber: number, sha: string) =>
  Effect.gen(function* () {
    const { state, targetHashes } = ctx
    const { readTargets } = ctx.store
    const repoId = ctx.queue.repo.id
    const self = state.entries.find((e) => e.prNumber === prNumber && e.headSha === sha && !isTerminalState(e))
    if (self === undefined) return []
    const targets = yield* readTargets(repoId, prNumber, sha)
    if (targets === null) return []
    const event = (lane: Lane): ReadonlyArray<PlannerEvent> => [{ _tag: "ImpactedTargetsSet", prNumber, sha, lane }]
    if (targets === "ALL") return event("ALL")
    if (targets.length === 0) return event("NONE")
    const mine = hashTargets(targets)
    const live = new Map<string, Float64Array>([[`${prNumber}@${sha}`, mine]])
    const overlaps: Array<string> = []
    for (const e of state.entries) {
      if (e === self || isTerminalState(e) || e.lane === null || typeof e.lane === "string") continue
      const key = `${e.prNumber}@${e.headSha}`
      let theirs = targetHashes.get(key)
      if (theirs === undefined) {
        const other = yield* readTargets(repoId, e.prNumber, e.headSha)
        if (other === null || other === "ALL") continue
        theirs = hashTargets(other)
      }
      live.set(key, theirs)
      if (sharesTarget(mine, theirs)) overlaps.push(e.id)
    }
    // keep only the lists of entries still active
    targetHashes.clear()
    for (const [key, hashes] of live) targetHashes.set(key, hashes)
    return event({ overlaps })
  })
