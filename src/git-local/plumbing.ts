/** Commit metadata and the plumbing steps of test branches: merge-tree, commit-tree, cherry-picks. */
import { Effect } from "effect"
import { GitError, GREENLINE_EMAIL, GREENLINE_NAME } from "../queue/GitHost.ts"
import { failure, git, runGit } from "./gitRun.ts"
import { SHA_RE } from "./repoPaths.ts"

// Commit metadata and plumbing steps
// ---------------------------------------------------------------------------------------------------------------

export interface CommitMeta {
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
export const readCommits = (
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
export const listCommits = (
  gitDir: string,
  rangeArgs: ReadonlyArray<string>,
  flags: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<CommitMeta>, GitError> =>
  Effect.map(
    git(gitDir, ["log", "--reverse", "--topo-order", ...flags, "-z", "--date=raw", META_FORMAT, ...rangeArgs, "--"]),
    parseMeta
  )

export const identityEnv = (
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

export const commitTree = (
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
export const mergeTree = (
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
export const cherryPickTree = (
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

export const treeOf = (gitDir: string, rev: string): Effect.Effect<string, GitError> =>
  Effect.map(git(gitDir, ["rev-parse", "--verify", "--end-of-options", `${rev}^{tree}`]), (s) => s.trim())

export const prNumberFromMessage = (message: string): number => {
  const subject = message.split("\n")[0] ?? ""
  const m = /^Merge pull request #(\d+)/.exec(subject) ?? /\(#(\d+)\)\s*$/.exec(subject)
  return m?.[1] === undefined ? 0 : Number(m[1])
}

// ---------------------------------------------------------------------------------------------------------------
