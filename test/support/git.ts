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
  /**
   * A push from outside Greenline that moves `branch` (default main) to the existing commit `sha`, e.g. a PR's head
   * merged by hand (on the simulated GitHub: with its webhooks, the PRs whose heads it contains closed as merged).
   */
  readonly pushSha: (sha: string, branch?: string) => void
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

/** Runs git synchronously (cwd = `cwd`, `input` on its stdin); returns trimmed stdout, throws with stderr on failure. */
export const runGitSync = (
  cwd: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {},
  input?: Uint8Array
): string => {
  const result = Bun.spawnSync(["git", ...args], {
    cwd,
    env: { ...isolatedEnv(), ...env },
    ...(input === undefined ? {} : { stdin: input }),
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
  const work = (args: ReadonlyArray<string>, input?: Uint8Array): string =>
    runGitSync(workDir, args, { GIT_OBJECT_DIRECTORY: objects }, input)
  work(["init", "-q", "-b", "scratch", "."])

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

  /**
   * One `git fast-import` per commit (in the scratch repository, into the bare one's objects): a commit used to take a
   * checkout, a clean, an add, a commit and a rev-parse, and a push to move the ref.
   */
  const commit = (base: string | null, spec: CommitSpec): string => {
    clock += 60
    const author = spec.author ?? options.author ?? DEFAULT_AUTHOR
    const who = `${author.name} <${author.email}> ${clock} +0000`
    const data = (text: string | Uint8Array) => {
      const bytes = typeof text === "string" ? Buffer.from(text) : text
      return [Buffer.from(`data ${bytes.length}\n`), bytes, Buffer.from("\n")]
    }
    const parts: Array<Uint8Array> = [
      Buffer.from(`commit refs/heads/scratch\nmark :1\nauthor ${who}\ncommitter ${who}\n`),
      ...data(`${(spec.message ?? `commit ${clock}`).trimEnd()}\n`),
      Buffer.from(base === null ? "deleteall\n" : `from ${resolve(base)}\n`)
    ]
    for (const [file, content] of Object.entries(spec.files ?? {})) {
      if (content === null) parts.push(Buffer.from(`D ${file}\n`))
      else parts.push(Buffer.from(`M 100644 inline ${file}\n`), ...data(content))
    }
    parts.push(Buffer.from("\nget-mark :1\ndone\n"))
    return work(["fast-import", "--quiet", "--force", "--done"], Buffer.concat(parts))
  }

  // the objects are in the bare repository already: a push is a move of the ref
  const push = (sha: string, ref: string): void => {
    bare("update-ref", ref, sha)
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
  push(initial, "refs/heads/main")

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
      push(sha, `refs/pull/${n}/head`)
      return sha
    },
    forcePushPr: (n, spec = {}) => {
      const sha = buildPr(n, spec)
      push(sha, `refs/pull/${n}/head`)
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
      push(sha, `refs/heads/${branch}`)
      return sha
    },
    pushSha: (sha, branch = "main") => push(sha, `refs/heads/${branch}`),
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
