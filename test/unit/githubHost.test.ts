/**
 * The GitHub provider (GitHubHost) against the simulated GitHub, on real Git content: every GitHostService method,
 * conflicts, compare-and-swap refusals, merges by moving the target and through the pull request API, and the
 * content of the test branch equal to the merged target for every merge method. The simulator's repositories are
 * bare repositories laid out as the local provider expects, so the local provider builds the same items beside it:
 * both providers must build the very same commits. Every request is checked against GitHub's OpenAPI description.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as path from "node:path"
import { Effect, Either } from "effect"
import { makeLocalGit } from "../../src/git-local/LocalGit.ts"
import { GitHubAuth, type GitHubClientService, makeGitHubClient } from "../../src/github/GitHubClient.ts"
import { makeGitHubHost } from "../../src/github/GitHubHost.ts"
import type { GitHubHostService } from "../../src/github/githubRepo.ts"
import type { GitHostService, MergeMethod, RepoRef, TestBranchItem } from "../../src/queue/GitHost.ts"
import { type GitHubSim, type SimRepoKey, startGitHubSim } from "../support/github/sim.ts"

let sim: GitHubSim
let client: GitHubClientService
let host: GitHubHostService
let counter = 0

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect)
const fail = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.flip(effect)) as Promise<E & { readonly _tag: string }>

/** The same repository as the local provider sees it (the simulator keeps it at <root>/github.sim/owner/name.git). */
const localOf = (repo: SimRepoKey): { local: GitHostService; ref: RepoRef } => {
  const gitDir = sim.gitDir(repo)
  const root = path.dirname(path.dirname(path.dirname(gitDir)))
  return { local: makeLocalGit(root), ref: { host: "github.sim", owner: repo.owner, name: repo.name } }
}

const refOf = (repo: SimRepoKey): RepoRef => ({ host: "github.com", owner: repo.owner, name: repo.name })

/** A fresh installed repository with a few files on main. */
const freshRepo = async (files: Record<string, string> = { "README.md": "hello\n", "shared.txt": "one\ntwo\n" }) => {
  const repo = await sim.createRepo("acme", `repo${++counter}`, files)
  await sim.installApp("acme", [repo.name])
  return repo
}

const treeOf = (repo: SimRepoKey, rev: string) => sim.git(repo, "rev-parse", `${rev}^{tree}`)
/** A file's text at a commit (the simulator's reader trims it). */
const file = (repo: SimRepoKey, rev: string, name: string) => sim.readFile(repo, rev, name)

beforeAll(async () => {
  sim = await startGitHubSim({ webhookSecret: "secret" })
  client = await run(makeGitHubClient({ apiUrl: sim.url, appId: String(sim.appId), privateKey: sim.privateKeyPem }))
  host = makeGitHubHost(client)
})

afterAll(async () => {
  expect(sim.violations()).toEqual([])
  await sim.stop()
})

