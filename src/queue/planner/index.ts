/**
 * The merge-queue planner: a pure function `step(state, event, now) -> { state, commands, transitions, runChanges }`.
 * See docs/simulator.md and the module headers for the semantics.
 */

export { choose, observe, statsOf } from "./adaptive.ts"
export type { EntryEstimate, QueueEstimate, UnavailableReason } from "./estimate.ts"
export { estimateQueue } from "./estimate.ts"
export { laneOf } from "./lanes.ts"
export { activePrNumbers, enqueued, initialState, joinsSubmissions, randomIds, step, stepMany } from "./step.ts"
export type * from "./types.ts"
export { Reasons } from "./types.ts"
