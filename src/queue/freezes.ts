/**
 * Extension (#31): freezes and their calendar. A freeze stops a queue's merges (`merge`, the default: testing goes
 * on, passed runs wait at the head) or everything new (`all`) for a while: once, from `startsAt` to `endsAt`, or
 * again and again, from each time a cron expression names in a time zone, for `durationMinutes`. The cron and time
 * zone arithmetic is cron-parser's (a maintained library, DST included); this module only combines the windows.
 * Pure: the runner and the views give it the freezes and the time.
 */
import { CronExpressionParser } from "cron-parser"
import type { FreezeInForce } from "./planner/index.ts"

export type FreezeMode = "merge" | "all"

/** A freeze as it is stored (a queue's, or every queue's of its repository when `queueId` is null). */
export interface FreezeRule {
  readonly id: string
  readonly queueId: string | null
  readonly reason: string
  readonly mode: FreezeMode
  /** one-off: from (epoch ms) */
  readonly startsAt: number | null
  /** one-off: until (epoch ms), null = until deleted */
  readonly endsAt: number | null
  /** recurring: a 5-field cron expression, its time zone (IANA) and how long each window lasts */
  readonly cron: string | null
  readonly timeZone: string | null
  readonly durationMinutes: number | null
}

/** Windows of a recurring rule looked at, at most, to chain overlapping ones (a duration longer than the period). */
const MAX_CHAIN = 64

/** Whether a time zone is one `Intl` knows (IANA names). */
export const validTimeZone = (tz: string): boolean => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz })
    return true
  } catch {
    return false
  }
}

/** Why a cron expression (and time zone) is refused, or null when cron-parser reads it. */
export const cronProblem = (cron: string, tz: string): string | null => {
  if (!validTimeZone(tz)) return `unknown time zone ${tz}`
  if (cron.trim().split(/\s+/).length !== 5) return "a cron expression has 5 fields: minute hour day month weekday"
  try {
    CronExpressionParser.parse(cron, { tz, currentDate: new Date(0) }).next()
    return null
  } catch (e) {
    return e instanceof Error ? e.message : String(e)
  }
}

const occurrence = (rule: FreezeRule, at: number, dir: "prev" | "next"): number | null => {
  try {
    // prev() is strictly before its current date: a window that starts at `at` is found from `at + 1 s`
    const it = CronExpressionParser.parse(rule.cron!, {
      tz: rule.timeZone ?? "UTC",
      currentDate: new Date(dir === "prev" ? at + 1000 : at)
    })
    return (dir === "prev" ? it.prev() : it.next()).getTime()
  } catch {
    return null
  }
}

/** The window of `rule` that holds `now` ([start, end)), or null; recurring windows that overlap are one. */
export const windowAt = (rule: FreezeRule, now: number): { readonly start: number; readonly end: number } | null => {
  if (rule.cron === null) {
    const start = rule.startsAt ?? Number.NEGATIVE_INFINITY
    const end = rule.endsAt ?? Number.POSITIVE_INFINITY
    return start <= now && now < end ? { start, end } : null
  }
  const d = (rule.durationMinutes ?? 0) * 60_000
  const start = occurrence(rule, now, "prev")
  if (start === null || start > now || now >= start + d) return null
  let end = start + d
  for (let i = 0; i < MAX_CHAIN; i++) {
    const next = occurrence(rule, end - 1, "next")
    if (next === null || next >= end) break
    end = next + d
  }
  return { start, end }
}

/** When `rule` next starts after `now` (null: never). */
export const nextStart = (rule: FreezeRule, now: number): number | null => {
  if (rule.cron === null) return rule.startsAt !== null && rule.startsAt > now ? rule.startsAt : null
  return occurrence(rule, now, "next")
}

/** What the freezes say at `now`: the freeze in force (combined), and when that may change next. */
export interface FreezeState {
  readonly inForce: FreezeInForce | null
  /** the next start or end of one of the rules (the runner wakes then), null when none */
  readonly nextChange: number | null
}

const active = (rules: ReadonlyArray<FreezeRule>, at: number) =>
  rules.flatMap((rule) => {
    const w = windowAt(rule, at)
    return w === null ? [] : [{ rule, end: w.end }]
  })

/** The combined freeze of `rules` at `now`: `all` when one is, ending when none holds any more. */
export const freezeAt = (rules: ReadonlyArray<FreezeRule>, now: number): FreezeState => {
  const holding = active(rules, now)
  let nextChange: number | null = null
  const soon = (t: number | null) => {
    if (t !== null && Number.isFinite(t) && t > now && (nextChange === null || t < nextChange)) nextChange = t
  }
  for (const rule of rules) {
    const w = holding.find((h) => h.rule === rule)
    soon(w !== undefined ? w.end : nextStart(rule, now))
  }
  if (holding.length === 0) return { inForce: null, nextChange }
  // the freeze lasts while any rule holds: follow the windows that start before the last one ends
  let until = Math.max(...holding.map((h) => h.end))
  for (let i = 0; i < MAX_CHAIN && Number.isFinite(until); i++) {
    const later = active(rules, until)
    if (later.length === 0) break
    until = Math.max(...later.map((h) => h.end))
  }
  const lead = holding.find((h) => h.rule.mode === "all") ?? holding.reduce((a, b) => (b.end > a.end ? b : a))
  return {
    inForce: {
      mode: holding.some((h) => h.rule.mode === "all") ? "all" : "merge",
      until: Number.isFinite(until) ? until : null,
      source: lead.rule.id,
      reason: lead.rule.reason
    },
    nextChange
  }
}

/** Two freezes in force are the same for the planner. */
export const sameFreeze = (a: FreezeInForce | null | undefined, b: FreezeInForce | null | undefined): boolean =>
  (a ?? null) === null
    ? (b ?? null) === null
    : (b ?? null) !== null &&
      a!.mode === b!.mode &&
      a!.until === b!.until &&
      a!.source === b!.source &&
      a!.reason === b!.reason

/** A round's change of the freeze in force (its events: queue.frozen, queue.unfrozen). */
export interface FreezeChange {
  readonly previous: FreezeInForce | null
  readonly next: FreezeInForce | null
  readonly at: number
}

/** getQueue's `freeze` field (#31). */
export const freezeView = (f: FreezeInForce | null) =>
  f === null
    ? null
    : {
        source: f.source === "schedule" ? ("schedule" as const) : ("freeze" as const),
        id: f.source === "schedule" ? null : f.source,
        reason: f.reason,
        mode: f.mode,
        endsAt: f.until === null ? null : new Date(f.until).toISOString()
      }

/** An entry in `state` waits for the freeze `f` (#31): passed in a `merge` freeze; not merged in an `all` one. */
export const waitsForFreeze = (f: FreezeInForce | null, state: string): boolean =>
  f !== null && (state === "tests_passed" || (f.mode === "all" && state === "pending"))
