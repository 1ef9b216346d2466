/**
 * Freezes (#31): the calendar of freezes (one-off and recurring, across a DST change) and what the planner does
 * under one: a `merge` freeze keeps testing and merges nothing, an `all` freeze starts nothing, `ignoreFreeze`.
 */
import { describe, expect, test } from "bun:test"
import { estimateWithFreeze } from "../../src/queue/freezeEstimate.ts"
import {
  cronProblem,
  type FreezeRule,
  freezeAt,
  type MergeSchedule,
  scheduleAt,
  scheduleProblem,
  windowAt
} from "../../src/queue/freezes.ts"
import type { FreezeInForce } from "../../src/queue/planner/index.ts"
import { entryOf, type Kit, makeKit, pass, passOneByOne, runOf, stateOf, submitted } from "../support/plannerKit.ts"

const at = (iso: string) => new Date(iso).getTime()

const rule = (over: Partial<FreezeRule>): FreezeRule => ({
  id: "f1",
  queueId: null,
  reason: "release",
  mode: "merge",
  startsAt: null,
  endsAt: null,
  cron: null,
  timeZone: null,
  durationMinutes: null,
  ...over
})

describe("the freeze calendar", () => {
  test("a one-off freeze holds from its start to its end", () => {
    const f = rule({ startsAt: at("2026-03-02T10:00:00Z"), endsAt: at("2026-03-02T12:00:00Z") })
    expect(freezeAt([f], at("2026-03-02T09:59:59Z"))).toEqual({ inForce: null, nextChange: f.startsAt })
    expect(freezeAt([f], at("2026-03-02T10:00:00Z"))).toEqual({
      inForce: { mode: "merge", until: f.endsAt, source: "f1", reason: "release" },
      nextChange: f.endsAt
    })
    expect(freezeAt([f], at("2026-03-02T12:00:00Z"))).toEqual({ inForce: null, nextChange: null })
  })

  test("every Friday 16:00 Europe/Berlin for 64 h, across the end of summer time", () => {
    const f = rule({ cron: "0 16 * * 5", timeZone: "Europe/Berlin", durationMinutes: 64 * 60 })
    // Friday 23 October 2026, summer time (UTC+2): 16:00 is 14:00 UTC, the freeze ends Monday 08:00 local
    expect(windowAt(f, at("2026-10-23T14:00:00Z"))).toEqual({
      start: at("2026-10-23T14:00:00Z"),
      end: at("2026-10-26T06:00:00Z")
    })
    expect(windowAt(f, at("2026-10-23T13:59:59Z"))).toBeNull()
    // the clocks go back on Sunday 25 October: 64 h after Friday 16:00 CEST is Monday 07:00 CET
    const sunday = freezeAt([f], at("2026-10-25T12:00:00Z"))
    expect(sunday.inForce?.until).toBe(at("2026-10-26T06:00:00Z"))
    expect(freezeAt([f], at("2026-10-26T06:00:00Z")).inForce).toBeNull()
    // the next Friday is in winter time (UTC+1): 16:00 is 15:00 UTC
    expect(freezeAt([f], at("2026-10-26T06:00:00Z")).nextChange).toBe(at("2026-10-30T15:00:00Z"))
    expect(freezeAt([f], at("2026-10-30T14:59:00Z")).inForce).toBeNull()
    expect(freezeAt([f], at("2026-10-30T15:00:00Z")).inForce?.until).toBe(at("2026-11-02T07:00:00Z"))
  })

  test("overlapping freezes combine: all wins, the freeze ends when the last one does", () => {
    const a = rule({ id: "a", startsAt: at("2026-03-02T10:00:00Z"), endsAt: at("2026-03-02T12:00:00Z") })
    const b = rule({
      id: "b",
      mode: "all",
      startsAt: at("2026-03-02T11:00:00Z"),
      endsAt: at("2026-03-02T13:00:00Z")
    })
    const early = freezeAt([a, b], at("2026-03-02T10:30:00Z"))
    expect(early.inForce).toEqual({ mode: "merge", until: at("2026-03-02T13:00:00Z"), source: "a", reason: "release" })
    expect(early.nextChange).toBe(at("2026-03-02T11:00:00Z"))
    expect(freezeAt([a, b], at("2026-03-02T11:30:00Z")).inForce?.mode).toBe("all")
  })

  test("cron expressions and time zones are checked", () => {
    expect(cronProblem("0 16 * * 5", "Europe/Berlin")).toBeNull()
    expect(cronProblem("0 16 * * 5", "Mars/Olympus")).toContain("time zone")
    expect(cronProblem("0 16 * *", "UTC")).not.toBeNull()
    expect(cronProblem("0 99 * * 5", "UTC")).not.toBeNull()
  })
})

