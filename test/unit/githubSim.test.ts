/**
 * The simulated GitHub itself: answers valid against GitHub's OpenAPI description, merges and conflicts decided by
 * real Git, App authentication, ETags, rate limits and signed webhooks.
 */
import { heapStats } from "bun:jsc"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as crypto from "node:crypto"
import { GitOps } from "../support/github/gitOps.ts"
import { openApiCatalog } from "../support/github/openapi.ts"
import { type GitHubSim, type SimPrKey, startGitHubSim } from "../support/github/sim.ts"

const SECRET = "sim-webhook-secret"

interface Received {
  readonly headers: Headers
  readonly raw: string
}

interface Reply {
  readonly status: number
  readonly headers: Headers
  // biome-ignore lint/suspicious/noExplicitAny: GitHub's JSON answers, read field by field (their shapes are validated by the simulator)
  readonly body: any
}

let sim: GitHubSim
let receiver: ReturnType<typeof Bun.serve>
const received: Received[] = []

const b64url = (s: string | Buffer) => Buffer.from(s).toString("base64url")

/** An App JWT signed with `key` (default the App's), claims overridable. */
const jwt = (claims: Record<string, unknown> = {}, key: string = sim.privateKeyPem) => {
  const nowSec = Math.floor(Date.now() / 1000)
  const header = b64url(JSON.stringify({ alg: "RS256", typ: "JWT" }))
  const payload = b64url(JSON.stringify({ iat: nowSec - 30, exp: nowSec + 540, iss: sim.appId, ...claims }))
  const signature = crypto.sign("RSA-SHA256", Buffer.from(`${header}.${payload}`), key).toString("base64url")
  return `${header}.${payload}.${signature}`
}

const call = async (
  method: string,
  path: string,
  options: { auth?: string; body?: unknown; headers?: Record<string, string> } = {}
): Promise<Reply> => {
  const headers: Record<string, string> = { accept: "application/vnd.github+json", ...(options.headers ?? {}) }
  if (options.auth !== undefined) headers.authorization = options.auth
  if (options.body !== undefined) headers["content-type"] = "application/json"
  const r = await fetch(`${sim.url}${path}`, {
    method,
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const text = await r.text()
  return { status: r.status, headers: r.headers, body: text === "" ? undefined : JSON.parse(text) }
}

let installationId = 0
let token = ""
const tok = () => `token ${token}`
const repo = { owner: "acme", name: "app" }
const R = "/repos/acme/app"

beforeAll(async () => {
  receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      received.push({ headers: req.headers, raw: await req.text() })
      return new Response(null, { status: 204 })
    }
  })
  sim = await startGitHubSim({ webhookSecret: SECRET })
  sim.setWebhookUrl(`http://127.0.0.1:${receiver.port}/webhooks/github`)
  await sim.createRepo("acme", "app", { "README.md": "hello\n", "shared.txt": "one\ntwo\nthree\n" })
  await sim.createRepo("acme", "other")
  await sim.createRepo("elsewhere", "lib")
  installationId = await sim.installApp("acme", ["app"])
  await sim.installApp("elsewhere", ["lib"])
  const r = await call("POST", `/app/installations/${installationId}/access_tokens`, { auth: `Bearer ${jwt()}` })
  expect(r.status).toBe(201)
  token = r.body.token
})

afterAll(async () => {
  await sim.stop()
  receiver.stop(true)
})

