import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect } from "effect"
import type { NewEvent } from "../kernel/EventLog.ts"
import type { Repository } from "../tenancy/Tenancy.ts"
import type { TestStatusValue } from "./classify.ts"
import type { QuarantineOverride } from "./FlakyRepo.ts"
import type { TestCase } from "./schemas.ts"

/**
 * The flaky feature's outgoing events, as a port: `test_case.quarantining_setting_changed` (contract.md §8) when an
 * override is set, imported or lapses. The composition root provides an implementation that appends to the event
 * log; without one (tools, tests, or before the event log is wired) nothing is sent. Called inside the transaction
 * that made the change.
 */

export interface QuarantineSettingChanged {
  readonly orgId: string
  readonly repo: Repository
  /** who changed it: the organization of the token that set it, or Greenline (an import, an expiry) */
  readonly actor: string
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

/**
 * The flaky-test service's domain events (contract.md §8, Trunk's webhook payloads): a test case's status changed
 * (an upload reclassified it), and its quarantining setting changed (setQuarantineOverride). Appended to the event
 * log in the transaction of the change.
 */

const SETTING: Record<QuarantineOverride, string> = {
  always_quarantine: "ALWAYS_QUARANTINE",
  never_quarantine: "NEVER_QUARANTINE",
  unspecified: "UNSPECIFIED"
}

export const statusChanged = (
  orgId: string,
  repoId: string,
  testCase: TestCase,
  previous: TestStatusValue
): NewEvent => ({
  orgId,
  type: "test_case.status_changed",
  at: Date.parse(testCase.status.timestamp),
  repoId,
  branch: null,
  orderingKey: `test:${testCase.id}`,
  data: {
    test_case: testCase,
    status_change: {
      previous_status: previous,
      current_status: {
        value: testCase.status.value,
        reason: testCase.status.reason,
        timestamp: testCase.status.timestamp
      }
    }
  }
})

export const quarantineSettingChanged = (
  orgId: string,
  repoId: string,
  testCase: TestCase,
  change: {
    readonly actor: { readonly full_name: string; readonly email: string | null }
    readonly at: number
    readonly previous: QuarantineOverride
    readonly updated: QuarantineOverride
    /** why: the override's reason as given (null when none was) */
    readonly reason: string | null
  }
): NewEvent => ({
  orgId,
  type: "test_case.quarantining_setting_changed",
  at: change.at,
  repoId,
  branch: null,
  orderingKey: `test:${testCase.id}`,
  data: {
    test_case: testCase,
    quarantine_setting_changed: {
      actor: change.actor,
      reason: change.reason,
      timestamp: new Date(change.at).toISOString(),
      previous_quarantining_setting: SETTING[change.previous],
      updated_quarantining_setting: SETTING[change.updated]
    }
  }
})
