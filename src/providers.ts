/**
 * The Git host of a repository, chosen by its host: repositories on GitHub's host (GITHUB_HOST, default github.com)
 * use the GitHub provider when GitHub is configured (an App id with its private key, or GITHUB_TOKEN); every other
 * repository, and every repository when GitHub is not configured, uses the local Git provider (bare repositories
 * under GIT_ROOT), as before the GitHub provider existed.
 */
import { Effect, Layer } from "effect"
import { AppConfig } from "./config.ts"
import { makeLocalGit } from "./git-local/LocalGit.ts"
import { GitHubClient, githubConfigured } from "./github/GitHubClient.ts"
import { makeGitHubHost } from "./github/GitHubHost.ts"
import { GitHost, type GitHostService, type RepoRef } from "./queue/GitHost.ts"

/** A GitHostService that sends each call to `github` for repositories on `githubHost`, else to `local`. */
export const routeByHost = (options: {
  readonly githubHost: string
  readonly github: GitHostService | null
  readonly local: GitHostService
}): GitHostService => {
  const githubHost = options.githubHost.toLowerCase()
  const github = options.github
  const pick = (repo: RepoRef): GitHostService =>
    github !== null && repo.host.toLowerCase() === githubHost ? github : options.local
  return {
    getPullRequest: (repo, prNumber) => pick(repo).getPullRequest(repo, prNumber),
    listPullHeads: (repo) => pick(repo).listPullHeads(repo),
    getBranchSha: (repo, branch) => pick(repo).getBranchSha(repo, branch),
    buildTestBranch: (input) => pick(input.repo).buildTestBranch(input),
    rebaseOnto: (input) => pick(input.repo).rebaseOnto(input),
    compareAndSwap: (repo, branch, expectedOld, newSha) => pick(repo).compareAndSwap(repo, branch, expectedOld, newSha),
    merge: (input) => pick(input.repo).merge(input),
    requiredStatusChecks: (repo, branch) => pick(repo).requiredStatusChecks(repo, branch),
    deleteBranch: (repo, branch) => pick(repo).deleteBranch(repo, branch),
    readFile: (repo, sha, path) => pick(repo).readFile(repo, sha, path),
    isAncestor: (repo, ancestor, descendant) => pick(repo).isAncestor(repo, ancestor, descendant),
    repoExists: (repo) => pick(repo).repoExists(repo),
    remotePullRequests: (repo) => pick(repo).remotePullRequests?.(repo) === true,
    watchRefs: (repo, refs, changed) => pick(repo).watchRefs?.(repo, refs, changed) ?? Effect.succeed(false)
  }
}

/** GitHost for the application: the GitHub provider (when configured) beside the local one. */
export const ProvidersLayer: Layer.Layer<GitHost, never, AppConfig | GitHubClient> = Layer.effect(
  GitHost,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const client = yield* GitHubClient
    const local = makeLocalGit(config.gitRoot, { watchMs: config.gitPollMs })
    const github = githubConfigured(config) && client.mode !== "none" ? makeGitHubHost(client) : null
    return routeByHost({ githubHost: config.githubHost, github, local })
  })
)