describe("authentication", () => {
  test("app JWTs: the App's key, RS256, at most ten minutes; tokens: known, unexpired, for installed repositories", async () => {
    expect((await call("GET", "/app/installations", { auth: `Bearer ${jwt()}` })).status).toBe(200)
    const other = crypto
      .generateKeyPairSync("rsa", { modulusLength: 2048 })
      .privateKey.export({ type: "pkcs1", format: "pem" })
    expect((await call("GET", "/app/installations", { auth: `Bearer ${jwt({}, other.toString())}` })).status).toBe(401)
    const nowSec = Math.floor(Date.now() / 1000)
    expect((await call("GET", "/app/installations", { auth: `Bearer ${jwt({ exp: nowSec + 3600 })}` })).status).toBe(
      401
    )
    expect((await call("GET", "/app/installations", { auth: `Bearer ${jwt({ exp: nowSec - 1 })}` })).status).toBe(401)
    expect((await call("GET", "/app/installations", { auth: `Bearer ${jwt({ iss: 1 })}` })).status).toBe(401)
    expect((await call("GET", "/app/installations", { auth: "Bearer not.a.jwt" })).status).toBe(401)
    expect((await call("GET", "/app/installations")).status).toBe(401)
    // an installation token is not a JWT
    expect((await call("GET", "/app/installations", { auth: `Bearer ${token}` })).status).toBe(401)

    const installation = await call("GET", `${R}/installation`, { auth: `Bearer ${jwt()}` })
    expect(installation.body.id).toBe(installationId)
    expect((await call("GET", "/repos/acme/other/installation", { auth: `Bearer ${jwt()}` })).status).toBe(404)

    expect((await call("GET", `${R}/pulls`, { auth: tok() })).status).toBe(200)
    expect((await call("GET", `${R}/pulls`, { auth: "token ghs_unknown" })).status).toBe(401)
    expect((await call("GET", `${R}/pulls`)).status).toBe(401)
    // not in this installation: hidden as GitHub hides it
    expect((await call("GET", "/repos/acme/other/pulls", { auth: tok() })).status).toBe(404)
    expect((await call("GET", "/repos/elsewhere/lib/pulls", { auth: tok() })).status).toBe(404)
    const repos = await call("GET", "/installation/repositories", { auth: tok() })
    expect(repos.body.repositories.map((r: { full_name: string }) => r.full_name)).toEqual(["acme/app"])

    // a token that expired is refused; a new one works
    const fresh = await call("POST", `/app/installations/${installationId}/access_tokens`, { auth: `Bearer ${jwt()}` })
    expect(Date.parse(fresh.body.expires_at)).toBeGreaterThan(Date.now() + 3_000_000)
    sim.expireTokens()
    expect((await call("GET", `${R}/pulls`, { auth: `token ${fresh.body.token}` })).status).toBe(401)
    const renewed = await call("POST", `/app/installations/${installationId}/access_tokens`, {
      auth: `Bearer ${jwt()}`
    })
    token = renewed.body.token
    expect((await call("GET", `${R}/pulls`, { auth: tok() })).status).toBe(200)

    // a personal access token reaches every repository
    const pat = sim.createPersonalToken("octo-admin")
    expect((await call("GET", "/repos/acme/other/pulls", { auth: `token ${pat}` })).status).toBe(200)
  })
})

