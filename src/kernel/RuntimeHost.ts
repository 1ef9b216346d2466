import { Context } from "effect"

/**
 * Port: what the hot paths need of the JavaScript runtime beyond the web platform. The flaky-test upload hashes a
 * test case id per result into one reused buffer (no object per id), and hints the garbage collector while it parses
 * (parsing makes short-lived strings faster than the collector comes back for them on its own). The composition root
 * provides the runtime's (server.ts: Bun's, `kernel/bunRuntime.ts`); nothing else imports an implementation.
 */
export interface RuntimeHostShape {
  /** Writes the SHA-1 digest of `input` into `out` (20 bytes). */
  readonly sha1Into: (input: Uint8Array, out: Uint8Array) => void
  /** A young-generation collection (a few milliseconds); a no-op where the runtime has none. */
  readonly collectYoung: () => void
  /** A full, synchronous collection; a no-op where the runtime has none. */
  readonly collectAll: () => void
}

export class RuntimeHost extends Context.Tag("greenline/RuntimeHost")<RuntimeHost, RuntimeHostShape>() {}
