import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import { type EntryState, initialState, step, type Transition } from "../../src/queue/planner/index.ts"
import { EntryStateValue } from "../../src/queue/schemas.ts"
import { entryPatches, iso, stateJson, upgradeState } from "../../src/queue/store.ts"
import { defaultConfig } from "../support/plannerKit.ts"

/** An entry row's columns that transitions write. */
interface Row {
  state: string
  state_changed_at: string
  run_id: string | null
  verified_by_test_run: string | null
  first_tested_at: string | null
  ended_at: string | null
}

const TERMINAL = new Set(["merged", "failed", "cancelled"])

/** What one UPDATE per transition did (the statement entryPatches replaced), applied in order. */
const applyOne = (row: Row, t: Transition): Row => {
  const at = iso(t.at)
  const terminal = TERMINAL.has(t.to)
  return {
    state: t.to,
    state_changed_at: at,
    run_id: t.runId ?? (terminal ? row.run_id : null),
    verified_by_test_run: t.verifiedByTestRun ?? row.verified_by_test_run,
    first_tested_at: t.to === "testing" ? (row.first_tested_at ?? at) : row.first_tested_at,
    ended_at: terminal ? at : null
  }
}

/** The batched UPDATE's SET clause, on one row. */
const applyPatch = (row: Row, p: ReturnType<typeof entryPatches>[number]): Row => ({
  state: p.state,
  state_changed_at: p.at,
  run_id: p.run_id_set ? p.run_id : row.run_id,
  verified_by_test_run: p.verified_by_test_run ?? row.verified_by_test_run,
  first_tested_at: row.first_tested_at ?? p.first_tested_at,
  ended_at: p.ended_at
})

const states: ReadonlyArray<EntryState> = EntryStateValue.literals

const transitionArb = fc.record({
  entryId: fc.constantFrom("a", "b", "c"),
  to: fc.constantFrom(...states),
  at: fc.integer({ min: 1_700_000_000_000, max: 1_700_000_100_000 }),
  runId: fc.option(fc.constantFrom("r1", "r2", "r3"), { nil: null }),
  verifiedByTestRun: fc.option(fc.constantFrom("r1", "r2"), { nil: null })
})

const rowArb = fc.record({
  state: fc.constantFrom(...states),
  state_changed_at: fc.constant(iso(1_600_000_000_000)),
  run_id: fc.option(fc.constant("r0"), { nil: null }),
  verified_by_test_run: fc.option(fc.constant("r0"), { nil: null }),
  first_tested_at: fc.option(fc.constant(iso(1_600_000_000_000)), { nil: null }),
  ended_at: fc.constant(null)
})

describe("entryPatches: a round's transitions folded into one patch per entry", () => {
  test("the patch leaves each row as the transitions applied one by one did", () => {
    fc.assert(
      fc.property(fc.array(transitionArb, { maxLength: 12 }), rowArb, (raw, initial) => {
        const transitions: ReadonlyArray<Transition> = raw.map((t) => ({ ...t, prNumber: 1, from: null, reason: "R" }))
        const patches = entryPatches(transitions)
        expect(new Set(patches.map((p) => p.id)).size).toBe(patches.length)
        for (const id of ["a", "b", "c"]) {
          const sequential = transitions.filter((t) => t.entryId === id).reduce(applyOne, initial)
          const patch = patches.find((p) => p.id === id)
          expect(patch === undefined ? initial : applyPatch(initial, patch)).toEqual(sequential)
        }
      }),
      { numRuns: 500 }
    )
  })
})

describe("stateJson: the runner's state as stored", () => {
  test("entries without their default fields, read back whole (upgradeState), before and after entries change", () => {
    let state = initialState({ ...defaultConfig, state: "paused" }, "base")
    let ids = 0
    const newId = () => `run-${++ids}`
    const roundTrip = () => {
      const text = stateJson(state)
      expect(upgradeState(JSON.parse(text))).toEqual(state)
      return text
    }
    for (let n = 1; n <= 5; n++) {
      state = step(
        state,
        {
          _tag: "Submitted",
          entryId: `e${n}`,
          prNumber: n,
          headSha: `h${n}`,
          priority: 100,
          noBatch: n === 2,
          ready: true
        },
        1_700_000_000_000 + n,
        newId
      ).state
      roundTrip()
    }
    state = step(state, { _tag: "Cancelled", prNumber: 3, reason: "API_REQUESTED" }, 1_700_000_001_000, newId).state
    const text = roundTrip()
    expect(text.length).toBeLessThan(JSON.stringify(state).length * 0.75)
    // a whole state (nothing to put back) is returned as it is
    expect(upgradeState(state)).toBe(state)
  })
})
