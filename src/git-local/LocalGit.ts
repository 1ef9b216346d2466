/** The local Git provider: bare repositories driven by the real `git` (design notes: docs/architecture.md). */
import * as path from "node:path"
import { Clock, Effect, Either, Layer } from "effect"
import {
  type BuildTestBranchInput,
  type BuildTestBranchResult,
  GitError,
  GitHost,
  type GitHostService,
  heldRefLock,
  MergeConflict,
  type MergeInput,
  PrNotFound,
  type PullRequestInfo,
  type RebaseOntoInput,
  type RepoNotFound,
  type RepoRef
} from "../queue/GitHost.ts"
import { makeCatFile, summarizeCommit } from "./catFile.ts"
import { decoder, failure, git, runGit, updateRef } from "./gitRun.ts"
import {
  type CommitMeta,
  cherryPickTree,
  commitTree,
  identityEnv,
  listCommits,
  mergeTree,
  prNumberFromMessage,
  readCommits,
  treeOf
} from "./plumbing.ts"
import { makeRefWatch } from "./RefWatch.ts"
import { checkBranch, checkSha, existingGitDir, formatRepo, isBareRepo, repoGitDir } from "./repoPaths.ts"

// The service
// ---------------------------------------------------------------------------------------------------------------

/** How often pushes are looked for when the caller does not say (GIT_POLL_MS's default). */
const DEFAULT_WATCH_MS = 2000

const asGitError = (e: RepoNotFound): GitError =>
  new GitError({ args: [], exitCode: null, stderr: "", message: e.message })

