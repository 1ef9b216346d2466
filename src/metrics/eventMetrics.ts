import type { DeliveryStats } from "../events/Delivery.ts"
import { formatLabels, formatNumber } from "../kernel/prometheusText.ts"
import { Gauge, type Registry } from "./registry.ts"

/**
 * The outgoing events' figures in `GET /metrics`: webhook attempts by endpoint and outcome, the retry queue's depth,
 * the oldest undelivered message's age, the endpoints failing now, messages given up and endpoints disabled (from the
 * delivery worker), and the live streams open on this instance.
 */
export const registerEventMetrics = (registry: Registry, delivery: () => DeliveryStats, subscribers: () => number) => {
  registry.register({
    name: "greenline_webhook_deliveries_total",
    help: "Webhook delivery attempts by endpoint and outcome (delivered, failed, gone, interrupted)",
    type: "counter",
    render: () =>
      delivery().attempts.map(
        (a) =>
          `greenline_webhook_deliveries_total${formatLabels({ endpoint: a.endpoint, outcome: a.outcome })} ${formatNumber(a.value)}`
      )
  })
  registry.register(
    new Gauge("greenline_webhook_retry_queue_depth", "Webhook messages waiting for a retry", () => [
      [{}, delivery().retryQueueDepth]
    ])
  )
  registry.register(
    new Gauge(
      "greenline_webhook_oldest_undelivered_seconds",
      "Age of the oldest webhook message not delivered yet (0 when none)",
      () => [[{}, delivery().oldestUndeliveredSeconds]]
    )
  )
  registry.register(
    new Gauge(
      "greenline_webhook_endpoints_failing",
      "Webhook endpoints failing now: probed one message at a time until one is delivered",
      () => [[{}, delivery().failingEndpoints]]
    )
  )
  registry.register({
    name: "greenline_webhook_retries_exhausted_total",
    help: "Webhook messages given up after their retries (webhook_endpoint.retries_exhausted), by endpoint",
    type: "counter",
    render: () =>
      delivery().retriesExhausted.map(
        (a) =>
          `greenline_webhook_retries_exhausted_total${formatLabels({ endpoint: a.endpoint })} ${formatNumber(a.value)}`
      )
  })
  registry.register({
    name: "greenline_webhook_endpoints_disabled_total",
    help: "Webhook endpoints disabled by Greenline (webhook_endpoint.disabled): gone (410) or failing for 5 days",
    type: "counter",
    render: () =>
      delivery().endpointsDisabled.map(
        (a) =>
          `greenline_webhook_endpoints_disabled_total${formatLabels({ reason: a.reason })} ${formatNumber(a.value)}`
      )
  })
  registry.register(
    new Gauge("greenline_event_stream_subscribers", "Open live event streams (GET /v1/events/stream)", () => [
      [{}, subscribers()]
    ])
  )
}
