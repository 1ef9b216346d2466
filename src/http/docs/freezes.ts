import type { OpName } from "../Api.ts"
import { repo } from "./examples.ts"

const freeze = {
  id: "9b0e7c2a-4f1d-4c8e-9a57-2f1e0d3c4b5a",
  targetBranch: "main",
  reason: "release 4.2",
  mode: "merge",
  startsAt: "2026-03-02T10:00:00.000Z",
  endsAt: "2026-03-02T14:00:00.000Z",
  cron: null,
  timeZone: null,
  durationMinutes: null,
  createdBy: "ci-token",
  createdAt: "2026-03-02T10:00:00.000Z",
  active: true,
  activeUntil: "2026-03-02T14:00:00.000Z",
  nextStartAt: null
}

/** Extension (#31): freezes. */
export const FREEZE_DOCS = {
  createFreeze: {
    summary: "Freeze a queue (or every queue of a repository)",
    description:
      "A freeze once (`startsAt`, default now, to `endsAt` or for `forMinutes`; no end: until deleted) or recurring (`cron`, a 5-field expression in `timeZone`, for `durationMinutes` each time). `mode`: `merge` (default: testing goes on, nothing merges; passed runs wait at the head and merge in order when it ends) or `all` (nothing new starts). Without `targetBranch` it freezes every queue of the repository. Role maintain.",
    request: { repo, targetBranch: "main", reason: "release 4.2", forMinutes: 240 },
    response: freeze
  },
  listFreezes: {
    summary: "List freezes",
    description:
      "The repository's freezes (with `targetBranch`: that queue's and the repository's), each with whether it holds now (`active`, `activeUntil`) and when it next starts.",
    request: { repo, targetBranch: "main" },
    response: { freezes: [freeze] }
  },
  updateFreeze: {
    summary: "Change a freeze",
    description:
      "Changes the fields given (`forMinutes`: a new end, counted from its start). 404 NOT_FOUND when there is no such freeze.",
    request: { repo, id: freeze.id, endsAt: "2026-03-02T16:00:00.000Z" },
    response: { ...freeze, endsAt: "2026-03-02T16:00:00.000Z", activeUntil: "2026-03-02T16:00:00.000Z" }
  },
  deleteFreeze: {
    summary: "Delete a freeze",
    description: "Ends it at once: passed runs that waited merge in order. 404 NOT_FOUND when there is no such freeze.",
    request: { repo, id: freeze.id },
    response: {}
  },
  setMergeSchedule: {
    summary: "Set a queue's merge schedule",
    description:
      "The queue merges only within these weekly hours (`days` 0 = Sunday to 6, `from` before `to`, HH:MM in `timeZone`); outside them it behaves as in a `merge` freeze (testing goes on, passed runs merge when it opens). `schedule: null` removes it. Answers whether it is open now and when that changes. Role maintain.",
    request: {
      repo,
      targetBranch: "main",
      schedule: { timeZone: "America/New_York", windows: [{ days: [1, 2, 3, 4, 5], from: "09:00", to: "18:00" }] }
    },
    response: {
      schedule: { timeZone: "America/New_York", windows: [{ days: [1, 2, 3, 4, 5], from: "09:00", to: "18:00" }] },
      open: true,
      nextChangeAt: "2026-03-02T23:00:00.000Z"
    }
  }
} satisfies Partial<Record<OpName, import("./examples.ts").OpDoc>>
