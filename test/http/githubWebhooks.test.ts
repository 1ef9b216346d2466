/**
 * POST /webhooks/github through the real server, with the GitHub provider pointed at the simulated GitHub: signatures,
 * redeliveries, installations and claims, comment commands, pull request events, pushes to the target, and CI results
 * reaching the testing details. Payloads are GitHub's own examples (`@octokit/webhooks-examples`) retargeted at the
 * test repository, or the simulator's deliveries (shaped like GitHub's and checked against its description).
 *
 * The runners' Git polling is switched off (GIT_POLL_MS of ten minutes, reconciliation as well), so what happens
 * here is the webhooks' doing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as SqlClient from "@effect/sql/SqlClient"
import examples from "@octokit/webhooks-examples"
import { Effect, Option, Redacted } from "effect"
import { COMMENT_MARKER } from "../../src/github/feedback.ts"
import { signBody } from "../../src/github/webhooks.ts"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { type GitHubSim, type SimPrKey, startGitHubSim } from "../support/github/sim.ts"
import { databases, eventually, startTestServer, type TestServer } from "../support/server.ts"

const SECRET = "webhook-secret-for-the-tests"
const OFF = 600_000

type Json = Record<string, unknown>

/** A deep copy of one of GitHub's example payloads of `event` (with `action`, when given). */
const example = (event: string, action?: string): Json => {
  const definition = examples.find((d) => d.name === event)
  const found = definition?.examples.find(
    (e) => action === undefined || (e as unknown as { action?: string }).action === action
  )
  if (found === undefined) throw new Error(`no example ${event} ${action ?? ""}`)
  return structuredClone(found) as unknown as Json
}

/** The payload with its repository replaced by `owner/name`. */
const retarget = (payload: Json, owner: string, name: string): Json => {
  const repository = payload.repository as Json & { owner: Json }
  return {
    ...payload,
    repository: {
      ...repository,
      name,
      full_name: `${owner}/${name}`,
      owner: { ...repository.owner, login: owner, name: owner }
    }
  }
}

interface Sent {
  readonly status: number
  readonly body: { result?: string; error?: { code: string; message: string } }
}