describe("GitHubHost: reads", () => {
  test("getPullRequest: head, title, author login, base, draft; closed and unknown PRs are PrNotFound", async () => {
    const repo = await freshRepo()
    const pr = await sim.openPullRequest({ ...repo, title: "Add a", user: "alice", files: { "a.txt": "a\n" } })
    const info = await run(host.getPullRequest(refOf(repo), pr.number))
    expect(info).toMatchObject({
      number: pr.number,
      headSha: pr.headSha,
      title: "Add a",
      author: "alice",
      baseBranch: "main",
      draft: false
    })
    expect(["mergeable", "in_progress"]).toContain(info.mergeability ?? "")
    expect((await fail(host.getPullRequest(refOf(repo), 999)))._tag).toBe("PrNotFound")
    await sim.closePullRequest(pr)
    const closed = await fail(host.getPullRequest(refOf(repo), pr.number))
    expect(closed).toMatchObject({ _tag: "PrNotFound" })
    expect(closed.message).toContain("closed")
  })

  test("a repository the App is not installed on is RepoNotFound; repoExists tells", async () => {
    const repo = await sim.createRepo("acme", `bare${++counter}`, {})
    expect((await fail(host.getPullRequest(refOf(repo), 1)))._tag).toBe("RepoNotFound")
    expect((await fail(host.listPullHeads(refOf(repo))))._tag).toBe("RepoNotFound")
    expect(await run(host.repoExists(refOf(repo)))).toBe(false)
    await sim.installApp("acme", [repo.name])
    expect(await run(host.repoExists(refOf(repo)))).toBe(true)
  })

  test("listPullHeads: the open PRs' heads; an unchanged listing is a 304", async () => {
    const repo = await freshRepo()
    const a = await sim.openPullRequest({ ...repo, title: "A", user: "alice" })
    const b = await sim.openPullRequest({ ...repo, title: "B", user: "bob" })
    const c = await sim.openPullRequest({ ...repo, title: "C", user: "bob" })
    await sim.closePullRequest(c)
    const heads = await run(host.listPullHeads(refOf(repo)))
    expect(Object.fromEntries(heads)).toEqual({ [a.number]: a.headSha, [b.number]: b.headSha })
    sim.clearRequests()
    await run(host.listPullHeads(refOf(repo)))
    expect(sim.requests().map((r) => `${r.route} ${r.status}`)).toEqual(["GET /repos/{owner}/{repo}/pulls 304"])
    const moved = await sim.pushToPullRequest(a, { files: { "more.txt": "x\n" } })
    expect((await run(host.listPullHeads(refOf(repo)))).get(a.number)).toBe(moved)
  })

  test("getBranchSha, readFile, isAncestor", async () => {
    const repo = await freshRepo({ "README.md": "hello\n", "docs/guide.md": "guide\n" })
    const main = await run(host.getBranchSha(refOf(repo), "main"))
    expect(main).toBe(repo.initialSha)
    expect(await run(host.getBranchSha(refOf(repo), "no/such-branch"))).toBeNull()
    expect(await run(host.readFile(refOf(repo), repo.initialSha, "docs/guide.md"))).toBe("guide\n")
    expect(await run(host.readFile(refOf(repo), repo.initialSha, "./README.md"))).toBe("hello\n")
    expect(await run(host.readFile(refOf(repo), repo.initialSha, "docs"))).toBeNull()
    expect(await run(host.readFile(refOf(repo), repo.initialSha, "missing.txt"))).toBeNull()
    const next = await sim.pushToBranch(repo, "main", { "b.txt": "b\n" })
    const pr = await sim.openPullRequest({ ...repo, title: "P", user: "alice" })
    expect(await run(host.isAncestor(refOf(repo), repo.initialSha, next))).toBe(true)
    expect(await run(host.isAncestor(refOf(repo), next, repo.initialSha))).toBe(false)
    expect(await run(host.isAncestor(refOf(repo), next, next))).toBe(true)
    // diverged: the PR's head does not contain a later push to main
    const later = await sim.pushToBranch(repo, "main", { "c.txt": "c\n" })
    expect(await run(host.isAncestor(refOf(repo), later, pr.headSha))).toBe(false)
  })

  test("requiredStatusChecks: branch protection's contexts; none when unprotected", async () => {
    const repo = await freshRepo()
    expect(await run(host.requiredStatusChecks(refOf(repo), "main"))).toEqual([])
    sim.setRequiredStatusChecks(repo, "main", ["ci", "lint"])
    expect([...(await run(host.requiredStatusChecks(refOf(repo), "main")))].sort()).toEqual(["ci", "lint"])
    sim.setRequiredStatusChecks(repo, "main", null)
    expect(await run(host.requiredStatusChecks(refOf(repo), "main"))).toEqual([])
  })
})

/** Two PRs touching different files, and their items. */
const twoPrs = async (repo: SimRepoKey & { initialSha: string }) => {
  const a = await sim.openPullRequest({
    ...repo,
    title: "Add a",
    user: "alice",
    commits: [
      { files: { "a.txt": "a1\n" }, message: "a: first" },
      { files: { "a.txt": "a2\n", "shared.txt": "zero\none\ntwo\n" }, message: "a: second" }
    ]
  })
  const b = await sim.openPullRequest({
    ...repo,
    title: "Add b",
    user: "bob",
    files: { "b.txt": "b\n", "shared.txt": "one\ntwo\nthree\n" }
  })
  const items: ReadonlyArray<TestBranchItem> = [
    { prNumber: a.number, headSha: a.headSha, title: "Add a" },
    { prNumber: b.number, headSha: b.headSha, title: "Add b" }
  ]
  return { a, b, items }
}