describe("a representative sequence", () => {
  let pr1: SimPrKey & { headSha: string; head: string }
  let pr2: SimPrKey & { headSha: string; head: string }
  let pr3: SimPrKey & { headSha: string; head: string }

  test("pull requests: listed, read, mergeability computed by git (null first, as GitHub)", async () => {
    pr1 = await sim.openPullRequest({ ...repo, title: "Add a", user: "alice", files: { "a.txt": "a\n" } })
    // pr2 and pr3 both rewrite the same line of shared.txt: each merges alone, not together
    pr2 = await sim.openPullRequest({
      ...repo,
      title: "Two",
      user: "bob",
      files: { "shared.txt": "one\nTWO\nthree\n" }
    })
    pr3 = await sim.openPullRequest({
      ...repo,
      title: "Deux",
      user: "carol",
      files: { "shared.txt": "one\ndeux\nthree\n" }
    })
    const list = await call("GET", `${R}/pulls?state=open&per_page=2&page=1`, { auth: tok() })
    expect(list.status).toBe(200)
    expect(list.body.map((p: { number: number }) => p.number)).toEqual([3, 2])
    expect(list.headers.get("link")).toContain('rel="next"')
    const first = await call("GET", `${R}/pulls/1`, { auth: tok() })
    expect({ mergeable: first.body.mergeable, state: first.body.mergeable_state }).toEqual({
      mergeable: null,
      state: "unknown"
    })
    const second = await call("GET", `${R}/pulls/1`, { auth: tok() })
    expect(second.body).toMatchObject({
      number: 1,
      title: "Add a",
      user: { login: "alice" },
      head: { ref: pr1.head, sha: pr1.headSha },
      base: { ref: "main", sha: sim.branchSha(repo, "main") },
      draft: false,
      state: "open",
      merged: false,
      mergeable: true,
      mergeable_state: "clean"
    })
    expect((await call("GET", `${R}/pulls/99`, { auth: tok() })).status).toBe(404)
  })

  test("test branches through the Git data and merges APIs: 201, 409 on conflict, 204 when nothing to merge", async () => {
    const main = sim.branchSha(repo, "main")!
    const created = await call("POST", `${R}/git/refs`, {
      auth: tok(),
      body: { ref: "refs/heads/trunk-merge/pr-2/run1", sha: main }
    })
    expect(created.status).toBe(201)
    expect(
      (
        await call("POST", `${R}/git/refs`, {
          auth: tok(),
          body: { ref: "refs/heads/trunk-merge/pr-2/run1", sha: main }
        })
      ).status
    ).toBe(422)
    const ref = await call("GET", `${R}/git/ref/${encodeURIComponent("heads/trunk-merge/pr-2/run1")}`, { auth: tok() })
    expect(ref.body.object.sha).toBe(main)
    const merged = await call("POST", `${R}/merges`, {
      auth: tok(),
      body: { base: "trunk-merge/pr-2/run1", head: pr2.headSha, commit_message: "Merge #2" }
    })
    expect(merged.status).toBe(201)
    expect(merged.body.parents.map((p: { sha: string }) => p.sha)).toEqual([main, pr2.headSha])
    expect(sim.readFile(repo, "trunk-merge/pr-2/run1", "shared.txt")).toBe("one\nTWO\nthree")
    const conflict = await call("POST", `${R}/merges`, {
      auth: tok(),
      body: { base: "trunk-merge/pr-2/run1", head: pr3.headSha }
    })
    expect(conflict.status).toBe(409)
    expect(sim.branchSha(repo, "trunk-merge/pr-2/run1")).toBe(merged.body.sha)
    const nothing = await call("POST", `${R}/merges`, {
      auth: tok(),
      body: { base: "trunk-merge/pr-2/run1", head: pr2.headSha }
    })
    expect(nothing.status).toBe(204)

    // a squashed equivalent through the Git data API: the merge's tree on one parent
    const commit = await call("GET", `${R}/git/commits/${merged.body.sha}`, { auth: tok() })
    const squash = await call("POST", `${R}/git/commits`, {
      auth: tok(),
      body: { message: "Two (#2)", tree: commit.body.tree.sha, parents: [main] }
    })
    expect(squash.status).toBe(201)
    const moved = await call("PATCH", `${R}/git/refs/${encodeURIComponent("heads/trunk-merge/pr-2/run1")}`, {
      auth: tok(),
      body: { sha: squash.body.sha, force: false }
    })
    expect(moved.status).toBe(422) // not a fast-forward
    const forced = await call("PATCH", `${R}/git/refs/${encodeURIComponent("heads/trunk-merge/pr-2/run1")}`, {
      auth: tok(),
      body: { sha: squash.body.sha, force: true }
    })
    expect(forced.status).toBe(200)
    const cmp = await call("GET", `${R}/compare/${main}...${squash.body.sha}`, { auth: tok() })
    expect({ status: cmp.body.status, ahead: cmp.body.ahead_by, behind: cmp.body.behind_by }).toEqual({
      status: "ahead",
      ahead: 1,
      behind: 0
    })
    const diverged = await call("GET", `${R}/compare/${pr1.headSha}...${pr2.headSha}`, { auth: tok() })
    expect(diverged.body.status).toBe("diverged")
    const matching = await call("GET", `${R}/git/matching-refs/${encodeURIComponent("heads/trunk-merge/")}`, {
      auth: tok()
    })
    expect(matching.body.map((r: { ref: string }) => r.ref)).toEqual(["refs/heads/trunk-merge/pr-2/run1"])
    const content = await call("GET", `${R}/contents/shared.txt?ref=${squash.body.sha}`, { auth: tok() })
    expect(Buffer.from(content.body.content, "base64").toString()).toBe("one\nTWO\nthree\n")
    expect((await call("GET", `${R}/contents/nope.txt?ref=main`, { auth: tok() })).status).toBe(404)

    // a draft PR for the test branch, closed when the branch is deleted
    const draft = await call("POST", `${R}/pulls`, {
      auth: tok(),
      body: { title: "Merge queue: #2", head: "trunk-merge/pr-2/run1", base: "main", draft: true }
    })
    expect(draft.status).toBe(201)
    expect(draft.body.user.login).toBe(sim.botLogin)
    const deleted = await call("DELETE", `${R}/git/refs/${encodeURIComponent("heads/trunk-merge/pr-2/run1")}`, {
      auth: tok()
    })
    expect(deleted.status).toBe(204)
    expect(sim.pullRequest({ ...repo, number: draft.body.number }).state).toBe("closed")
    expect(
      (await call("DELETE", `${R}/git/refs/${encodeURIComponent("heads/trunk-merge/pr-2/run1")}`, { auth: tok() }))
        .status
    ).toBe(422)
  })

  test("statuses, check runs and required status checks", async () => {
    expect((await call("GET", `${R}/branches/main/protection/required_status_checks`, { auth: tok() })).status).toBe(
      404
    )
    sim.setRequiredStatusChecks(repo, "main", ["ci", "lint"])
    const policy = await call("GET", `${R}/branches/main/protection/required_status_checks`, { auth: tok() })
    expect(policy.body.contexts).toEqual(["ci", "lint"])

    await sim.postStatus(pr1.headSha, "ci", "pending")
    const posted = await call("POST", `${R}/statuses/${pr1.headSha}`, {
      auth: tok(),
      body: { state: "pending", context: "Trunk Merge Queue (main)", description: "queued" }
    })
    expect(posted.status).toBe(201)
    let combined = await call("GET", `${R}/commits/${pr1.headSha}/status`, { auth: tok() })
    expect(combined.body.state).toBe("pending")
    await sim.postStatus(pr1.headSha, "ci", "failure")
    combined = await call("GET", `${R}/commits/${pr1.headSha}/status`, { auth: tok() })
    expect(combined.body.state).toBe("failure")
    expect(
      (await call("POST", `${R}/statuses/${"f".repeat(40)}`, { auth: tok(), body: { state: "success" } })).status
    ).toBe(422)

    await sim.startCheckRun(pr1.headSha, "lint")
    await sim.completeCheckRun(pr1.headSha, "lint", "success")
    const runs = await call("GET", `${R}/commits/${pr1.headSha}/check-runs`, { auth: tok() })
    expect(runs.body.check_runs.map((r: { name: string; conclusion: string }) => [r.name, r.conclusion])).toEqual([
      ["lint", "success"]
    ])
    expect(runs.body.check_runs[0].pull_requests[0].number).toBe(1)

    // blocked until every required check passes; then PUT merge with the sha guard
    await call("GET", `${R}/pulls/1`, { auth: tok() })
    expect((await call("GET", `${R}/pulls/1`, { auth: tok() })).body.mergeable_state).toBe("blocked")
    expect(
      (await call("PUT", `${R}/pulls/1/merge`, { auth: tok(), body: { sha: pr1.headSha, merge_method: "squash" } }))
        .status
    ).toBe(405)
    await sim.postStatus(pr1.headSha, "ci", "success")
    expect(
      (await call("PUT", `${R}/pulls/1/merge`, { auth: tok(), body: { sha: pr2.headSha, merge_method: "squash" } }))
        .status
    ).toBe(409)
    const done = await call("PUT", `${R}/pulls/1/merge`, {
      auth: tok(),
      body: { sha: pr1.headSha, merge_method: "squash" }
    })
    expect(done.status).toBe(200)
    expect(done.body.merged).toBe(true)
    expect(sim.git(repo, "rev-list", "--count", `${done.body.sha}^@`)).toBe("1")
    expect(sim.git(repo, "log", "-1", "--format=%s", "main")).toBe("Add a (#1)")
    const after = await call("GET", `${R}/pulls/1`, { auth: tok() })
    expect(after.body).toMatchObject({ state: "closed", merged: true, merge_commit_sha: done.body.sha })
    // a protected branch moves only to a commit whose required checks passed, and only forward
    const unchecked = sim.git(
      repo,
      "-c",
      "user.name=T",
      "-c",
      "user.email=t@example.com",
      "commit-tree",
      `${done.body.sha}^{tree}`,
      "-p",
      done.body.sha,
      "-m",
      "unchecked"
    )
    const refused = await call("PATCH", `${R}/git/refs/heads%2Fmain`, { auth: tok(), body: { sha: unchecked } })
    expect(refused.status).toBe(422)
    expect(refused.body.message).toContain("Required status check")
    sim.setRequiredStatusChecks(repo, "main", null)
  })

  test("moving the base to a commit containing a PR's head marks it merged; merge commits; rebase conflicts", async () => {
    const main = sim.branchSha(repo, "main")!
    const merged = await call("POST", `${R}/merges`, { auth: tok(), body: { base: "main", head: pr2.headSha } })
    expect(merged.status).toBe(201)
    expect(sim.pullRequest(pr2)).toMatchObject({ state: "closed", merged: true, mergeCommitSha: merged.body.sha })
    expect(await sim.git(repo, "rev-parse", "main")).not.toBe(main)
    // pr3 now conflicts with main
    await call("GET", `${R}/pulls/3`, { auth: tok() })
    const dirty = await call("GET", `${R}/pulls/3`, { auth: tok() })
    expect({ mergeable: dirty.body.mergeable, state: dirty.body.mergeable_state }).toEqual({
      mergeable: false,
      state: "dirty"
    })
    expect((await call("PUT", `${R}/pulls/3/merge`, { auth: tok(), body: { merge_method: "rebase" } })).status).toBe(
      405
    )
    expect((await call("PUT", `${R}/pulls/3/merge`, { auth: tok(), body: { merge_method: "merge" } })).status).toBe(405)
    // a force-push that resolves it, then a merge commit
    const head = await sim.pushToPullRequest(pr3, { force: true, files: { "d.txt": "deux\n" } })
    const clean = await call("PUT", `${R}/pulls/3/merge`, { auth: tok(), body: { sha: head, merge_method: "merge" } })
    expect(clean.status).toBe(200)
    expect(sim.git(repo, "rev-parse", `${clean.body.sha}^2`)).toBe(head)
    const pr4 = await sim.openPullRequest({
      ...repo,
      title: "Three commits",
      user: "alice",
      commits: [
        { files: { "r1.txt": "1\n" } },
        { files: { "r2.txt": "2\n" } },
        { files: { "r3.txt": "3\n" }, message: "third" }
      ]
    })
    const rebased = await call("PUT", `${R}/pulls/${pr4.number}/merge`, {
      auth: tok(),
      body: { merge_method: "rebase" }
    })
    expect(rebased.status).toBe(200)
    expect(sim.git(repo, "rev-list", "--count", `${clean.body.sha}..main`)).toBe("3")
    expect(sim.git(repo, "log", "-1", "--format=%s", "main")).toBe("third")
  })

  test("comments, reactions and permissions", async () => {
    const pr = await sim.openPullRequest({ ...repo, title: "Commented", user: "dave" })
    const id = await sim.comment("dave", pr, "/trunk merge")
    const mine = await call("POST", `${R}/issues/${pr.number}/comments`, { auth: tok(), body: { body: "Queued" } })
    expect(mine.status).toBe(201)
    expect(mine.body.performed_via_github_app?.id).toBe(sim.appId)
    const edited = await call("PATCH", `${R}/issues/comments/${mine.body.id}`, {
      auth: tok(),
      body: { body: "Testing" }
    })
    expect(edited.body.body).toBe("Testing")
    expect((await call("PATCH", `${R}/issues/comments/${id}`, { auth: tok(), body: { body: "x" } })).status).toBe(403)
    const reaction = await call("POST", `${R}/issues/comments/${id}/reactions`, {
      auth: tok(),
      body: { content: "+1" }
    })
    expect(reaction.status).toBe(201)
    expect(
      (await call("POST", `${R}/issues/comments/${id}/reactions`, { auth: tok(), body: { content: "+1" } })).status
    ).toBe(200)
    expect(sim.comments(pr).map((c) => [c.user, c.body, c.reactions.map((r) => r.content)])).toEqual([
      ["dave", "/trunk merge", ["+1"]],
      [sim.botLogin, "Testing", []]
    ])
    sim.setPermission("dave", "write")
    sim.setPermission("eve", "triage", repo)
    const dave = await call("GET", `${R}/collaborators/dave/permission`, { auth: tok() })
    expect(dave.body.permission).toBe("write")
    const eve = await call("GET", `${R}/collaborators/eve/permission`, { auth: tok() })
    expect({ permission: eve.body.permission, role: eve.body.role_name }).toEqual({
      permission: "read",
      role: "triage"
    })
    expect((await call("GET", `${R}/collaborators/acme/permission`, { auth: tok() })).status).toBe(404)
    expect((await call("GET", `${R}/collaborators/nobody-at-all/permission`, { auth: tok() })).status).toBe(404)
  })

  test("every request and answer so far matches GitHub's OpenAPI description", () => {
    expect(sim.violations()).toEqual([])
    expect(sim.requests().length).toBeGreaterThan(50)
    expect(sim.requests().every((r) => r.route !== null)).toBe(true)
  })
})

