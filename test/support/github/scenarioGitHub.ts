/**
 * The scenario driver (test/support/scenario.ts) over the simulated GitHub: the queue's repository is
 * `github.com/<owner>/<name>` served by the simulator, so Greenline reaches it through its GitHub provider (REST and
 * webhooks), and CI reports its results to GitHub (commit statuses, which GitHub sends to Greenline as `status`
 * webhooks), as a real CI would.
 *
 * ```ts
 * const gh = await startGitHubTestServer("pglite")
 * const s = await openGitHubScenario(gh, { name: "s1", concurrency: 2 })  // same Scenario API as openScenario
 * s.createPr(1); await s.submit(1); await s.ciPass(1); await s.waitState(1, "merged")
 * await s.checkOnePromise()
 * s.close(); await gh.close()
 * ```
 *
 * The repository handle is a `TestRepo` whose operations act on GitHub: `createPr(n)` opens pull request #n (the
 * simulator numbers PRs in order, so scenarios create them as 1, 2, 3 ...), `forcePushPr` force-pushes its head
 * branch, `pushToMain` pushes to the branch, `deletePr` closes the PR. Each changes GitHub's state at once; the
 * webhooks follow asynchronously, as GitHub delivers them.
 */
import { Option, Redacted } from "effect"
import type { TestRepo } from "../git.ts"
import { openScenario, type Scenario, type ScenarioOptions } from "../scenario.ts"
import { startTestServer, type TestServer } from "../server.ts"
import { type GitHubSim, startGitHubSim } from "./sim.ts"

/** The owner of the scenario repositories on the simulated GitHub. */
export const SCENARIO_OWNER = "acme"
/** The author of scenario pull requests (has write permission, so `/trunk` commands are accepted). */
export const SCENARIO_AUTHOR = "dev-alice"

export interface GitHubTestServer {
  readonly server: TestServer
  readonly sim: GitHubSim
  /** Stops the server, then the simulator. */
  readonly close: () => Promise<void>
}

/**
 * A simulated GitHub and a test server configured as its GitHub App (GITHUB_API_URL, GITHUB_APP_ID,
 * GITHUB_APP_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET), the simulator's webhooks pointed at the server.
 */
export const startGitHubTestServer = async (
  db: "pglite" | "postgres",
  options: { readonly reconcileMs?: number; readonly gitPollMs?: number } = {}
): Promise<GitHubTestServer> => {
  const secret = `whsec-${Math.random().toString(36).slice(2)}`
  const sim = await startGitHubSim({ webhookSecret: secret })
  const server = await startTestServer({
    db,
    gitPollMs: options.gitPollMs ?? 100,
    config: {
      githubApiUrl: sim.url,
      githubAppId: Option.some(String(sim.appId)),
      githubAppPrivateKey: Option.some(Redacted.make(sim.privateKeyPem)),
      githubWebhookSecret: Option.some(Redacted.make(secret)),
      githubReconcileMs: options.reconcileMs ?? 60_000
    }
  })
  sim.setWebhookUrl(`${server.url}/webhooks/github`)
  sim.setPermission(SCENARIO_AUTHOR, "write")
  return {
    server,
    sim,
    close: async () => {
      // nothing more reaches the server once it stops
      await sim.settled()
      sim.dropNextDeliveries(Number.MAX_SAFE_INTEGER)
      await server.close()
      await sim.stop()
    }
  }
}

/** The simulator's repository as a `TestRepo` whose changes go through GitHub (see the module comment). */
export const gitHubTestRepo = (sim: GitHubSim, owner: string, name: string): TestRepo => {
  const key = { owner, name }
  const gitDir = sim.gitDir(key)
  const git = (...args: ReadonlyArray<string>) => sim.git(key, ...args)
  const specOf = (n: number, spec: Parameters<TestRepo["createPr"]>[1] = {}) => {
    const title = spec.title ?? `PR #${n}`
    const commits = spec.commits?.map((c, i) => ({
      ...c,
      message:
        i === (spec.commits?.length ?? 0) - 1
          ? (spec.title ?? c.message ?? title)
          : (c.message ?? `PR #${n} part ${i + 1}`)
    }))
    return {
      title,
      ...(commits === undefined ? { files: spec.files ?? { [`pr-${n}.txt`]: `${n}\n` } } : { commits })
    }
  }
  return {
    root: gitDir,
    repo: { host: "github.com", owner, name },
    gitDir,
    workDir: gitDir,
    git,
    branchSha: (branch = "main") => sim.branchSha(key, branch),
    commit: () => {
      throw new Error("commit is not available on the simulated GitHub: use createPr or pushToMain")
    },
    createPr: (n, spec = {}) => {
      const { title, ...change } = specOf(n, spec)
      const pr = sim.openPullRequestNow({
        ...key,
        title,
        user: SCENARIO_AUTHOR,
        ...(spec.base === undefined ? {} : { base: spec.base }),
        ...change
      })
      if (pr.number !== n) throw new Error(`the simulator opened #${pr.number}, not #${n}: create PRs in order`)
      return pr.headSha
    },
    forcePushPr: (n, spec = {}) => {
      const { title, ...change } = specOf(n, spec)
      return sim.pushToPullRequestNow({ ...key, number: n }, { ...change, force: true, message: title })
    },
    deletePr: (n) => sim.closePullRequestNow({ ...key, number: n }),
    pushToMain: (files, options = {}) =>
      sim.pushToBranchNow(key, options.branch ?? "main", files, {
        ...(options.message === undefined ? {} : { message: options.message })
      }),
    setBranch: (branch, sha) => {
      git("update-ref", `refs/heads/${branch}`, sha)
    },
    pushSha: (sha, branch = "main") => sim.moveBranchNow(key, branch, sha),
    cleanup: () => {}
  }
}

/**
 * `openScenario` on a new repository of the simulated GitHub, with the App installed on it; CI results are posted as
 * commit statuses on GitHub (`ci: "webhook"`, default) or sent to POST /v1/reportStatus (`ci: "api"`).
 */
export const openGitHubScenario = async (
  gh: GitHubTestServer,
  options: ScenarioOptions & { readonly ci?: "webhook" | "api" }
): Promise<Scenario> => {
  const { sim, server } = gh
  await sim.createRepo(SCENARIO_OWNER, options.name, options.files ?? { "README.md": "hello\n" })
  await sim.installApp(SCENARIO_OWNER, [options.name])
  const key = { owner: SCENARIO_OWNER, name: options.name }
  const repo = gitHubTestRepo(sim, SCENARIO_OWNER, options.name)
  return openScenario(server, "", {
    // every step is a few REST calls to GitHub (here: the simulator, which runs git and validates each exchange)
    waitMs: 60_000,
    landsTestedCommits: false,
    // the webhooks GitHub still has to send are sent before each step of a wait
    settle: () => sim.settled(),
    ...options,
    repo,
    ...(options.ci === "api"
      ? {}
      : {
          report: async (sha: string, state: "pending" | "success" | "failure" | "error", context: string) => {
            await sim.postStatus(sha, context, state, { repo: key })
          }
        })
  })
}