describe("GitHubHost: test branches", () => {
  for (const method of ["merge_commit", "squash", "rebase"] as const satisfies ReadonlyArray<MergeMethod>) {
    test(`${method}: the same commits as the local provider, deterministic, with both PRs' content`, async () => {
      const repo = await freshRepo()
      const { items } = await twoPrs(repo)
      const input = { repo: refOf(repo), baseSha: repo.initialSha, method, items }
      sim.clearRequests()
      const built = await run(host.buildTestBranch({ ...input, branch: `trunk-merge/pr-1/${method}` }))
      expect(built.commits).toHaveLength(2)
      // the test branch is written once, to the built tip (CI on trunk-merge/** sees nothing else); no scratch is left
      const writes = sim
        .requests()
        .filter(
          (r) =>
            (r.status < 300 &&
              r.method === "PATCH" &&
              r.path.endsWith(encodeURIComponent(`heads/trunk-merge/pr-1/${method}`))) ||
            (r.method === "POST" &&
              r.route === "POST /repos/{owner}/{repo}/git/refs" &&
              (r.body as { ref?: string }).ref === `refs/heads/trunk-merge/pr-1/${method}`)
        )
      expect(writes.map((r) => (r.body as { sha?: string }).sha)).toEqual([built.sha])
      expect(sim.git(repo, "for-each-ref", "refs/heads/greenline/")).toBe("")
      expect(built.sha).toBe(built.commits[1]!)
      expect(sim.branchSha(repo, `trunk-merge/pr-1/${method}`)).toBe(built.sha)
      expect(file(repo, built.sha, "a.txt")).toBe("a2")
      expect(file(repo, built.sha, "b.txt")).toBe("b")
      expect(file(repo, built.sha, "shared.txt")).toBe("zero\none\ntwo\nthree")
      const parents = sim.git(repo, "rev-list", "--parents", "-n", "1", built.sha).split(" ").slice(1)
      expect(parents[0]).toBe(built.commits[0]!)
      expect(parents).toHaveLength(method === "merge_commit" ? 2 : 1)
      if (method === "rebase") {
        // each PR commit replayed: a's two commits, then b's one
        expect(sim.git(repo, "rev-list", "--count", `${repo.initialSha}..${built.sha}`)).toBe("3")
      }
      // built again (a fresh provider: nothing remembered) on another branch: the very same commits
      const again = await run(
        makeGitHubHost(client).buildTestBranch({ ...input, branch: `trunk-merge/pr-2/${method}` })
      )
      expect(again).toEqual(built)
      // and the local provider, on the same bare repository, builds them too
      const { local, ref } = localOf(repo)
      const locally = await run(local.buildTestBranch({ ...input, repo: ref, branch: `local/${method}` }))
      expect(locally).toEqual(built)
    })
  }

  test("a conflict names the PR and its index; no items: the branch is the base", async () => {
    const repo = await freshRepo()
    const a = await sim.openPullRequest({ ...repo, title: "A", user: "alice", files: { "shared.txt": "alpha\n" } })
    const b = await sim.openPullRequest({ ...repo, title: "B", user: "bob", files: { "shared.txt": "beta\n" } })
    for (const method of ["merge_commit", "squash", "rebase"] as const) {
      const conflict = await fail(
        host.buildTestBranch({
          repo: refOf(repo),
          branch: `trunk-merge/conflict/${method}`,
          baseSha: repo.initialSha,
          method,
          items: [
            { prNumber: a.number, headSha: a.headSha, title: "A" },
            { prNumber: b.number, headSha: b.headSha, title: "B" }
          ]
        })
      )
      expect(conflict).toMatchObject({ _tag: "MergeConflict", prNumber: b.number, index: 1 })
    }
    const empty = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "trunk-merge/empty",
        baseSha: repo.initialSha,
        method: "squash",
        items: []
      })
    )
    expect(empty).toEqual({ sha: repo.initialSha, commits: [] })
    expect(sim.branchSha(repo, "trunk-merge/empty")).toBe(repo.initialSha)
  })

  test("invalid input is a GitError before any request", async () => {
    const repo = await freshRepo()
    sim.clearRequests()
    const bad = await fail(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "bad..name",
        baseSha: repo.initialSha,
        method: "squash",
        items: []
      })
    )
    expect(bad._tag).toBe("GitError")
    expect((await fail(host.getBranchSha(refOf(repo), "-x")))._tag).toBe("GitError")
    expect((await fail(host.readFile(refOf(repo), "HEAD", "README.md")))._tag).toBe("GitError")
    expect(sim.requests()).toEqual([])
  })

  test("a draft pull request for the test branch; deleteBranch closes it and deletes the branch", async () => {
    const repo = await freshRepo()
    const { items } = await twoPrs(repo)
    const branch = "trunk-merge/pr-9/run-1"
    const built = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch,
        baseSha: repo.initialSha,
        method: "merge_commit",
        items,
        pullRequest: { base: "main" }
      })
    )
    const open = (await run(host.listOpenPulls(refOf(repo)))).filter((p) => p.headRef === branch)
    expect(open).toHaveLength(1)
    expect(open[0]).toMatchObject({ draft: true, baseRef: "main", headSha: built.sha })
    // built again (a retry of the same command): still one pull request
    await run(
      makeGitHubHost(client).buildTestBranch({
        repo: refOf(repo),
        branch,
        baseSha: repo.initialSha,
        method: "merge_commit",
        items,
        pullRequest: { base: "main" }
      })
    )
    expect((await run(host.listOpenPulls(refOf(repo)))).filter((p) => p.headRef === branch)).toHaveLength(1)
    // deleted by a provider that did not open it (after a restart): found, closed, branch gone
    await run(makeGitHubHost(client).deleteBranch(refOf(repo), branch))
    expect(sim.pullRequest({ ...repo, number: open[0]!.number })).toMatchObject({ state: "closed", merged: false })
    expect(sim.branchSha(repo, branch)).toBeNull()
    // deleting again, or a branch that never existed, succeeds
    await run(host.deleteBranch(refOf(repo), branch))
    await run(host.deleteBranch(refOf(repo), "trunk-merge/never"))
  })

  test("rebaseOnto: the lane replayed onto a moved target, as the local provider does; a conflict is reported", async () => {
    const repo = await freshRepo()
    const { items } = await twoPrs(repo)
    const lane = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "trunk-merge/lane",
        baseSha: repo.initialSha,
        method: "merge_commit",
        items
      })
    )
    const onto = await sim.pushToBranch(repo, "main", { "c.txt": "c\n" })
    const rebased = await run(
      host.rebaseOnto({ repo: refOf(repo), baseSha: repo.initialSha, laneSha: lane.sha, ontoSha: onto })
    )
    expect(file(repo, rebased, "c.txt")).toBe("c")
    expect(file(repo, rebased, "b.txt")).toBe("b")
    expect(file(repo, rebased, "shared.txt")).toBe("zero\none\ntwo\nthree")
    expect(sim.git(repo, "merge-base", "--is-ancestor", onto, rebased)).toBe("")
    const { local, ref } = localOf(repo)
    expect(await run(local.rebaseOnto({ repo: ref, baseSha: repo.initialSha, laneSha: lane.sha, ontoSha: onto }))).toBe(
      rebased
    )
    // the scratch branch is gone
    expect(sim.git(repo, "for-each-ref", "refs/heads/greenline/")).toBe("")
    // onto the base itself: the lane as it is
    expect(
      await run(
        host.rebaseOnto({ repo: refOf(repo), baseSha: repo.initialSha, laneSha: lane.sha, ontoSha: repo.initialSha })
      )
    ).toBe(lane.sha)
    const clash = await sim.pushToBranch(repo, "main", { "b.txt": "not b\n" })
    const conflict = await fail(
      host.rebaseOnto({ repo: refOf(repo), baseSha: repo.initialSha, laneSha: lane.sha, ontoSha: clash })
    )
    expect(conflict).toMatchObject({ _tag: "MergeConflict", prNumber: items[1]!.prNumber, index: 1 })
  })
})