const freeze = (mode: "merge" | "all"): FreezeInForce => ({ mode, until: null, source: "f1", reason: "release" })
const setFreeze = (kit: Kit, f: FreezeInForce | null) => kit.send({ _tag: "FreezeChanged", freeze: f })
const merges = (kit: Kit) => kit.commands.filter((c) => c._tag === "Merge").length

describe("the planner under a freeze", () => {
  for (const mode of ["single", "parallel"] as const) {
    test(`${mode}: a merge freeze keeps testing, merges nothing, then merges in order without retesting`, () => {
      const kit = makeKit({ mode, concurrency: 3 })
      setFreeze(kit, freeze("merge"))
      kit.send(submitted(1))
      kit.send(submitted(2))
      if (mode === "parallel") {
        kit.send({ _tag: "ImpactedTargetsSet", prNumber: 1, sha: "h1", targets: ["a"] })
        kit.send({ _tag: "ImpactedTargetsSet", prNumber: 2, sha: "h2", targets: ["a"] })
      }
      const runs = [runOf(kit, 1), runOf(kit, 2)]
      for (const r of runs) pass(kit, r)
      expect(stateOf(kit, 1)).toBe("tests_passed")
      expect(stateOf(kit, 2)).toBe("tests_passed")
      expect(merges(kit)).toBe(0)
      const built = kit.commands.filter((c) => c._tag === "BuildRun").length
      setFreeze(kit, null)
      expect(stateOf(kit, 1)).toBe("merged")
      expect(stateOf(kit, 2)).toBe("merged")
      expect(kit.commands.filter((c) => c._tag === "BuildRun").length).toBe(built)
      expect(kit.state.freeze).toBeUndefined()
    })
  }

  test("an all freeze starts nothing; runs in progress finish and wait", () => {
    const kit = makeKit({})
    kit.send(submitted(1))
    const run = runOf(kit, 1)
    setFreeze(kit, freeze("all"))
    kit.send(submitted(2))
    expect(entryOf(kit, 2)?.runId).toBeNull()
    pass(kit, run)
    expect(stateOf(kit, 1)).toBe("tests_passed")
    expect(merges(kit)).toBe(0)
    expect(kit.state.freeze?.mode).toBe("all")
    setFreeze(kit, null)
    expect(stateOf(kit, 1)).toBe("merged")
    expect(entryOf(kit, 2)?.runId).not.toBeNull()
  })

  test("ignoreFreeze: an urgent PR that ignores the freeze merges, the others wait", () => {
    const kit = makeKit({})
    setFreeze(kit, freeze("merge"))
    kit.send(submitted(1))
    pass(kit, runOf(kit, 1))
    kit.send({
      _tag: "Submitted",
      entryId: "e9",
      prNumber: 9,
      headSha: "h9",
      priority: 0,
      noBatch: false,
      ready: true,
      ignoreFreeze: true
    })
    expect(entryOf(kit, 9)?.ignoreFreeze).toBe(true)
    pass(kit, runOf(kit, 9))
    expect(stateOf(kit, 9)).toBe("merged")
    expect(stateOf(kit, 1)).not.toBe("merged")
    setFreeze(kit, null)
    pass(kit, runOf(kit, 1))
    expect(stateOf(kit, 1)).toBe("merged")
  })
})

