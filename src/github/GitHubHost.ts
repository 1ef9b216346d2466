/** The GitHub provider: the Git host port over GitHub's REST API (design notes: docs/architecture.md). */
import { Effect } from "effect"
import {
  type BuildTestBranchInput,
  type BuildTestBranchResult,
  GitError,
  type GitHostService,
  GREENLINE_EMAIL,
  GREENLINE_NAME,
  invalidBranchName,
  MergeConflict,
  type MergeInput,
  MergeRefused,
  PrNotFound,
  type PullRequestInfo,
  type RebaseOntoInput,
  RepoNotFound,
  type RepoRef
} from "../queue/GitHost.ts"
import {
  type GitHubApiError,
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

const GREENLINE = { name: GREENLINE_NAME, email: GREENLINE_EMAIL }
const SCAFFOLD_DATE = "1970-01-01T00:00:00Z"
const SHA_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/
const PER_PAGE = 100

interface CommitMeta {
  readonly sha: string
  readonly tree: string
  readonly parents: ReadonlyArray<string>
  readonly author: { readonly name: string; readonly email: string; readonly date: string }
  readonly committerDate: string
  readonly message: string
}

const prNumberFromMessage = (message: string): number => {
  const subject = message.split("\n")[0] ?? ""
  const m = /^Merge pull request #(\d+)/.exec(subject) ?? /\(#(\d+)\)\s*$/.exec(subject)
  return m?.[1] === undefined ? 0 : Number(m[1])
}

const toGitError = (e: GitHubError): GitError =>
  new GitError({
    args: [e.route],
    exitCode: e._tag === "GitHubApiError" ? e.status : 429,
    stderr: e.message,
    message: `GitHub ${e.route}: ${e._tag === "GitHubApiError" ? e.status : "rate limited"} ${e.message}`
  })

const badInput = (message: string) => new GitError({ args: [], exitCode: null, stderr: "", message })

const checkSha = (sha: string, what: string): Effect.Effect<string, GitError> =>
  SHA_RE.test(sha) ? Effect.succeed(sha) : Effect.fail(badInput(`${what} is not a full sha: '${sha}'`))

const checkBranch = (branch: string): Effect.Effect<string, GitError> => {
  const reason = invalidBranchName(branch)
  return reason === null ? Effect.succeed(branch) : Effect.fail(badInput(reason))
}

const isStatus = (e: GitHubError, ...statuses: ReadonlyArray<number>): boolean =>
  e._tag === "GitHubApiError" && statuses.includes(e.status)

const INSTALLATION_ROUTE = "GET /repos/{owner}/{repo}/installation"
const PULLS_ROUTE = "GET /repos/{owner}/{repo}/pulls"

const repoNotFound = (repo: RepoRef) =>
  new RepoNotFound({
    repo,
    invalid: false,
    message: `${repo.owner}/${repo.name} does not exist on GitHub or the App is not installed on it`
  })

/**
 * A repository the App is not installed on (or the token cannot see) is RepoNotFound: a 404 on the installation
 * lookup or on the repository's pull request listing. The rest is GitError.
 */
const repoErrors =
  (repo: RepoRef) =>
  (e: GitHubError): RepoNotFound | GitError =>
    e._tag === "GitHubApiError" && e.status === 404 && (e.route === INSTALLATION_ROUTE || e.route === PULLS_ROUTE)
      ? repoNotFound(repo)
      : toGitError(e)

export const makeGitHubHost = (client: GitHubClientService): GitHubHostService => {
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
  ): Effect.Effect<PullRequestInfo, PrNotFound | RepoNotFound | GitError> =>
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
      if (pr.state !== "open") return yield* notFound(pr.merged === true ? "is merged" : "is closed")
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

  type TrialMerge = { readonly _tag: "Merged"; readonly tree: string } | { readonly _tag: "Conflict" }

  /**
   * Merges `head` into the branch (at its current commit) with the merges API and returns the merged tree; the
   * branch moves to GitHub's merge commit. `ontoTree` is the tree when there is nothing to merge (204).
   */
  const trialMerge = (
    repo: RepoRef,
    branch: string,
    head: string,
    ontoTree: string
  ): Effect.Effect<TrialMerge, GitHubError> =>
    call(repo)("POST /repos/{owner}/{repo}/merges", {
      base: branch,
      head,
      commit_message: `greenline trial merge of ${head}`
    }).pipe(
      Effect.map((r): TrialMerge => {
        if (r.status === 201) return { _tag: "Merged", tree: r.data.commit.tree.sha }
        return { _tag: "Merged", tree: ontoTree }
      }),
      Effect.catchIf(
        (e) => isStatus(e, 409),
        () => Effect.succeed<TrialMerge>({ _tag: "Conflict" })
      )
    )

  const createCommit = (
    repo: RepoRef,
    tree: string,
    parents: ReadonlyArray<string>,
    message: string,
    author: { readonly name: string; readonly email: string; readonly date: string },
    committerDate: string
  ): Effect.Effect<string, GitHubError> =>
    Effect.map(
      call(repo)("POST /repos/{owner}/{repo}/git/commits", {
        message,
        tree,
        parents: [...parents],
        author: { name: author.name.trim() === "" ? "unknown" : author.name, email: author.email, date: author.date },
        committer: { ...GREENLINE, date: committerDate }
      }),
      (r) => {
        remember({
          sha: r.data.sha,
          tree,
          parents,
          author,
          committerDate,
          message
        })
        return r.data.sha
      }
    )

  /** Commits of the PR not in `base` (merges left out), oldest first. */
  const prCommits = (
    repo: RepoRef,
    base: string,
    head: string
  ): Effect.Effect<ReadonlyArray<CommitMeta>, GitHubError> =>
    Effect.gen(function* () {
      const out: Array<CommitMeta> = []
      for (let page = 1; page <= 100; page++) {
        const r = yield* call(repo)("GET /repos/{owner}/{repo}/compare/{basehead}", {
          basehead: `${base}...${head}`,
          per_page: PER_PAGE,
          page
        })
        for (const c of r.data.commits) {
          const meta: CommitMeta = {
            sha: c.sha,
            tree: c.commit.tree.sha,
            parents: c.parents.map((p) => p.sha),
            author: {
              name: c.commit.author?.name ?? "",
              email: c.commit.author?.email ?? "",
              date: c.commit.author?.date ?? SCAFFOLD_DATE
            },
            committerDate: c.commit.committer?.date ?? SCAFFOLD_DATE,
            message: c.commit.message
          }
          remember(meta)
          if (meta.parents.length <= 1) out.push(meta)
        }
        if (r.data.commits.length < PER_PAGE || out.length >= r.data.total_commits) break
      }
      return out
    })

  type Tip = { readonly sha: string; readonly tree: string }

  /**
   * Applies `commit` onto `tip` (3-way merge with base = the commit's first parent), using `scratch` as the branch
   * the merges API works on. Returns the new tip, the same tip when the commit became empty and `dropEmpty`, or null
   * on a conflict.
   */
  const cherryPick = (
    repo: RepoRef,
    scratch: string,
    tip: Tip,
    commit: CommitMeta,
    options: { readonly dropEmpty: boolean; readonly keepOtherParents: boolean }
  ): Effect.Effect<Tip | null, GitHubError> =>
    Effect.gen(function* () {
      const parent = commit.parents[0]
      let tree: string
      if (parent === tip.sha) {
        tree = commit.tree
      } else {
        const scaffold = yield* createCommit(
          repo,
          tip.tree,
          parent === undefined ? [] : [parent],
          "greenline cherry-pick scaffold\n",
          { ...GREENLINE, date: SCAFFOLD_DATE },
          SCAFFOLD_DATE
        )
        yield* setBranch(repo, scratch, scaffold)
        const merged = yield* trialMerge(repo, scratch, commit.sha, tip.tree)
        if (merged._tag === "Conflict") return null
        tree = merged.tree
      }
      if (options.dropEmpty && tree === tip.tree) return tip
      const parents = options.keepOtherParents ? [tip.sha, ...commit.parents.slice(1)] : [tip.sha]
      const sha = yield* createCommit(repo, tree, parents, commit.message, commit.author, commit.committerDate)
      return { sha, tree }
    })

  /** (parent, item, method) -> the commit built for it (builds are deterministic; kept bounded). */
  const built = new Map<string, { readonly sha: string; readonly tree: string }>()

  /** Test branch -> the draft pull request opened for it. */
  const testPulls = new Map<string, number>()

  const openTestPull = (repo: RepoRef, input: BuildTestBranchInput, base: string) =>
    Effect.gen(function* () {
      const key = `${repo.owner}/${repo.name}\0${input.branch}`
      if (testPulls.has(key)) return
      const existing = (yield* listOpenPulls(repo)).find((p) => p.headRef === input.branch)
      if (existing !== undefined) {
        testPulls.set(key, existing.number)
        return
      }
      const numbers = input.items.map((i) => `#${i.prNumber}`).join(", ")
      const body = {
        title: `Greenline: testing ${numbers}`,
        head: input.branch,
        base,
        body: `Test branch of the merge queue for ${numbers} into \`${base}\`. Greenline closes it when the run ends.`
      }
      const created = yield* call(repo)("POST /repos/{owner}/{repo}/pulls", { ...body, draft: true }).pipe(
        // repositories whose plan has no draft pull requests refuse draft: true
        Effect.catchIf(
          (e) => isStatus(e, 422) && /draft/i.test(e.message),
          () => call(repo)("POST /repos/{owner}/{repo}/pulls", body)
        )
      )
      testPulls.set(key, created.data.number)
    }).pipe(
      Effect.catchAll((e) => Effect.logWarning(`could not open a pull request for ${input.branch}: ${e.message}`))
    )

  /**
   * Builds on a scratch branch (the merges API needs a branch to merge into) and sets the test branch once, to the
   * built tip: CI that runs on pushes to `trunk-merge/**` sees only the commit to test, never an intermediate one.
   */
  const buildTestBranch = (
    input: BuildTestBranchInput
  ): Effect.Effect<BuildTestBranchResult, MergeConflict | RepoNotFound | GitError> => {
    const scratch = { name: `greenline/scratch/${crypto.randomUUID()}`, at: null as string | null, used: false }
    return Effect.gen(function* () {
      const repo = input.repo
      yield* checkBranch(input.branch)
      yield* checkSha(input.baseSha, "baseSha")
      for (const item of input.items) yield* checkSha(item.headSha, `head of #${item.prNumber}`)
      const conflict = (index: number) => {
        const prNumber = input.items[index]?.prNumber ?? 0
        return new MergeConflict({
          prNumber,
          index,
          paths: [],
          message: `pull request #${prNumber} does not merge cleanly`
        })
      }
      const base = yield* commitMeta(repo, input.baseSha)
      let tip: Tip = { sha: base.sha, tree: base.tree }
      const moveScratch = (sha: string) => {
        scratch.used = true
        return scratch.at === sha
          ? Effect.void
          : Effect.tap(setBranch(repo, scratch.name, sha), () => {
              scratch.at = sha
            })
      }
      const commits: Array<string> = []
      const keyOf = (parent: string, item: (typeof input.items)[number]) =>
        `${repo.owner}/${repo.name}\0${input.method}\0${parent}\0${item.headSha}\0${item.prNumber}\0${item.title}`

      for (const [index, item] of input.items.entries()) {
        const known = built.get(keyOf(tip.sha, item))
        if (known !== undefined) {
          tip = known
          commits.push(known.sha)
          continue
        }
        const parent = tip
        if (input.method === "rebase") {
          const list = yield* prCommits(repo, input.baseSha, item.headSha)
          for (const commit of list) {
            scratch.used = true
            scratch.at = null
            const next = yield* cherryPick(repo, scratch.name, tip, commit, {
              dropEmpty: true,
              keepOtherParents: false
            })
            if (next === null) return yield* conflict(index)
            tip = next
          }
        } else {
          yield* moveScratch(tip.sha)
          const merged = yield* trialMerge(repo, scratch.name, item.headSha, tip.tree)
          scratch.at = null
          if (merged._tag === "Conflict") return yield* conflict(index)
          const head = yield* commitMeta(repo, item.headSha)
          const sha =
            input.method === "merge_commit"
              ? yield* createCommit(
                  repo,
                  merged.tree,
                  [tip.sha, item.headSha],
                  `Merge pull request #${item.prNumber}: ${item.title}\n`,
                  head.author,
                  head.committerDate
                )
              : yield* createCommit(
                  repo,
                  merged.tree,
                  [tip.sha],
                  `${item.title} (#${item.prNumber})\n`,
                  head.author,
                  head.committerDate
                )
          tip = { sha, tree: merged.tree }
        }
        commits.push(tip.sha)
        if (built.size >= 50_000) built.clear()
        built.set(keyOf(parent.sha, item), tip)
      }
      yield* setBranch(repo, input.branch, tip.sha)
      if (input.pullRequest !== undefined && input.items.length > 0) {
        yield* openTestPull(repo, input, input.pullRequest.base)
      }
      return { sha: tip.sha, commits }
    }).pipe(
      Effect.ensuring(
        Effect.suspend(() => (scratch.used ? Effect.ignore(deleteRef(input.repo, scratch.name)) : Effect.void))
      ),
      Effect.catchTags({
        GitHubApiError: (e) => Effect.fail(repoErrors(input.repo)(e)),
        GitHubRateLimited: (e) => Effect.fail(toGitError(e))
      })
    )
  }

  const rebaseOnto = (input: RebaseOntoInput): Effect.Effect<string, MergeConflict | GitError> =>
    Effect.gen(function* () {
      const repo = input.repo
      yield* checkSha(input.baseSha, "baseSha")
      yield* checkSha(input.laneSha, "laneSha")
      yield* checkSha(input.ontoSha, "ontoSha")
      if (input.ontoSha === input.baseSha) return input.laneSha
      // the lane's first-parent chain, newest first, down to the base
      const chain: Array<CommitMeta> = []
      let at = input.laneSha
      while (at !== input.baseSha) {
        if (chain.length >= 1000)
          return yield* badInput(`${input.laneSha} is not within 1000 commits of ${input.baseSha}`)
        const meta = yield* commitMeta(repo, at)
        chain.push(meta)
        const parent = meta.parents[0]
        if (parent === undefined) return yield* badInput(`${input.baseSha} is not an ancestor of ${input.laneSha}`)
        at = parent
      }
      chain.reverse()
      const onto = yield* commitMeta(repo, input.ontoSha)
      const scratch = `greenline/scratch/${crypto.randomUUID()}`
      return yield* Effect.gen(function* () {
        let tip: Tip = { sha: onto.sha, tree: onto.tree }
        for (const [index, commit] of chain.entries()) {
          const next = yield* cherryPick(repo, scratch, tip, commit, { dropEmpty: false, keepOtherParents: true })
          if (next === null) {
            return yield* new MergeConflict({
              prNumber: prNumberFromMessage(commit.message),
              index,
              paths: [],
              message: `lane commit ${commit.sha} does not apply onto ${input.ontoSha}`
            })
          }
          tip = next
        }
        return tip.sha
      }).pipe(Effect.ensuring(deleteRef(repo, scratch).pipe(Effect.ignore)))
    }).pipe(
      Effect.catchTags({
        GitHubApiError: (e) => Effect.fail(toGitError(e)),
        GitHubRateLimited: (e) => Effect.fail(toGitError(e))
      })
    )

  // ------------------------------------------------------------------ moving the target

  type RefUpdate = "moved" | "not_fast_forward" | { readonly refused: string }

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
    repoExists
  }
}
