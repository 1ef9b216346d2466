import type { PlannerConfig } from "./planner/index.ts"
import type { StoredQueueConfig } from "./schemas.ts"

/** A queue's stored configuration as the planner takes it (the runner's rounds and the views' read-your-writes). */
export const plannerConfig = (c: StoredQueueConfig): PlannerConfig => ({
  state: c.state === "switching_modes" ? (c.previousState ?? "running") : c.state,
  mode: c.mode,
  concurrency: c.concurrency,
  bisectionConcurrency: c.bisectionConcurrency,
  testingTimeoutMinutes: c.testingTimeoutMinutes,
  notReadyTimeoutHours: c.notReadyTimeoutHours,
  pendingFailureDepth: c.pendingFailureDepth,
  canOptimisticallyMerge: c.canOptimisticallyMerge,
  batch: c.batch,
  batchingMaxWaitTimeMinutes: c.batchingMaxWaitTimeMinutes,
  batchingMinSize: c.batchingMinSize,
  directMergeMode: c.directMergeMode,
  optimizationMode: c.optimizationMode,
  mergeMethod: c.mergeMethod,
  ...(c.adaptive === true ? { adaptive: true } : {})
})
