import { createHash } from "node:crypto"
import { Effect, Layer, Option } from "effect"
import { type AppConfigShape, makeAppConfig } from "../../src/config.ts"
import { layerPgliteMemory } from "../../src/db/Database.ts"
import { EventLogLive } from "../../src/events/EventLogLive.ts"
import { CommandCi, type CommandCiService } from "../../src/queue/CiRunner.ts"
import { EngineLive } from "../../src/queue/engine/EngineLive.ts"
import {
  GitError,
  GitHost,
  type GitHostService,
  MergeConflict,
  PrNotFound,
  RepoNotFound,
  type RepoRef
} from "../../src/queue/GitHost.ts"
import { QueueRepoLive } from "../../src/queue/QueueRepo.ts"
import { RunnerMetrics } from "../../src/queue/RunnerMetrics.ts"
import { RunnerHealthLive } from "../../src/queue/runner/health.ts"
import { RunnerProbe, type RunnerProbeShape } from "../../src/queue/runner/probe.ts"
import { StatusesLive } from "../../src/queue/Statuses.ts"
import { TenancyLive } from "../../src/tenancy/Tenancy.ts"

/**
 * Test layers of the engine's outward ports, in memory (docs/architecture.md, "Testing"): a Git host whose
 * repositories are maps of commits, and a built-in CI whose verdict is a function of the commit's files. Storage stays
 * real (in-memory PGlite, migrated); `engineTestLayer` provides `Engine` over them without HTTP, GitHub or webhooks.
 */

export type Files = Readonly<Record<string, string>>

interface Commit {
  readonly parents: ReadonlyArray<string>
  readonly files: Files
  readonly message: string
}

interface Pull {
  readonly headSha: string
  readonly title: string
  readonly author: string
}

/** One repository: commits by sha, branches and pull request heads. What a test reads and writes directly. */
export interface MemoryRepo {
  readonly ref: RepoRef
  /** Writes a commit (sha = hash of parents, files and message: the same content gives the same sha). */
  readonly commit: (parents: ReadonlyArray<string>, files: Files, message: string) => string
  readonly setBranch: (branch: string, sha: string) => void
  readonly branch: (branch: string) => string | undefined
  readonly files: (sha: string) => Files
  /** Messages of the first-parent chain of `branch`, oldest first, without the root commit. */
  readonly history: (branch: string) => ReadonlyArray<string>
  /** A PR on top of `base` (default: `main`'s tip) that writes `files`; returns its head. */
  readonly openPr: (
    number: number,
    files: Files,
    options?: { readonly title?: string; readonly base?: string }
  ) => string
}

const shaOf = (commit: Commit) =>
  createHash("sha1")
    .update(
      JSON.stringify([
        commit.parents,
        Object.entries(commit.files).sort(([a], [b]) => a.localeCompare(b)),
        commit.message
      ])
    )
    .digest("hex")

const repoKey = (ref: RepoRef) => `${ref.host}/${ref.owner}/${ref.name}`.toLowerCase()

const gitError = (args: ReadonlyArray<string>, message: string) =>
  new GitError({ args, exitCode: 128, stderr: message, message })

interface RepoState {
  readonly commits: Map<string, Commit>
  readonly branches: Map<string, string>
  readonly pulls: Map<number, Pull>
}

/** Every ancestor of `sha` (itself included), nearest first (breadth first). */
const ancestors = (repo: RepoState, sha: string): ReadonlyArray<string> => {
  const seen = new Set<string>([sha])
  const order = [sha]
  for (let i = 0; i < order.length; i++) {
    for (const p of repo.commits.get(order[i]!)?.parents ?? []) {
      if (!seen.has(p)) {
        seen.add(p)
        order.push(p)
      }
    }
  }
  return order
}

const mergeBase = (repo: RepoState, a: string, b: string): string | undefined => {
  const ofA = new Set(ancestors(repo, a))
  return ancestors(repo, b).find((sha) => ofA.has(sha))
}

/** The paths `from` → `to` changed, with their new content (undefined: deleted). */
const changes = (from: Files, to: Files): ReadonlyMap<string, string | undefined> => {
  const out = new Map<string, string | undefined>()
  for (const path of new Set([...Object.keys(from), ...Object.keys(to)])) {
    if (from[path] !== to[path]) out.set(path, to[path])
  }
  return out
}

/** `onto` with `changed` applied; the paths both sides changed differently since `base` conflict. */
const apply = (base: Files, onto: Files, changed: ReadonlyMap<string, string | undefined>) => {
  const files: Record<string, string> = { ...onto }
  const conflicts: Array<string> = []
  for (const [path, content] of changed) {
    if (onto[path] !== base[path] && onto[path] !== content) conflicts.push(path)
    else if (content === undefined) delete files[path]
    else files[path] = content
  }
  return { files: files as Files, conflicts }
}

