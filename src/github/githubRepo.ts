/** The GitHub provider's repository calls (reads, branches, commit metadata) and shared helpers. */
import { Effect } from "effect"
import {
  GitError,
  type GitHostService,
  GREENLINE_EMAIL,
  GREENLINE_NAME,
  invalidBranchName,
  PrMerged,
  PrNotFound,
  type PullRequestInfo,
  RepoNotFound,
  type RepoRef
} from "../queue/GitHost.ts"
import {
  GitHubAuth,
  type GitHubClientService,
  type GitHubError,
  type GitHubParams,
  type GitHubRequestOptions,
  type GitHubResponse,
  type GitHubRoute
} from "./GitHubClient.ts"

/** An open pull request as the listing shows it. */
export interface OpenPull {
  readonly number: number
  readonly headSha: string
  readonly headRef: string
  readonly baseRef: string
  readonly draft: boolean
  readonly title: string
  readonly author: string
}

export interface GitHubHostService extends GitHostService {
  /** Every open pull request of the repository (conditional requests: an unchanged listing costs no budget). */
  readonly listOpenPulls: (repo: RepoRef) => Effect.Effect<ReadonlyArray<OpenPull>, RepoNotFound | GitError>
}

export const GREENLINE = { name: GREENLINE_NAME, email: GREENLINE_EMAIL }
export const SCAFFOLD_DATE = "1970-01-01T00:00:00Z"
export const SHA_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/
export const PER_PAGE = 100

export interface CommitMeta {
  readonly sha: string
  readonly tree: string
  readonly parents: ReadonlyArray<string>
  readonly author: { readonly name: string; readonly email: string; readonly date: string }
  readonly committerDate: string
  readonly message: string
}

export const prNumberFromMessage = (message: string): number => {
  const subject = message.split("\n")[0] ?? ""
  const m = /^Merge pull request #(\d+)/.exec(subject) ?? /\(#(\d+)\)\s*$/.exec(subject)
  return m?.[1] === undefined ? 0 : Number(m[1])
}

export const toGitError = (e: GitHubError): GitError =>
  new GitError({
    args: [e.route],
    exitCode: e._tag === "GitHubApiError" ? e.status : 429,
    stderr: e.message,
    message: `GitHub ${e.route}: ${e._tag === "GitHubApiError" ? e.status : "rate limited"} ${e.message}`
  })

export const badInput = (message: string) => new GitError({ args: [], exitCode: null, stderr: "", message })

export const checkSha = (sha: string, what: string): Effect.Effect<string, GitError> =>
  SHA_RE.test(sha) ? Effect.succeed(sha) : Effect.fail(badInput(`${what} is not a full sha: '${sha}'`))

export const checkBranch = (branch: string): Effect.Effect<string, GitError> => {
  const reason = invalidBranchName(branch)
  return reason === null ? Effect.succeed(branch) : Effect.fail(badInput(reason))
}

export const isStatus = (e: GitHubError, ...statuses: ReadonlyArray<number>): boolean =>
  e._tag === "GitHubApiError" && statuses.includes(e.status)

export const INSTALLATION_ROUTE = "GET /repos/{owner}/{repo}/installation"
export const PULLS_ROUTE = "GET /repos/{owner}/{repo}/pulls"

export const repoNotFound = (repo: RepoRef) =>
  new RepoNotFound({
    repo,
    invalid: false,
    message: `${repo.owner}/${repo.name} does not exist on GitHub or the App is not installed on it`
  })

/**
 * A repository the App is not installed on (or the token cannot see) is RepoNotFound: a 404 on the installation
 * lookup or on the repository's pull request listing. The rest is GitError.
 */
export const repoErrors =
  (repo: RepoRef) =>
  (e: GitHubError): RepoNotFound | GitError =>
    e._tag === "GitHubApiError" && e.status === 404 && (e.route === INSTALLATION_ROUTE || e.route === PULLS_ROUTE)
      ? repoNotFound(repo)
      : toGitError(e)

export type TrialMerge = { readonly _tag: "Merged"; readonly tree: string } | { readonly _tag: "Conflict" }

