import { Schema } from "effect"
import { DateTimeString, Page, PageQuery } from "../flaky/schemas.ts"
import { CaseInsensitive, opt, Text } from "../queue/schemas.ts"
import { ROLES } from "../tenancy/principal.ts"

/** `listAuditEvents` (extension, issue #30): the organization's audit log, newest first, filtered and paged. */

export const AuditOutcome = CaseInsensitive("allowed", "refused")

export const ListAuditEventsRequest = Schema.Struct({
  /** a token's id, a person's subject, or either's name (exact) */
  actor: opt(Text(200, 1)),
  /** an operation's name (exact, e.g. `createQueue`) */
  action: opt(Text(100, 1)),
  outcome: opt(AuditOutcome),
  /** a part of the target (any letter case) */
  target: opt(Text(300, 1)),
  /** from this time on (inclusive) */
  start_time: opt(DateTimeString),
  /** before this time (exclusive) */
  end_time: opt(DateTimeString),
  /** the flaky-test lists' paging; default 50 a page, from the newest */
  page_query: opt(PageQuery)
}).annotations({ identifier: "ListAuditEventsRequest" })
export type ListAuditEventsRequest = typeof ListAuditEventsRequest.Type

export const AuditActor = Schema.Struct({
  kind: Schema.Literal("token", "person"),
  /** the token's id, or the person's subject at the identity provider */
  id: Schema.String,
  name: Schema.String,
  email: opt(Schema.String)
}).annotations({ identifier: "AuditActor" })

export const AuditEventView = Schema.Struct({
  id: Schema.String,
  /** ISO 8601 */
  at: Schema.String,
  actor: AuditActor,
  /** the actor's role when it acted */
  role: Schema.Literal(...ROLES),
  /** the operation */
  action: Schema.String,
  /** what it was about: `host/owner/name@branch #pr`, an id, a name */
  target: Schema.String,
  /** `refused`: answered 403 PERMISSION_DENIED, nothing changed */
  outcome: Schema.Literal("allowed", "refused"),
  /** the client's address as the server saw it; null when unknown */
  sourceIp: Schema.NullOr(Schema.String)
}).annotations({ identifier: "AuditEvent" })
export type AuditEventView = typeof AuditEventView.Type

export const ListAuditEventsResponse = Schema.Struct({
  events: Schema.Array(AuditEventView),
  page: Page
}).annotations({ identifier: "ListAuditEventsResponse" })
