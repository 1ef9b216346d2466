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

/** This instance's share of the queues (#37), as its last lease pass found it. */
export interface RunnerShare {
  /** the lease owner this instance runs its queues as */
  readonly owner: string
  /** queues whose lease it holds */
  readonly owned: number
  /** its fair share: ceil(queues / live instances) */
  readonly fair: number
  /** the most it takes: the fair share and a slack */
  readonly most: number
  readonly live: number
  readonly queues: number
}

export interface RunnerHealthShape {
  /** the lease loop's last pass (none before the first) */
  readonly share: () => RunnerShare | undefined
  readonly setShare: (share: RunnerShare) => void
  readonly failed: (queueId: string, message: string, now: number, retryAt: number) => void
  /** the runner completed a round: it is healthy again */
  readonly recovered: (queueId: string) => void
  readonly errorOf: (queueId: string) => RunnerError | undefined
  readonly failing: () => ReadonlyArray<RunnerError>
}

export class RunnerHealth extends Context.Tag("greenline/RunnerHealth")<RunnerHealth, RunnerHealthShape>() {}

export const makeRunnerHealth = (): RunnerHealthShape => {
  const errors = new Map<string, RunnerError>()
  let share: RunnerShare | undefined
  return {
    share: () => share,
    setShare: (next) => {
      share = next
    },
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
