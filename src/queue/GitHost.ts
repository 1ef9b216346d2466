/**
 * The Git host as the merge queue sees it: pull request heads, branches, test-branch construction and the
 * compare-and-swap that moves the target branch. `LocalGit.ts` implements it over bare repositories on disk
 * (contract.md §6).
 */

import type { Effect, Scope } from "effect"
import { Context, Data } from "effect"

/** A repository's identity; for the local provider its bare repository is `$GIT_ROOT/<host>/<owner>/<name>.git`. */
export interface RepoRef {
  readonly host: string
  readonly owner: string
  readonly name: string
}

export type MergeMethod = "merge_commit" | "squash" | "rebase"

export interface PullRequestInfo {
  readonly number: number
  readonly headSha: string
  /** Subject of the head commit. */
  readonly title: string
  /** Author name of the head commit. */
  readonly author: string
  /** Providers with pull requests (GitHub): the branch the PR merges into. */
  readonly baseBranch?: string
  readonly draft?: boolean
  /** Providers with pull requests: the host's view of whether the PR merges cleanly into its base. */
  readonly mergeability?: "unspecified" | "in_progress" | "mergeable" | "not_mergeable"
}

export interface TestBranchItem {
  readonly prNumber: number
  readonly headSha: string
  readonly title: string
}

export interface BuildTestBranchInput {
  readonly repo: RepoRef
  /** Branch name without `refs/heads/`, e.g. `trunk-merge/pr-12/abc`. Set (forced) to the built tip. */
  readonly branch: string
  readonly baseSha: string
  readonly method: MergeMethod
  readonly items: ReadonlyArray<TestBranchItem>
  /**
   * Providers with pull requests (GitHub): open a draft pull request from the test branch into `base` (the queue's
   * `createPrsForTestingBranches`, so CI that runs on pull requests runs); `deleteBranch` closes it. Others ignore it.
   */
  readonly pullRequest?: { readonly base: string }
}

export interface BuildTestBranchResult {
  /** The tip of the built branch (`baseSha` when there are no items). */
  readonly sha: string
  /** `commits[i]` is the chain's commit after item i was applied (same length as `items`). */
  readonly commits: ReadonlyArray<string>
}

export interface RebaseOntoInput {
  readonly repo: RepoRef
  /** The commit the lane was built on. */
  readonly baseSha: string
  /** The tested lane commit (a descendant of baseSha). */
  readonly laneSha: string
  /** The commit to carry the lane's commits onto (usually the target's current tip). */
  readonly ontoSha: string
}

/** The repository does not exist under GIT_ROOT, or its identity is invalid (`invalid: true`). */
export class RepoNotFound extends Data.TaggedError("RepoNotFound")<{
  readonly repo: RepoRef
  readonly invalid: boolean
  readonly message: string
}> {}

/** `refs/pull/<prNumber>/head` does not exist. */
export class PrNotFound extends Data.TaggedError("PrNotFound")<{
  readonly repo: RepoRef
  readonly prNumber: number
  readonly message: string
}> {}

/** The Git host says the pull request is merged already (GitHub: merged, through its merge button or a push). */
export class PrMerged extends Data.TaggedError("PrMerged")<{
  readonly repo: RepoRef
  readonly prNumber: number
  readonly message: string
}> {}

/**
 * Applying an item did not merge cleanly.
 * - buildTestBranch: `index` is the position of the item in `items`, `prNumber` its PR.
 * - rebaseOnto: `index` is the position of the lane commit (oldest first) in `base..lane`; `prNumber` is read from
 *   that commit's message ("Merge pull request #N: ..." or "... (#N)"), 0 when the message names none.
 * `paths` lists the conflicted files.
 */
export class MergeConflict extends Data.TaggedError("MergeConflict")<{
  readonly prNumber: number
  readonly index: number
  readonly paths: ReadonlyArray<string>
  readonly message: string
}> {}

/** The Git host refused to merge a pull request (GitHub: `PUT pulls/{n}/merge` answered 405/409/422). */
export class MergeRefused extends Data.TaggedError("MergeRefused")<{
  readonly prNumber: number
  /** The target's tip after the refusal (earlier pull requests of the same merge may have landed). */
  readonly actualSha: string | null
  readonly message: string
}> {}

export interface MergeInput {
  readonly repo: RepoRef
  readonly branch: string
  /** The target's tip the run was tested on; nothing is merged when the target is elsewhere. */
  readonly expectedOld: string
  /** The tested commit: after the merge the target's tree is this commit's tree. */
  readonly newSha: string
  readonly method: MergeMethod
  /** The pull requests the merge lands, in the order they were applied, with their tested heads. */
  readonly pulls: ReadonlyArray<{ readonly prNumber: number; readonly headSha: string; readonly title: string }>
}

/** Whether git's `stderr` says a ref's lock file exists: another git holds the ref, or a killed one left the lock. */
export const heldRefLock = (stderr: string): boolean => /\.lock': File exists/.test(stderr)

/** A git invocation failed unexpectedly (or an argument such as a branch name was refused). */
export class GitError extends Data.TaggedError("GitError")<{
  readonly args: ReadonlyArray<string>
  readonly exitCode: number | null
  readonly stderr: string
  readonly message: string
}> {}

