/**
 * Reconciliation with GitHub (src/github/reconcile.ts) through the real server and the simulated GitHub, with every
 * webhook after the setup dropped and the runners' own Git polling switched off: CI results (a commit status, a check
 * run), a force-push, a close, a base change, a draft and a push to the target all reach the queue through the
 * periodic reconciliation alone; and a merge GitHub refuses fails the entry with GITHUB_API_MERGE_PR_FAILED.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Option, Redacted } from "effect"
import { type GitHubSim, type SimPrKey, startGitHubSim } from "../support/github/sim.ts"
import { databases, eventually, startTestServer, type TestServer } from "../support/server.ts"

const SECRET = "reconcile-secret"
const OFF = 600_000

type Json = Record<string, unknown>

for (const db of databases) {
  describe(`reconciliation with GitHub (${db})`, () => {
    let sim: GitHubSim
    let server: TestServer
    const repo = { owner: "acme", name: "recon" }
    const ghRepo = { host: "github.com", ...repo }

    const record = async (pr: number): Promise<Json | undefined> => {
      const r = await server.post("getSubmittedPullRequest", {
        repo: ghRepo,
        targetBranch: "main",
        pr: { number: pr },
        includeTimeline: true
      })
      return r.status === 200 ? (r.body as Json) : undefined
    }

    const lastReason = (r: Json) => (r.timeline as Array<{ reason: string }> | undefined)?.at(-1)?.reason

    let queueId: string
    /**
     * Waits round by round until `check` gives a value: the runner's rounds, whatever woke it (the reconciliation's
     * wake-ups, here). Never a tick: a tick's round looks at GitHub itself, and would do the reconciliation's work.
     */
    const afterRounds = <A>(what: string, check: () => Promise<A | undefined | false>) =>
      server.until(queueId, what, check, { tick: false })

    const waitForState = (pr: number, state: string, what: string) =>
      afterRounds(what, async () => {
        const r = await record(pr)
        return r?.state === state ? r : undefined
      })

    const submit = async (pr: number) => {
      const r = await server.post("submitPullRequest", { repo: ghRepo, targetBranch: "main", pr: { number: pr } })
      expect(r.status).toBe(200)
    }

    /** The tip of the test branch testing `pr` (built by the runner), once there is one. */
    const testBranchNow = async (pr: number) => {
      const out = sim.git(
        repo,
        "for-each-ref",
        "--format=%(refname:short) %(objectname)",
        `refs/heads/trunk-merge/pr-${pr}/`
      )
      const line = out.split("\n").find((l) => l.trim() !== "")
      return line === undefined ? undefined : { branch: line.split(" ")[0]!, sha: line.split(" ")[1]! }
    }
    const testBranchOf = (pr: number) => afterRounds(`a test branch for #${pr}`, () => testBranchNow(pr))

    const openPr = (title: string, files: Record<string, string>) =>
      sim.openPullRequest({ ...repo, title, user: "alice", files })

    beforeAll(async () => {
      sim = await startGitHubSim({ webhookSecret: SECRET })
      server = await startTestServer({
        db,
        gitPollMs: OFF,
        config: {
          githubApiUrl: sim.url,
          githubAppId: Option.some(String(sim.appId)),
          githubAppPrivateKey: Option.some(Redacted.make(sim.privateKeyPem)),
          githubWebhookSecret: Option.some(Redacted.make(SECRET)),
          githubReconcileMs: 250
        }
      })
      sim.setWebhookUrl(`${server.url}/webhooks/github`)
      await sim.createRepo(repo.owner, repo.name, { "README.md": "hello\n" })
      await sim.installApp(repo.owner, [repo.name])
      await sim.settled()
      const created = await server.post("createQueue", { repo: ghRepo, targetBranch: "main" })
      expect(created.status).toBe(200)
      queueId = await server.queueId({ repo: ghRepo, targetBranch: "main" })
      const updated = await server.post("updateQueue", {
        repo: ghRepo,
        targetBranch: "main",
        requiredStatuses: ["ci"],
        createPrsForTestingBranches: false
      })
      expect(updated.status).toBe(200)
      // from now on GitHub tells the service nothing: only the reconciliation finds out
      sim.dropNextDeliveries(1_000_000)
    }, 60_000)

    afterAll(async () => {
      await server?.close()
      expect(sim.violations()).toEqual([])
      expect(sim.deliveries().filter((d) => typeof d.outcome === "number").length).toBeGreaterThan(0)
      await sim?.stop()
    }, 60_000)

    test("a commit status on the test branch, never delivered, is read back: the PR merges", async () => {
      const pr = await openPr("Add a", { "a.txt": "a\n" })
      await submit(pr.number)
      const { sha } = await testBranchOf(pr.number)
      // readiness as GitHub sees the PR (GitHub computes mergeability lazily: in progress at first); the view asks
      // GitHub when it is read, in no round of the queue: polled
      const ready = await eventually(
        async () => {
          const r = await record(pr.number)
          const readiness = r?.readiness as { gitHubMergeability?: string; doesBaseBranchMatch?: boolean } | undefined
          return readiness?.gitHubMergeability === "mergeable" ? readiness : undefined
        },
        10_000,
        "gitHubMergeability mergeable"
      )
      expect(ready.doesBaseBranchMatch).toBe(true)
      await sim.postStatus(sha, "ci", "success", { repo })
      await waitForState(pr.number, "merged", "merged through the reconciled status")
      expect(sim.pullRequest(pr)).toMatchObject({ merged: true })
      expect(sim.readFile(repo, "main", "a.txt")).toBe("a")
    }, 60_000)

    test("a check run, never delivered, is read back (a failure fails the PR, then a pass merges the next)", async () => {
      const failing = await openPr("Add b", { "b.txt": "b\n" })
      await submit(failing.number)
      const first = await testBranchOf(failing.number)
      await sim.startCheckRun(first.sha, "ci", { repo })
      await sim.completeCheckRun(first.sha, "ci", "failure", { repo })
      const failed = await waitForState(failing.number, "failed", "failed through the reconciled check run")
      expect(lastReason(failed)).toBe("TEST_RUN_REQUIRED_STATUS_FAILED")

      const passing = await openPr("Add c", { "c.txt": "c\n" })
      await submit(passing.number)
      const second = await testBranchOf(passing.number)
      await sim.startCheckRun(second.sha, "ci", { repo })
      await sim.completeCheckRun(second.sha, "ci", "success", { repo })
      await waitForState(passing.number, "merged", "merged through the reconciled check run")
    }, 60_000)

    test("pull request changes, never delivered: force-push, close, base change, draft", async () => {
      const cases: Array<{ pr: SimPrKey; change: () => Promise<unknown>; reason: string }> = []
      const pushed = await openPr("Pushed", { "p.txt": "p\n" })
      cases.push({
        pr: pushed,
        change: () => sim.pushToPullRequest(pushed, { files: { "p.txt": "p2\n" }, force: true }),
        reason: "PR_PUSHED_TO"
      })
      const closed = await openPr("Closed", { "q.txt": "q\n" })
      cases.push({ pr: closed, change: () => sim.closePullRequest(closed), reason: "PR_CLOSED" })
      sim.git(repo, "branch", "-f", "release", "main")
      const retargeted = await openPr("Retargeted", { "r.txt": "r\n" })
      cases.push({
        pr: retargeted,
        change: () => sim.changeBase(retargeted, "release"),
        reason: "PR_BASE_BRANCH_CHANGED"
      })
      const drafted = await openPr("Drafted", { "s.txt": "s\n" })
      cases.push({ pr: drafted, change: () => sim.convertToDraft(drafted), reason: "PR_CONVERTED_TO_DRAFT" })
      for (const c of cases) await submit(c.pr.number)
      // a submission that answered 200 reads back at once (read-your-writes)
      for (const c of cases) expect(await record(c.pr.number)).toBeDefined()
      for (const c of cases) await c.change()
      for (const c of cases) {
        const r = await waitForState(c.pr.number, "cancelled", `#${c.pr.number} cancelled (${c.reason})`)
        expect(lastReason(r)).toBe(c.reason)
      }
    }, 90_000)

    test("a merge GitHub refuses fails the PR with GITHUB_API_MERGE_PR_FAILED; the PR stays open", async () => {
      sim.setMergeMethods(repo, { squash: false })
      try {
        const pr = await openPr("Refused", { "e.txt": "e\n" })
        await submit(pr.number)
        const { sha } = await testBranchOf(pr.number)
        await sim.postStatus(sha, "ci", "success", { repo })
        const failed = await waitForState(pr.number, "failed", "failed: squash merges are not allowed")
        expect(lastReason(failed)).toBe("GITHUB_API_MERGE_PR_FAILED")
        expect(sim.pullRequest(pr)).toMatchObject({ state: "open", merged: false })
        expect(sim.readFile(repo, "main", "e.txt")).toBeNull()
      } finally {
        sim.setMergeMethods(repo, { squash: true })
      }
    }, 60_000)

    test("a push to the target, never delivered: the run is rebuilt on the new tip and merges on it", async () => {
      const pr = await openPr("Add d", { "d.txt": "d\n" })
      await submit(pr.number)
      const before = await testBranchOf(pr.number)
      const pushed = await sim.pushToBranch(repo, "main", { "outside.txt": "outside\n" })
      const rebuilt = await afterRounds("a test branch on the pushed tip", async () => {
        const now = await testBranchNow(pr.number)
        if (now === undefined || now.sha === before.sha) return undefined
        return sim.git(repo, "merge-base", now.sha, pushed) === pushed ? now : undefined
      })
      await sim.postStatus(rebuilt.sha, "ci", "success", { repo })
      await waitForState(pr.number, "merged", "merged on top of the outside push")
      expect(sim.readFile(repo, "main", "outside.txt")).toBe("outside")
      expect(sim.readFile(repo, "main", "d.txt")).toBe("d")
    }, 60_000)
  })
}