for (const db of databases) {
  describe(`GitHub webhooks (${db})`, () => {
    let sim: GitHubSim
    let server: TestServer
    const repo = { owner: "acme", name: "web" }
    const ghRepo = { host: "github.com", ...repo }
    let deliveryCounter = 0

    const deliver = async (
      event: string,
      payload: unknown,
      options: { delivery?: string; signature?: string | null; body?: string } = {}
    ): Promise<Sent> => {
      const body = options.body ?? JSON.stringify(payload)
      const headers: Record<string, string> = {
        "content-type": "application/json",
        "x-github-event": event,
        "x-github-delivery": options.delivery ?? `test-${db}-${++deliveryCounter}-${crypto.randomUUID()}`
      }
      const signature = options.signature === undefined ? signBody(SECRET, body) : options.signature
      if (signature !== null) headers["x-hub-signature-256"] = signature
      const response = await fetch(`${server.url}/webhooks/github`, { method: "POST", headers, body })
      return { status: response.status, body: (await response.json()) as Sent["body"] }
    }

    const query = <A extends object>(text: string, ...params: ReadonlyArray<unknown>) =>
      server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<A>(text, params as Array<unknown>)).pipe(Effect.orDie)
      )

    const deliveryCount = async () =>
      Number((await query<{ n: string }>("select count(*) as n from github_deliveries"))[0]?.n)

    const storedStatus = async (sha: string, context: string) =>
      (
        await query<{ state: string }>(
          "select state from commit_statuses where sha = $1 and context = $2",
          sha,
          context
        )
      )[0]?.state

    const submitted = async (pr: number) => {
      const r = await server.post("getSubmittedPullRequest", {
        repo: ghRepo,
        targetBranch: "main",
        pr: { number: pr },
        includeTimeline: true
      })
      return r
    }

    let queueId: string
    /** Steps the queue's runner (a tick, then its next rounds) until `check` gives a value, once the simulator
     * delivered the webhooks it has so far. */
    const until = async <A>(what: string, check: () => Promise<A | undefined | false>) => {
      await sim.settled()
      return server.until(queueId, what, check)
    }
    /**
     * What the webhook's handler does after it answered GitHub (a reaction, a reply to a command) is in no round of
     * the queue and no event: those waits poll the simulator.
     */
    const afterTheAnswer = <A>(what: string, check: () => Promise<A | undefined>) => eventually(check, 20_000, what)

    /** The PR's record once `check` accepts it. */
    const waitFor = async (pr: number, check: (record: Json) => boolean, what: string) =>
      until(what, async () => {
        const r = await submitted(pr)
        return r.status === 200 && check(r.body as Json) ? (r.body as Json) : undefined
      })

    const lastReason = (record: Json) => {
      const timeline = record.timeline as Array<{ reason: string }> | undefined
      return timeline?.at(-1)?.reason
    }

    const botComments = (pr: SimPrKey) => sim.comments(pr).filter((c) => c.user === sim.botLogin)

    const openPr = (title: string, files?: Record<string, string>) =>
      sim.openPullRequest({ ...repo, title, user: "alice", ...(files === undefined ? {} : { files }) })

    const submit = async (pr: number) => {
      const r = await server.post("submitPullRequest", { repo: ghRepo, targetBranch: "main", pr: { number: pr } })
      expect(r.status).toBe(200)
    }

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
          githubReconcileMs: OFF
        }
      })
      sim.setWebhookUrl(`${server.url}/webhooks/github`)
      await sim.createRepo(repo.owner, repo.name, { "README.md": "hello\n" })
      await sim.installApp(repo.owner, [repo.name])
      await sim.settled()
      sim.setPermission("alice", "write", repo)
      sim.setPermission("bob", "read", repo)
      const created = await server.post("createQueue", { repo: ghRepo, targetBranch: "main" })
      expect(created.status).toBe(200)
      queueId = await server.queueId({ repo: ghRepo, targetBranch: "main" })
      const updated = await server.post("updateQueue", { repo: ghRepo, targetBranch: "main", requiredStatuses: ["ci"] })
      expect(updated.status).toBe(200)
    }, 60_000)

    afterAll(async () => {
      await sim?.settled()
      await server?.close()
      await sim?.stop()
    }, 60_000)

    test("a missing, wrong or stale signature is a 401 in the error envelope, and nothing happens", async () => {
      const sha = "a".repeat(40)
      const payload = {
        ...retarget(example("status"), repo.owner, repo.name),
        sha,
        context: "signed",
        state: "success"
      }
      const before = await deliveryCount()
      const body = JSON.stringify(payload)
      const refused: Array<Sent> = [
        await deliver("status", payload, { signature: null }),
        await deliver("status", payload, { signature: signBody("another-secret", body) }),
        await deliver("status", payload, { signature: "sha256=not-hex" }),
        await deliver("status", payload, { signature: signBody(SECRET, body).replace("sha256=", "sha1=") }),
        // signed, then changed in transit
        await deliver("status", payload, {
          signature: signBody(SECRET, body),
          body: body.replace('"success"', '"failure"')
        })
      ]
      for (const r of refused) {
        expect(r.status).toBe(401)
        expect(r.body.error?.code).toBe("UNAUTHORIZED")
      }
      expect(await deliveryCount()).toBe(before)
      expect(await storedStatus(sha, "signed")).toBeUndefined()

      const accepted = await deliver("status", payload)
      expect(accepted.status).toBe(200)
      expect(await storedStatus(sha, "signed")).toBe("success")
      expect(await deliveryCount()).toBe(before + 1)
    }, 60_000)

    test("a delivery id seen before answers 200 and does nothing", async () => {
      const sha = "b".repeat(40)
      const base = retarget(example("status"), repo.owner, repo.name)
      const first = { ...base, sha, context: "replayed", state: "success" }
      const id = `replay-${db}-${crypto.randomUUID()}`
      expect((await deliver("status", first, { delivery: id })).status).toBe(200)
      expect(await storedStatus(sha, "replayed")).toBe("success")
      expect((await deliver("status", { ...first, state: "failure" })).status).toBe(200)
      expect(await storedStatus(sha, "replayed")).toBe("failure")

      const count = await deliveryCount()
      const again = await deliver("status", first, { delivery: id })
      expect(again.status).toBe(200)
      expect(again.body.result).toContain("duplicate")
      expect(await storedStatus(sha, "replayed")).toBe("failure")
      expect(await deliveryCount()).toBe(count)

      // GitHub's "Redeliver" (same id) of a delivery the simulator made
      const made = sim.deliveries().filter((d) => d.outcome === 200)
      const last = made.at(-1)
      expect(last).toBeDefined()
      expect(await sim.redeliver(last!.id)).toBe(200)
      expect(await deliveryCount()).toBe(count)
    }, 60_000)

    test("installation events decide which repositories an organization may claim", async () => {
      const claim = (owner: string, name: string) =>
        server.post("createQueue", { repo: { host: "github.com", owner, name }, targetBranch: "main" })

      // GitHub's examples: the App installed on Codertocat/Hello-World, then Codertocat/Space added and removed
      expect((await claim("Codertocat", "Hello-World")).status).toBe(404)
      const installed = example("installation", "created")
      expect((await deliver("installation", installed)).status).toBe(200)
      expect((await claim("Codertocat", "Hello-World")).status).toBe(200)

      const added = example("installation_repositories", "added")
      const removed = {
        ...example("installation_repositories", "removed"),
        installation: added.installation,
        repositories_removed: added.repositories_added
      }
      expect((await deliver("installation_repositories", added)).status).toBe(200)
      expect((await deliver("installation_repositories", removed)).status).toBe(200)
      expect((await claim("Codertocat", "Space")).status).toBe(404)

      // suspended: nothing new may be claimed through it; deleted: its repositories are forgotten
      const suspended = { ...example("installation", "suspend"), installation: installed.installation }
      expect((await deliver("installation", suspended)).status).toBe(200)
      expect((await deliver("installation_repositories", added)).status).toBe(200)
      expect((await claim("Codertocat", "Space")).status).toBe(404)
      const resumed = { ...example("installation", "unsuspend"), installation: installed.installation }
      expect((await deliver("installation", resumed)).status).toBe(200)
      const deleted = { ...example("installation", "deleted"), installation: installed.installation }
      expect((await deliver("installation", deleted)).status).toBe(200)
      expect((await claim("Codertocat", "Space")).status).toBe(404)
      // the CLI's `repos add` is refused the same way, with the reason
      const added_ = await server.run(
        Effect.flatMap(Tenancy, (t) =>
          t.addRepo("acme-org", { host: "github.com", owner: "Codertocat", name: "Space" })
        ).pipe(Effect.either)
      )
      expect(added_._tag).toBe("Left")
      if (added_._tag === "Left") expect(added_.left.message).toContain("not installed")
      expect(
        await query(
          "select * from github_installation_repos where installation_id = $1",
          (installed.installation as Json).id
        )
      ).toEqual([])

      // the simulator's own deliveries: installing the App on acme/api lets the organization claim it
      await sim.createRepo("acme", "api")
      expect((await claim("acme", "api")).status).toBe(404)
      await sim.installApp("acme", ["api"])
      await sim.settled()
      expect((await claim("acme", "api")).status).toBe(200)

      // an installation whose webhook never arrived: GitHub is asked when the repository is claimed
      await sim.createRepo("acme", "lib")
      sim.dropNextDeliveries(1)
      await sim.installApp("acme", ["lib"])
      await sim.settled()
      expect(sim.deliveries().at(-1)?.outcome).toBe("dropped")
      expect((await claim("acme", "lib")).status).toBe(200)
    }, 60_000)

    test("`/trunk merge -p high` from a writer submits the PR with that priority; a reader is refused with a reply", async () => {
      const pr = await openPr("Comment commands")
      await sim.settled()

      const bobs = await sim.comment("bob", pr, "/trunk merge")
      await afterTheAnswer("the reader's command refused", async () => {
        const reaction = sim.comments(pr).find((c) => c.id === bobs)?.reactions
        const reply = botComments(pr).find((c) => c.body.includes("@bob") && c.body.includes("write access"))
        return reaction?.some((r) => r.content === "confused") && reply !== undefined ? true : undefined
      })
      expect((await submitted(pr.number)).status).toBe(404)

      const alices = await sim.comment("alice", pr, "Looks good.\n\n/trunk merge -p high")
      const record = await waitFor(pr.number, (r) => r.priorityName === "high", "the writer's submission")
      expect(record.priorityValue).toBe(10)
      await afterTheAnswer("a +1 on the command", async () =>
        sim
          .comments(pr)
          .find((c) => c.id === alices)
          ?.reactions.some((r) => r.content === "+1")
          ? true
          : undefined
      )

      // the queue's one comment and its status check on the head
      await until("the queue's comment", async () =>
        botComments(pr).some((c) => c.body.startsWith(COMMENT_MARKER)) ? true : undefined
      )
      await until("the queue's status check", async () =>
        sim.statuses(repo, pr.headSha).some((s) => s.context === "Trunk Merge Queue (main)") ? true : undefined
      )

      await sim.comment("alice", pr, "/trunk cancel")
      // the state shows at once; the timeline item follows the runner's round (docs/decisions.md, read-your-writes)
      const cancelled = await waitFor(
        pr.number,
        (r) => r.state === "cancelled" && lastReason(r) === "USER_REQUESTED",
        "the cancel command"
      )
      expect(lastReason(cancelled)).toBe("USER_REQUESTED")
      const queueComments = await until("the queue's comment edited", async () => {
        const mine = botComments(pr).filter((c) => c.body.startsWith(COMMENT_MARKER))
        return mine.length === 1 && mine[0]!.body.includes("USER_REQUESTED") ? mine : undefined
      })
      expect(queueComments).toHaveLength(1)
      await until("the status check of a cancelled PR", async () =>
        sim.statuses(repo, pr.headSha).some((s) => s.context === "Trunk Merge Queue (main)" && s.state === "error")
          ? true
          : undefined
      )
      // a cancel of a PR that is not in the queue is answered with the reason
      const again = await sim.comment("alice", pr, "/trunk cancel")
      await afterTheAnswer("the refused cancel", async () =>
        sim
          .comments(pr)
          .find((c) => c.id === again)
          ?.reactions.some((r) => r.content === "confused")
          ? true
          : undefined
      )
    }, 60_000)

    test("GitHub's example issue_comment payload, on a pull request, runs its command", async () => {
      const pr = await openPr("Example comment")
      await sim.settled()
      const payload = retarget(example("issue_comment", "created"), repo.owner, repo.name) as Json & {
        issue: Json
        comment: Json & { user: Json }
      }
      payload.issue = { ...payload.issue, number: pr.number, pull_request: { url: "https://example.invalid/pull" } }
      payload.comment = {
        ...payload.comment,
        body: "/trunk merge --priority low --no-batch",
        user: { ...payload.comment.user, login: "alice", type: "User" }
      }
      expect((await deliver("issue_comment", payload)).status).toBe(200)
      const record = await waitFor(pr.number, (r) => r.priorityName === "low", "the example's submission")
      expect(record.noBatch).toBe(true)

      // the same comment on an issue (no pull_request) is not a command
      const onIssue = { ...payload, issue: { ...payload.issue, number: pr.number + 1000, pull_request: undefined } }
      const answer = await deliver("issue_comment", onIssue)
      expect(answer.body.result).toContain("not on a pull request")
      // on a pull request GitHub does not know (any more): nothing, and the delivery is done
      const onMissing = { ...payload, issue: { ...payload.issue, number: 99_999 } }
      const missing = await deliver("issue_comment", onMissing)
      expect(missing.status).toBe(200)
      expect(missing.body.result).toContain("not found")

      expect(
        (await server.post("cancelPullRequest", { repo: ghRepo, targetBranch: "main", pr: { number: pr.number } }))
          .status
      ).toBe(200)
      await waitFor(pr.number, (r) => r.state === "cancelled", "cancelled")
    }, 60_000)

    test("pull request events: pushed, closed, drafted and rebased PRs leave the queue with their reason", async () => {
      const cases: ReadonlyArray<[string, (pr: SimPrKey) => Promise<unknown>, string]> = [
        ["pushed", (pr) => sim.pushToPullRequest(pr, { force: true }), "PR_PUSHED_TO"],
        ["closed", (pr) => sim.closePullRequest(pr), "PR_CLOSED"],
        ["drafted", (pr) => sim.convertToDraft(pr), "PR_CONVERTED_TO_DRAFT"],
        ["rebased", (pr) => sim.changeBase(pr, "release"), "PR_BASE_BRANCH_CHANGED"]
      ]
      sim.git(repo, "branch", "release", "main")
      for (const [what, act, reason] of cases) {
        const pr = await openPr(`PR to be ${what}`)
        await sim.settled()
        await submit(pr.number)
        await waitFor(pr.number, (r) => r.state === "testing", `${what}: testing`)
        await act(pr)
        const record = await waitFor(
          pr.number,
          (r) => r.state === "cancelled" && lastReason(r) === reason,
          `${what}: cancelled`
        )
        expect(lastReason(record)).toBe(reason)
      }

      // GitHub's example synchronize payload retargeted at an active PR: cancelled as well
      const pr = await openPr("Example synchronize")
      await sim.settled()
      await submit(pr.number)
      await waitFor(pr.number, (r) => r.state === "testing", "testing")
      const sync = retarget(example("pull_request", "synchronize"), repo.owner, repo.name) as Json & {
        pull_request: Json & { head: Json }
      }
      sync.number = pr.number
      sync.pull_request = {
        ...sync.pull_request,
        number: pr.number,
        head: { ...sync.pull_request.head, sha: "c".repeat(40) }
      }
      expect((await deliver("pull_request", sync)).status).toBe(200)
      const record = await waitFor(
        pr.number,
        (r) => r.state === "cancelled" && lastReason(r) === "PR_PUSHED_TO",
        "cancelled by the example"
      )
      expect(lastReason(record)).toBe("PR_PUSHED_TO")
    }, 60_000)

    test("a push to the target branch restarts the runs built on the old tip", async () => {
      const pr = await openPr("Behind a push")
      await sim.settled()
      await submit(pr.number)
      const testing = await waitFor(pr.number, (r) => r.state === "testing", "testing")
      const firstRun = testing.testRunId
      await sim.pushToBranch(repo, "main", { "pushed.txt": "from outside\n" })
      const restarted = await waitFor(
        pr.number,
        (r) => r.state === "testing" && r.testRunId !== firstRun,
        "testing again on the new tip"
      )
      const reasons = (restarted.timeline as Array<{ reason: string }>).map((t) => t.reason)
      expect(reasons).toContain("MANUAL_PUSH_TO_TARGET_BRANCH")
      await server.post("cancelPullRequest", { repo: ghRepo, targetBranch: "main", pr: { number: pr.number } })
      await waitFor(pr.number, (r) => r.state === "cancelled", "cancelled")
    }, 60_000)

    test("CI results by webhook (status, check_run, check_suite) reach the testing details and decide the run", async () => {
      const pr = await openPr("Tested by CI", { "feature.txt": "feature\n" })
      await sim.settled()
      await submit(pr.number)
      const testing = await waitFor(pr.number, (r) => r.state === "testing", "testing")
      const runId = testing.testRunId as string
      const details = async () => {
        const r = await server.post("getMergeQueueTestingDetails", {
          repo: ghRepo,
          targetBranch: "main",
          testRunId: runId
        })
        expect(r.status).toBe(200)
        return r.body as {
          testBranchSha: string
          statusChecks: Array<{ context: string; state: string; url: string }>
          checkSuites: Array<{
            checkRuns: Array<{ name: string; url: string; status?: string; conclusion?: string | null }>
          }>
        }
      }
      const sha = await until("the test branch", async () => (await details()).testBranchSha || undefined)

      await sim.postStatus(sha, "ci", "pending", { repo, targetUrl: "https://ci.example.invalid/1" })
      await until("the pending status in statusChecks", async () =>
        (await details()).statusChecks.some(
          (s) => s.context === "ci" && s.state === "PENDING" && s.url === "https://ci.example.invalid/1"
        )
          ? true
          : undefined
      )

      await sim.startCheckRun(sha, "lint", { repo })
      await sim.completeCheckRun(sha, "lint", "success", { repo })
      const suites = await until("the check run in checkSuites", async () => {
        const d = await details()
        const lint = d.checkSuites.flatMap((s) => s.checkRuns).find((r) => r.name === "lint")
        return lint?.conclusion === "SUCCESS" ? d.checkSuites : undefined
      })
      expect(suites.flatMap((s) => s.checkRuns).find((r) => r.name === "lint")?.status).toBe("COMPLETED")
      expect(await waitFor(pr.number, (r) => r.state === "testing", "still testing")).toBeDefined()

      await sim.postStatus(sha, "ci", "success", { repo })
      await waitFor(pr.number, (r) => r.state === "merged", "merged once ci passed")
      await until("the queue's comment says merged", async () =>
        botComments(pr).some((c) => c.body.startsWith(COMMENT_MARKER) && c.body.includes("Merged")) ? true : undefined
      )
      // every request, answer and webhook payload valid against GitHub's description
      expect(sim.violations()).toEqual([])
    }, 60_000)
  })
}
