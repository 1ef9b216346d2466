import { Schema } from "effect"
import { MAX_LEN, MergeScheduleSchema, opt, RepoRef, Text } from "./schemas.ts"

/** Extension (#31): request and answer schemas of the freeze operations (docs/api-extensions.md). */

const inRange = (ms: number) => ms >= Date.parse("1970-01-01T00:00:00Z") && ms <= Date.parse("9999-12-31T23:59:59Z")
const DateTime = Schema.String.pipe(
  Schema.maxLength(64, { message: () => "must be an ISO 8601 date-time" }),
  Schema.filter((s) => (!Number.isNaN(Date.parse(s)) && inRange(Date.parse(s))) || "must be an ISO 8601 date-time")
).annotations({ description: "ISO 8601 date-time" })

const Mode = Schema.Literal("merge", "all").annotations({
  description:
    "`merge` (the default): the queue keeps testing and merges nothing, passed runs wait at the head; `all`: nothing new starts either"
})

/** A week of minutes at most: a recurring freeze's window. */
const Duration = Schema.Int.pipe(
  Schema.between(1, 7 * 24 * 60, { message: () => "must be an integer from 1 to 10080 (a week of minutes)" })
)

const fields = {
  reason: Text(MAX_LEN.description, 1),
  mode: opt(Mode),
  startsAt: opt(Schema.NullOr(DateTime)),
  endsAt: opt(Schema.NullOr(DateTime)),
  forMinutes: opt(
    Schema.Int.pipe(Schema.between(1, 366 * 24 * 60, { message: () => "must be an integer from 1 to 527040" }))
  ).annotations({ description: "freeze now (or from `startsAt`) for this many minutes: the form of `endsAt`" }),
  cron: opt(Schema.NullOr(Text(100, 1))).annotations({
    description: "recurring: a 5-field cron expression (minute hour day month weekday), in `timeZone`"
  }),
  timeZone: opt(Schema.NullOr(Text(64, 1))).annotations({ description: "IANA time zone of `cron` (default UTC)" }),
  durationMinutes: opt(Schema.NullOr(Duration)).annotations({ description: "recurring: how long each window lasts" })
}

export const CreateFreezeRequest = Schema.Struct({
  repo: RepoRef,
  targetBranch: opt(Schema.NullOr(Text(MAX_LEN.branch, 1))).annotations({
    description: "the queue frozen; absent or null: every queue of the repository"
  }),
  ...fields
}).annotations({ identifier: "CreateFreezeRequest" })

export const UpdateFreezeRequest = Schema.Struct({
  repo: RepoRef,
  id: Text(64, 1),
  ...fields,
  reason: opt(Text(MAX_LEN.description, 1))
}).annotations({ identifier: "UpdateFreezeRequest" })

export const FreezeKeyRequest = Schema.Struct({ repo: RepoRef, id: Text(64, 1) }).annotations({
  identifier: "FreezeKey"
})

export const ListFreezesRequest = Schema.Struct({
  repo: RepoRef,
  targetBranch: opt(Text(MAX_LEN.branch, 1)).annotations({
    description: "only this queue's freezes and the repository's (absent: every freeze of the repository)"
  })
}).annotations({ identifier: "ListFreezesRequest" })

export const Freeze = Schema.Struct({
  id: Schema.String,
  targetBranch: Schema.NullOr(Schema.String),
  reason: Schema.String,
  mode: Mode,
  startsAt: Schema.NullOr(Schema.String),
  endsAt: Schema.NullOr(Schema.String),
  cron: Schema.NullOr(Schema.String),
  timeZone: Schema.NullOr(Schema.String),
  durationMinutes: Schema.NullOr(Schema.Number),
  createdBy: Schema.String,
  createdAt: Schema.String,
  active: Schema.Boolean,
  activeUntil: Schema.NullOr(Schema.String),
  nextStartAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Freeze" })

export const ListFreezesResponse = Schema.Struct({ freezes: Schema.Array(Freeze) }).annotations({
  identifier: "ListFreezesResponse"
})

export const SetMergeScheduleRequest = Schema.Struct({
  repo: RepoRef,
  targetBranch: Text(MAX_LEN.branch, 1),
  schedule: Schema.NullOr(MergeScheduleSchema).annotations({ description: "null removes the schedule" })
}).annotations({ identifier: "SetMergeScheduleRequest" })

export const MergeScheduleAnswer = Schema.Struct({
  schedule: Schema.NullOr(MergeScheduleSchema),
  open: Schema.Boolean,
  nextChangeAt: Schema.NullOr(Schema.String)
}).annotations({ identifier: "MergeScheduleState" })
