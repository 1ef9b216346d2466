/** The GitHub provider: the Git host port over GitHub's REST API (design notes: docs/architecture.md). */
import { Effect } from "effect"
import type { GitError, RepoRef } from "../queue/GitHost.ts"
import type { GitHubClientService } from "./GitHubClient.ts"
import { makeTestBranchBuilds } from "./githubBuild.ts"
import { makeMerges } from "./githubMerge.ts"
import {
  checkBranch,
  checkSha,
  type GitHubHostService,
  INSTALLATION_ROUTE,
  isStatus,
  makeRepoCalls,
  type OpenPull,
  toGitError
} from "./githubRepo.ts"

export const makeGitHubHost = (client: GitHubClientService): GitHubHostService => {
  const repo = makeRepoCalls(client)
  const { call, visible, listOpenPulls, getPullRequest, listPullHeads, getBranchSha, deleteRef } = repo
  const { buildTestBranch, rebaseOnto, testPulls } = makeTestBranchBuilds(repo)
  const { compareAndSwap, merge } = makeMerges(repo)

  const requiredStatusChecks = (repo: RepoRef, branch: string): Effect.Effect<ReadonlyArray<string>, GitError> =>
    Effect.gen(function* () {
      yield* checkBranch(branch)
      const r = yield* call(repo)("GET /repos/{owner}/{repo}/branches/{branch}/protection/required_status_checks", {
        branch
      })
      const names = new Set<string>(r.data.contexts ?? [])
      for (const check of r.data.checks ?? []) names.add(check.context)
      return [...names]
    }).pipe(
      Effect.catchIf(
        (e) => e._tag !== "GitError" && isStatus(e, 404),
        () => Effect.succeed([])
      ),
      Effect.catchIf(
        (e) => e._tag !== "GitError" && isStatus(e, 403),
        (e) =>
          Effect.as(
            Effect.logWarning(`cannot read the protection of ${branch} (${e.message}): no required checks from it`),
            []
          )
      ),
      Effect.catchTags({
        GitHubApiError: (e) => Effect.fail(toGitError(e)),
        GitHubRateLimited: (e) => Effect.fail(toGitError(e))
      })
    )

  const deleteBranch = (repo: RepoRef, branch: string): Effect.Effect<void, GitError> =>
    Effect.gen(function* () {
      yield* checkBranch(branch)
      const key = `${repo.owner}/${repo.name}\0${branch}`
      let pull = testPulls.get(key)
      if (pull === undefined && branch.startsWith("trunk-merge/")) {
        // opened before a restart: find it among the open pull requests
        const open = yield* listOpenPulls(repo).pipe(Effect.orElseSucceed((): ReadonlyArray<OpenPull> => []))
        pull = open.find((p) => p.headRef === branch)?.number
      }
      if (pull !== undefined) {
        yield* call(repo)("PATCH /repos/{owner}/{repo}/pulls/{pull_number}", {
          pull_number: pull,
          state: "closed"
        }).pipe(Effect.catchAll((e) => Effect.logWarning(`could not close #${pull} of ${branch}: ${e.message}`)))
        testPulls.delete(key)
      }
      yield* deleteRef(repo, branch).pipe(
        Effect.catchIf(
          (e) => e._tag === "GitHubApiError" && e.route === INSTALLATION_ROUTE && e.status === 404,
          () => Effect.void
        ),
        Effect.mapError(toGitError)
      )
    })

  const readFile = (repo: RepoRef, sha: string, filePath: string): Effect.Effect<string | null, GitError> =>
    Effect.gen(function* () {
      yield* checkSha(sha, "sha")
      const clean = filePath.replace(/^\.?\/+/, "")
      if (clean === "" || /[\n\r]/.test(clean)) return null
      const r = yield* call(repo)("GET /repos/{owner}/{repo}/contents/{path}", { path: clean, ref: sha }).pipe(
        Effect.map((r) => r.data),
        Effect.catchIf(
          (e) => isStatus(e, 404),
          () => Effect.succeed(null)
        ),
        Effect.mapError(toGitError)
      )
      if (r === null || Array.isArray(r) || r.type !== "file" || !("content" in r)) return null
      if (r.encoding === "base64") return Buffer.from(r.content, "base64").toString("utf8")
      if (r.encoding === "none" || r.encoding === undefined) {
        // too large for the contents API (over 1 MB): not a configuration file we read
        return r.content === "" ? null : r.content
      }
      return r.content
    })

  const isAncestor = (repo: RepoRef, ancestor: string, descendant: string): Effect.Effect<boolean, GitError> =>
    Effect.gen(function* () {
      yield* checkSha(ancestor, "ancestor")
      yield* checkSha(descendant, "descendant")
      if (ancestor === descendant) return true
      const r = yield* call(repo)("GET /repos/{owner}/{repo}/compare/{basehead}", {
        basehead: `${ancestor}...${descendant}`,
        per_page: 1
      }).pipe(Effect.mapError(toGitError))
      return r.data.status === "ahead" || r.data.status === "identical"
    })

  const repoExists = (repo: RepoRef): Effect.Effect<boolean> => visible(repo).pipe(Effect.orElseSucceed(() => false))

  return {
    getPullRequest,
    listPullHeads,
    listOpenPulls,
    getBranchSha,
    buildTestBranch,
    rebaseOnto,
    compareAndSwap,
    merge,
    requiredStatusChecks,
    deleteBranch,
    readFile,
    isAncestor,
    repoExists,
    remotePullRequests: () => true
  }
}