describe("conditional requests and rate limits", () => {
  test("GETs carry an ETag; If-None-Match answers 304 without spending the budget", async () => {
    const first = await call("GET", `${R}/pulls?state=all`, { auth: tok() })
    const etag = first.headers.get("etag")!
    expect(etag).toMatch(/^W\/"/)
    const remaining = Number(first.headers.get("x-ratelimit-remaining"))
    const again = await call("GET", `${R}/pulls?state=all`, { auth: tok(), headers: { "if-none-match": etag } })
    expect(again.status).toBe(304)
    expect(again.body).toBeUndefined()
    const third = await call("GET", `${R}/pulls?state=all`, { auth: tok() })
    expect(Number(third.headers.get("x-ratelimit-remaining"))).toBe(remaining - 1)
    await sim.openPullRequest({ ...repo, title: "Changes the list", user: "alice" })
    expect(
      (await call("GET", `${R}/pulls?state=all`, { auth: tok(), headers: { "if-none-match": etag } })).status
    ).toBe(200)
  })

  test("every answer has rate-limit headers; the secondary-limit switch; an exhausted budget", async () => {
    const ok = await call("GET", `${R}/pulls`, { auth: tok() })
    for (const h of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-used"])
      expect(ok.headers.get(h)).not.toBeNull()
    sim.secondaryRateLimit(2, { retryAfterSeconds: 7 })
    const a = await call("GET", `${R}/pulls`, { auth: tok() })
    const b = await call("POST", `${R}/issues/1/comments`, { auth: tok(), body: { body: "x" } })
    expect([a.status, b.status, a.headers.get("retry-after")]).toEqual([403, 403, "7"])
    expect(a.body.message).toContain("secondary rate limit")
    expect((await call("GET", `${R}/pulls`, { auth: tok() })).status).toBe(200)
    sim.secondaryRateLimit(1, { status: 429 })
    expect((await call("GET", `${R}/pulls`, { auth: tok() })).status).toBe(429)
    sim.setRateLimitRemaining(0)
    const exhausted = await call("GET", `${R}/pulls`, { auth: tok() })
    expect([exhausted.status, exhausted.headers.get("x-ratelimit-remaining")]).toEqual([403, "0"])
    expect(Number(exhausted.headers.get("x-ratelimit-reset"))).toBeGreaterThan(Date.now() / 1000)
    sim.setRateLimitRemaining(5000)
    expect((await call("GET", `${R}/pulls`, { auth: tok() })).status).toBe(200)
  })
})

describe("webhooks", () => {
  test("signed with X-Hub-Signature-256 over the raw body, one delivery id each, valid payloads", async () => {
    await sim.settled()
    const sent = sim.deliveries().filter((d) => d.outcome === 204)
    expect(sent.length).toBe(received.length)
    for (const r of received) {
      const expected = `sha256=${crypto.createHmac("sha256", SECRET).update(r.raw).digest("hex")}`
      const given = r.headers.get("x-hub-signature-256") ?? ""
      expect(given.length).toBe(expected.length)
      expect(crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected))).toBe(true)
      expect(r.headers.get("x-github-delivery")).toMatch(
        /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
      )
    }
    expect(new Set(received.map((r) => r.headers.get("x-github-delivery"))).size).toBe(received.length)
    const events = new Set(received.map((r) => `${r.headers.get("x-github-event")}.${JSON.parse(r.raw).action ?? ""}`))
    for (const e of [
      "installation.created",
      "pull_request.opened",
      "pull_request.synchronize",
      "pull_request.closed",
      "push.",
      "status.",
      "check_run.created",
      "check_run.completed",
      "check_suite.completed",
      "issue_comment.created",
      "issue_comment.edited"
    ])
      expect({ event: e, seen: events.has(e) }).toEqual({ event: e, seen: true })
    // the PR merged by moving main: closed with merged true, sent after the push
    const closed = received.map((r) => JSON.parse(r.raw)).filter((p) => p.action === "closed" && p.number === 2)
    expect(closed.map((p) => p.pull_request.merged)).toEqual([true])
    expect(sim.violations()).toEqual([])
  })

  test("the next N deliveries can be dropped; a redelivery keeps its id", async () => {
    const before = received.length
    sim.dropNextDeliveries(1)
    const pr = await sim.openPullRequest({ ...repo, title: "Dropped", user: "alice" })
    await sim.convertToDraft(pr)
    await sim.markReadyForReview(pr)
    await sim.changeBase(pr, "main")
    const ds = sim.deliveries()
    const dropped = ds.filter((d) => d.outcome === "dropped")
    expect(dropped.map((d) => `${d.event}.${d.action ?? ""}`)).toEqual(["push."])
    expect(received.length).toBe(before + 4)
    const outcome = await sim.redeliver(dropped[0]!.id)
    expect(outcome).toBe(204)
    expect(received.at(-1)!.headers.get("x-github-delivery")).toBe(dropped[0]!.id)
  })
})

