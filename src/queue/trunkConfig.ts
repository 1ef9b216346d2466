/**
 * `merge.required_statuses` from `.trunk/trunk.yaml` (contract.md §6, "trunk_config"):
 *
 * ```yaml
 * version: 0.1
 * merge:
 *   required_statuses:
 *     - ci
 *     - lint
 * ```
 */
import { Effect } from "effect"
import { parse } from "yaml"
import { type GitError, GitHost, type RepoRef } from "./GitHost.ts"

export const TRUNK_YAML_PATH = ".trunk/trunk.yaml"

/**
 * - `Found`: the file exists and is valid; `statuses` may be empty (no `merge.required_statuses`).
 * - `Absent`: no `.trunk/trunk.yaml` at that commit.
 * - `Malformed`: the file exists but is not valid YAML or `merge.required_statuses` is not a list of strings; the
 *   queue treats it as naming no statuses, and `reason` says why (for the run's timeline).
 */
export type TrunkConfig =
  | { readonly _tag: "Found"; readonly statuses: ReadonlyArray<string> }
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Malformed"; readonly reason: string }

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Parses the text of a trunk.yaml (null = the file is absent). Never throws. */
export const parseTrunkYaml = (text: string | null): TrunkConfig => {
  if (text === null) return { _tag: "Absent" }
  let doc: unknown
  try {
    doc = parse(text)
  } catch (cause) {
    const first = (cause instanceof Error ? cause.message : String(cause)).split("\n")[0] ?? ""
    return { _tag: "Malformed", reason: `${TRUNK_YAML_PATH} is not valid YAML: ${first}` }
  }
  if (doc === null || doc === undefined) return { _tag: "Found", statuses: [] }
  if (!isRecord(doc)) return { _tag: "Malformed", reason: `${TRUNK_YAML_PATH} is not a mapping` }
  const merge = doc.merge
  if (merge === null || merge === undefined) return { _tag: "Found", statuses: [] }
  if (!isRecord(merge)) return { _tag: "Malformed", reason: `${TRUNK_YAML_PATH}: merge is not a mapping` }
  const list = merge.required_statuses
  if (list === null || list === undefined) return { _tag: "Found", statuses: [] }
  if (!Array.isArray(list) || !list.every((s): s is string => typeof s === "string")) {
    return { _tag: "Malformed", reason: `${TRUNK_YAML_PATH}: merge.required_statuses is not a list of strings` }
  }
  const statuses = [...new Set(list.map((s) => s.trim()).filter((s) => s !== ""))]
  return { _tag: "Found", statuses }
}

/** The trunk configuration at commit `sha` of `repo`. */
export const readTrunkConfig = (repo: RepoRef, sha: string): Effect.Effect<TrunkConfig, GitError, GitHost> =>
  Effect.flatMap(GitHost, (git) => Effect.map(git.readFile(repo, sha, TRUNK_YAML_PATH), parseTrunkYaml))

/** The required statuses named at commit `sha`, or null when the file is absent or malformed. */
export const readRequiredStatuses = (
  repo: RepoRef,
  sha: string
): Effect.Effect<{ readonly statuses: ReadonlyArray<string> } | null, GitError, GitHost> =>
  Effect.map(readTrunkConfig(repo, sha), (config) => (config._tag === "Found" ? { statuses: config.statuses } : null))