export interface GitHostService {
  /**
   * PR N is the ref refs/pull/N/head; title = subject, author = author name of that commit. PrMerged: a host with
   * pull requests of its own (GitHub) says it is merged.
   */
  readonly getPullRequest: (
    repo: RepoRef,
    prNumber: number
  ) => Effect.Effect<PullRequestInfo, PrNotFound | PrMerged | RepoNotFound | GitError>
  /** PR number -> head sha of every `refs/pull/<N>/head` (one `git for-each-ref`). */
  readonly listPullHeads: (repo: RepoRef) => Effect.Effect<ReadonlyMap<number, string>, RepoNotFound | GitError>
  /** The sha of refs/heads/<branch>, null when the branch does not exist. */
  readonly getBranchSha: (repo: RepoRef, branch: string) => Effect.Effect<string | null, RepoNotFound | GitError>
  /**
   * Builds refs/heads/<branch> = baseSha + items applied in order with the method, deterministically (the same item
   * applied with the same method on the same parent always gives the same commit). Touches no working tree.
   */
  readonly buildTestBranch: (
    input: BuildTestBranchInput
  ) => Effect.Effect<BuildTestBranchResult, MergeConflict | RepoNotFound | GitError>
  /** Replays the commits base..laneSha (first-parent chain) onto ontoSha, deterministically; returns the new tip. */
  readonly rebaseOnto: (input: RebaseOntoInput) => Effect.Effect<string, MergeConflict | GitError>
  /** `git update-ref refs/heads/<branch> <newSha> <expectedOld>`; false when the ref was not at expectedOld. */
  readonly compareAndSwap: (
    repo: RepoRef,
    branch: string,
    expectedOld: string,
    newSha: string
  ) => Effect.Effect<boolean, RepoNotFound | GitError>
  /**
   * Lands a tested commit on the target and returns the target's new tip, or null when the target was not at
   * `expectedOld` (nothing merged). The local provider moves the ref (`compareAndSwap`), so the tip is `newSha`. A
   * provider may merge through its pull requests instead (GitHub: squash/rebase, or a protected branch), then the
   * tip is a different commit with the tested tree; a refusal fails with MergeRefused.
   */
  readonly merge: (input: MergeInput) => Effect.Effect<string | null, MergeRefused | RepoNotFound | GitError>
  /**
   * The status checks the host requires on `branch` (GitHub: branch protection's required status checks); empty
   * when the branch is unprotected or the host has no such notion (local provider).
   */
  readonly requiredStatusChecks: (repo: RepoRef, branch: string) => Effect.Effect<ReadonlyArray<string>, GitError>
  /** Deletes refs/heads/<branch>; succeeds when it (or the repository) does not exist. */
  readonly deleteBranch: (repo: RepoRef, branch: string) => Effect.Effect<void, GitError>
  /** Text of `path` at commit `sha`; null when the path (or the commit) does not exist or is not a file. */
  readonly readFile: (repo: RepoRef, sha: string, path: string) => Effect.Effect<string | null, GitError>
  /** `git merge-base --is-ancestor` (a commit is its own ancestor). */
  readonly isAncestor: (repo: RepoRef, ancestor: string, descendant: string) => Effect.Effect<boolean, GitError>
  /** True when the repository identity is valid and its bare repository exists. */
  readonly repoExists: (repo: RepoRef) => Effect.Effect<boolean>
  /**
   * Whether a pull request read is a call to a remote host whose answer can change on its own (GitHub: a PR edited or
   * closed there), worth asking live when a PR is shown. Absent: no.
   */
  readonly remotePullRequests?: (repo: RepoRef) => boolean
  /**
   * Providers that notice pushes themselves (the local provider, #37): until the scope closes, `changed` is called
   * when one of `refs` (full ref names, read again at each check) may have moved; one check shared by every watcher,
   * at most every GIT_POLL_MS. False when the provider cannot watch the repository (then the queue polls). Absent:
   * the host tells of pushes itself (GitHub's webhooks).
   */
  readonly watchRefs?: (
    repo: RepoRef,
    refs: () => ReadonlyArray<string>,
    changed: () => void
  ) => Effect.Effect<boolean, never, Scope.Scope>
}

export class GitHost extends Context.Tag("greenline/GitHost")<GitHost, GitHostService>() {}

/** The committer of every commit Greenline writes (both providers, so they build the same commits). */
export const GREENLINE_NAME = "Greenline"
export const GREENLINE_EMAIL = "greenline@greenline.invalid"

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/

/** Null when `branch` is an acceptable branch name (a subset of git check-ref-format), else the reason. */
export const invalidBranchName = (branch: string): string | null => {
  if (branch.length === 0) return "empty branch name"
  if (branch.length > 250) return "branch name too long"
  if (branch.startsWith("-") || branch.startsWith("/") || branch.endsWith("/") || branch.endsWith(".")) {
    return `invalid branch name '${branch}'`
  }
  if (branch === "@" || branch.includes("..") || branch.includes("//") || branch.includes("@{")) {
    return `invalid branch name '${branch}'`
  }
  if (CONTROL.test(branch) || /[ ~^:?*[\\]/.test(branch)) return `invalid branch name '${branch}'`
  for (const part of branch.split("/")) {
    if (part.startsWith(".") || part.endsWith(".lock")) return `invalid branch name '${branch}'`
  }
  return null
}