export const makeLocalGit = (gitRootInput: string, options?: { readonly watchMs?: number }): GitHostService => {
  const gitRoot = path.resolve(gitRootInput)
  const refWatch = makeRefWatch(options?.watchMs ?? DEFAULT_WATCH_MS)
  const dirOf = (repo: RepoRef) => existingGitDir(gitRoot, repo)
  const catFile = makeCatFile()

  // submissions read PR heads of the same few repositories over and over: a repository seen a moment ago is not
  // looked for on disk again (a read that then fails looks again, so a repository removed meanwhile is still 404)
  const seen = new Map<string, number>()
  const SEEN_MS = 1_000
  const recentDirOf = (repo: RepoRef) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const key = formatRepo(repo)
      const until = seen.get(key)
      if (until !== undefined && until > now) return repoGitDir(gitRoot, repo)
      return Effect.tap(dirOf(repo), () => {
        if (seen.size > 1_000) seen.clear()
        seen.set(key, now + SEEN_MS)
      })
    })

  const getPullRequest = (
    repo: RepoRef,
    prNumber: number
  ): Effect.Effect<PullRequestInfo, PrNotFound | RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* recentDirOf(repo)
      // made only when needed: an error captures a stack trace
      const notFound = () =>
        new PrNotFound({ repo, prNumber, message: `pull request #${prNumber} not found in ${formatRepo(repo)}` })
      if (!Number.isSafeInteger(prNumber) || prNumber <= 0) return yield* notFound()
      // one line to the repository's cat-file process, not a git process per submission
      const object = yield* catFile.read(gitDir, `refs/pull/${prNumber}/head^{commit}`).pipe(
        // a repository removed meanwhile is a 404 (RepoNotFound), not a failed read
        Effect.catchAll((error) => {
          seen.delete(formatRepo(repo))
          return Effect.flatMap(dirOf(repo), () => Effect.fail(error))
        })
      )
      if (object !== null && object.type === "commit") {
        const { subject, authorName } = summarizeCommit(object.content)
        return { number: prNumber, headSha: object.sha, title: subject, author: authorName }
      }
      // not there: because the repository itself is gone (RepoNotFound)?
      seen.delete(formatRepo(repo))
      yield* dirOf(repo)
      return yield* notFound()
    })

  const listPullHeads = (repo: RepoRef): Effect.Effect<ReadonlyMap<number, string>, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* dirOf(repo)
      const out = yield* git(gitDir, ["for-each-ref", "--format=%(objectname) %(refname)", "refs/pull/"])
      const heads = new Map<number, string>()
      for (const line of out.split("\n")) {
        const m = /^([0-9a-f]+) refs\/pull\/(\d+)\/head$/.exec(line)
        if (m?.[1] !== undefined && m[2] !== undefined) heads.set(Number(m[2]), m[1])
      }
      return heads
    })

  const readRef = (gitDir: string, ref: string): Effect.Effect<string | null, GitError> => {
    const args = ["rev-parse", "--verify", "--quiet", "--end-of-options", ref]
    return Effect.flatMap(runGit(gitDir, args), (result) =>
      result.exitCode === 0
        ? Effect.succeed(result.stdout.trim())
        : result.exitCode === 1
          ? Effect.succeed(null)
          : Effect.fail(failure(args, result))
    )
  }

  // every runner reads its target branch once per Git poll: a line to the repository's cat-file process, not a
  // `git rev-parse` each (the ref is read anew for each line)
  const getBranchSha = (repo: RepoRef, branch: string): Effect.Effect<string | null, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* dirOf(repo)
      yield* checkBranch(branch)
      const object = yield* catFile.read(gitDir, `refs/heads/${branch}`)
      return object?.sha ?? null
    })

  /** Replays `commits` onto `start`; returns the new tip after each commit (or null when it was dropped). */
  const replay = (
    gitDir: string,
    start: { sha: string; tree: string },
    commits: ReadonlyArray<CommitMeta>,
    options: { dropEmpty: boolean; keepOtherParents: boolean },
    onConflict: (commit: CommitMeta, index: number, paths: ReadonlyArray<string>) => MergeConflict
  ): Effect.Effect<{ sha: string; tree: string }, MergeConflict | GitError> =>
    Effect.gen(function* () {
      let tip = start
      for (const [index, commit] of commits.entries()) {
        const merged = yield* cherryPickTree(gitDir, tip.sha, tip.tree, commit)
        if (merged._tag === "Conflict") return yield* onConflict(commit, index, merged.paths)
        if (options.dropEmpty && merged.tree === tip.tree) continue
        const parents = options.keepOtherParents ? [tip.sha, ...commit.parents.slice(1)] : [tip.sha]
        const env = identityEnv(commit.authorName, commit.authorEmail, commit.authorDate, commit.committerDate)
        const sha = yield* commitTree(gitDir, merged.tree, parents, commit.message, env)
        tip = { sha, tree: merged.tree }
      }
      return tip
    })

  /** (parent, item, method) -> the commit built for it; valid forever, since builds are deterministic. */
  const builtCommits = new Map<string, string>()

  const buildTestBranch = (
    input: BuildTestBranchInput
  ): Effect.Effect<BuildTestBranchResult, MergeConflict | RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* dirOf(input.repo)
      yield* checkBranch(input.branch)
      yield* checkSha(input.baseSha, "baseSha")
      for (const item of input.items) yield* checkSha(item.headSha, `head of #${item.prNumber}`)
      const conflict = (index: number, paths: ReadonlyArray<string>) => {
        const prNumber = input.items[index]?.prNumber ?? 0
        return new MergeConflict({
          prNumber,
          index,
          paths,
          message: `pull request #${prNumber} does not merge cleanly (${paths.join(", ") || "conflict"})`
        })
      }
      const commits: Array<string> = []
      let tip = input.baseSha

      if (input.method === "rebase") {
        const [baseTree, lists] = yield* Effect.all(
          [
            treeOf(gitDir, input.baseSha),
            Effect.forEach(
              input.items,
              (item) => listCommits(gitDir, [item.headSha, `^${input.baseSha}`], ["--no-merges"]),
              {
                concurrency: 8
              }
            )
          ],
          { concurrency: 2 }
        )
        let state = { sha: input.baseSha, tree: baseTree }
        for (const [index, list] of lists.entries()) {
          state = yield* replay(gitDir, state, list, { dropEmpty: true, keepOtherParents: false }, (_c, _i, paths) =>
            conflict(index, paths)
          )
          commits.push(state.sha)
        }
        tip = state.sha
      } else {
        // A commit is a function of its parent and the item, so a chain's prefix built before is reused as is:
        // only the items past the last remembered one cost git calls.
        const keyOf = (parent: string, item: (typeof input.items)[number]) =>
          `${gitDir}\0${input.method}\0${parent}\0${item.headSha}\0${item.prNumber}\0${item.title}`
        let reused = 0
        for (const item of input.items) {
          const known = builtCommits.get(keyOf(tip, item))
          if (known === undefined) break
          tip = known
          commits.push(known)
          reused++
        }
        const rest = input.items.slice(reused)
        const metas =
          rest.length === 0
            ? new Map()
            : yield* readCommits(
                gitDir,
                rest.map((item) => item.headSha)
              )
        for (const [offset, item] of rest.entries()) {
          const index = reused + offset
          const parent = tip
          const head = metas.get(item.headSha)
          if (head === undefined)
            return yield* new GitError({ args: [], exitCode: null, stderr: "", message: "missing head" })
          const merged = yield* mergeTree(gitDir, tip, item.headSha, false)
          if (merged._tag === "Conflict") return yield* conflict(index, merged.paths)
          const env = identityEnv(head.authorName, head.authorEmail, head.authorDate, head.committerDate)
          tip =
            input.method === "merge_commit"
              ? yield* commitTree(
                  gitDir,
                  merged.tree,
                  [tip, item.headSha],
                  `Merge pull request #${item.prNumber}: ${item.title}\n`,
                  env
                )
              : yield* commitTree(gitDir, merged.tree, [tip], `${item.title} (#${item.prNumber})\n`, env)
          commits.push(tip)
          if (builtCommits.size >= 50_000) builtCommits.clear()
          builtCommits.set(keyOf(parent, item), tip)
        }
      }
      const updateArgs = ["update-ref", "--no-deref", `refs/heads/${input.branch}`, tip]
      const updated = yield* updateRef(gitDir, updateArgs)
      if (updated.exitCode !== 0) return yield* failure(updateArgs, updated)
      return { sha: tip, commits }
    })

  const rebaseOnto = (input: RebaseOntoInput): Effect.Effect<string, MergeConflict | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* Effect.mapError(dirOf(input.repo), asGitError)
      yield* checkSha(input.baseSha, "baseSha")
      yield* checkSha(input.laneSha, "laneSha")
      yield* checkSha(input.ontoSha, "ontoSha")
      if (input.ontoSha === input.baseSha) return input.laneSha
      const [lane, ontoTree] = yield* Effect.all(
        [listCommits(gitDir, [input.laneSha, `^${input.baseSha}`], ["--first-parent"]), treeOf(gitDir, input.ontoSha)],
        { concurrency: 2 }
      )
      const tip = yield* replay(
        gitDir,
        { sha: input.ontoSha, tree: ontoTree },
        lane,
        { dropEmpty: false, keepOtherParents: true },
        (commit, index, paths) =>
          new MergeConflict({
            prNumber: prNumberFromMessage(commit.message),
            index,
            paths,
            message: `lane commit ${commit.sha} does not apply onto ${input.ontoSha} (${paths.join(", ") || "conflict"})`
          })
      )
      return tip.sha
    })

  const compareAndSwap = (
    repo: RepoRef,
    branch: string,
    expectedOld: string,
    newSha: string
  ): Effect.Effect<boolean, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* dirOf(repo)
      yield* checkBranch(branch)
      yield* checkSha(expectedOld, "expectedOld")
      yield* checkSha(newSha, "newSha")
      const ref = `refs/heads/${branch}`
      const args = ["update-ref", "--no-deref", ref, newSha, expectedOld]
      for (let attempt = 0; ; attempt++) {
        const result = yield* updateRef(gitDir, args)
        if (result.exitCode === 0) return true
        const current = yield* readRef(gitDir, ref)
        const expectedAbsent = /^0+$/.test(expectedOld)
        if (expectedAbsent ? current !== null : current !== expectedOld) return false
        // The ref is still where we expected: a concurrent writer held the lock, or a real error.
        if (attempt < 5 && /lock/i.test(result.stderr)) {
          yield* Effect.sleep(10 * (attempt + 1))
          continue
        }
        return yield* failure(args, result)
      }
    })

  const merge = (input: MergeInput): Effect.Effect<string | null, RepoNotFound | GitError> =>
    Effect.map(compareAndSwap(input.repo, input.branch, input.expectedOld, input.newSha), (swapped) =>
      swapped ? input.newSha : null
    )

  const deleteBranch = (repo: RepoRef, branch: string): Effect.Effect<void, GitError> =>
    Effect.gen(function* () {
      yield* checkBranch(branch)
      const dir = yield* Effect.mapError(repoGitDir(gitRoot, repo), asGitError)
      if (!isBareRepo(dir)) return
      const args = ["update-ref", "--no-deref", "-d", `refs/heads/${branch}`]
      for (let attempt = 0; ; attempt++) {
        const result = yield* updateRef(dir, args)
        if (result.exitCode === 0) return
        if (attempt < 5 && /lock/i.test(result.stderr)) {
          yield* Effect.sleep(10 * (attempt + 1))
          continue
        }
        // gone already, unless a lock holds its place: a git that died creating it left one (removed once stale,
        // so the runner's next try deletes it) or a live git is writing it
        if ((yield* readRef(dir, `refs/heads/${branch}`)) === null && !heldRefLock(result.stderr)) return
        return yield* failure(args, result)
      }
    })

  const readFile = (repo: RepoRef, sha: string, filePath: string): Effect.Effect<string | null, GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* Effect.mapError(dirOf(repo), asGitError)
      yield* checkSha(sha, "sha")
      const clean = filePath.replace(/^\.?\/+/, "")
      if (clean === "" || /[\n\r]/.test(clean)) return null
      const result = yield* runGit(gitDir, ["cat-file", "--batch"], { stdin: `${sha}:${clean}\n` })
      if (result.exitCode !== 0) return yield* failure(["cat-file", "--batch"], result)
      const bytes = result.stdoutBytes
      const newline = bytes.indexOf(10)
      if (newline < 0) return null
      const header = decoder.decode(bytes.subarray(0, newline))
      const m = /^[0-9a-f]+ (\w+) (\d+)$/.exec(header)
      if (m === null || m[1] !== "blob") return null
      const size = Number(m[2])
      return decoder.decode(bytes.subarray(newline + 1, newline + 1 + size))
    })

  // whether one commit is an ancestor of another never changes: the answers are remembered (bounded), so that a
  // submission's check that its PR is not in the target (#37: a git process each, a third of the submission's cost)
  // is asked of git once per head and tip
  const ancestry = new Map<string, boolean>()
  const ANCESTRY_MAX = 10_000
  const isAncestor = (repo: RepoRef, ancestor: string, descendant: string): Effect.Effect<boolean, GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* Effect.mapError(dirOf(repo), asGitError)
      yield* checkSha(ancestor, "ancestor")
      yield* checkSha(descendant, "descendant")
      const key = `${gitDir}\n${ancestor}\n${descendant}`
      const known = ancestry.get(key)
      if (known !== undefined) return known
      const args = ["merge-base", "--is-ancestor", ancestor, descendant]
      const result = yield* runGit(gitDir, args)
      if (result.exitCode !== 0 && result.exitCode !== 1) return yield* failure(args, result)
      if (ancestry.size >= ANCESTRY_MAX) ancestry.clear()
      ancestry.set(key, result.exitCode === 0)
      return result.exitCode === 0
    })

  const repoExists = (repo: RepoRef): Effect.Effect<boolean> =>
    Effect.sync(() => Either.match(repoGitDir(gitRoot, repo), { onLeft: () => false, onRight: isBareRepo }))

  return {
    getPullRequest,
    listPullHeads,
    getBranchSha,
    buildTestBranch,
    rebaseOnto,
    compareAndSwap,
    merge,
    requiredStatusChecks: () => Effect.succeed([]),
    deleteBranch,
    readFile,
    isAncestor,
    repoExists,
    watchRefs: (repo, refs, changed) =>
      Either.match(repoGitDir(gitRoot, repo), {
        onLeft: () => Effect.succeed(false),
        onRight: (gitDir) => Effect.as(refWatch.watch(gitDir, refs, changed), true)
      })
  }
}

/** GitHost over the bare repositories under `gitRoot` (GIT_ROOT). */
export const LocalGitLayer = (gitRoot: string): Layer.Layer<GitHost> => Layer.succeed(GitHost, makeLocalGit(gitRoot))
