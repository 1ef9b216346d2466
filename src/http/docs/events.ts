import type { OpName } from "../Api.ts"
import { type OpDoc, WEBHOOK_ENDPOINT_EXAMPLE } from "./examples.ts"

/** Outgoing events: webhook endpoints, their deliveries and replays. */
export const EVENTS_DOCS = {
  createWebhookEndpoint: {
    summary: "Register a webhook endpoint (extension)",
    description:
      "Events are signed by Standard Webhooks 1.0 (`webhook-id`, `webhook-timestamp`, `webhook-signature`, and the " +
      "same under `svix-*`), retried for days, and delivered in order per pull request. `eventTypes` limits the " +
      "types (all when left out); `repo` limits the repository. The secret is shown only in this answer.",
    request: { url: "https://hooks.example/greenline", description: "deploys", eventTypes: ["pull_request.merged"] },
    response: { ...WEBHOOK_ENDPOINT_EXAMPLE, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }
  },
  listWebhookEndpoints: {
    summary: "List the organization's webhook endpoints (extension)",
    description:
      "Every endpoint with its filters, whether it is disabled (and why) and its `health`: `failing` while its last " +
      "attempts failed (it is then tried one message at a time, at `nextProbeAt`), its latest delivery, the messages " +
      "waiting and given up. Never the secrets.",
    request: {},
    response: { endpoints: [WEBHOOK_ENDPOINT_EXAMPLE] }
  },
  updateWebhookEndpoint: {
    summary: "Change a webhook endpoint (extension)",
    description:
      "Changes the address, description or event types, or disables and enables it again (`disabled`). " +
      "`eventTypes: null` means every type.",
    request: { id: WEBHOOK_ENDPOINT_EXAMPLE.id, disabled: true },
    response: { ...WEBHOOK_ENDPOINT_EXAMPLE, disabled: true, disabledReason: "disabled through the API" }
  },
  deleteWebhookEndpoint: {
    summary: "Delete a webhook endpoint (extension)",
    description: "The endpoint and its delivery log; messages not yet delivered are dropped.",
    request: { id: WEBHOOK_ENDPOINT_EXAMPLE.id },
    response: {}
  },
  rotateWebhookSecret: {
    summary: "Rotate a webhook endpoint's secret (extension)",
    description:
      "A new secret, shown only here. For 24 hours both the old and the new signature are sent, space-separated, " +
      "so a receiver can switch without losing a message.",
    request: { id: WEBHOOK_ENDPOINT_EXAMPLE.id },
    response: { id: WEBHOOK_ENDPOINT_EXAMPLE.id, secret: "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD" }
  },
  listWebhookDeliveries: {
    summary: "An endpoint's delivery log (extension)",
    description:
      "Each message with its attempts (time, the receiver's status, duration, error, the request's headers, the " +
      "first 4 KiB of the answer, whether the server stopped during it), newest first, paged; `status` keeps one " +
      "state. Each message keeps its latest 20 attempts, for EVENT_RETENTION_DAYS.",
    request: { endpointId: WEBHOOK_ENDPOINT_EXAMPLE.id, page_query: { page_size: 20, page_token: "" } },
    response: {
      messages: [
        {
          id: "msg_2f1e0d9c8b7a4c6d9e8f7a6b5c4d3e2f",
          eventType: "pull_request.merged",
          timestamp: "2026-11-26T12:00:00.000Z",
          status: "delivered",
          nextAttemptAt: null,
          attempts: [
            {
              at: "2026-11-26T12:00:05.000Z",
              status: 500,
              durationMs: 41,
              error: "the receiver answered 500",
              requestHeaders: {
                "content-type": "application/json",
                "webhook-id": "msg_2f1e0d9c8b7a4c6d9e8f7a6b5c4d3e2f",
                "webhook-timestamp": "1795694405",
                "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="
              },
              responseBody: "upstream unavailable",
              interrupted: false
            },
            {
              at: "2026-11-26T12:00:10.000Z",
              status: 200,
              durationMs: 12,
              error: null,
              requestHeaders: null,
              responseBody: "ok",
              interrupted: false
            }
          ]
        }
      ],
      page: { next_page_token: "" }
    }
  },
  replayWebhookMessages: {
    summary: "Deliver messages again (extension)",
    description:
      "Sends the endpoint's messages since a time, or the listed ones, again, with their original ids so a " +
      "receiver can tell a replay from a new event. `onlyFailed`: only the messages that were given up.",
    request: { endpointId: WEBHOOK_ENDPOINT_EXAMPLE.id, since: "2026-11-26T00:00:00.000Z" },
    response: { replayed: 12 }
  }
} satisfies Partial<Record<OpName, OpDoc>>