describe("validation against the OpenAPI description", () => {
  test("finds operations by method and path template and refuses what does not exist", async () => {
    const catalog = await openApiCatalog()
    expect(catalog.findOperation("GET", "/repos/a/b/git/ref/heads%2Fmain")?.route).toBe(
      "GET /repos/{owner}/{repo}/git/ref/{ref}"
    )
    expect(catalog.findOperation("GET", "/repos/a/b/git/ref/heads/feature/x")?.pathParams.ref).toBe("heads/feature/x")
    expect(catalog.findOperation("GET", "/repos/a/b/commits/abc/status")?.route).toBe(
      "GET /repos/{owner}/{repo}/commits/{ref}/status"
    )
    expect(catalog.findOperation("POST", "/repos/a/b/pulls/1/merge")).toBeUndefined()
    const op = catalog.findOperation("POST", "/repos/a/b/statuses/abc")!
    expect(catalog.validateRequest(op, new URLSearchParams(), { state: "success", context: "ci" })).toEqual([])
    expect(catalog.validateRequest(op, new URLSearchParams(), { state: "green" })).not.toEqual([])
    expect(catalog.validateRequest(op, new URLSearchParams("bogus=1"), { state: "success" })).not.toEqual([])
    const pull = catalog.findOperation("GET", "/repos/a/b/pulls/1")!
    expect(catalog.validateResponse(pull, 200, { number: 1 })).not.toEqual([])
    expect(catalog.validateResponse(pull, 418, { message: "teapot" })).not.toEqual([])
    expect(catalog.validateWebhook("pull_request", "opened", { action: "opened" })).not.toEqual([])
  })

  test("the simulator records a request the provider should not send", async () => {
    const before = sim.violations().length
    await call("POST", `${R}/statuses/${sim.branchSha(repo, "main")}`, {
      auth: tok(),
      body: { state: "green", context: "ci" }
    })
    await call("GET", `${R}/no-such-endpoint`, { auth: tok() })
    const added = sim.violations().slice(before)
    expect(added.map((v) => v.kind)).toEqual(["request", "request", "unimplemented"])
  })
})

describe("git output", () => {
  // A scenario file makes the simulator run about 100 git commands a second. Read asynchronously, each one's pipes
  // cost Bun about 300 KB of ArrayBuffers, which the collector of that big process left for minutes, until the 64 GB
  // range that ArrayBuffers share with PGlite's WebAssembly memory was full: "RangeError: Out of memory", first in
  // the simulator, on every request.
  test("a git command leaves no buffer of its output behind", async () => {
    const ops = new GitOps(sim.gitDir(repo))
    const grown: number[] = []
    for (let i = 0; i < 25; i++) {
      const before = heapStats().extraMemorySize
      expect(await ops.refSha("refs/heads/main")).toMatch(/^[0-9a-f]{40}$/)
      grown.push(heapStats().extraMemorySize - before)
    }
    // the median: a collection during a command can only make its figure smaller
    grown.sort((a, b) => a - b)
    expect(grown[12]!).toBeLessThan(32 * 1024)
  })
})
