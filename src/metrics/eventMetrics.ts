import type { DeliveryStats } from "../events/Delivery.ts"
import { formatLabels, formatNumber } from "../kernel/prometheusText.ts"
import { Gauge, type Registry } from "./registry.ts"

/**
 * The outgoing events' figures in `GET /metrics`: webhook attempts by endpoint and outcome, the retry queue's depth,
 * the oldest undelivered message's age (from the delivery worker) and the live streams open on this instance.
 */
export const registerEventMetrics = (registry: Registry, delivery: () => DeliveryStats, subscribers: () => number) => {
  registry.register({
    name: "greenline_webhook_deliveries_total",
    help: "Webhook delivery attempts by endpoint and outcome (delivered, failed, gone)",
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
    new Gauge("greenline_event_stream_subscribers", "Open live event streams (GET /v1/events/stream)", () => [
      [{}, subscribers()]
    ])
  )
}
