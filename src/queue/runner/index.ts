/**
 * The queue's runner, in parts: the round loop (runQueue.ts, round.ts), the command executors (build.ts, merge.ts,
 * ci.ts, feedback.ts, commands.ts), lanes (lanes.ts), its supervision (supervise.ts) and this instance's runners
 * under their leases (lease.ts). It is built on the queue's ports and repositories (../); the engine's wiring
 * (../engine/EngineLive.ts) starts it.
 */

export { plannerConfig } from "../plannerConfig.ts"
export { repoRefOf } from "./context.ts"
export { statusCheckName } from "./feedback.ts"
export type { Lease, RunnerHooks } from "./round.ts"
export { runQueue } from "./runQueue.ts"
