/**
 * Test helpers for the local Git provider: real bare repositories in temporary folders.
 *
 * ```ts
 * const repo = createTestRepo({ files: { "README.md": "hello\n" } })   // GIT_ROOT = repo.root, bare repo on `main`
 * const head = repo.createPr(1, { files: { "a.txt": "a\n" }, title: "Add a" })  // refs/pull/1/head
 * repo.pushToMain({ "b.txt": "b\n" })                                       // an outside push to main
 * repo.forcePushPr(1, { files: { "a.txt": "A\n" } })                        // a force-push of PR 1
 * repo.cleanup()                                                            // in afterEach/afterAll
 * ```
 *
 * Commits are made in a scratch (non-bare) repository whose object store is the bare repository's own
 * (GIT_OBJECT_DIRECTORY), so any commit of the bare repository — including ones Greenline built — can be used as a
 * base, every commit made (pushed or not) is usable by Greenline, and refs are moved with `git push`. Commit dates are deterministic (a fixed start, one minute per commit), so two test repositories built by
 * the same steps have the same SHAs. Everything is synchronous (for use in test set-up).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { RepoRef } from "../../src/queue/GitHost.ts"
import { removeDir, tempDir } from "./tmp.ts"

/** path -> new content; `null` deletes the file. */
export type FileChanges = Readonly<Record<string, string | null>>

export interface Author {
  readonly name: string
  readonly email: string
}

export interface CommitSpec {
  readonly files?: FileChanges
  /** Commit message (subject and optional body). */
  readonly message?: string
  readonly author?: Author
}

export interface PrSpec {
  /** A single commit's changes (ignored when `commits` is given). */
  readonly files?: FileChanges
  /** Several commits, applied in order. */
  readonly commits?: ReadonlyArray<CommitSpec>
  /** Message of the last commit, i.e. the PR title. Default "PR #<n>". */
  readonly title?: string
  readonly author?: Author
  /** Where the PR starts: a sha, or a branch of the bare repository. Default "main". */
  readonly base?: string
}

export interface TestRepo {
  /** The GIT_ROOT to give to LocalGit. */
  readonly root: string
  readonly repo: RepoRef
  /** The bare repository: `<root>/<host>/<owner>/<name>.git`. */
  readonly gitDir: string
  /** The scratch repository commits are made in. */
  readonly workDir: string
  /** Runs git in the bare repository; returns trimmed standard output, throws on failure. */
  readonly git: (...args: ReadonlyArray<string>) => string
  /** Sha of a branch of the bare repository (default main), or null. */
  readonly branchSha: (branch?: string) => string | null
  /** Creates a commit on `base` (a sha or branch; null = a root commit) without moving any ref; returns its sha. */
  readonly commit: (base: string | null, spec: CommitSpec) => string
  /** Creates refs/pull/<n>/head (fails if it exists); returns the head sha. */
  readonly createPr: (n: number, spec?: PrSpec) => string
  /** Replaces refs/pull/<n>/head with new commits (a force-push); returns the new head sha. */
  readonly forcePushPr: (n: number, spec?: PrSpec) => string
  /** Deletes refs/pull/<n>/head. */
  readonly deletePr: (n: number) => void
  /** A commit pushed to `branch` (default main) from outside Greenline, fast-forward; returns its sha. */
  readonly pushToMain: (files: FileChanges, options?: { message?: string; branch?: string; author?: Author }) => string
  /** Sets refs/heads/<branch> of the bare repository to sha (forced). */
  readonly setBranch: (branch: string, sha: string) => void
  /** Removes the temporary folders (root included, unless it was given). */
  readonly cleanup: () => void
}

export const DEFAULT_REPO: RepoRef = { host: "local", owner: "acme", name: "app" }
export const DEFAULT_AUTHOR: Author = { name: "Test Author", email: "author@example.com" }

const isolatedEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("GIT_")) env[key] = value
  }
  env.GIT_TERMINAL_PROMPT = "0"
  env.GIT_CONFIG_NOSYSTEM = "1"
  env.GIT_CONFIG_GLOBAL = "/dev/null"
  env.LC_ALL = "C"
  return env
}

