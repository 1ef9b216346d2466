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

const preview = {
  interruptedRuns: [{ testRunId: "3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b", prNumbers: [43], runningSeconds: 840 }],
  ciSecondsLost: 840,
  retestedPrs: [43],
  estimates: [
    { prNumber: 42, estimatedMergeAt: "2026-03-02T10:30:00.000Z", estimatedMergeAtAfter: null },
    { prNumber: 43, estimatedMergeAt: "2026-03-02T10:45:00.000Z", estimatedMergeAtAfter: "2026-03-02T11:05:00.000Z" }
  ]
}

/** Extension (#31): freezes, merge schedules and impact previews. */
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
  },
  previewCancelPullRequest: {
    summary: "Preview a cancel",
    description:
      "What cancelPullRequest would do now, computed by the planner on a copy of the queue (read-only): the runs it interrupts with their PRs and how long they have run (`ciSecondsLost`, their sum), the PRs tested again, and every PR's estimated merge time before and after. 409 PR_NOT_ACTIVE when the PR is not in the queue.",
    request: { repo, targetBranch: "main", pr: { number: 42 } },
    response: preview
  },
  previewSubmitPullRequest: {
    summary: "Preview a change of priority",
    description:
      "What submitting a queued pull request again with `priority` would do (`urgent` interrupts the runs it goes ahead of). As previewCancelPullRequest.",
    request: { repo, targetBranch: "main", pr: { number: 42 }, priority: "urgent" },
    response: preview
  },
  previewRestartTests: {
    summary: "Preview a restart",
    description: "What restartTestsOnPullRequest would do now. As previewCancelPullRequest.",
    request: { repo, targetBranch: "main", pr: { number: 42 } },
    response: preview
  }
} satisfies Partial<Record<OpName, import("./examples.ts").OpDoc>>
