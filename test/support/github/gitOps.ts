/**
 * The simulated GitHub's Git content: plumbing over one real bare repository per simulated repository (merge-tree,
 * commit-tree, update-ref, cat-file, merge-base), so merges and conflicts behave as Git decides.
 *
 * Git runs synchronously (`Bun.spawnSync`, about 1.5 ms a command). Reading a subprocess's pipes asynchronously
 * costs Bun a fresh ArrayBuffer of about 300 KB per pipe, even for the 41 bytes of a `rev-parse`: a scenario file
 * makes about 100 git commands a second, and the collector of that big process (the OpenAPI description, PGlite) left
 * gigabytes of them for minutes. ArrayBuffers and PGlite's WebAssembly memory share one 64 GB address range in Bun,
 * so when it filled up every allocation failed with "RangeError: Out of memory", first here: every simulated request
 * failed (test/unit/githubSim.test.ts, "git output").
 */
import type { CommitInfo } from "./shapes.ts"

const env = (): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("GIT_")) out[key] = value
  }
  out.GIT_TERMINAL_PROMPT = "0"
  out.GIT_CONFIG_NOSYSTEM = "1"
  out.GIT_CONFIG_GLOBAL = "/dev/null"
  out.LC_ALL = "C"
  return out
}

export interface GitResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export interface Identity {
  readonly name: string
  readonly email: string
  /** ISO date */
  readonly date: string
}

const isoToGit = (iso: string) => `@${Math.floor(Date.parse(iso) / 1000)} +0000`

/** GitHub's timestamp form: ISO without milliseconds. */
export const gitHubTime = (d: Date | number) => new Date(d).toISOString().replace(/\.\d{3}Z$/, "Z")

/** A full object id: what it names never changes, so answers about it are kept (`GitOps.memo`). */
const FULL_SHA = /^[0-9a-f]{40}$/

export class GitOps {
  constructor(readonly gitDir: string) {}

  /**
   * Answers about full object ids (a commit's fields, counts and ancestry between two commits), kept: the runners
   * and the simulator ask the same ones on every round, at a git process each.
   */
  private readonly memos = new Map<string, unknown>()

  private async memo<A>(key: string, shas: ReadonlyArray<string>, compute: () => Promise<A>): Promise<A> {
    if (!shas.every((sha) => FULL_SHA.test(sha))) return compute()
    if (this.memos.has(key)) return this.memos.get(key) as A
    const value = await compute()
    // a missing object may appear later (a push): only what exists is kept
    if (value !== null) {
      if (this.memos.size >= 10_000) this.memos.clear()
      this.memos.set(key, value)
    }
    return value
  }