/** Runs git synchronously (cwd = `cwd`); returns trimmed stdout, throws with stderr on failure. */
export const runGitSync = (
  cwd: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
): string => {
  const result = Bun.spawnSync(["git", ...args], {
    cwd,
    env: { ...isolatedEnv(), ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  if (result.exitCode !== 0) {
    throw new Error(`git ${args.join(" ")} failed (${result.exitCode}): ${result.stderr.toString()}`)
  }
  return result.stdout.toString().trim()
}

/** A fresh temporary folder, removed at the latest when the test process exits. */
export const makeTempDir = tempDir

/**
 * Creates a bare repository with an initial commit on `main` (files default `{ "README.md": "hello\n" }`).
 * `root` defaults to a new temporary folder (removed by cleanup); several repositories may share one root.
 */
export const createTestRepo = (
  options: { root?: string; repo?: RepoRef; files?: FileChanges; author?: Author } = {}
): TestRepo => {
  const ownRoot = options.root === undefined
  const root = options.root ?? makeTempDir("greenline-gitroot-")
  const repo = options.repo ?? DEFAULT_REPO
  const gitDir = path.join(root, repo.host, repo.owner, `${repo.name}.git`)
  const workDir = makeTempDir("greenline-work-")
  let clock = 1_700_000_000

  fs.mkdirSync(path.dirname(gitDir), { recursive: true })
  runGitSync(root, ["init", "-q", "--bare", "-b", "main", gitDir])
  const objects = path.join(gitDir, "objects")
  const work = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}): string =>
    runGitSync(workDir, args, { GIT_OBJECT_DIRECTORY: objects, ...env })
  work(["init", "-q", "-b", "scratch", "."])
  work(["remote", "add", "origin", gitDir])

  const bare = (...args: ReadonlyArray<string>): string => runGitSync(root, [`--git-dir=${gitDir}`, ...args])

  const branchSha = (branch = "main"): string | null => {
    try {
      return bare("rev-parse", "--verify", "--quiet", `refs/heads/${branch}^{commit}`)
    } catch {
      return null
    }
  }

  const resolve = (rev: string): string => {
    if (/^[0-9a-f]{40,64}$/.test(rev)) return rev
    const sha = branchSha(rev)
    if (sha === null) throw new Error(`no branch ${rev} in ${gitDir}`)
    return sha
  }

  const commit = (base: string | null, spec: CommitSpec): string => {
    if (base === null) {
      work(["checkout", "-q", "-f", "--orphan", `orphan-${clock}`])
      work(["rm", "-rfq", "--ignore-unmatch", "."])
    } else {
      work(["checkout", "-q", "-f", "--detach", resolve(base)])
    }
    work(["clean", "-fdqx"])
    for (const [file, content] of Object.entries(spec.files ?? {})) {
      const target = path.join(workDir, file)
      if (content === null) {
        fs.rmSync(target, { force: true })
      } else {
        fs.mkdirSync(path.dirname(target), { recursive: true })
        fs.writeFileSync(target, content)
      }
    }
    work(["add", "-A"])
    clock += 60
    const author = spec.author ?? options.author ?? DEFAULT_AUTHOR
    work(["commit", "-q", "--allow-empty", "--no-verify", "-m", spec.message ?? `commit ${clock}`], {
      GIT_AUTHOR_NAME: author.name,
      GIT_AUTHOR_EMAIL: author.email,
      GIT_AUTHOR_DATE: `@${clock} +0000`,
      GIT_COMMITTER_NAME: author.name,
      GIT_COMMITTER_EMAIL: author.email,
      GIT_COMMITTER_DATE: `@${clock} +0000`
    })
    return work(["rev-parse", "HEAD"])
  }

  const push = (sha: string, ref: string, force: boolean): void => {
    work(["push", "-q", ...(force ? ["--force"] : []), "origin", `${sha}:${ref}`])
  }

  const buildPr = (n: number, spec: PrSpec): string => {
    const commits: ReadonlyArray<CommitSpec> = spec.commits ?? [{ files: spec.files ?? { [`pr-${n}.txt`]: `${n}\n` } }]
    let sha = resolve(spec.base ?? "main")
    commits.forEach((c, i) => {
      const last = i === commits.length - 1
      const message = last ? (spec.title ?? c.message ?? `PR #${n}`) : (c.message ?? `PR #${n} part ${i + 1}`)
      const author = c.author ?? spec.author
      sha = commit(sha, { files: c.files ?? {}, message, ...(author === undefined ? {} : { author }) })
    })
    return sha
  }

  const prExists = (n: number): boolean => {
    try {
      bare("rev-parse", "--verify", "--quiet", `refs/pull/${n}/head`)
      return true
    } catch {
      return false
    }
  }

  const initial = commit(null, { files: options.files ?? { "README.md": "hello\n" }, message: "Initial commit" })
  push(initial, "refs/heads/main", false)

  return {
    root,
    repo,
    gitDir,
    workDir,
    git: bare,
    branchSha,
    commit,
    createPr: (n, spec = {}) => {
      if (prExists(n)) throw new Error(`refs/pull/${n}/head already exists`)
      const sha = buildPr(n, spec)
      push(sha, `refs/pull/${n}/head`, false)
      return sha
    },
    forcePushPr: (n, spec = {}) => {
      const sha = buildPr(n, spec)
      push(sha, `refs/pull/${n}/head`, true)
      return sha
    },
    deletePr: (n) => {
      bare("update-ref", "-d", `refs/pull/${n}/head`)
    },
    pushToMain: (files, pushOptions = {}) => {
      const branch = pushOptions.branch ?? "main"
      const sha = commit(branch, {
        files,
        message: pushOptions.message ?? "Outside change",
        ...(pushOptions.author === undefined ? {} : { author: pushOptions.author })
      })
      push(sha, `refs/heads/${branch}`, false)
      return sha
    },
    setBranch: (branch, sha) => {
      bare("update-ref", `refs/heads/${branch}`, sha)
    },
    cleanup: () => {
      removeDir(workDir)
      if (ownRoot) removeDir(root)
      else removeDir(path.join(root, repo.host, repo.owner, `${repo.name}.git`))
    }
  }
}
