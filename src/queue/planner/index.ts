/**
 * The merge-queue planner: a pure function
 * `step(state, event, now, newId, memo?) -> { state, commands, transitions, runChanges }`: its ids come from its
 * input (`newId`), what it remembers from one step to the next is its caller's (`memo`), and what it tells a PR's
 * author is data (the feedback adapters write the text). See docs/simulator.md and the module headers for the
 * semantics.
 */

export { choose, observe, statsOf } from "./adaptive.ts"
export type { EntryEstimate, EstimateOptions, QueueEstimate, TimeRange, UnavailableReason } from "./estimate.ts"
export { estimateQueue } from "./estimate.ts"
export { laneOf } from "./lanes.ts"
export {
  activePrNumbers,
  enqueued,
  initialState,
  joinsSubmissions,
  makePlannerMemo,
  step,
  stepMany
} from "./step.ts"
export type * from "./types.ts"
export { Reasons } from "./types.ts"
