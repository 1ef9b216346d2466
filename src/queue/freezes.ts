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

// ---------------------------------------------------------------- merge schedules (#31)

/** A queue's merge schedule: it merges only within these weekly hours, in `timeZone`; outside, a `merge` freeze. */
export interface MergeSchedule {
  readonly timeZone: string
  readonly windows: ReadonlyArray<{
    /** weekdays, 0 (Sunday) to 6 */
    readonly days: ReadonlyArray<number>
    /** "HH:MM", `from` before `to`, the same day */
    readonly from: string
    readonly to: string
  }>
}

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/

/** Why a schedule is refused, or null. */
export const scheduleProblem = (s: MergeSchedule): string | null => {
  if (!validTimeZone(s.timeZone)) return `unknown time zone ${s.timeZone}`
  if (s.windows.length === 0) return "a merge schedule has at least one window (none: remove the schedule)"
  for (const w of s.windows) {
    if (!HHMM.test(w.from) || !HHMM.test(w.to)) return "from and to are HH:MM times (00:00 to 23:59)"
    if (w.from >= w.to) return "a window's from is before its to, on the same day"
    if (w.days.length === 0 || w.days.some((d) => !Number.isInteger(d) || d < 0 || d > 6))
      return "days are weekdays from 0 (Sunday) to 6 (Saturday)"
  }
  return null
}

const cronAt = (hhmm: string, days: ReadonlyArray<number>) => {
  const [h, m] = hhmm.split(":")
  return `${Number(m)} ${Number(h)} * * ${[...new Set(days)].sort().join(",")}`
}

const edge = (cron: string, tz: string, at: number, dir: "prev" | "next"): number | null => {
  try {
    const it = CronExpressionParser.parse(cron, { tz, currentDate: new Date(dir === "prev" ? at + 1000 : at) })
    return (dir === "prev" ? it.prev() : it.next()).getTime()
  } catch {
    return null
  }
}

/** Whether the schedule is open at `now`, and its next opening and next change. */
export const scheduleAt = (
  s: MergeSchedule,
  now: number
): { readonly open: boolean; readonly nextOpen: number | null; readonly nextChange: number | null } => {
  let open = false
  let nextOpen: number | null = null
  let nextChange: number | null = null
  const min = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b))
  for (const w of s.windows) {
    const opens = cronAt(w.from, w.days)
    const closes = cronAt(w.to, w.days)
    const lastOpen = edge(opens, s.timeZone, now, "prev")
    const lastClose = edge(closes, s.timeZone, now, "prev")
    if (lastOpen !== null && lastOpen <= now && (lastClose === null || lastClose < lastOpen)) open = true
    const nOpen = edge(opens, s.timeZone, now, "next")
    nextOpen = min(nextOpen, nOpen)
    nextChange = min(nextChange, min(nOpen, edge(closes, s.timeZone, now, "next")))
  }
  return { open, nextOpen, nextChange }
}

/** The schedule's closed hours as a rule that holds from `now` to its next opening. */
const closedRule = (s: MergeSchedule | null, at: number): { rule: FreezeRule; end: number } | null => {
  if (s === null) return null
  const state = scheduleAt(s, at)
  if (state.open) return null
  return {
    rule: {
      id: "schedule",
      queueId: null,
      reason: "outside the merge schedule",
      mode: "merge",
      startsAt: null,
      endsAt: null,
      cron: null,
      timeZone: s.timeZone,
      durationMinutes: null
    },
    end: state.nextOpen ?? Number.POSITIVE_INFINITY
  }
}

const active = (rules: ReadonlyArray<FreezeRule>, at: number, schedule: MergeSchedule | null = null) => {
  const out = rules.flatMap((rule) => {
    const w = windowAt(rule, at)
    return w === null ? [] : [{ rule, end: w.end }]
  })
  const closed = closedRule(schedule, at)
  if (closed !== null) out.push(closed)
  return out
}

/**
 * The combined freeze of `rules` (and the closed hours of `schedule`) at `now`: `all` when one is, ending when none
 * holds any more.
 */
export const freezeAt = (
  rules: ReadonlyArray<FreezeRule>,
  now: number,
  schedule: MergeSchedule | null = null
): FreezeState => {
  const holding = active(rules, now, schedule)
  let nextChange: number | null = null
  const soon = (t: number | null) => {
    if (t !== null && Number.isFinite(t) && t > now && (nextChange === null || t < nextChange)) nextChange = t
  }
  for (const rule of rules) {
    const w = holding.find((h) => h.rule === rule)
    soon(w !== undefined ? w.end : nextStart(rule, now))
  }
  if (schedule !== null) soon(scheduleAt(schedule, now).nextChange)
  if (holding.length === 0) return { inForce: null, nextChange }
  // the freeze lasts while any rule holds: follow the windows that start before the last one ends
  let until = Math.max(...holding.map((h) => h.end))
  for (let i = 0; i < MAX_CHAIN && Number.isFinite(until); i++) {
    const later = active(rules, until, schedule)
    if (later.length === 0) break
    until = Math.max(...later.map((h) => h.end))
  }
  // a freeze is named before the schedule's closed hours
  const freezes = holding.filter((h) => h.rule.id !== "schedule")
  const lead =
    holding.find((h) => h.rule.mode === "all") ??
    (freezes.length > 0 ? freezes : holding).reduce((a, b) => (b.end > a.end ? b : a))
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