/** A Git host over in-memory repositories, created with `repo(ref)`. */
export const makeMemoryGit = () => {
  const repos = new Map<string, RepoState>()
  const stateOf = (ref: RepoRef) => Option.fromNullable(repos.get(repoKey(ref)))
  const need = (ref: RepoRef) =>
    Option.match(stateOf(ref), {
      onNone: () =>
        Effect.fail(new RepoNotFound({ repo: ref, invalid: false, message: `no repository ${repoKey(ref)}` })),
      onSome: Effect.succeed
    })
  const write = (repo: RepoState, commit: Commit) => {
    const sha = shaOf(commit)
    repo.commits.set(sha, commit)
    return sha
  }
  const filesAt = (repo: RepoState, sha: string, args: ReadonlyArray<string>) => {
    const commit = repo.commits.get(sha)
    return commit === undefined ? Effect.fail(gitError(args, `unknown commit ${sha}`)) : Effect.succeed(commit.files)
  }

  const repo = (ref: RepoRef, initial: Files = { "README.md": "hello\n" }): MemoryRepo => {
    const state: RepoState = { commits: new Map(), branches: new Map(), pulls: new Map() }
    repos.set(repoKey(ref), state)
    state.branches.set("main", write(state, { parents: [], files: initial, message: "initial" }))
    const files = (sha: string) => state.commits.get(sha)?.files ?? {}
    return {
      ref,
      commit: (parents, files, message) => write(state, { parents, files, message }),
      setBranch: (branch, sha) => void state.branches.set(branch, sha),
      branch: (branch) => state.branches.get(branch),
      files,
      history: (branch) => {
        const out: Array<string> = []
        let sha = state.branches.get(branch)
        for (
          let c = sha === undefined ? undefined : state.commits.get(sha);
          c !== undefined && c.parents.length > 0;
        ) {
          out.unshift(c.message)
          sha = c.parents[0]
          c = sha === undefined ? undefined : state.commits.get(sha)
        }
        return out
      },
      openPr: (number, changed, options) => {
        const base = options?.base ?? state.branches.get("main")!
        const title = options?.title ?? `PR #${number}`
        const head = write(state, { parents: [base], files: { ...files(base), ...changed }, message: title })
        state.pulls.set(number, { headSha: head, title, author: "Tester" })
        return head
      }
    }
  }

  const service: GitHostService = {
    getPullRequest: (ref, prNumber) =>
      Effect.flatMap(need(ref), (r) => {
        const pull = r.pulls.get(prNumber)
        return pull === undefined
          ? Effect.fail(new PrNotFound({ repo: ref, prNumber, message: `no pull request #${prNumber}` }))
          : Effect.succeed({ number: prNumber, ...pull })
      }),
    listPullHeads: (ref) =>
      Effect.map(need(ref), (r) => new Map([...r.pulls].map(([n, p]) => [n, p.headSha] as const))),
    getBranchSha: (ref, branch) => Effect.map(need(ref), (r) => r.branches.get(branch) ?? null),
    buildTestBranch: (input) =>
      Effect.gen(function* () {
        const r = yield* need(input.repo)
        let tip = input.baseSha
        const commits: Array<string> = []
        for (const [index, item] of input.items.entries()) {
          const args = ["build", String(item.prNumber)]
          const onto = yield* filesAt(r, tip, args)
          const head = yield* filesAt(r, item.headSha, args)
          const base = mergeBase(r, item.headSha, tip)
          const baseFiles = base === undefined ? {} : yield* filesAt(r, base, args)
          const applied = apply(baseFiles, onto, changes(baseFiles, head))
          if (applied.conflicts.length > 0) {
            return yield* new MergeConflict({
              prNumber: item.prNumber,
              index,
              paths: applied.conflicts,
              message: `pull request #${item.prNumber} conflicts in ${applied.conflicts.join(", ")}`
            })
          }
          const merge = input.method === "merge_commit"
          tip = write(r, {
            parents: merge ? [tip, item.headSha] : [tip],
            files: applied.files,
            message: merge ? `Merge pull request #${item.prNumber}: ${item.title}` : `${item.title} (#${item.prNumber})`
          })
          commits.push(tip)
        }
        r.branches.set(input.branch, tip)
        return { sha: tip, commits }
      }),
    rebaseOnto: (input) =>
      Effect.gen(function* () {
        const args = ["rebase", input.laneSha]
        const r = yield* Effect.mapError(need(input.repo), (e) => gitError(args, e.message))
        const chain: Array<string> = []
        for (let sha = input.laneSha; sha !== input.baseSha; ) {
          const parent = r.commits.get(sha)?.parents[0]
          if (parent === undefined) return yield* gitError(args, `${input.baseSha} is not on the lane's chain`)
          chain.unshift(sha)
          sha = parent
        }
        let tip = input.ontoSha
        for (const [index, sha] of chain.entries()) {
          const commit = r.commits.get(sha)!
          const parentFiles = yield* filesAt(r, commit.parents[0]!, args)
          const applied = apply(parentFiles, yield* filesAt(r, tip, args), changes(parentFiles, commit.files))
          if (applied.conflicts.length > 0) {
            const prNumber = Number(/#(\d+)/.exec(commit.message)?.[1] ?? 0)
            return yield* new MergeConflict({ prNumber, index, paths: applied.conflicts, message: "rebase conflict" })
          }
          tip = write(r, { parents: [tip, ...commit.parents.slice(1)], files: applied.files, message: commit.message })
        }
        return tip
      }),
    compareAndSwap: (ref, branch, expectedOld, newSha) =>
      Effect.map(need(ref), (r) => {
        if (r.branches.get(branch) !== expectedOld) return false
        r.branches.set(branch, newSha)
        return true
      }),
    merge: (input) =>
      Effect.map(need(input.repo), (r) => {
        if (r.branches.get(input.branch) !== input.expectedOld) return null
        r.branches.set(input.branch, input.newSha)
        return input.newSha
      }),
    requiredStatusChecks: () => Effect.succeed([]),
    deleteBranch: (ref, branch) => Effect.sync(() => void repos.get(repoKey(ref))?.branches.delete(branch)),
    readFile: (ref, sha, path) => Effect.sync(() => repos.get(repoKey(ref))?.commits.get(sha)?.files[path] ?? null),
    isAncestor: (ref, ancestor, descendant) =>
      Effect.sync(() => {
        const r = repos.get(repoKey(ref))
        return r !== undefined && ancestors(r, descendant).includes(ancestor)
      }),
    repoExists: (ref) => Effect.sync(() => repos.has(repoKey(ref)))
  }

  /** The files of commit `sha` in `ref` (empty when unknown). */
  const filesOf = (ref: RepoRef, sha: string): Files => repos.get(repoKey(ref))?.commits.get(sha)?.files ?? {}
  return { repo, service, filesOf }
}

export type MemoryGit = ReturnType<typeof makeMemoryGit>

/**
 * The built-in CI in memory: a run passes when `passes(files of the commit)`. `hold()` keeps every run waiting until
 * `release()` (a test that acts while a run is in progress); `ran` lists the commits it ran on.
 */
export const makeMemoryCi = (git: MemoryGit, passes: (files: Files) => boolean) => {
  let gate: { readonly promise: Promise<void>; readonly resolve: () => void } | undefined
  const ran: Array<string> = []
  const service: CommandCiService = {
    run: (input) =>
      Effect.gen(function* () {
        const waiting = gate
        if (waiting !== undefined) yield* Effect.promise(() => waiting.promise)
        ran.push(input.sha)
        const ok = passes(git.filesOf(input.repo, input.sha))
        return { exitCode: ok ? 0 : 1, timedOut: false, output: ok ? "ok" : "failed", truncated: false, durationMs: 0 }
      })
  }
  return {
    service,
    ran,
    hold: () => {
      let resolve = () => {}
      const promise = new Promise<void>((r) => {
        resolve = r
      })
      gate = { promise, resolve }
    },
    release: () => {
      gate?.resolve()
      gate = undefined
    }
  }
}

export type MemoryCi = ReturnType<typeof makeMemoryCi>

/** Runner metrics that go nowhere (they cannot matter to the engine's logic). */
export const RunnerMetricsNone = Layer.succeed(RunnerMetrics, {
  observeLag: () => {},
  observeStep: () => {},
  restarted: () => {}
})

export interface EngineTestOptions {
  /** a migrated PGlite data directory (test/support/pgliteSeed.ts) */
  readonly seed: Blob
  readonly git: MemoryGit
  readonly ci: MemoryCi
  readonly probe: RunnerProbeShape
  readonly config?: Partial<AppConfigShape>
}

/**
 * `Engine` and `EngineRunner` (EngineLive) with what they need: the real storage services (queues, statuses, tenancy
 * for the test's organizations and repositories) on an in-memory PGlite, the memory Git host and CI, the runner's
 * health, no metrics, and the test's probe, with the event log the runners write the timelines to (no webhook
 * endpoints nor delivery). No HTTP server, no GitHub adapter.
 */
export const engineTestLayer = (options: EngineTestOptions) => {
  const config = makeAppConfig({
    dataDir: ":memory:",
    ciCommand: Option.some("memory-ci"),
    logLevel: "error",
    ...options.config
  })
  const ports = Layer.mergeAll(
    Layer.succeed(GitHost, options.git.service),
    Layer.succeed(CommandCi, options.ci.service),
    Layer.succeed(RunnerProbe, options.probe),
    RunnerMetricsNone,
    RunnerHealthLive,
    config
  )
  const storage = Layer.mergeAll(QueueRepoLive, StatusesLive, TenancyLive, EventLogLive).pipe(
    Layer.provideMerge(layerPgliteMemory(options.seed))
  )
  return EngineLive.pipe(Layer.provideMerge(storage), Layer.provideMerge(ports))
}
