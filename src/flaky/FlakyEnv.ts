import { Context } from "effect"

/** What the flaky-test feature takes from the server's settings (provided by the composition root). */
export interface FlakyEnvShape {
  /** The server's address: links to tests and uploads (PUBLIC_URL). */
  readonly publicUrl: string
}

export class FlakyEnv extends Context.Tag("greenline/FlakyEnv")<FlakyEnv, FlakyEnvShape>() {}
