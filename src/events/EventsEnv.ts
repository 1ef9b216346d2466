import { Context } from "effect"

/** What the event log and webhook delivery take from the server's settings (provided by the composition root). */
export interface EventsEnvShape {
  /** Webhook endpoints on loopback and private addresses are allowed (WEBHOOK_ALLOW_PRIVATE). */
  readonly webhookAllowPrivate: boolean
  /** This instance sends webhook messages (WEBHOOK_WORKER). */
  readonly webhookWorker: boolean
  /** Days the event log keeps events, with their webhook messages (EVENT_RETENTION_DAYS). */
  readonly eventRetentionDays: number
}

export class EventsEnv extends Context.Tag("greenline/EventsEnv")<EventsEnv, EventsEnvShape>() {}
