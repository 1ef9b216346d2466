/** The local Git provider: bare repositories driven by the real `git` (design notes: docs/architecture.md). */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Clock, Effect, Either, Layer } from "effect"
import {
  type BuildTestBranchInput,
  type BuildTestBranchResult,
  GitError,
  GitHost,
  type GitHostService,
  GREENLINE_EMAIL,
  GREENLINE_NAME,
  invalidBranchName,
  MergeConflict,
  type MergeInput,
  PrNotFound,
  type PullRequestInfo,
  type RebaseOntoInput,
  RepoNotFound,
  type RepoRef
} from "../queue/GitHost.ts"
import { makeCatFile, summarizeCommit } from "./catFile.ts"
import { gitEnvironment } from "./gitEnv.ts"

// ---------------------------------------------------------------------------------------------------------------
// Validation and paths
// ---------------------------------------------------------------------------------------------------------------

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/

/** Why a repository identity part is refused, or null when it is acceptable. */
const invalidPart = (label: string, value: string, allowSlash: boolean): string | null => {
  if (value.length === 0) return `${label} is empty`
  if (value.length > 200) return `${label} is too long`
  if (value.startsWith("-")) return `${label} starts with '-'`
  if (value.startsWith(".")) return `${label} starts with '.'`
  if (value.includes("..")) return `${label} contains '..'`
  if (value.includes("\\")) return `${label} contains '\\'`
  if (CONTROL.test(value)) return `${label} contains control characters`
  if (!allowSlash && value.includes("/")) return `${label} contains '/'`
  return null
}

/** Null when `repo` is a valid identity, else the reason it is refused (no part may escape GIT_ROOT). */
export const validateRepoRef = (repo: RepoRef): string | null =>
  invalidPart("host", repo.host, false) ??
  invalidPart("owner", repo.owner, false) ??
  invalidPart("name", repo.name, false)

/** The bare repository path of `repo` under `gitRoot`, or the reason the identity is refused. */
export const repoGitDir = (gitRoot: string, repo: RepoRef): Either.Either<string, RepoNotFound> => {
  const reason = validateRepoRef(repo)
  if (reason !== null) {
    return Either.left(
      new RepoNotFound({ repo, invalid: true, message: `invalid repository ${formatRepo(repo)}: ${reason}` })
    )
  }
  const root = path.resolve(gitRoot)
  const dir = path.join(root, repo.host, repo.owner, `${repo.name}.git`)
  if (!dir.startsWith(root + path.sep)) {
    return Either.left(new RepoNotFound({ repo, invalid: true, message: `invalid repository ${formatRepo(repo)}` }))
  }
  return Either.right(dir)
}

export const formatRepo = (repo: RepoRef): string => `${repo.host}/${repo.owner}/${repo.name}`

const isBareRepo = (dir: string): boolean => {
  try {
    return fs.statSync(path.join(dir, "objects")).isDirectory() && fs.statSync(path.join(dir, "HEAD")).isFile()
  } catch {
    return false
  }
}

/** Resolves `repo` to an existing bare repository. */
export const existingGitDir = (gitRoot: string, repo: RepoRef): Effect.Effect<string, RepoNotFound> =>
  Effect.flatMap(repoGitDir(gitRoot, repo), (dir) =>
    isBareRepo(dir)
      ? Effect.succeed(dir)
      : Effect.fail(new RepoNotFound({ repo, invalid: false, message: `repository ${formatRepo(repo)} not found` }))
  )

const SHA_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

const checkSha = (sha: string, what: string): Effect.Effect<string, GitError> =>
  SHA_RE.test(sha)
    ? Effect.succeed(sha)
    : Effect.fail(
        new GitError({ args: [], exitCode: null, stderr: "", message: `${what} is not a full sha: '${sha}'` })
      )

const checkBranch = (branch: string): Effect.Effect<string, GitError> => {
  const reason = invalidBranchName(branch)
  return reason === null
    ? Effect.succeed(branch)
    : Effect.fail(new GitError({ args: [], exitCode: null, stderr: "", message: reason }))
}

// ---------------------------------------------------------------------------------------------------------------
// Running git
// ---------------------------------------------------------------------------------------------------------------

export interface GitRunOptions {
  /** Bytes written to git's standard input. */
  readonly stdin?: string
  /** Extra environment variables (e.g. GIT_AUTHOR_NAME). */
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
}