/** The repository calls every part of the GitHub provider builds on: reads, branches, commit metadata. */
export const makeRepoCalls = (client: GitHubClientService) => {
  const call =
    (repo: RepoRef) =>
    <R extends GitHubRoute>(
      route: R,
      params: Omit<GitHubParams<R>, "owner" | "repo">,
      options?: GitHubRequestOptions
    ): Effect.Effect<GitHubResponse<R>, GitHubError> =>
      client.request(
        route,
        { owner: repo.owner, repo: repo.name, ...params } as unknown as GitHubParams<R>,
        GitHubAuth.repository(repo.owner, repo.name),
        options
      )

  // ------------------------------------------------------------------ reads

  /** Commits are immutable: their metadata is kept (bounded). */
  const metas = new Map<string, CommitMeta>()
  const remember = (meta: CommitMeta) => {
    if (metas.size >= 20_000) metas.clear()
    metas.set(meta.sha, meta)
  }

  const commitMeta = (repo: RepoRef, sha: string): Effect.Effect<CommitMeta, GitHubError> =>
    Effect.suspend(() => {
      const known = metas.get(sha)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(call(repo)("GET /repos/{owner}/{repo}/git/commits/{commit_sha}", { commit_sha: sha }), (r) => {
        const meta: CommitMeta = {
          sha: r.data.sha,
          tree: r.data.tree.sha,
          parents: r.data.parents.map((p) => p.sha),
          author: { name: r.data.author.name, email: r.data.author.email, date: r.data.author.date },
          committerDate: r.data.committer.date,
          message: r.data.message
        }
        remember(meta)
        return meta
      })
    })

  /** Whether the repository exists and the App (or token) can see it. */
  const visible = (repo: RepoRef): Effect.Effect<boolean, GitHubError> =>
    call(repo)("GET /repos/{owner}/{repo}/pulls", { state: "open", per_page: 1 }, { conditional: true }).pipe(
      Effect.as(true),
      Effect.catchIf(
        (e) => isStatus(e, 404),
        () => Effect.succeed(false)
      )
    )

  const listOpenPulls = (repo: RepoRef): Effect.Effect<ReadonlyArray<OpenPull>, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const out: Array<OpenPull> = []
      for (let page = 1; page <= 100; page++) {
        const r = yield* call(repo)(
          "GET /repos/{owner}/{repo}/pulls",
          { state: "open", per_page: PER_PAGE, page },
          { conditional: true }
        )
        for (const p of r.data) {
          out.push({
            number: p.number,
            headSha: p.head.sha,
            headRef: p.head.ref,
            baseRef: p.base.ref,
            draft: p.draft === true,
            title: p.title,
            author: p.user?.login ?? ""
          })
        }
        if (r.data.length < PER_PAGE) break
      }
      return out
    }).pipe(Effect.mapError(repoErrors(repo)))

  const getPullRequest = (
    repo: RepoRef,
    prNumber: number
  ): Effect.Effect<PullRequestInfo, PrNotFound | PrMerged | RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const notFound = (why: string) =>
        new PrNotFound({ repo, prNumber, message: `pull request #${prNumber} ${why} in ${repo.owner}/${repo.name}` })
      if (!Number.isSafeInteger(prNumber) || prNumber <= 0) return yield* notFound("not found")
      const r = yield* call(repo)("GET /repos/{owner}/{repo}/pulls/{pull_number}", { pull_number: prNumber }).pipe(
        // a 404 is the pull request's, or the repository's when the App cannot see it
        Effect.catchIf(
          (e) => isStatus(e, 404),
          () => Effect.flatMap(visible(repo), (seen) => Effect.fail(seen ? notFound("not found") : repoNotFound(repo)))
        ),
        Effect.mapError((e) => (e._tag === "PrNotFound" || e._tag === "RepoNotFound" ? e : repoErrors(repo)(e)))
      )
      const pr = r.data
      if (pr.merged === true)
        return yield* new PrMerged({
          repo,
          prNumber,
          message: `pull request #${prNumber} is merged in ${repo.owner}/${repo.name}`
        })
      if (pr.state !== "open") return yield* notFound("is closed")
      const mergeability: PullRequestInfo["mergeability"] =
        pr.mergeable === true
          ? "mergeable"
          : pr.mergeable === false || pr.mergeable_state === "dirty"
            ? "not_mergeable"
            : "in_progress"
      return {
        number: pr.number,
        headSha: pr.head.sha,
        title: pr.title,
        author: pr.user.login,
        baseBranch: pr.base.ref,
        draft: pr.draft === true,
        mergeability
      }
    })

  const listPullHeads = (repo: RepoRef): Effect.Effect<ReadonlyMap<number, string>, RepoNotFound | GitError> =>
    Effect.map(listOpenPulls(repo), (pulls) => new Map(pulls.map((p) => [p.number, p.headSha] as const)))

  const readBranch = (repo: RepoRef, branch: string): Effect.Effect<string | null, GitHubError> =>
    // conditional: the runners poll their target's tip, and an unchanged ref costs no budget
    call(repo)("GET /repos/{owner}/{repo}/git/ref/{ref}", { ref: `heads/${branch}` }, { conditional: true }).pipe(
      Effect.map((r) => r.data.object.sha),
      Effect.catchIf(
        (e) => isStatus(e, 404),
        () => Effect.succeed(null)
      )
    )

  const getBranchSha = (repo: RepoRef, branch: string): Effect.Effect<string | null, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      yield* checkBranch(branch)
      return yield* readBranch(repo, branch).pipe(Effect.mapError(repoErrors(repo)))
    })

  // ------------------------------------------------------------------ building

  /** Points refs/heads/<branch> at sha (forced), creating it when it does not exist. */
  const setBranch = (repo: RepoRef, branch: string, sha: string): Effect.Effect<void, GitHubError> =>
    // test and scratch branches are new names: create first, move (forced) when it exists already (a retried build)
    call(repo)("POST /repos/{owner}/{repo}/git/refs", { ref: `refs/heads/${branch}`, sha }).pipe(
      Effect.asVoid,
      Effect.catchIf(
        (e) => isStatus(e, 422),
        () =>
          call(repo)("PATCH /repos/{owner}/{repo}/git/refs/{ref}", {
            ref: `heads/${branch}`,
            sha,
            force: true
          }).pipe(Effect.asVoid)
      )
    )

  const deleteRef = (repo: RepoRef, branch: string): Effect.Effect<void, GitHubError> =>
    call(repo)("DELETE /repos/{owner}/{repo}/git/refs/{ref}", { ref: `heads/${branch}` }).pipe(
      Effect.asVoid,
      Effect.catchIf(
        (e) => isStatus(e, 404, 422),
        () => Effect.void
      )
    )

  return {
    call,
    remember,
    commitMeta,
    visible,
    listOpenPulls,
    getPullRequest,
    listPullHeads,
    readBranch,
    getBranchSha,
    setBranch,
    deleteRef
  }
}

export type RepoCalls = ReturnType<typeof makeRepoCalls>
