import { Schema } from "effect"
import { ErrorDetail } from "../kernel/errors.ts"

/** The events feature's failures; the HTTP edge (`http/errors.ts`) gives each its status and code. */

/** An endpoint or repository that does not exist in the caller's organization (404 NOT_FOUND). */
export class EventsNotFound extends Schema.TaggedError<EventsNotFound>()("EventsNotFound", {
  message: Schema.String
}) {}

/** A request the schema let through but the feature refuses, with the fields at fault (400 INVALID_REQUEST). */
export class InvalidEventsRequest extends Schema.TaggedError<InvalidEventsRequest>()("InvalidEventsRequest", {
  message: Schema.String,
  details: Schema.Array(ErrorDetail)
}) {}

/** A `page_token` this server did not issue for the query (400 INVALID_PAGE_TOKEN). */
export class InvalidEventsPageToken extends Schema.TaggedError<InvalidEventsPageToken>()("InvalidEventsPageToken", {
  message: Schema.String
}) {}

export const EventsError = Schema.Union(EventsNotFound, InvalidEventsRequest, InvalidEventsPageToken)
export type EventsError = typeof EventsError.Type

export const isEventsError: (e: unknown) => e is EventsError = Schema.is(EventsError)