  /** Runs git to the end (see the module comment for why synchronously); async for the callers. */
  async run(args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}): Promise<GitResult> {
    const r = this.spawn(args, extraEnv)
    return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() }
  }

  private spawn(args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) {
    return Bun.spawnSync(["git", `--git-dir=${this.gitDir}`, ...args], {
      env: { ...env(), ...extraEnv },
      stdout: "pipe",
      stderr: "pipe",
      stdin: "ignore"
    })
  }

  async ok(args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}): Promise<string> {
    const r = await this.run(args, extraEnv)
    if (r.code !== 0) throw new Error(`git ${args.join(" ")} failed (${r.code}): ${r.stderr}`)
    return r.stdout.trim()
  }

  /** The commit a revision names, or null. */
  async commitOf(rev: string): Promise<string | null> {
    if (rev.startsWith("-")) return null
    const r = await this.run(["rev-parse", "--verify", "--quiet", `${rev}^{commit}`])
    return r.code === 0 ? r.stdout.trim() : null
  }

  /** The sha of a full ref (refs/heads/x), or null. */
  async refSha(ref: string): Promise<string | null> {
    const r = await this.run(["rev-parse", "--verify", "--quiet", ref])
    return r.code === 0 ? r.stdout.trim() : null
  }

  async objectType(sha: string): Promise<string | null> {
    if (!/^[0-9a-f]{4,64}$/.test(sha)) return null
    const r = await this.run(["cat-file", "-t", sha])
    return r.code === 0 ? r.stdout.trim() : null
  }

  readCommit(sha: string): Promise<CommitInfo | null> {
    return this.memo(`commit ${sha}`, [sha], () => this.readCommitNow(sha))
  }

  private async readCommitNow(sha: string): Promise<CommitInfo | null> {
    const r = await this.run([
      "show",
      "-s",
      "--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%B",
      sha,
      "--"
    ])
    if (r.code !== 0) return null
    const [h, t, p, an, ae, at, cn, ce, ct, ...rest] = r.stdout.split("\0")
    return {
      sha: h!,
      tree: t!,
      parents: p === "" ? [] : p!.split(" "),
      authorName: an!,
      authorEmail: ae!,
      authorDate: gitHubTime(Number(at) * 1000),
      committerName: cn!,
      committerEmail: ce!,
      committerDate: gitHubTime(Number(ct) * 1000),
      message: rest.join("\0").replace(/\n+$/, "")
    }
  }

  async isAncestor(ancestor: string, descendant: string): Promise<boolean> {
    // null: git could not tell (an object missing), not kept
    const known = await this.memo(`ancestor ${ancestor} ${descendant}`, [ancestor, descendant], async () => {
      const r = await this.run(["merge-base", "--is-ancestor", ancestor, descendant])
      return r.code === 0 ? true : r.code === 1 ? false : null
    })
    return known === true
  }

  mergeBase(a: string, b: string): Promise<string | null> {
    return this.memo(`base ${a} ${b}`, [a, b], async () => {
      const r = await this.run(["merge-base", a, b])
      return r.code === 0 ? r.stdout.trim() : null
    })
  }

  /**
   * `git merge-tree --write-tree`: the merged tree, or the conflicted paths. With `mergeBase` (a cherry-pick: the
   * parent of `theirs`), git 2.39 has no `--merge-base`, so `ours`' tree is first committed on that parent: the
   * merge base of that scaffold and `theirs` is then exactly `mergeBase`.
   */
  async mergeTree(
    ours: string,
    theirs: string,
    mergeBase?: string
  ): Promise<
    { readonly clean: true; readonly tree: string } | { readonly clean: false; readonly paths: ReadonlyArray<string> }
  > {
    let left = ours
    if (mergeBase !== undefined && mergeBase !== ours) {
      const scaffold: Identity = { name: "sim", email: "sim@example.com", date: "2000-01-01T00:00:00Z" }
      left = await this.commitTree(`${ours}^{tree}`, [mergeBase], "cherry-pick scaffold", scaffold, scaffold)
    }
    const r = await this.run(["merge-tree", "--write-tree", "--name-only", "--no-messages", left, theirs])
    const lines = r.stdout.split("\n").filter((l) => l !== "")
    if (r.code === 0) return { clean: true, tree: lines[0]! }
    if (r.code === 1) return { clean: false, paths: [...new Set(lines.slice(1))] }
    throw new Error(`git merge-tree failed (${r.code}): ${r.stderr}`)
  }

  async commitTree(
    tree: string,
    parents: ReadonlyArray<string>,
    message: string,
    author: Identity,
    committer: Identity
  ): Promise<string> {
    const args = ["commit-tree", tree, ...parents.flatMap((p) => ["-p", p]), "-m", message]
    return this.ok(args, {
      GIT_AUTHOR_NAME: author.name,
      GIT_AUTHOR_EMAIL: author.email,
      GIT_AUTHOR_DATE: isoToGit(author.date),
      GIT_COMMITTER_NAME: committer.name,
      GIT_COMMITTER_EMAIL: committer.email,
      GIT_COMMITTER_DATE: isoToGit(committer.date)
    })
  }

  /** Sets `ref` to `sha` when it is at `expectedOld` (null: must not exist; undefined: any); false when it was not. */
  async updateRef(ref: string, sha: string, expectedOld?: string | null): Promise<boolean> {
    const args = ["update-ref", ref, sha]
    if (expectedOld !== undefined) args.push(expectedOld ?? "0".repeat(40))
    return (await this.run(args)).code === 0
  }

  async deleteRef(ref: string, expectedOld?: string): Promise<boolean> {
    return (await this.run(["update-ref", "-d", ref, ...(expectedOld === undefined ? [] : [expectedOld])])).code === 0
  }

  /** Refs under `prefix` (e.g. "refs/heads/"), sorted by name. */
  async refs(prefix: string): Promise<ReadonlyArray<{ readonly ref: string; readonly sha: string }>> {
    const out = await this.ok(["for-each-ref", "--format=%(refname) %(objectname)", prefix])
    return out === ""
      ? []
      : out.split("\n").map((line) => {
          const [ref, sha] = line.split(" ")
          return { ref: ref!, sha: sha! }
        })
  }

  /** Commits reachable from `to` and not from `from`, oldest first. */
  async commitsBetween(from: string | null, to: string, limit = 250): Promise<ReadonlyArray<string>> {
    const out = await this.ok([
      "rev-list",
      "--reverse",
      "--topo-order",
      `--max-count=${limit}`,
      to,
      ...(from === null ? [] : [`^${from}`])
    ])
    return out === "" ? [] : out.split("\n")
  }

  count(from: string, to: string): Promise<number> {
    return this.memo(`count ${from} ${to}`, [from, to], async () =>
      Number(await this.ok(["rev-list", "--count", `${from}..${to}`]))
    )
  }

  /** What `path` is at commit `sha`: a blob with its content, a tree with its entries, or null. */
  async entry(
    sha: string,
    path: string
  ): Promise<
    | { readonly type: "blob"; readonly sha: string; readonly content: Buffer }
    | {
        readonly type: "tree"
        readonly sha: string
        readonly entries: ReadonlyArray<{ type: string; sha: string; size: number; name: string }>
      }
    | null
  > {
    const spec = `${sha}:${path.replace(/^\/+|\/+$/g, "")}`
    const r = await this.run(["rev-parse", "--verify", "--quiet", spec])
    if (r.code !== 0) return null
    const oid = r.stdout.trim()
    const type = await this.objectType(oid)
    if (type === "blob") {
      return { type: "blob", sha: oid, content: Buffer.from(this.spawn(["cat-file", "blob", oid]).stdout) }
    }
    if (type === "tree") {
      const out = await this.ok(["ls-tree", "-l", oid])
      const entries = (out === "" ? [] : out.split("\n")).map((line) => {
        const [meta, name] = line.split("\t")
        const [, t, s, size] = (meta ?? "").split(/\s+/)
        return { type: t!, sha: s!, size: size === "-" ? 0 : Number(size), name: name! }
      })
      return { type: "tree", sha: oid, entries }
    }
    return null
  }
}
