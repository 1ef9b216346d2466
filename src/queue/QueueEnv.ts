import { Context, type Option } from "effect"

/**
 * What the queue's engine and runners take from the server's settings. The composition root provides it from
 * src/config.ts; the queue never reads the configuration itself.
 */
export interface QueueEnvShape {
  /** The server's address: links in PR comments and statuses (PUBLIC_URL). */
  readonly publicUrl: string
  /** How often a runner looks for pushed PR heads and a moved target branch, ms (GIT_POLL_MS). */
  readonly gitPollMs: number
  /** The built-in CI's shell command (CI_COMMAND); none: no built-in CI. */
  readonly ciCommand: Option.Option<string>
  /** The built-in CI's status context (CI_CONTEXT). */
  readonly ciContext: string
}

export class QueueEnv extends Context.Tag("greenline/QueueEnv")<QueueEnv, QueueEnvShape>() {}
