import { Schema } from "effect"
import { EVENT_TYPES } from "../kernel/EventLog.ts"

/** Request and answer schemas of the webhook endpoints API (extension; contract.md §8, issue #17). */

const NonEmptyString = Schema.String.pipe(Schema.minLength(1, { message: () => "must be a non-empty string" }))

const Repo = Schema.Struct({ host: NonEmptyString, owner: NonEmptyString, name: NonEmptyString }).annotations({
  identifier: "WebhookRepo"
})

const Id = Schema.UUID.annotations({ message: () => "must be a UUID", identifier: "WebhookEndpointId" })

/** An absolute http(s) URL without credentials, at most 2000 characters. */
export const WebhookUrl = Schema.String.pipe(
  Schema.maxLength(2000, { message: () => "must be at most 2000 characters" }),
  Schema.filter(
    (s) => {
      if (!URL.canParse(s)) return false
      const u = new URL(s)
      return (u.protocol === "https:" || u.protocol === "http:") && u.username === "" && u.password === ""
    },
    { message: () => "must be an absolute http or https URL without credentials" }
  )
).annotations({ identifier: "WebhookUrl" })

const typeMessage = `must be one of ${EVENT_TYPES.join(", ")}`
export const EventTypeName = Schema.transform(
  Schema.String.pipe(
    Schema.filter((s) => (EVENT_TYPES as ReadonlyArray<string>).includes(s.toLowerCase()), {
      message: () => typeMessage
    })
  ),
  Schema.Literal(...EVENT_TYPES),
  { strict: false, decode: (s) => s.toLowerCase(), encode: (s) => s }
).annotations({ identifier: "EventType" })

const EventTypes = Schema.Array(EventTypeName).pipe(
  Schema.minItems(1, { message: () => "must name at least one event type (null or left out: every type)" })
)

const Description = Schema.String.pipe(Schema.maxLength(1000, { message: () => "must be at most 1000 characters" }))

export const CreateWebhookEndpointRequest = Schema.Struct({
  url: WebhookUrl,
  description: Schema.optional(Description),
  /** null or left out: every event type, including ones added later */
  eventTypes: Schema.optional(Schema.NullOr(EventTypes)),
  repo: Schema.optional(Repo)
})

/** How an endpoint is doing (extension, issue #34): what the dashboard's delivery page shows. */
export const WebhookEndpointHealth = Schema.Struct({
  /** `failing`: its last attempts failed and it is probed one message at a time (`nextProbeAt`) */
  state: Schema.Literal("healthy", "failing", "disabled"),
  failingSince: Schema.NullOr(Schema.String),
  nextProbeAt: Schema.NullOr(Schema.String),
  lastSuccessAt: Schema.NullOr(Schema.String),
  /** messages waiting to be delivered, and messages given up (kept for EVENT_RETENTION_DAYS) */
  pending: Schema.Number,
  failed: Schema.Number
}).annotations({ identifier: "WebhookEndpointHealth" })

export const WebhookEndpoint = Schema.Struct({
  id: Schema.String,
  url: Schema.String,
  description: Schema.String,
  /** null: every event type, including ones added later */
  eventTypes: Schema.NullOr(Schema.Array(Schema.String)),
  repo: Schema.NullOr(Repo),
  disabled: Schema.Boolean,
  disabledReason: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  health: WebhookEndpointHealth
}).annotations({ identifier: "WebhookEndpoint" })
export type WebhookEndpoint = typeof WebhookEndpoint.Type

export const CreatedWebhookEndpoint = Schema.Struct({
  ...WebhookEndpoint.fields,
  /** shown only here and by rotateWebhookSecret */
  secret: Schema.String
}).annotations({ identifier: "CreatedWebhookEndpoint" })

export const ListWebhookEndpointsRequest = Schema.Struct({})
export const ListWebhookEndpointsResponse = Schema.Struct({ endpoints: Schema.Array(WebhookEndpoint) })

export const UpdateWebhookEndpointRequest = Schema.Struct({
  id: Id,
  url: Schema.optional(WebhookUrl),
  description: Schema.optional(Description),
  /** null: every event type */
  eventTypes: Schema.optional(Schema.NullOr(EventTypes)),
  disabled: Schema.optional(Schema.Boolean)
})

export const WebhookEndpointIdRequest = Schema.Struct({ id: Id })

export const RotatedWebhookSecret = Schema.Struct({ id: Schema.String, secret: Schema.String })

const MessageStatus = Schema.Literal("pending", "delivered", "failed")

export const ListWebhookDeliveriesRequest = Schema.Struct({
  endpointId: Id,
  /** only messages in this state (extension, issue #34) */
  status: Schema.optional(MessageStatus),
  page_query: Schema.optional(
    Schema.Struct({
      page_size: Schema.Int.pipe(Schema.between(1, 100, { message: () => "must be an integer from 1 to 100" })),
      page_token: Schema.String
    })
  )
})

export const WebhookAttempt = Schema.Struct({
  at: Schema.String,
  /** the receiver's HTTP status; null when it did not answer */
  status: Schema.NullOr(Schema.Number),
  durationMs: Schema.Number,
  error: Schema.NullOr(Schema.String),
  /** the request's headers as sent (signatures included; never the secret); null for attempts recorded before */
  requestHeaders: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** the first 4 KiB of the receiver's answer */
  responseBody: Schema.NullOr(Schema.String),
  /** the server stopped during the attempt (the receiver may have got it) */
  interrupted: Schema.Boolean
}).annotations({ identifier: "WebhookAttempt" })

export const WebhookMessage = Schema.Struct({
  id: Schema.String,
  eventType: Schema.String,
  timestamp: Schema.String,
  status: MessageStatus,
  nextAttemptAt: Schema.NullOr(Schema.String),
  attempts: Schema.Array(WebhookAttempt)
}).annotations({ identifier: "WebhookMessage" })
export type WebhookMessage = typeof WebhookMessage.Type

export const ListWebhookDeliveriesResponse = Schema.Struct({
  messages: Schema.Array(WebhookMessage),
  page: Schema.Struct({ next_page_token: Schema.String })
})

export const ReplayWebhookMessagesRequest = Schema.Struct({
  endpointId: Id,
  since: Schema.optional(
    Schema.String.pipe(
      Schema.filter((s) => !Number.isNaN(Date.parse(s)), { message: () => "must be an ISO 8601 date-time" })
    )
  ),
  messageIds: Schema.optional(
    Schema.Array(
      Schema.String.pipe(Schema.pattern(/^msg_[0-9a-fA-F]{32}$/, { message: () => "must be a message id (msg_...)" }))
    ).pipe(Schema.maxItems(1000, { message: () => "must hold at most 1000 ids" }))
  ),
  /** only the endpoint's messages that were given up (status `failed`), since `since` (extension, issue #34) */
  onlyFailed: Schema.optional(Schema.Boolean)
})

export const ReplayWebhookMessagesResponse = Schema.Struct({ replayed: Schema.Number })