export interface GitRunResult {
  readonly exitCode: number
  readonly stdout: string
  readonly stdoutBytes: Uint8Array
  readonly stderr: string
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Runs `git --git-dir=<gitDir> -c core.hooksPath=/dev/null <args>` and returns its exit code and output; fails only
 * when the process cannot be run. Interrupting the effect kills the process.
 */
export const runGit = (
  gitDir: string,
  args: ReadonlyArray<string>,
  options: GitRunOptions = {}
): Effect.Effect<GitRunResult, GitError> =>
  Effect.async<GitRunResult, GitError>((resume) => {
    const cmd = ["git", `--git-dir=${gitDir}`, "-c", "core.hooksPath=/dev/null", ...args]
    const spawn = () =>
      Bun.spawn(cmd, {
        env: gitEnvironment(options.env),
        cwd: options.cwd ?? os.tmpdir(),
        stdin: options.stdin === undefined ? "ignore" : encoder.encode(options.stdin),
        stdout: "pipe",
        stderr: "pipe"
      })
    let proc: ReturnType<typeof spawn>
    try {
      proc = spawn()
    } catch (cause) {
      resume(Effect.fail(new GitError({ args, exitCode: null, stderr: "", message: `cannot run git: ${cause}` })))
      return
    }
    Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]).then(
      ([buffer, stderr, exitCode]) => {
        const stdoutBytes = new Uint8Array(buffer)
        resume(Effect.succeed({ exitCode, stdout: decoder.decode(stdoutBytes), stdoutBytes, stderr }))
      },
      (cause) =>
        resume(Effect.fail(new GitError({ args, exitCode: null, stderr: "", message: `git failed: ${cause}` })))
    )
    return Effect.sync(() => {
      if (proc.exitCode === null) proc.kill("SIGKILL")
    })
  })

const failure = (args: ReadonlyArray<string>, result: GitRunResult): GitError =>
  new GitError({
    args,
    exitCode: result.exitCode,
    stderr: result.stderr,
    message: `git ${args[0] ?? ""} exited with ${result.exitCode}: ${result.stderr.trim().split("\n").slice(-3).join(" | ")}`
  })

/** Runs git and returns its standard output; a non-zero exit fails with GitError. */
export const git = (
  gitDir: string,
  args: ReadonlyArray<string>,
  options: GitRunOptions = {}
): Effect.Effect<string, GitError> =>
  Effect.flatMap(runGit(gitDir, args, options), (result) =>
    result.exitCode === 0 ? Effect.succeed(result.stdout) : Effect.fail(failure(args, result))
  )

// ---------------------------------------------------------------------------------------------------------------
// Commit metadata and plumbing steps
// ---------------------------------------------------------------------------------------------------------------

interface CommitMeta {
  readonly sha: string
  readonly tree: string
  readonly parents: ReadonlyArray<string>
  readonly authorName: string
  readonly authorEmail: string
  /** `<unix seconds> <+zzzz>` */
  readonly authorDate: string
  readonly committerDate: string
  /** The raw message. */
  readonly message: string
}

const META_FORMAT = "--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%ad%x00%cd%x00%B"
const META_FIELDS = 8

const parseMeta = (stdout: string): ReadonlyArray<CommitMeta> => {
  const fields = stdout.split("\0")
  if (fields.length > 0 && fields[fields.length - 1] === "") fields.pop()
  const out: Array<CommitMeta> = []
  for (let i = 0; i + META_FIELDS <= fields.length; i += META_FIELDS) {
    const f = (k: number): string => fields[i + k] ?? ""
    out.push({
      sha: f(0).trim(),
      tree: f(1),
      parents: f(2) === "" ? [] : f(2).split(" "),
      authorName: f(3),
      authorEmail: f(4),
      authorDate: f(5),
      committerDate: f(6),
      message: f(7)
    })
  }
  return out
}

/** Metadata of the given commits (one `git log --no-walk`), keyed by sha. */
const readCommits = (
  gitDir: string,
  shas: ReadonlyArray<string>
): Effect.Effect<ReadonlyMap<string, CommitMeta>, GitError> => {
  const unique = [...new Set(shas)]
  if (unique.length === 0) return Effect.succeed(new Map())
  const args = ["log", "--no-walk=unsorted", "-z", "--date=raw", META_FORMAT, ...unique, "--"]
  return Effect.flatMap(git(gitDir, args), (stdout) => {
    const map = new Map(parseMeta(stdout).map((m) => [m.sha, m] as const))
    const missing = unique.filter((sha) => !map.has(sha))
    return missing.length === 0
      ? Effect.succeed(map)
      : Effect.fail(new GitError({ args, exitCode: 0, stderr: "", message: `not commits: ${missing.join(", ")}` }))
  })
}

