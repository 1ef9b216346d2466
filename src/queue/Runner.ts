/**
 * The queue's runner, in parts under runner/: the round loop (runQueue.ts, round.ts), the command executors
 * (build.ts, merge.ts, ci.ts, feedback.ts, commands.ts), lanes (lanes.ts), and its supervision (supervise.ts).
 */
export { repoRefOf } from "./runner/context.ts"
export { statusCheckName } from "./runner/feedback.ts"
export { type Lease, plannerConfig, type RunnerHooks } from "./runner/round.ts"
export { runQueue } from "./runner/runQueue.ts"
