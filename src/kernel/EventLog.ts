import type { SqlError } from "@effect/sql/SqlError"
import { Context, type Effect } from "effect"

/**
 * The event log's port: what the features (queue engine and runner, flaky tests) write their domain events to.
 * It imports nothing but `effect`, so a feature depends on this file and never on the log's implementation
 * (`EventLogLive.ts`), the webhook delivery or the live stream. The feature owns its events and their payloads
 * (`queue/events.ts`, `flaky/events.ts`); the log stores them, fans them out to webhook endpoints and streams them.
 */

/** Trunk's v1 webhook event types (contract.md §8), then Greenline's extensions. */
export const PR_ACTIONS = ["submitted", "queued", "testing", "pending_failure", "failed", "merged", "canceled"] as const
export type PrAction = (typeof PR_ACTIONS)[number]

export const EVENT_TYPES = [
  ...PR_ACTIONS.map((a) => `pull_request.${a}` as const),
  ...PR_ACTIONS.map((a) => `pull_request_batch.${a}` as const),
  "test_case.status_changed",
  "test_case.quarantining_setting_changed",
  "queue.updated",
  "queue.state_changed",
  "test_run.started",
  "test_run.completed",
  "queue.created",
  "queue.deleted",
  "webhook_endpoint.disabled",
  "webhook_endpoint.retries_exhausted",
  "queue.frozen",
  "queue.unfrozen"
] as const
export type EventType = (typeof EVENT_TYPES)[number]

/**
 * A queue entry's change of state: the record that carries it is a row of the entry's timeline (what
 * getSubmittedPullRequest shows), with the planner's own state and reason (`tests_passed`, `not_ready`: states Trunk
 * has no event for).
 */
export interface Transition {
  readonly entryId: string
  readonly state: string
  readonly reason: string
}

/** One domain event, as a feature hands it to the log. */
export interface NewEvent {
  readonly orgId: string
  /**
   * The webhook and stream type; null for a record that only carries a `transition` Trunk has no event for: kept in
   * the log, never delivered nor streamed.
   */
  readonly type: EventType | null
  /** When it happened (epoch ms): the message's `timestamp`. */
  readonly at: number
  /** The webhook payload (`data` of the message), field names exactly as Trunk's. */
  readonly data: Readonly<Record<string, unknown>>
  /** Filters of endpoints and the live stream: the repository, and the queue's target branch. */
  readonly repoId: string | null
  readonly branch: string | null
  /** Messages with the same key are delivered in log order (one pull request, one queue, one test case). */
  readonly orderingKey: string
  /** When set, a second event with the same key in the organization is dropped (a fact told once, e.g. a run's start). */
  readonly dedupeKey?: string | undefined
  /** The entry state change this record stands for (at most one record per change carries it). */
  readonly transition?: Transition | undefined
  /** A webhook endpoint that does not get the event (the one an event about an endpoint is about). */
  readonly exceptEndpointId?: string | undefined
}

export interface EventLogShape {
  /**
   * Appends events in the order given. Runs in the caller's transaction (the `SqlClient` the caller's effect uses),
   * so an event exists exactly when the change that causes it committed.
   */
  readonly append: (events: ReadonlyArray<NewEvent>) => Effect.Effect<void, SqlError>
}

export class EventLog extends Context.Tag("greenline/EventLog")<EventLog, EventLogShape>() {}