describe("estimates under a freeze", () => {
  test("a PR that passes during a merge freeze is estimated to merge when it ends; in an all freeze it starts then", () => {
    const kit = makeKit({ concurrency: 3 })
    passOneByOne(kit, 4)
    const until = kit.now + 10 * 3_600_000
    kit.send({ _tag: "FreezeChanged", freeze: { mode: "merge", until, source: "f1", reason: "weekend" } })
    kit.send(submitted(5))
    kit.send(submitted(6))
    const open = estimateWithFreeze({ ...kit.state, freeze: null }, kit.now)
    const held = estimateWithFreeze(kit.state, kit.now)
    for (const id of ["e5", "e6"]) {
      expect(open.byEntry.get(id)!.mergeAt!).toBeLessThan(until)
      expect(held.byEntry.get(id)!.mergeAt).toBe(until)
      expect(held.byEntry.get(id)!.mergeRange?.earliest ?? until).toBeGreaterThanOrEqual(until)
      expect(held.byEntry.get(id)!.testingStartAt).toBe(open.byEntry.get(id)!.testingStartAt)
    }
    const all = estimateWithFreeze({ ...kit.state, freeze: { ...kit.state.freeze!, mode: "all" } }, kit.now)
    expect(all.byEntry.get("e6")!.mergeAt).toBe(until)
    const forever = estimateWithFreeze({ ...kit.state, freeze: { ...kit.state.freeze!, until: null } }, kit.now)
    expect(forever.byEntry.get("e5")!.mergeAt).toBeNull()
  })
})

describe("merge schedules", () => {
  const office: MergeSchedule = {
    timeZone: "America/New_York",
    windows: [{ days: [1, 2, 3, 4, 5], from: "09:00", to: "18:00" }]
  }
  test("Mon-Fri 09:00-18:00 New York: closed from Friday 18:00 EST to Monday 09:00 EDT (summer time begins)", () => {
    // Friday 6 March 2026 17:50 EST (UTC-5) is open, 18:00 closes
    expect(scheduleAt(office, at("2026-03-06T22:50:00Z"))).toMatchObject({
      open: true,
      nextChange: at("2026-03-06T23:00:00Z")
    })
    const closed = freezeAt([], at("2026-03-06T23:00:00Z"), office)
    // clocks go forward on Sunday 8 March: Monday 09:00 EDT is 13:00 UTC
    expect(closed.inForce).toEqual({
      mode: "merge",
      until: at("2026-03-09T13:00:00Z"),
      source: "schedule",
      reason: "outside the merge schedule"
    })
    expect(closed.nextChange).toBe(at("2026-03-09T13:00:00Z"))
    expect(freezeAt([], at("2026-03-09T13:00:00Z"), office).inForce).toBeNull()
  })
  test("a freeze inside closed hours is named first, and the freeze lasts until the schedule opens", () => {
    const f = rule({ startsAt: at("2026-03-06T20:00:00Z"), endsAt: at("2026-03-07T12:00:00Z") })
    const both = freezeAt([f], at("2026-03-06T23:30:00Z"), office)
    expect(both.inForce).toMatchObject({ source: "f1", until: at("2026-03-09T13:00:00Z") })
  })
  test("schedules are checked", () => {
    expect(scheduleProblem(office)).toBeNull()
    expect(scheduleProblem({ ...office, timeZone: "Nowhere/None" })).toContain("time zone")
    expect(scheduleProblem({ ...office, windows: [{ days: [1], from: "18:00", to: "09:00" }] })).not.toBeNull()
    expect(scheduleProblem({ ...office, windows: [{ days: [7], from: "09:00", to: "18:00" }] })).not.toBeNull()
    expect(scheduleProblem({ ...office, windows: [{ days: [1], from: "9:00", to: "18:00" }] })).not.toBeNull()
    expect(scheduleProblem({ ...office, windows: [] })).not.toBeNull()
  })
})
