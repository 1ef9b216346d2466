/** Repository references and bare repository paths under GIT_ROOT, validated before git sees them. */
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Either } from "effect"
import { GitError, invalidBranchName, RepoNotFound, type RepoRef } from "../queue/GitHost.ts"

// ---------------------------------------------------------------------------------------------------------------
// Validation and paths
// ---------------------------------------------------------------------------------------------------------------

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
export const CONTROL = /[\u0000-\u001f\u007f]/

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

export const isBareRepo = (dir: string): boolean => {
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

export const SHA_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

export const checkSha = (sha: string, what: string): Effect.Effect<string, GitError> =>
  SHA_RE.test(sha)
    ? Effect.succeed(sha)
    : Effect.fail(
        new GitError({ args: [], exitCode: null, stderr: "", message: `${what} is not a full sha: '${sha}'` })
      )

export const checkBranch = (branch: string): Effect.Effect<string, GitError> => {
  const reason = invalidBranchName(branch)
  return reason === null
    ? Effect.succeed(branch)
    : Effect.fail(new GitError({ args: [], exitCode: null, stderr: "", message: reason }))
}