/** Commits of `rangeArgs` (e.g. `[head, ^base]`), oldest first. */
const listCommits = (
  gitDir: string,
  rangeArgs: ReadonlyArray<string>,
  flags: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<CommitMeta>, GitError> =>
  Effect.map(
    git(gitDir, ["log", "--reverse", "--topo-order", ...flags, "-z", "--date=raw", META_FORMAT, ...rangeArgs, "--"]),
    parseMeta
  )

const identityEnv = (
  authorName: string,
  authorEmail: string,
  authorDate: string,
  committerDate: string
): Record<string, string> => ({
  GIT_AUTHOR_NAME: authorName.trim() === "" ? "unknown" : authorName,
  GIT_AUTHOR_EMAIL: authorEmail,
  GIT_AUTHOR_DATE: `@${authorDate}`,
  GIT_COMMITTER_NAME: GREENLINE_NAME,
  GIT_COMMITTER_EMAIL: GREENLINE_EMAIL,
  GIT_COMMITTER_DATE: `@${committerDate}`
})

/** Identity of the throwaway commits used to steer merge-tree's merge base. */
const SCAFFOLD_ENV = identityEnv(GREENLINE_NAME, GREENLINE_EMAIL, "0 +0000", "0 +0000")

const commitTree = (
  gitDir: string,
  tree: string,
  parents: ReadonlyArray<string>,
  message: string,
  env: Record<string, string>
): Effect.Effect<string, GitError> =>
  Effect.map(git(gitDir, ["commit-tree", tree, ...parents.flatMap((p) => ["-p", p])], { stdin: message, env }), (out) =>
    out.trim()
  )

type MergeTreeResult =
  | { readonly _tag: "Clean"; readonly tree: string }
  | { readonly _tag: "Conflict"; readonly paths: ReadonlyArray<string> }

/** `git merge-tree --write-tree ours theirs` (merge base computed by git). */
const mergeTree = (
  gitDir: string,
  ours: string,
  theirs: string,
  allowUnrelated: boolean
): Effect.Effect<MergeTreeResult, GitError> => {
  const args = [
    "merge-tree",
    "--write-tree",
    "-z",
    "--name-only",
    "--no-messages",
    ...(allowUnrelated ? ["--allow-unrelated-histories"] : []),
    ours,
    theirs
  ]
  return Effect.flatMap(runGit(gitDir, args), (result): Effect.Effect<MergeTreeResult, GitError> => {
    const parts = result.stdout.split("\0")
    const tree = (parts[0] ?? "").trim()
    if (result.exitCode === 0 && SHA_RE.test(tree)) return Effect.succeed({ _tag: "Clean", tree })
    if (result.exitCode === 1 && SHA_RE.test(tree)) {
      return Effect.succeed({ _tag: "Conflict", paths: [...new Set(parts.slice(1).filter((p) => p !== ""))] })
    }
    return Effect.fail(failure(args, result))
  })
}

/**
 * The tree of applying `commit` (against its first parent, the "mainline") onto a commit whose tree is `ontoTree`:
 * a 3-way merge with base = the commit's first parent (cherry-pick semantics).
 */
const cherryPickTree = (
  gitDir: string,
  onto: string,
  ontoTree: string,
  commit: CommitMeta
): Effect.Effect<MergeTreeResult, GitError> => {
  const parent = commit.parents[0]
  // Applying onto the commit's own parent: the result is the commit's tree.
  if (parent === onto) return Effect.succeed({ _tag: "Clean", tree: commit.tree })
  const scaffoldParents = parent === undefined ? [] : [parent]
  return Effect.flatMap(
    commitTree(gitDir, ontoTree, scaffoldParents, "greenline cherry-pick scaffold\n", SCAFFOLD_ENV),
    (scaffold) => mergeTree(gitDir, scaffold, commit.sha, parent === undefined)
  )
}

const treeOf = (gitDir: string, rev: string): Effect.Effect<string, GitError> =>
  Effect.map(git(gitDir, ["rev-parse", "--verify", "--end-of-options", `${rev}^{tree}`]), (s) => s.trim())

const prNumberFromMessage = (message: string): number => {
  const subject = message.split("\n")[0] ?? ""
  const m = /^Merge pull request #(\d+)/.exec(subject) ?? /\(#(\d+)\)\s*$/.exec(subject)
  return m?.[1] === undefined ? 0 : Number(m[1])
}

// ---------------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------------

const asGitError = (e: RepoNotFound): GitError =>
  new GitError({ args: [], exitCode: null, stderr: "", message: e.message })

export const makeLocalGit = (gitRootInput: string): GitHostService => {
  const gitRoot = path.resolve(gitRootInput)
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

  const getBranchSha = (repo: RepoRef, branch: string): Effect.Effect<string | null, RepoNotFound | GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* dirOf(repo)
      yield* checkBranch(branch)
      return yield* readRef(gitDir, `refs/heads/${branch}`)
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
      yield* git(gitDir, ["update-ref", "--no-deref", `refs/heads/${input.branch}`, tip])
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
        const result = yield* runGit(gitDir, args)
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
        const result = yield* runGit(dir, args)
        if (result.exitCode === 0) return
        if (attempt < 5 && /lock/i.test(result.stderr)) {
          yield* Effect.sleep(10 * (attempt + 1))
          continue
        }
        if ((yield* readRef(dir, `refs/heads/${branch}`)) === null) return
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

  const isAncestor = (repo: RepoRef, ancestor: string, descendant: string): Effect.Effect<boolean, GitError> =>
    Effect.gen(function* () {
      const gitDir = yield* Effect.mapError(dirOf(repo), asGitError)
      yield* checkSha(ancestor, "ancestor")
      yield* checkSha(descendant, "descendant")
      const args = ["merge-base", "--is-ancestor", ancestor, descendant]
      const result = yield* runGit(gitDir, args)
      if (result.exitCode === 0) return true
      if (result.exitCode === 1) return false
      return yield* failure(args, result)
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
    repoExists
  }
}

/** GitHost over the bare repositories under `gitRoot` (GIT_ROOT). */
export const LocalGitLayer = (gitRoot: string): Layer.Layer<GitHost> => Layer.succeed(GitHost, makeLocalGit(gitRoot))
