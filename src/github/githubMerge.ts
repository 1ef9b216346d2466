import { Effect } from "effect"
import { type GitError, type MergeInput, MergeRefused, type RepoNotFound, type RepoRef } from "../queue/GitHost.ts"
import type { GitHubApiError, GitHubError } from "./GitHubClient.ts"
import type { RefUpdate } from "./githubBuild.ts"
import {
  badInput,
  checkBranch,
  checkSha,
  isStatus,
  type RepoCalls,
  repoErrors,
  SHA_RE,
  toGitError
} from "./githubRepo.ts"

/** Moving a target branch on GitHub: compare-and-swap, and merges that are checked and idempotent. */
export const makeMerges = (repo: RepoCalls) => {
  const { call, commitMeta, readBranch } = repo

  /** `PATCH git/refs` without force: GitHub moves the ref only when `sha` descends from where it is. */
  const fastForward = (repo: RepoRef, branch: string, sha: string): Effect.Effect<RefUpdate, GitHubError> =>
    call(repo)("PATCH /repos/{owner}/{repo}/git/refs/{ref}", { ref: `heads/${branch}`, sha, force: false }).pipe(
      Effect.map((): RefUpdate => "moved"),
      Effect.catchIf(
        (e): e is GitHubApiError => isStatus(e, 403, 409, 422),
        (e) =>
          Effect.succeed<RefUpdate>(
            /fast.?forward/i.test((e as GitHubApiError).message) ? "not_fast_forward" : { refused: e.message }
          )
      )
    )

  const compareAndSwap = (
    repo: RepoRef,
    branch: string,
    expectedOld: string,
    newSha: string
  ): Effect.Effect<boolean, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      yield* checkBranch(branch)
      yield* checkSha(expectedOld, "expectedOld")
      yield* checkSha(newSha, "newSha")
      const current = yield* readBranch(repo, branch)
      if (current !== expectedOld) return false
      if (expectedOld === newSha) return true
      const update = yield* fastForward(repo, branch, newSha)
      if (update === "moved") return true
      const now = yield* readBranch(repo, branch)
      if (now !== expectedOld) return false
      if (update === "not_fast_forward") {
        return yield* badInput(`${newSha} does not descend from ${expectedOld}: refusing to force ${branch}`)
      }
      return yield* badInput(`GitHub refused to move ${branch}: ${update.refused}`)
    }).pipe(
      Effect.catchTags({
        GitHubApiError: (e) => Effect.fail(repoErrors(repo)(e)),
        GitHubRateLimited: (e) => Effect.fail(toGitError(e))
      })
    )

  const mergeMethodOf = (method: MergeInput["method"]) =>
    method === "merge_commit" ? ("merge" as const) : method === "squash" ? ("squash" as const) : ("rebase" as const)

  /** Whether `descendant` contains `ancestor` (a commit contains itself). */
  const descends = (repo: RepoRef, ancestor: string, descendant: string): Effect.Effect<boolean, GitHubError> =>
    ancestor === descendant
      ? Effect.succeed(true)
      : Effect.map(
          call(repo)("GET /repos/{owner}/{repo}/compare/{basehead}", {
            basehead: `${ancestor}...${descendant}`,
            per_page: 1
          }),
          (r) => r.data.status === "ahead" || r.data.status === "identical"
        )

  /**
   * The trees of the tested chain, oldest first: the first-parent commits of `newSha` down to (not including)
   * `expectedOld`, i.e. the target's content after each tested commit. Only the tested tip's tree when the chain does
   * not reach `expectedOld` within 1000 commits.
   */
  const testedTrees = (
    repo: RepoRef,
    expectedOld: string,
    newSha: string
  ): Effect.Effect<ReadonlyArray<string>, GitHubError> =>
    Effect.gen(function* () {
      const trees: Array<string> = []
      let at = newSha
      while (at !== expectedOld) {
        const meta = yield* commitMeta(repo, at)
        trees.push(meta.tree)
        const parent = meta.parents[0]
        if (parent === undefined || trees.length >= 1000) return [(yield* commitMeta(repo, newSha)).tree]
        at = parent
      }
      return trees.reverse()
    })

  /**
   * What an earlier attempt of this very merge landed before it was cut short (a replay after a crash: GitHub merged
   * pull requests, the runner never recorded it). The longest prefix of `pulls` that GitHub reports merged at their
   * tested head into `branch`, each merge commit on the target (after the previous one) with a tree of the tested
   * chain, in order; the last pull request's with the tested tip's tree. Anything else (a PR closed without merging,
   * merged at another head, or whose merge has other content) ends the prefix. Returns its length and the target's
   * commit after it.
   */
  const landedBefore = (
    input: MergeInput,
    current: string
  ): Effect.Effect<{ readonly count: number; readonly tip: string }, GitHubError> =>
    Effect.gen(function* () {
      const repo = input.repo
      let tip = input.expectedOld
      let count = 0
      let trees: ReadonlyArray<string> | null = null
      let from = 0
      for (const [index, pull] of input.pulls.entries()) {
        const pr = yield* call(repo)("GET /repos/{owner}/{repo}/pulls/{pull_number}", {
          pull_number: pull.prNumber
        }).pipe(
          Effect.map((r) => r.data),
          Effect.catchIf(
            (e) => isStatus(e, 404),
            () => Effect.succeed(null)
          )
        )
        const sha = pr?.merge_commit_sha ?? null
        if (pr === null || pr.merged !== true || sha === null || !SHA_RE.test(sha)) break
        if (pr.head.sha !== pull.headSha || pr.base.ref !== input.branch) break
        if (sha === tip && count > 0) {
          // the same commit landed several of them (the target was moved to the tested commit)
          count++
          continue
        }
        if (!(yield* descends(repo, tip, sha)) || !(yield* descends(repo, sha, current))) break
        trees ??= yield* testedTrees(repo, input.expectedOld, input.newSha)
        const tree = (yield* commitMeta(repo, sha)).tree
        const at = trees.indexOf(tree, from)
        if (at < 0 || (index === input.pulls.length - 1 && at !== trees.length - 1)) break
        from = at + 1
        tip = sha
        count++
      }
      return { count, tip }
    })

  const merge = (input: MergeInput): Effect.Effect<string | null, MergeRefused | RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const { repo, branch } = input
      yield* checkBranch(branch)
      yield* checkSha(input.expectedOld, "expectedOld")
      yield* checkSha(input.newSha, "newSha")
      const current = yield* readBranch(repo, branch)
      if (current === input.newSha && input.method === "merge_commit") return input.newSha
      if (current === null) return null
      // a replay: the pull requests an earlier attempt merged count as merged, the rest go on from their tip
      let start = 0
      if (current !== input.expectedOld) {
        const landed = yield* landedBefore(input, current)
        if (landed.count === 0) return null
        if (landed.count === input.pulls.length) return landed.tip
        const next = input.pulls[landed.count]!
        const done = input.pulls
          .slice(0, landed.count)
          .map((p) => `#${p.prNumber}`)
          .join(", ")
        if (landed.tip !== current) {
          return yield* new MergeRefused({
            prNumber: next.prNumber,
            actualSha: current,
            message: `${branch} moved after ${done} merged: pull request #${next.prNumber} is not merged`
          })
        }
        yield* Effect.logInfo(`${done} merged into ${branch} by an earlier attempt; merging the rest from ${current}`)
        start = landed.count
      }
      let refusal = ""
      if (input.method === "merge_commit" && start === 0) {
        const update = yield* fastForward(repo, branch, input.newSha)
        if (update === "moved") return input.newSha
        if ((yield* readBranch(repo, branch)) !== input.expectedOld) return null
        if (update === "not_fast_forward") {
          return yield* badInput(
            `${input.newSha} does not descend from ${input.expectedOld}: refusing to force ${branch}`
          )
        }
        // a protected branch: merge through the pull requests instead
        refusal = update.refused
        yield* Effect.logInfo(`moving ${branch} was refused (${refusal}); merging through the pull request API`)
      }
      for (const pull of input.pulls.slice(start)) {
        const result = yield* call(repo)("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge", {
          pull_number: pull.prNumber,
          sha: pull.headSha,
          merge_method: mergeMethodOf(input.method),
          ...(input.method === "squash"
            ? { commit_title: `${pull.title} (#${pull.prNumber})` }
            : input.method === "merge_commit"
              ? { commit_title: `Merge pull request #${pull.prNumber}: ${pull.title}` }
              : {})
        }).pipe(
          Effect.map(
            (r) => ({ merged: r.data.merged, message: r.data.message }) as { merged: boolean; message: string }
          ),
          Effect.catchIf(
            (e): e is GitHubApiError => isStatus(e, 403, 404, 405, 409, 422),
            (e) => Effect.succeed({ merged: false, message: e.message })
          )
        )
        if (!result.merged) {
          const actual = yield* readBranch(repo, branch)
          return yield* new MergeRefused({
            prNumber: pull.prNumber,
            actualSha: actual,
            message: `GitHub refused to merge pull request #${pull.prNumber}: ${result.message}${refusal === "" ? "" : ` (moving ${branch}: ${refusal})`}`
          })
        }
      }
      const tip = yield* readBranch(repo, branch)
      if (tip === null) return yield* badInput(`${branch} disappeared after merging`)
      const [merged, tested] = yield* Effect.all([commitMeta(repo, tip), commitMeta(repo, input.newSha)])
      if (merged.tree !== tested.tree) {
        yield* Effect.logWarning(
          `the merged ${branch} (${tip}, tree ${merged.tree}) is not the tested tree ${tested.tree} of ${input.newSha}`
        )
      }
      return tip
    }).pipe(
      Effect.catchTags({
        GitHubApiError: (e) => Effect.fail(repoErrors(input.repo)(e)),
        GitHubRateLimited: (e) => Effect.fail(toGitError(e))
      })
    )

  // ------------------------------------------------------------------ the rest

  return { compareAndSwap, merge }
}
