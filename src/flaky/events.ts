import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect } from "effect"
import type { QuarantineOverride } from "./FlakyRepo.ts"

/**
 * The flaky feature's outgoing events, as a port: `test_case.quarantining_setting_changed` (contract.md §8) when an
 * override is set, imported or lapses. The composition root provides an implementation that appends to the event
 * log; without one (tools, tests, or before the event log is wired) nothing is sent. Called inside the transaction
 * that made the change.
 */

export interface QuarantineSettingChanged {
  readonly orgId: string
  readonly repoId: string
  readonly testCaseId: string
  readonly name: string
  readonly previous: QuarantineOverride
  readonly current: QuarantineOverride
  /** what changed it: a user's `set-quarantine-override`, an import, or its expiry */
  readonly cause: "set" | "imported" | "expired"
  readonly owner: string | null
  readonly reason: string | null
  readonly ticketUrl: string | null
  readonly expiresAt: Date | null
  readonly at: Date
}

export interface FlakyEventsShape {
  readonly quarantiningSettingChanged: (
    changes: ReadonlyArray<QuarantineSettingChanged>
  ) => Effect.Effect<void, SqlError>
}

export class FlakyEvents extends Context.Tag("greenline/FlakyEvents")<FlakyEvents, FlakyEventsShape>() {}

/** Sends nothing. */
export const noFlakyEvents: FlakyEventsShape = { quarantiningSettingChanged: () => Effect.void }
