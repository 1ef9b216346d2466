import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import type { ImpactedTargets, QueueState } from "../../src/queue/planner/index.ts"
import { upgradeState } from "../../src/queue/store.ts"
import { hash53, hashTargets, sharesTarget } from "../../src/queue/targetSets.ts"
import { makeKit, submitted } from "../support/plannerKit.ts"

describe("target sets", () => {
  test("two lists share a hash exactly when they share a name (property)", () => {
    const name = fc.string({ minLength: 0, maxLength: 12 })
    fc.assert(
      fc.property(fc.array(name, { maxLength: 40 }), fc.array(name, { maxLength: 40 }), (a, b) => {
        const shared = a.some((x) => b.includes(x))
        expect(sharesTarget(hashTargets(a), hashTargets(b))).toBe(shared)
      }),
      { numRuns: 500 }
    )
  })

  test("hashes are 53-bit integers, stable, and spread over similar names", () => {
    expect(hash53("//a:b")).toBe(hash53("//a:b"))
    const seen = new Set<number>()
    for (let i = 0; i < 200_000; i++) {
      const h = hash53(`//services/pkg/module${i % 97}:target_${i}`)
      expect(Number.isSafeInteger(h) && h >= 0).toBe(true)
      seen.add(h)
    }
    expect(seen.size).toBe(200_000)
  })

  test("sorted hashes of a large list find the one shared name at either end", () => {
    const a = Array.from({ length: 100_000 }, (_, i) => `a${i}`)
    const b = Array.from({ length: 100_000 }, (_, i) => `b${i}`)
    const ha = hashTargets(a)
    expect(sharesTarget(ha, hashTargets(b))).toBe(false)
    expect(sharesTarget(ha, hashTargets([...b, "a99999"]))).toBe(true)
    expect(sharesTarget(ha, hashTargets(["a0", ...b]))).toBe(true)
  })
})

describe("queue states stored before lanes", () => {
  test("target lists are reduced to lanes when the state is loaded", () => {
    const kit = makeKit({ mode: "parallel", concurrency: 1 })
    for (const pr of [1, 2, 3, 4]) {
      kit.send(submitted(pr))
    }
    const lists: Record<string, ImpactedTargets> = { e1: ["x", "y"], e2: ["y"], e3: "ALL", e4: [] }
    const old = {
      ...kit.state,
      entries: kit.state.entries.map(({ lane: _lane, ...e }) => ({ ...e, impactedTargets: lists[e.id] ?? null }))
    } as unknown as QueueState
    const lanes = Object.fromEntries(upgradeState(old).entries.map((e) => [e.id, e.lane]))
    expect(lanes).toEqual({ e1: { overlaps: ["e2"] }, e2: { overlaps: ["e1"] }, e3: "ALL", e4: "NONE" })
    expect(upgradeState(kit.state)).toBe(kit.state)
  })
})
