import { afterEach, beforeEach, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { makeLocalGit } from "../../src/git-local/LocalGit.ts"
import type { GitHostService, MergeMethod, TestBranchItem } from "../../src/queue/GitHost.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"

const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
const runFail = <A, E>(effect: Effect.Effect<A, E>): Promise<E> => Effect.runPromise(Effect.flip(effect))

const SHARED = "line1\nline2\nline3\n"
const METHODS: ReadonlyArray<MergeMethod> = ["merge_commit", "squash", "rebase"]

let repo: TestRepo
let host: GitHostService
let base: string
let pr: Record<number, TestBranchItem>

const item = (n: number, headSha: string, title: string): TestBranchItem => ({ prNumber: n, headSha, title })

beforeEach(() => {
  repo = createTestRepo({ files: { "README.md": "hello\n", "shared.txt": SHARED } })
  host = makeLocalGit(repo.root)
  base = repo.branchSha()!
  pr = {
    1: item(1, repo.createPr(1, { files: { "a.txt": "a\n" }, title: "Add a" }), "Add a"),
    2: item(2, repo.createPr(2, { files: { "b.txt": "b\n" }, title: "Add b" }), "Add b"),
    3: item(
      3,
      repo.createPr(3, {
        commits: [
          { files: { "c.txt": "one\n" }, message: "Add c" },
          { files: { "c.txt": "two\n", "d.txt": "d\n" }, message: "Change c, add d" }
        ],
        author: { name: "Carol", email: "carol@example.com" }
      }),
      "Change c, add d"
    ),
    10: item(10, repo.createPr(10, { files: { "shared.txt": "X\nline2\nline3\n" }, title: "X" }), "X"),
    11: item(11, repo.createPr(11, { files: { "shared.txt": "Y\nline2\nline3\n" }, title: "Y" }), "Y"),
    12: item(12, repo.createPr(12, { files: { "shared.txt": "line1\nline2\nZ\n" }, title: "Z" }), "Z")
  }
})

afterEach(() => {
  repo.cleanup()
})

const build = (method: MergeMethod, items: ReadonlyArray<TestBranchItem>, branch = "trunk-merge/test", from = base) =>
  host.buildTestBranch({ repo: repo.repo, branch, baseSha: from, method, items })

const files = (sha: string): Array<string> => repo.git("ls-tree", "-r", "--name-only", sha).split("\n")
const parents = (sha: string): Array<string> => repo.git("rev-list", "--parents", "-n", "1", sha).split(" ").slice(1)
const show = (sha: string, format: string): string => repo.git("show", "-s", `--format=${format}`, sha)

describe("buildTestBranch", () => {
  test("merge_commit: merge commits with parents (previous, PR head)", async () => {
    const result = await run(build("merge_commit", [pr[1]!, pr[2]!]))
    expect(result.commits.length).toBe(2)
    const [c1, c2] = result.commits as [string, string]
    expect(result.sha).toBe(c2)
    expect(repo.branchSha("trunk-merge/test")).toBe(c2)
    expect(parents(c1)).toEqual([base, pr[1]!.headSha])
    expect(parents(c2)).toEqual([c1, pr[2]!.headSha])
    expect(show(c1, "%B")).toBe("Merge pull request #1: Add a")
    expect(show(c2, "%an <%ae>|%cn <%ce>")).toBe(
      "Test Author <author@example.com>|Greenline <greenline@greenline.invalid>"
    )
    expect(files(c2)).toEqual(["README.md", "a.txt", "b.txt", "shared.txt"])
    expect(repo.git("log", "--first-parent", "--format=%s", `${base}..${c2}`).split("\n")).toEqual([
      "Merge pull request #2: Add b",
      "Merge pull request #1: Add a"
    ])
  })

  test("squash: one commit per PR with the PR's change", async () => {
    const result = await run(build("squash", [pr[1]!, pr[3]!, pr[12]!]))
    const [c1, c3, c12] = result.commits as [string, string, string]
    expect(parents(c1)).toEqual([base])
    expect(parents(c3)).toEqual([c1])
    expect(parents(c12)).toEqual([c3])
    expect(show(c1, "%B")).toBe("Add a (#1)")
    expect(show(c3, "%B")).toBe("Change c, add d (#3)")
    expect(show(c3, "%an <%ae>|%cn")).toBe("Carol <carol@example.com>|Greenline")
    // dates come from the PR head commit, so the commit depends only on (parent, item, method)
    expect(show(c3, "%ad|%cd")).toBe(show(pr[3]!.headSha, "%ad|%cd"))
    expect(repo.git("diff-tree", "--no-commit-id", "--name-only", "-r", c3).split("\n")).toEqual(["c.txt", "d.txt"])
    expect(repo.git("show", `${c3}:c.txt`)).toBe("two")
    expect(files(c12)).toEqual(["README.md", "a.txt", "c.txt", "d.txt", "shared.txt"])
    expect(repo.git("show", `${c12}:shared.txt`)).toBe("line1\nline2\nZ")
    expect(repo.git("rev-list", "--count", `${base}..${c12}`)).toBe("3")
  })

  test("squash merges non-conflicting edits of the same file", async () => {
    const result = await run(build("squash", [pr[10]!, pr[12]!]))
    expect(repo.git("show", `${result.sha}:shared.txt`)).toBe("X\nline2\nZ")
  })

  test("rebase: the PR's commits replayed one by one, messages and authors kept", async () => {
    const result = await run(build("rebase", [pr[1]!, pr[3]!]))
    const [c1, c3] = result.commits as [string, string]
    expect(repo.git("log", "--format=%s|%an|%cn", `${base}..${c3}`).split("\n")).toEqual([
      "Change c, add d|Carol|Greenline",
      "Add c|Carol|Greenline",
      "Add a|Test Author|Greenline"
    ])
    expect(parents(c1)).toEqual([base])
    expect(repo.git("rev-list", "--count", "--merges", `${base}..${c3}`)).toBe("0")
    expect(repo.git("show", `${c3}:c.txt`)).toBe("two")
    expect(files(c3)).toEqual(["README.md", "a.txt", "c.txt", "d.txt", "shared.txt"])
  })

  test("rebase onto a moved base replays each commit against its own parent (cherry-pick)", async () => {
    const moved = repo.pushToMain({ "shared.txt": "line1\nline2\nmain\n", "c.txt": null })
    const result = await run(build("rebase", [pr[3]!], "trunk-merge/moved", moved))
    const tip = result.sha
    // the second commit changes c.txt from "one" to "two": correct only with base = its parent
    expect(repo.git("show", `${tip}:c.txt`)).toBe("two")
    expect(repo.git("show", `${tip}:shared.txt`)).toBe("line1\nline2\nmain")
    expect(repo.git("rev-list", "--count", `${moved}..${tip}`)).toBe("2")
    expect(repo.git("show", `${tip}~2`, "-s", "--format=%H")).toBe(moved)
  })

  test("rebase drops commits already applied (stacked PRs)", async () => {
    const stacked = repo.createPr(4, { base: pr[1]!.headSha, files: { "e.txt": "e\n" }, title: "Add e" })
    const result = await run(build("rebase", [pr[1]!, item(4, stacked, "Add e")]))
    expect(repo.git("log", "--format=%s", `${base}..${result.sha}`).split("\n")).toEqual(["Add e", "Add a"])
  })

  test("no items: the branch is the base", async () => {
    const result = await run(build("squash", []))
    expect(result).toEqual({ sha: base, commits: [] })
    expect(repo.branchSha("trunk-merge/test")).toBe(base)
  })

  for (const method of METHODS) {
    test(`${method}: deterministic and prefix-stable`, async () => {
      const items = [pr[1]!, pr[3]!, pr[2]!]
      const first = await run(build(method, items, "trunk-merge/pr-2/one"))
      const second = await run(build(method, items, "trunk-merge/pr-2/two"))
      expect(second).toEqual(first)
      const prefix = await run(build(method, [pr[1]!], "trunk-merge/pr-1/three"))
      expect(prefix.commits[0]).toBe(first.commits[0]!)
      // a run built on top of an earlier run's chain reproduces its commits
      const onTop = await run(build(method, [pr[3]!, pr[2]!], "trunk-merge/pr-2/four", prefix.sha))
      expect(onTop.commits).toEqual(first.commits.slice(1))
    })

    test(`${method}: a conflict fails with the conflicting PR`, async () => {
      const error = await runFail(build(method, [pr[1]!, pr[10]!, pr[11]!], `trunk-merge/conflict-${method}`))
      expect(error._tag).toBe("MergeConflict")
      if (error._tag === "MergeConflict") {
        expect(error.prNumber).toBe(11)
        expect(error.index).toBe(2)
        expect(error.paths).toEqual(["shared.txt"])
      }
      expect(repo.branchSha(`trunk-merge/conflict-${method}`)).toBeNull()
    })
  }

  test("bad input is refused", async () => {
    expect((await runFail(build("squash", [pr[1]!], "bad..branch")))._tag).toBe("GitError")
    expect((await runFail(build("squash", [pr[1]!], "x", "main")))._tag).toBe("GitError")
    expect((await runFail(build("squash", [item(1, "a".repeat(40), "t")])))._tag).toBe("GitError")
    const missing = await runFail(
      host.buildTestBranch({
        repo: { ...repo.repo, name: "gone" },
        branch: "x",
        baseSha: base,
        method: "squash",
        items: []
      })
    )
    expect(missing._tag).toBe("RepoNotFound")
  })

  test("timing: a chain of 8 squash items", async () => {
    const items = Array.from({ length: 8 }, (_, i) =>
      item(100 + i, repo.createPr(100 + i, { files: { [`f${i}.txt`]: `${i}\n` }, title: `F${i}` }), `F${i}`)
    )
    await run(build("squash", items.slice(0, 1), "trunk-merge/warmup"))
    const started = performance.now()
    const result = await run(build("squash", items, "trunk-merge/eight"))
    const elapsed = performance.now() - started
    console.log(`buildTestBranch, 8 squash items: ${elapsed.toFixed(1)} ms`)
    expect(result.commits.length).toBe(8)
    expect(files(result.sha).length).toBe(10)
  })
})

describe("rebaseOnto", () => {
  test("carries a squash lane onto a moved tip", async () => {
    const lane = await run(build("squash", [pr[1]!, pr[2]!], "trunk-merge/lane"))
    const tip = repo.pushToMain({ "other.txt": "o\n" })
    const combined = await run(host.rebaseOnto({ repo: repo.repo, baseSha: base, laneSha: lane.sha, ontoSha: tip }))
    expect(repo.git("log", "--format=%s", `${tip}..${combined}`).split("\n")).toEqual(["Add b (#2)", "Add a (#1)"])
    expect(parents(`${combined}~1`)).toEqual([tip])
    expect(files(combined)).toEqual(["README.md", "a.txt", "b.txt", "other.txt", "shared.txt"])
    expect(await run(host.isAncestor(repo.repo, tip, combined))).toBe(true)
    const again = await run(host.rebaseOnto({ repo: repo.repo, baseSha: base, laneSha: lane.sha, ontoSha: tip }))
    expect(again).toBe(combined)
  })

  test("keeps merge commits of a merge_commit lane", async () => {
    const lane = await run(build("merge_commit", [pr[1]!, pr[2]!], "trunk-merge/lane"))
    const tip = repo.pushToMain({ "other.txt": "o\n" })
    const combined = await run(host.rebaseOnto({ repo: repo.repo, baseSha: base, laneSha: lane.sha, ontoSha: tip }))
    expect(parents(combined)).toEqual([parents(combined)[0]!, pr[2]!.headSha])
    expect(parents(`${combined}^1`)).toEqual([tip, pr[1]!.headSha])
    expect(files(combined)).toEqual(["README.md", "a.txt", "b.txt", "other.txt", "shared.txt"])
  })

  test("onto the lane's own base returns the lane", async () => {
    const lane = await run(build("rebase", [pr[3]!], "trunk-merge/lane"))
    expect(await run(host.rebaseOnto({ repo: repo.repo, baseSha: base, laneSha: lane.sha, ontoSha: base }))).toBe(
      lane.sha
    )
  })

  test("a conflict names the PR from the commit message", async () => {
    const lane = await run(build("squash", [pr[1]!, pr[10]!], "trunk-merge/lane"))
    const tip = repo.pushToMain({ "shared.txt": "W\nline2\nline3\n" })
    const error = await runFail(host.rebaseOnto({ repo: repo.repo, baseSha: base, laneSha: lane.sha, ontoSha: tip }))
    expect(error._tag).toBe("MergeConflict")
    if (error._tag === "MergeConflict") {
      expect(error.prNumber).toBe(10)
      expect(error.index).toBe(1)
      expect(error.paths).toEqual(["shared.txt"])
    }
  })
})
