import { afterEach, beforeEach, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Effect } from "effect"
import { LocalGitLayer, makeLocalGit } from "../../src/git-local/LocalGit.ts"
import { repoGitDir, validateRepoRef } from "../../src/git-local/repoPaths.ts"
import { GitHost, type GitHostService, type RepoRef } from "../../src/queue/GitHost.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
const runFail = <A, E>(effect: Effect.Effect<A, E>): Promise<E> => Effect.runPromise(Effect.flip(effect))

let repo: TestRepo
let host: GitHostService

beforeEach(() => {
  repo = createTestRepo({ files: { "README.md": "hello\n" } })
  host = makeLocalGit(repo.root)
})

afterEach(() => {
  repo.cleanup()
})

describe("repository identity", () => {
  test("validateRepoRef refuses path escapes", () => {
    expect(validateRepoRef({ host: "local", owner: "acme", name: "app" })).toBeNull()
    expect(validateRepoRef({ host: "local", owner: "..", name: "app" })).not.toBeNull()
    expect(validateRepoRef({ host: "local", owner: "acme", name: "../../etc" })).not.toBeNull()
    expect(validateRepoRef({ host: "local", owner: "a/b", name: "app" })).not.toBeNull()
    expect(validateRepoRef({ host: "local", owner: "-x", name: "app" })).not.toBeNull()
    expect(validateRepoRef({ host: "", owner: "acme", name: "app" })).not.toBeNull()
    expect(validateRepoRef({ host: "local", owner: "acme", name: "a\nb" })).not.toBeNull()
    expect(validateRepoRef({ host: "github.com", owner: "my-org", name: "my.repo_1" })).toBeNull()
  })

  test("repoGitDir is under GIT_ROOT", () => {
    const dir = repoGitDir("/srv/git", { host: "h", owner: "o", name: "n" })
    expect(dir._tag).toBe("Right")
    if (dir._tag === "Right") expect(dir.right).toBe("/srv/git/h/o/n.git")
    expect(repoGitDir("/srv/git", { host: "h", owner: "..", name: "n" })._tag).toBe("Left")
  })

  test("repoExists", async () => {
    expect(await run(host.repoExists(repo.repo))).toBe(true)
    expect(await run(host.repoExists({ ...repo.repo, name: "other" }))).toBe(false)
    expect(await run(host.repoExists({ ...repo.repo, owner: ".." }))).toBe(false)
  })

  test("an invalid identity is RepoNotFound (invalid), never a path outside GIT_ROOT", async () => {
    const bad: RepoRef = { host: "local", owner: "..", name: "acme" }
    const error = await runFail(host.getPullRequest(bad, 1))
    expect(error._tag).toBe("RepoNotFound")
    if (error._tag === "RepoNotFound") expect(error.invalid).toBe(true)
    const missing = await runFail(host.listPullHeads({ ...repo.repo, name: "nope" }))
    expect(missing._tag).toBe("RepoNotFound")
    if (missing._tag === "RepoNotFound") expect(missing.invalid).toBe(false)
  })

  test("the layer provides GitHost", async () => {
    const exists = await Effect.runPromise(
      Effect.flatMap(GitHost, (git) => git.repoExists(repo.repo)).pipe(Effect.provide(LocalGitLayer(repo.root)))
    )
    expect(exists).toBe(true)
  })
})

