import { Context, Layer } from "effect"

/**
 * What this instance knows of the health of the runners it holds: the last error of a runner that failed and has not
 * completed a round since. Read by getQueue (`runnerError`), /readyz and the metrics.
 */

export interface RunnerError {
  readonly queueId: string
  readonly message: string
  /** when it first failed (epoch ms) in this series of failures */
  readonly since: number
  /** failures in a row */
  readonly failures: number
  /** when it restarts (epoch ms) */
  readonly retryAt: number
}

export interface RunnerHealthShape {
  readonly failed: (queueId: string, message: string, now: number, retryAt: number) => void
  /** the runner completed a round: it is healthy again */
  readonly recovered: (queueId: string) => void
  readonly errorOf: (queueId: string) => RunnerError | undefined
  readonly failing: () => ReadonlyArray<RunnerError>
}

export class RunnerHealth extends Context.Tag("greenline/RunnerHealth")<RunnerHealth, RunnerHealthShape>() {}

export const makeRunnerHealth = (): RunnerHealthShape => {
  const errors = new Map<string, RunnerError>()
  return {
    failed: (queueId, message, now, retryAt) => {
      const before = errors.get(queueId)
      errors.set(queueId, {
        queueId,
        message: message.slice(0, 1000),
        since: before?.since ?? now,
        failures: (before?.failures ?? 0) + 1,
        retryAt
      })
    },
    recovered: (queueId) => {
      errors.delete(queueId)
    },
    errorOf: (queueId) => errors.get(queueId),
    failing: () => [...errors.values()]
  }
}

export const RunnerHealthLive = Layer.sync(RunnerHealth, makeRunnerHealth)
