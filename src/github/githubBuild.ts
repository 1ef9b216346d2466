import { Effect } from "effect"
import {
  type BuildTestBranchInput,
  type BuildTestBranchResult,
  type GitError,
  MergeConflict,
  type RebaseOntoInput,
  type RepoNotFound,
  type RepoRef
} from "../queue/GitHost.ts"
import type { GitHubError } from "./GitHubClient.ts"
import {
  badInput,
  type CommitMeta,
  checkBranch,
  checkSha,
  GREENLINE,
  isStatus,
  PER_PAGE,
  prNumberFromMessage,
  type RepoCalls,
  repoErrors,
  SCAFFOLD_DATE,
  type TrialMerge,
  toGitError
} from "./githubRepo.ts"

export type Tip = { readonly sha: string; readonly tree: string }

export type RefUpdate = "moved" | "not_fast_forward" | { readonly refused: string }

/** Test branches on GitHub: trial merges, commits, cherry-picks, draft pull requests (docs/architecture.md). */
export const makeTestBranchBuilds = (repo: RepoCalls) => {
  const { call, remember, commitMeta, listOpenPulls, setBranch, deleteRef } = repo

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

  return { buildTestBranch, rebaseOnto, testPulls }
}
