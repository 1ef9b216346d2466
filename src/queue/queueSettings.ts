import type { QueueConfig, StoredQueueConfig, UpdateQueueRequest } from "./schemas.ts"

/** updateQueue as a pure function: the stored configuration after a request (contract.md §2). */
export const applyUpdate = (current: StoredQueueConfig, request: UpdateQueueRequest): StoredQueueConfig => {
  const { repo: _repo, targetBranch: _branch, state, deleteRequiredStatuses, requiredStatuses, ...fields } = request
  const next: { -readonly [K in keyof StoredQueueConfig]: StoredQueueConfig[K] } = { ...current }
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) (next as Record<string, unknown>)[key] = value
  }
  if (deleteRequiredStatuses === true) next.requiredStatuses = []
  if (requiredStatuses !== undefined && requiredStatuses.length > 0) next.requiredStatuses = [...requiredStatuses]
  if (state !== undefined) {
    if (next.state === "switching_modes") next.previousState = state
    else next.state = state
  }
  return next
}

/** The configuration as the API shows it (without the bookkeeping fields). */
export const publicConfig = (config: StoredQueueConfig): QueueConfig => {
  const { previousState: _p, pendingMode: _m, ...rest } = config
  return rest
}