describe("GitHubHost: moving the target", () => {
  test("compareAndSwap: moves a fast-forward; false when the target is elsewhere; never forces", async () => {
    const repo = await freshRepo()
    const pr = await sim.openPullRequest({ ...repo, title: "A", user: "alice", files: { "a.txt": "a\n" } })
    expect(await run(host.compareAndSwap(refOf(repo), "main", pr.headSha, pr.headSha))).toBe(false)
    expect(await run(host.compareAndSwap(refOf(repo), "main", repo.initialSha, pr.headSha))).toBe(true)
    expect(sim.branchSha(repo, "main")).toBe(pr.headSha)
    // stale expectation: refused, nothing moves
    expect(await run(host.compareAndSwap(refOf(repo), "main", repo.initialSha, pr.headSha))).toBe(false)
    // not a fast-forward: an error, the branch stays
    const other = await sim.openPullRequest({ ...repo, base: "main", title: "B", user: "bob" })
    const side = await sim.pushToBranch(repo, "main", { "x.txt": "x\n" })
    const forced = await fail(host.compareAndSwap(refOf(repo), "main", side, other.headSha))
    expect(forced._tag).toBe("GitError")
    expect(sim.branchSha(repo, "main")).toBe(side)
  })

  for (const method of ["merge_commit", "squash", "rebase"] as const) {
    test(`merge (${method}): the target gets exactly the tested tree and the PRs are merged`, async () => {
      const repo = await freshRepo()
      const { a, b, items } = await twoPrs(repo)
      const built = await run(
        host.buildTestBranch({
          repo: refOf(repo),
          branch: `trunk-merge/m/${method}`,
          baseSha: repo.initialSha,
          method,
          items
        })
      )
      sim.clearRequests()
      const tip = await run(
        host.merge({
          repo: refOf(repo),
          branch: "main",
          expectedOld: repo.initialSha,
          newSha: built.sha,
          method,
          pulls: items.map((i) => ({ prNumber: i.prNumber, headSha: i.headSha, title: i.title }))
        })
      )
      expect(tip).toBe(sim.branchSha(repo, "main"))
      expect(treeOf(repo, tip!)).toBe(treeOf(repo, built.sha))
      const routes = sim.requests().map((r) => r.route)
      if (method === "merge_commit") {
        // the target moved to the tested commit itself
        expect(tip).toBe(built.sha)
        expect(routes).not.toContain("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge")
      } else {
        expect(routes.filter((r) => r === "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge")).toHaveLength(2)
      }
      for (const pr of [a, b]) expect(sim.pullRequest(pr)).toMatchObject({ state: "closed", merged: true })
    })
  }

  test("merge: a target that moved is not merged (null)", async () => {
    const repo = await freshRepo()
    const { items } = await twoPrs(repo)
    const built = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "trunk-merge/moved",
        baseSha: repo.initialSha,
        method: "squash",
        items
      })
    )
    const moved = await sim.pushToBranch(repo, "main", { "x.txt": "x\n" })
    const tip = await run(
      host.merge({
        repo: refOf(repo),
        branch: "main",
        expectedOld: repo.initialSha,
        newSha: built.sha,
        method: "squash",
        pulls: items.map((i) => ({ ...i }))
      })
    )
    expect(tip).toBeNull()
    expect(sim.branchSha(repo, "main")).toBe(moved)
  })

  test("merge: a protected target is merged through the pull request API, and a refusal is MergeRefused", async () => {
    const repo = await freshRepo()
    const pr = await sim.openPullRequest({ ...repo, title: "A", user: "alice", files: { "a.txt": "a\n" } })
    const items = [{ prNumber: pr.number, headSha: pr.headSha, title: "A" }]
    const built = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "trunk-merge/protected",
        baseSha: repo.initialSha,
        method: "merge_commit",
        items
      })
    )
    sim.setRequiredStatusChecks(repo, "main", ["ci"])
    const input = {
      repo: refOf(repo),
      branch: "main",
      expectedOld: repo.initialSha,
      newSha: built.sha,
      method: "merge_commit" as const,
      pulls: items
    }
    // no "ci" anywhere: moving the ref and the PR merge are both refused
    const refused = await fail(host.merge(input))
    expect(refused).toMatchObject({ _tag: "MergeRefused", prNumber: pr.number, actualSha: repo.initialSha })
    expect(sim.branchSha(repo, "main")).toBe(repo.initialSha)
    // the PR's head passed "ci": the protection lets the pull request merge (not the untested test-branch commit)
    await sim.postStatus(pr.headSha, "ci", "success", { repo })
    sim.clearRequests()
    const tip = await run(host.merge(input))
    expect(sim.requests().map((r) => r.route)).toContain("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge")
    expect(tip).toBe(sim.branchSha(repo, "main"))
    expect(treeOf(repo, tip!)).toBe(treeOf(repo, built.sha))
    expect(sim.pullRequest(pr)).toMatchObject({ merged: true })
  })

  test("merge: a merge method the repository does not allow is MergeRefused with GitHub's reason", async () => {
    const repo = await freshRepo()
    const pr = await sim.openPullRequest({ ...repo, title: "A", user: "alice", files: { "a.txt": "a\n" } })
    const items = [{ prNumber: pr.number, headSha: pr.headSha, title: "A" }]
    const built = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "trunk-merge/squash-off",
        baseSha: repo.initialSha,
        method: "squash",
        items
      })
    )
    sim.setMergeMethods(repo, { squash: false })
    const refused = await fail(
      host.merge({
        repo: refOf(repo),
        branch: "main",
        expectedOld: repo.initialSha,
        newSha: built.sha,
        method: "squash",
        pulls: items
      })
    )
    expect(refused).toMatchObject({ _tag: "MergeRefused", prNumber: pr.number })
    expect(refused.message).toContain("#")
    expect(sim.pullRequest(pr)).toMatchObject({ state: "open", merged: false })
  })

  test("merge: a PR pushed to after it was tested is refused by the sha guard", async () => {
    const repo = await freshRepo()
    const pr = await sim.openPullRequest({ ...repo, title: "A", user: "alice", files: { "a.txt": "a\n" } })
    const items = [{ prNumber: pr.number, headSha: pr.headSha, title: "A" }]
    const built = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: "trunk-merge/guard",
        baseSha: repo.initialSha,
        method: "squash",
        items
      })
    )
    await sim.pushToPullRequest(pr, { files: { "a.txt": "changed\n" } })
    const result = await run(
      Effect.either(
        host.merge({
          repo: refOf(repo),
          branch: "main",
          expectedOld: repo.initialSha,
          newSha: built.sha,
          method: "squash",
          pulls: items
        })
      )
    )
    expect(Either.isLeft(result) && result.left._tag).toBe("MergeRefused")
    expect(sim.branchSha(repo, "main")).toBe(repo.initialSha)
  })
})