describe("pull requests and branches", () => {
  test("getPullRequest reads head, title and author", async () => {
    const head = repo.createPr(7, {
      files: { "a.txt": "a\n" },
      title: "Add a\n\nLonger body",
      author: { name: "Ada Lovelace", email: "ada@example.com" }
    })
    const pr = await run(host.getPullRequest(repo.repo, 7))
    expect(pr).toEqual({ number: 7, headSha: head, title: "Add a", author: "Ada Lovelace" })
  })

  test("getPullRequest follows a moved head and new commits through its long-lived reader", async () => {
    repo.createPr(10, { files: { "c.txt": "c\n" }, title: "Other" })
    const first = repo.createPr(8, { files: { "b.txt": "b\n" }, title: "First\nsecond line\n\nbody" })
    expect(await run(host.getPullRequest(repo.repo, 8))).toMatchObject({ headSha: first, title: "First second line" })
    const moved = repo.forcePushPr(8, { files: { "b.txt": "b2\n" }, title: "Moved" })
    expect(moved).not.toBe(first)
    const [again, other] = await Promise.all([
      run(host.getPullRequest(repo.repo, 8)),
      run(host.getPullRequest(repo.repo, 10))
    ])
    expect(again).toMatchObject({ headSha: moved, title: "Moved" })
    expect(other).toMatchObject({ number: 10, title: "Other" })
    expect((await runFail(host.getPullRequest(repo.repo, 9)))._tag).toBe("PrNotFound")
  })

  test("getPullRequest right after the repository was removed is RepoNotFound, not a failed read", async () => {
    repo.createPr(11, { files: { "d.txt": "d\n" }, title: "Eleven" })
    expect(await run(host.getPullRequest(repo.repo, 11))).toMatchObject({ number: 11, title: "Eleven" })
    fs.rmSync(repo.gitDir, { recursive: true, force: true })
    expect((await runFail(host.getPullRequest(repo.repo, 11)))._tag).toBe("RepoNotFound")
  })

  test("getPullRequest of a missing ref is PrNotFound", async () => {
    const error = await runFail(host.getPullRequest(repo.repo, 3))
    expect(error._tag).toBe("PrNotFound")
    expect((await runFail(host.getPullRequest(repo.repo, -1)))._tag).toBe("PrNotFound")
  })

  test("listPullHeads sees new heads and force-pushes", async () => {
    expect((await run(host.listPullHeads(repo.repo))).size).toBe(0)
    const h1 = repo.createPr(1)
    const h2 = repo.createPr(2)
    expect(await run(host.listPullHeads(repo.repo))).toEqual(
      new Map([
        [1, h1],
        [2, h2]
      ])
    )
    const h1b = repo.forcePushPr(1, { files: { "x.txt": "new\n" } })
    expect(h1b).not.toBe(h1)
    expect((await run(host.listPullHeads(repo.repo))).get(1)).toBe(h1b)
  })

  test("getBranchSha", async () => {
    expect(await run(host.getBranchSha(repo.repo, "main"))).toBe(repo.branchSha("main"))
    expect(await run(host.getBranchSha(repo.repo, "nope"))).toBeNull()
    expect((await runFail(host.getBranchSha(repo.repo, "../x")))._tag).toBe("GitError")
  })

  test("compareAndSwap succeeds only from the expected sha", async () => {
    const base = repo.branchSha()!
    const next = repo.commit(base, { files: { "n.txt": "n\n" } })
    const other = repo.commit(base, { files: { "o.txt": "o\n" } })
    expect(await run(host.compareAndSwap(repo.repo, "main", base, next))).toBe(true)
    expect(repo.branchSha()).toBe(next)
    expect(await run(host.compareAndSwap(repo.repo, "main", base, other))).toBe(false)
    expect(repo.branchSha()).toBe(next)
    // a missing branch is not at any sha; the zero sha means "must not exist"
    expect(await run(host.compareAndSwap(repo.repo, "missing", base, other))).toBe(false)
    expect(await run(host.compareAndSwap(repo.repo, "created", "0".repeat(40), other))).toBe(true)
    expect(repo.branchSha("created")).toBe(other)
    expect((await runFail(host.compareAndSwap(repo.repo, "main", "nope", other)))._tag).toBe("GitError")
  })

  test("deleteBranch is idempotent", async () => {
    repo.setBranch("trunk-merge/pr-1/run", repo.branchSha()!)
    expect(await run(host.getBranchSha(repo.repo, "trunk-merge/pr-1/run"))).not.toBeNull()
    await run(host.deleteBranch(repo.repo, "trunk-merge/pr-1/run"))
    expect(await run(host.getBranchSha(repo.repo, "trunk-merge/pr-1/run"))).toBeNull()
    await run(host.deleteBranch(repo.repo, "trunk-merge/pr-1/run"))
    await run(host.deleteBranch({ ...repo.repo, name: "gone" }, "x"))
  })

  test("deleteBranch of a branch whose create a killed git left locked: refused while the lock is fresh, and the lock removed once stale", async () => {
    // the branch was never written: the git that was creating it died holding its lock
    const dir = `${repo.gitDir}/refs/heads/trunk-merge/pr-2`
    fs.mkdirSync(dir, { recursive: true })
    const lock = `${dir}/run.lock`
    fs.writeFileSync(lock, "")
    // a fresh lock may belong to a live git: the delete fails (the runner tries it again) instead of passing over it
    expect(await Effect.runPromise(Effect.either(host.deleteBranch(repo.repo, "trunk-merge/pr-2/run")))).toMatchObject({
      _tag: "Left"
    })
    const old = new Date(Date.now() - 60_000)
    fs.utimesSync(lock, old, old)
    await run(host.deleteBranch(repo.repo, "trunk-merge/pr-2/run"))
    expect(fs.existsSync(lock)).toBe(false)
  })

  test("readFile", async () => {
    const head = repo.createPr(1, { files: { "dir/a.txt": "héllo\n" } })
    expect(await run(host.readFile(repo.repo, head, "dir/a.txt"))).toBe("héllo\n")
    expect(await run(host.readFile(repo.repo, head, "./dir/a.txt"))).toBe("héllo\n")
    expect(await run(host.readFile(repo.repo, head, "dir/missing.txt"))).toBeNull()
    expect(await run(host.readFile(repo.repo, head, "dir"))).toBeNull()
    expect(await run(host.readFile(repo.repo, "f".repeat(40), "dir/a.txt"))).toBeNull()
    expect((await runFail(host.readFile({ ...repo.repo, name: "gone" }, head, "a")))._tag).toBe("GitError")
  })

  test("isAncestor", async () => {
    const base = repo.branchSha()!
    const head = repo.createPr(1)
    expect(await run(host.isAncestor(repo.repo, base, head))).toBe(true)
    expect(await run(host.isAncestor(repo.repo, head, base))).toBe(false)
    expect(await run(host.isAncestor(repo.repo, base, base))).toBe(true)
  })
})
