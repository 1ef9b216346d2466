import { Context } from "effect"

/** What the HTTP edge takes from the server's settings (provided by the composition root from src/config.ts). */
export interface HttpEnvShape {
  /** Live event streams open at once per organization and instance (EVENT_STREAMS_PER_ORG). */
  readonly eventStreamsPerOrg: number
  /** How often an idle live stream reads the log without a wake-up, ms (EVENT_STREAM_POLL_MS). */
  readonly eventStreamPollMs: number
}

export class HttpEnv extends Context.Tag("greenline/HttpEnv")<HttpEnv, HttpEnvShape>() {}