/**
 * A provider over the same client that stops (a defect, as a crash would) right after GitHub answered the merge of
 * pull request `prNumber`: GitHub merged it, the caller never learns.
 */
const stopsAfterMerging = (prNumber: number): GitHubHostService =>
  makeGitHubHost({
    ...client,
    request: (route, params, auth, options) => {
      const sent = client.request(route, params, auth, options)
      return route === "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge" &&
        (params as { readonly pull_number?: number }).pull_number === prNumber
        ? Effect.zipRight(sent, Effect.die(new Error("the service stopped")))
        : sent
    }
  })

describe("GitHubHost: a replayed merge (the service stopped after GitHub merged)", () => {
  const PUT_MERGE = "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"

  /** Two PRs tested together with `method`; protected `main` (merged through the PR API) for merge_commit. */
  const testedBatch = async (method: MergeMethod) => {
    const repo = await freshRepo()
    const { a, b, items } = await twoPrs(repo)
    const built = await run(
      host.buildTestBranch({
        repo: refOf(repo),
        branch: `trunk-merge/replay/${method}`,
        baseSha: repo.initialSha,
        method,
        items
      })
    )
    if (method === "merge_commit") {
      sim.setRequiredStatusChecks(repo, "main", ["ci"])
      for (const pr of [a, b]) await sim.postStatus(pr.headSha, "ci", "success", { repo })
    }
    const input = {
      repo: refOf(repo),
      branch: "main",
      expectedOld: repo.initialSha,
      newSha: built.sha,
      method,
      pulls: items.map((i) => ({ prNumber: i.prNumber, headSha: i.headSha, title: i.title }))
    }
    return { repo, a, b, built, input }
  }

  for (const method of ["squash", "rebase", "merge_commit"] as const) {
    test(`${method}: stopped after the last PR merged, the replay counts both as merged and merges nothing more`, async () => {
      const { repo, a, b, built, input } = await testedBatch(method)
      const crashed = await Effect.runPromiseExit(stopsAfterMerging(b.number).merge(input))
      expect(crashed._tag).toBe("Failure")
      const landed = sim.branchSha(repo, "main")
      expect(landed).not.toBe(repo.initialSha)
      expect(treeOf(repo, landed!)).toBe(treeOf(repo, built.sha))
      // after a restart: a new provider (nothing remembered), the same merge again
      sim.clearRequests()
      const replayed = await run(makeGitHubHost(client).merge(input))
      expect(replayed).toBe(landed)
      expect(sim.requests().map((r) => r.route)).not.toContain(PUT_MERGE)
      // and again: still the same tip, nothing moves
      expect(await run(host.merge(input))).toBe(landed)
      expect(sim.branchSha(repo, "main")).toBe(landed)
      for (const pr of [a, b]) expect(sim.pullRequest(pr)).toMatchObject({ state: "closed", merged: true })
    })

    test(`${method}: stopped in the middle of the batch, the replay merges the rest from the new tip`, async () => {
      const { repo, a, b, built, input } = await testedBatch(method)
      const crashed = await Effect.runPromiseExit(stopsAfterMerging(a.number).merge(input))
      expect(crashed._tag).toBe("Failure")
      const afterA = sim.branchSha(repo, "main")
      expect(sim.pullRequest(a)).toMatchObject({ merged: true })
      expect(sim.pullRequest(b)).toMatchObject({ state: "open", merged: false })
      sim.clearRequests()
      const replayed = await run(makeGitHubHost(client).merge(input))
      const merges = sim.requests().filter((r) => r.route === PUT_MERGE)
      expect(merges.map((r) => r.path)).toEqual([expect.stringContaining(`/pulls/${b.number}/merge`)])
      expect(replayed).toBe(sim.branchSha(repo, "main"))
      expect(sim.git(repo, "rev-parse", `${replayed}^`)).toBe(afterA!)
      expect(treeOf(repo, replayed!)).toBe(treeOf(repo, built.sha))
      for (const pr of [a, b]) expect(sim.pullRequest(pr)).toMatchObject({ state: "closed", merged: true })
    })
  }

  test("a PR closed without merging still fails: MergeRefused names it, the one merged before it stays merged", async () => {
    const { repo, a, b, input } = await testedBatch("squash")
    await Effect.runPromiseExit(stopsAfterMerging(a.number).merge(input))
    const afterA = sim.branchSha(repo, "main")
    await sim.closePullRequest(b)
    const refused = await fail(makeGitHubHost(client).merge(input))
    expect(refused).toMatchObject({ _tag: "MergeRefused", prNumber: b.number, actualSha: afterA })
    expect(sim.branchSha(repo, "main")).toBe(afterA)
    expect(sim.pullRequest(a)).toMatchObject({ merged: true })
    expect(sim.pullRequest(b)).toMatchObject({ state: "closed", merged: false })
  })

  test("a PR merged by someone else with other content is not ours: nothing merged (null), nothing merged more", async () => {
    const { repo, a, b, input } = await testedBatch("squash")
    // someone pushed to main, then merged the first PR onto it from GitHub's page
    await sim.pushToBranch(repo, "main", { "x.txt": "x\n" })
    await run(
      client.request(
        PUT_MERGE,
        { owner: repo.owner, repo: repo.name, pull_number: a.number, merge_method: "squash" },
        GitHubAuth.repository(repo.owner, repo.name)
      )
    )
    const tip = sim.branchSha(repo, "main")
    sim.clearRequests()
    expect(await run(makeGitHubHost(client).merge(input))).toBeNull()
    expect(sim.requests().map((r) => r.route)).not.toContain(PUT_MERGE)
    expect(sim.branchSha(repo, "main")).toBe(tip)
    expect(sim.pullRequest(b)).toMatchObject({ state: "open", merged: false })
  })

  test("stopped after the target moved on from the merged PRs: the tip of their merge, not the foreign commit", async () => {
    const { repo, b, input } = await testedBatch("squash")
    await Effect.runPromiseExit(stopsAfterMerging(b.number).merge(input))
    const landed = sim.branchSha(repo, "main")
    await sim.pushToBranch(repo, "main", { "later.txt": "later\n" })
    expect(await run(makeGitHubHost(client).merge(input))).toBe(landed)
  })
})
