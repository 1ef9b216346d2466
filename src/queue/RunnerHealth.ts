import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import { makeStore } from "./store.ts"

/**
 * Whether each queue's runner runs: its last error while it keeps failing, shown by getQueue (`runnerError`),
 * `/readyz` and the `greenline_queue_runner_error` gauge (metrics/Metrics.ts). The runner's supervisor records each failure; the runner
 * clears it once a round completes.
 */
export interface RunnerHealthShape {
  /** The runner of `queueId` failed with `message` (it will be restarted). */
  readonly recordRunnerError: (queueId: string, message: string) => Effect.Effect<void, SqlError>
  /** The runner of `queueId` completed a round. Cheap when nothing was recorded: call it after every round. */
  readonly clearRunnerError: (queueId: string) => Effect.Effect<void, SqlError>
  /** The queues whose runner failed on this instance and has not completed a round since (a gauge reads it). */
  readonly failingHere: () => ReadonlyArray<string>
  /** Every queue whose runner is failing (on any instance), with its last error and since when. */
  readonly runnerErrors: Effect.Effect<
    ReadonlyArray<{ readonly queueId: string; readonly message: string; readonly since: string }>,
    SqlError
  >
}

export class RunnerHealth extends Context.Tag("greenline/RunnerHealth")<RunnerHealth, RunnerHealthShape>() {}

/** An error's message for users: the first line of it and of each cause under it, bounded. */
export const errorMessage = (error: unknown): string => {
  const parts: Array<string> = []
  let e: unknown = error
  for (let depth = 0; depth < 4 && e !== undefined && e !== null; depth++) {
    const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e)
    parts.push(text.split("\n")[0] ?? text)
    e = e instanceof Error ? e.cause : undefined
  }
  const line = parts.join(": caused by ")
  return line.length > 500 ? `${line.slice(0, 497)}...` : line
}

export const RunnerHealthLive = Layer.effect(
  RunnerHealth,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const store = makeStore(sql)
    // this instance's view: queues whose runner failed here (true) or was seen healthy since (false); a queue not
    // known yet may carry an error recorded by another instance, so its first clear goes to the database
    const failing = new Map<string, boolean>()
    return {
      recordRunnerError: (queueId, message) =>
        Effect.zipRight(
          Effect.sync(() => failing.set(queueId, true)),
          store.recordRunnerError(queueId, message)
        ),
      clearRunnerError: (queueId) =>
        failing.get(queueId) === false
          ? Effect.void
          : Effect.zipRight(
              store.clearRunnerError(queueId),
              Effect.sync(() => {
                if (failing.size > 10_000) failing.clear()
                failing.set(queueId, false)
              })
            ),
      failingHere: () => [...failing].filter(([, f]) => f).map(([queueId]) => queueId),
      runnerErrors: store.runnerErrors
    }
  })
)
