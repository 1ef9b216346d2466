/**
 * A simulated GitHub for the tests: a stateful HTTP server on loopback serving the REST endpoints the GitHub provider
 * uses (docs: the "seam" list of the GitHub plan), with GitHub's status codes and shapes, its Git content in a real
 * bare repository per simulated repository, GitHub App authentication (RS256 JWTs, installation tokens that expire),
 * rate-limit headers, a secondary-limit switch, ETags, and signed webhooks sent to the service.
 *
 * Every request the provider sends is matched to an operation of GitHub's OpenAPI description (`@octokit/openapi`)
 * and its query and body validated; every answer and every webhook payload is validated too. Problems are collected
 * in `violations()`; tests assert it is empty.
 *
 * ```ts
 * const sim = await startGitHubSim({ webhookSecret: "s3cret" })
 * const repo = await sim.createRepo("acme", "app", { "README.md": "hello\n" })
 * await sim.installApp("acme", ["app"])
 * const pr = await sim.openPullRequest({ ...repo, base: "main", title: "Add a", user: "alice", files: { "a.txt": "a\n" } })
 * await sim.comment("alice", pr, "/trunk merge")
 * await sim.postStatus(sha, "ci", "success")
 * expect(sim.violations()).toEqual([])
 * await sim.stop()
 * ```
 */
import * as crypto from "node:crypto"
import { type CommitSpec, createTestRepo, type FileChanges, makeTempDir, type TestRepo } from "../git.ts"
import { removeDir } from "../tmp.ts"
import { GitOps, gitHubTime } from "./gitOps.ts"
import { compileTemplate, type Json, matchTemplate, type OpenApiCatalog, openApiCatalog } from "./openapi.ts"
import {
  type AppView,
  type CheckRunView,
  type CommentView,
  type CommitInfo,
  checkRunShape,
  checkSuiteShape,
  combinedStatusShape,
  commitShape,
  comparisonShape,
  contentEntryShape,
  contentFileShape,
  gitCommitShape,
  gitRefShape,
  type InstallationView,
  installationShape,
  issueCommentShape,
  issueOfPullShape,
  type JsonObject,
  type PullView,
  pullRequestMinimalShape,
  pullRequestShape,
  pullRequestSimpleShape,
  pushCommitShape,
  pushRepositoryShape,
  type RepoInfo,
  repositoryBriefShape,
  repositoryShape,
  type SimUser,
  type StatusView,
  type SuiteView,
  statusCommitShape,
  statusShape,
  type Urls,
  userShape
} from "./shapes.ts"

// ---------------------------------------------------------------------------------------------------------------
// Public types

/** A repository of the simulator. */
export interface SimRepoKey {
  readonly owner: string
  readonly name: string
}

/** A pull request of the simulator. */
export interface SimPrKey extends SimRepoKey {
  readonly number: number
}

export type PermissionLevel = "admin" | "maintain" | "write" | "triage" | "read" | "none"
export type StatusState = "error" | "failure" | "pending" | "success"
export type CheckConclusion =
  | "success"
  | "failure"
  | "neutral"
  | "cancelled"
  | "skipped"
  | "timed_out"
  | "action_required"

export interface GitHubSimOptions {
  /** Where webhooks go (`POST`); without one, deliveries are recorded as `no-url` until `setWebhookUrl`. */
  readonly webhookUrl?: string
  /** The secret the `X-Hub-Signature-256` HMAC is keyed with. */
  readonly webhookSecret: string
  /**
   * As GitHub: the first read of a pull request after its head or base moved answers `mergeable: null` and
   * `mergeable_state: "unknown"` while the merge is computed (default true).
   */
  readonly lazyMergeability?: boolean
  /** Lifetime of installation tokens in seconds (GitHub: 3600). */
  readonly tokenLifetimeSeconds?: number
  /** Primary rate limit per token per hour (GitHub: 5000 for an installation). */
  readonly rateLimit?: number
}

/** A webhook the simulator sent (or dropped on purpose). */
export interface SimDelivery {
  readonly id: string
  readonly event: string
  readonly action: string | undefined
  readonly payload: JsonObject
  readonly body: string
  readonly signature: string
  /** the service's answer, `dropped` (dropNextDeliveries), `no-url`, or `error` (connection failed) */
  readonly outcome: number | "dropped" | "no-url" | "error"
}

/** A request the provider sent to the simulator. */
export interface SimRequest {
  readonly method: string
  readonly path: string
  readonly query: string
  /** the OpenAPI route ("GET /repos/{owner}/{repo}/pulls"), null when none matched */
  readonly route: string | null
  readonly body: Json | undefined
  readonly status: number
  readonly auth: "app" | "installation" | "pat" | "none" | "invalid"
  /** when it arrived (epoch ms) and how long the simulator took to answer */
  readonly at: number
  readonly ms: number
}

/** Something that does not match GitHub's OpenAPI description (or that the simulator does not implement). */
export interface SimViolation {
  readonly kind: "request" | "response" | "webhook" | "unimplemented"
  readonly what: string
  readonly problems: ReadonlyArray<string>
}

export interface OpenPullRequestInput extends SimRepoKey {
  /** the base branch (default the repository's default branch) */
  readonly base?: string
  readonly title: string
  /** the author's login */
  readonly user: string
  readonly body?: string
  /** the head branch (default `<user>/pr-<number>`) */
  readonly head?: string
  readonly draft?: boolean
  /** one commit's changes (default: adds `pr-<number>.txt`) */
  readonly files?: FileChanges
  /** several commits instead of `files` */
  readonly commits?: ReadonlyArray<CommitSpec>
}

export interface SimPullRequest extends SimPrKey {
  readonly headSha: string
  /** the head branch */
  readonly head: string
}

export interface PushToPullRequestChange {
  readonly files?: FileChanges
  readonly commits?: ReadonlyArray<CommitSpec>
  /** build the new head on the base's tip (a force-push) instead of on the current head */
  readonly force?: boolean
  /** message of the (last) commit; default the PR title */
  readonly message?: string
}

export interface PushOptions {
  readonly message?: string
  /** the pusher's login (default `<owner>-admin`) */
  readonly user?: string
}

export interface SimComment {
  readonly id: number
  readonly user: string
  readonly body: string
  readonly reactions: ReadonlyArray<{ readonly user: string; readonly content: string }>
  readonly createdAt: string
  readonly updatedAt: string
}

export interface GitHubSim {
  /** The REST API root, e.g. `http://127.0.0.1:40123` (give it to the service as GITHUB_API_URL). */
  readonly url: string
  readonly appId: number
  readonly appSlug: string
  /** The bot user the App acts as (`<slug>[bot]`). */
  readonly botLogin: string
  /** The App's private key, PKCS#1 PEM as GitHub hands it out. */
  readonly privateKeyPem: string
  /** The same key as PKCS#8 PEM. */
  readonly privateKeyPkcs8Pem: string
  readonly webhookSecret: string
  /** Points webhooks at the service (after it started on its port). */
  readonly setWebhookUrl: (url: string) => void
  /** A repository whose default branch `main` has one commit with `files`. */
  readonly createRepo: (
    owner: string,
    name: string,
    files?: FileChanges
  ) => Promise<SimRepoKey & { readonly initialSha: string }>
  /** Installs the App on `owner` for `names` (sends `installation` created, or `installation_repositories` added
   * when already installed); returns the installation id. */
  readonly installApp: (owner: string, names: ReadonlyArray<string>) => Promise<number>
  /** Removes repositories from the installation (`installation_repositories` removed). */
  readonly removeFromInstallation: (owner: string, names: ReadonlyArray<string>) => Promise<void>
  /** Uninstalls the App from `owner` (`installation` deleted); its tokens stop working. */
  readonly uninstallApp: (owner: string) => Promise<void>
  /** A personal access token of `login` with access to every repository (the GITHUB_TOKEN alternative). */
  readonly createPersonalToken: (login: string) => string
  /** Makes every installation token issued so far expired. */
  readonly expireTokens: () => void
  /** A head branch with commits on the base's tip and a pull request for it (sends `push` and `pull_request`
   * opened, and waits for their delivery). */
  readonly openPullRequest: (input: OpenPullRequestInput) => Promise<SimPullRequest>
  /** `openPullRequest` at once (synchronously): the PR exists on return, its webhooks follow. */
  readonly openPullRequestNow: (input: OpenPullRequestInput) => SimPullRequest
  /** Pushes new commits to the PR's head branch (sends `push` and `pull_request` synchronize); `force` builds the
   * new head on the base's tip instead (a force-push). Returns the new head sha. */
  readonly pushToPullRequest: (pr: SimPrKey, change?: PushToPullRequestChange) => Promise<string>
  /** `pushToPullRequest` at once: the head moved on return, its webhooks follow. */
  readonly pushToPullRequestNow: (pr: SimPrKey, change?: PushToPullRequestChange) => string
  /** A commit pushed to a branch from outside (sends `push`, and `pull_request` closed with `merged: true` for open
   * PRs on that base whose head it contains). Returns its sha. */
  readonly pushToBranch: (
    repo: SimRepoKey,
    branch: string,
    files: FileChanges,
    options?: PushOptions
  ) => Promise<string>
  /** `pushToBranch` at once: the branch moved on return, its webhooks follow. */
  readonly pushToBranchNow: (repo: SimRepoKey, branch: string, files: FileChanges, options?: PushOptions) => string
  /** A push from outside that moves `branch` to an existing commit `sha` (a fast-forward to a PR's head, say): the
   * branch moved on return; its `push` webhook and the PRs it merges (`closed`, `merged: true`) follow. */
  readonly moveBranchNow: (repo: SimRepoKey, branch: string, sha: string, options?: { readonly user?: string }) => void
  readonly closePullRequest: (pr: SimPrKey, user?: string) => Promise<void>
  /** `closePullRequest` at once: closed on return, its webhook follows. */
  readonly closePullRequestNow: (pr: SimPrKey, user?: string) => void
  readonly reopenPullRequest: (pr: SimPrKey, user?: string) => Promise<void>
  readonly convertToDraft: (pr: SimPrKey) => Promise<void>
  readonly markReadyForReview: (pr: SimPrKey) => Promise<void>
  /** Changes the PR's base branch (`pull_request` edited with `changes.base`). */
  readonly changeBase: (pr: SimPrKey, base: string) => Promise<void>
  /** A comment on a PR by `user` (`issue_comment` created); returns its id. */
  readonly comment: (user: string, pr: SimPrKey, body: string) => Promise<number>
  /** `user`'s permission on `repo` (or on every repository when `repo` is omitted). */
  readonly setPermission: (user: string, level: PermissionLevel, repo?: SimRepoKey) => void
  /** A commit status as CI would post it (`status` webhook). The repository is found by the sha when omitted. */
  readonly postStatus: (
    sha: string,
    context: string,
    state: StatusState,
    options?: { readonly repo?: SimRepoKey; readonly targetUrl?: string; readonly description?: string }
  ) => Promise<void>
  /** A check run started by the CI app (`check_run` created). */
  readonly startCheckRun: (sha: string, name: string, options?: { readonly repo?: SimRepoKey }) => Promise<number>
  /** A check run of the CI app completed (`check_run` completed, and `check_suite` completed when all its runs are). */
  readonly completeCheckRun: (
    sha: string,
    name: string,
    conclusion: CheckConclusion,
    options?: { readonly repo?: SimRepoKey }
  ) => Promise<void>
  /** Branch protection's required status checks (null removes the protection). */
  readonly setRequiredStatusChecks: (
    repo: SimRepoKey,
    branch: string,
    contexts: ReadonlyArray<string> | null,
    options?: { readonly strict?: boolean }
  ) => void
  /** Which merge methods the repository allows (all by default). */
  readonly setMergeMethods: (repo: SimRepoKey, methods: { merge?: boolean; squash?: boolean; rebase?: boolean }) => void
  /** The next `n` webhooks are recorded as `dropped` and not sent. */
  readonly dropNextDeliveries: (n: number) => void
  /** Sends a recorded delivery again, with the same delivery id (as GitHub's "Redeliver"). */
  readonly redeliver: (id: string) => Promise<number | "error" | "no-url">
  /** The next `n` requests are answered with a secondary rate limit (403 or 429 with `retry-after`). */
  readonly secondaryRateLimit: (
    n: number,
    options?: { readonly status?: 403 | 429; readonly retryAfterSeconds?: number }
  ) => void
  /** Sets the remaining primary budget of every token (0: answers 403 "API rate limit exceeded" until reset). */
  readonly setRateLimitRemaining: (remaining: number) => void
  /** Waits until every webhook queued so far was delivered. */
  readonly settled: () => Promise<void>
  readonly deliveries: () => ReadonlyArray<SimDelivery>
  readonly requests: () => ReadonlyArray<SimRequest>
  readonly clearRequests: () => void
  readonly comments: (pr: SimPrKey) => ReadonlyArray<SimComment>
  /** The PR as the simulator holds it (state, head, base, merged, draft ...). */
  readonly pullRequest: (pr: SimPrKey) => PullView
  readonly branchSha: (repo: SimRepoKey, branch: string) => string | null
  readonly readFile: (repo: SimRepoKey, ref: string, path: string) => string | null
  /** Runs git in the repository's bare repository (trimmed stdout). */
  readonly git: (repo: SimRepoKey, ...args: ReadonlyArray<string>) => string
  readonly gitDir: (repo: SimRepoKey) => string
  /** Latest status per context on a commit. */
  readonly statuses: (
    repo: SimRepoKey,
    sha: string
  ) => ReadonlyArray<{ context: string; state: StatusState; creator: string }>
  readonly violations: () => ReadonlyArray<SimViolation>
  readonly stop: () => Promise<void>
}

// ---------------------------------------------------------------------------------------------------------------
// State

interface Pull {
  number: number
  id: number
  title: string
  body: string | null
  user: SimUser
  headRef: string
  headSha: string
  baseRef: string
  draft: boolean
  state: "open" | "closed"
  merged: boolean
  mergedAt: string | null
  mergedBy: SimUser | null
  mergeCommitSha: string | null
  createdAt: string
  updatedAt: string
  closedAt: string | null
  /** mergeability computed for "baseSha:headSha" */
  mergeKey: string | null
  mergeClean: boolean
  /** the key the last read was answered for (lazy mergeability) */
  servedKey: string | null
}

interface Repo {
  readonly info: RepoInfo
  readonly test: TestRepo
  readonly ops: GitOps
  readonly pulls: Map<number, Pull>
  nextNumber: number
  readonly statuses: StatusView[]
  readonly checkRuns: CheckRunView[]
  readonly suites: Map<string, Suite>
  readonly protection: Map<string, { contexts: string[]; strict: boolean }>
  readonly comments: CommentView[]
  readonly permissions: Map<string, PermissionLevel>
  mergeMethods: { merge: boolean; squash: boolean; rebase: boolean }
  lock: Promise<void>
}

type Suite = { -readonly [K in keyof SuiteView]: SuiteView[K] }

interface Installation {
  readonly view: InstallationView
  readonly repos: Set<string>
  active: boolean
}

interface Token {
  readonly token: string
  readonly installationId: number | null
  readonly user: SimUser | null
  expiresAt: number
  /** repository full names the token is limited to (null: the installation's) */
  readonly repos: ReadonlySet<string> | null
}

type Principal =
  | { readonly kind: "app" }
  | { readonly kind: "installation"; readonly installation: Installation; readonly token: Token }
  | { readonly kind: "pat"; readonly token: Token }

interface Answer {
  readonly status: number
  readonly body?: Json
  readonly headers?: Record<string, string>
}

interface Ctx {
  readonly params: Record<string, string>
  readonly query: URLSearchParams
  readonly body: JsonObject
  readonly principal: Principal
  /** set for repository routes */
  readonly repo: Repo
  readonly actor: SimUser
  readonly url: URL
}

type Handler = (ctx: Ctx) => Promise<Answer>

interface Route {
  readonly method: string
  readonly path: string
  readonly auth: "app" | "repo" | "installation"
  readonly handler: Handler
  readonly strict: RegExp
  readonly loose: RegExp
  readonly literals: number
  readonly names: ReadonlyArray<string>
}

const DOCS = "https://docs.github.com/rest"
const ZERO = "0".repeat(40)
const PERMISSION_RANK: Record<PermissionLevel, number> = {
  none: 0,
  read: 1,
  triage: 2,
  write: 3,
  maintain: 4,
  admin: 5
}

const error = (status: number, message: string, extra: JsonObject = {}): Answer => ({
  status,
  body: { message, documentation_url: DOCS, ...extra }
})
const validationFailed = (resource: string, field: string, code: string, message?: string): Answer =>
  error(422, "Validation Failed", {
    errors: [{ resource, field, code, ...(message === undefined ? {} : { message }) }]
  })
const notFound = () => error(404, "Not Found")

const now = () => gitHubTime(Date.now())
/** A user's noreply address (a valid email: a bot's `[bot]` suffix left out). */
const emailOf = (user: SimUser) => `${user.id}+${user.login.replace(/[^A-Za-z0-9-]/g, "")}@users.noreply.sim`
const str = (v: Json | undefined): string | undefined => (typeof v === "string" ? v : undefined)

/** Starts the simulator on 127.0.0.1 (a free port). */
export const startGitHubSim = async (options: GitHubSimOptions): Promise<GitHubSim> => {
  const catalog = await openApiCatalog()
  const sim = new Sim(catalog, options)
  return sim.api()
}

class Sim {
  private readonly root = makeTempDir("greenline-ghsim-")
  private readonly keys = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 })
  private readonly server: ReturnType<typeof Bun.serve>
  private readonly urls: Urls
  private readonly app: AppView
  private readonly ciApp: AppView
  private readonly bot: SimUser
  private readonly ciUser: SimUser
  private readonly users = new Map<string, SimUser>()
  private readonly repos = new Map<string, Repo>()
  private readonly installations = new Map<number, Installation>()
  private readonly tokens = new Map<string, Token>()
  private readonly globalPermissions = new Map<string, PermissionLevel>()
  private readonly routes: Route[] = []
  private readonly log: SimRequest[] = []
  private readonly problems: SimViolation[] = []
  private readonly sent: SimDelivery[] = []
  private webhookUrl: string | undefined
  private deliveryChain: Promise<void> = Promise.resolve()
  private dropNext = 0
  private secondary = { remaining: 0, status: 403 as 403 | 429, retryAfter: 1 }
  private readonly buckets = new Map<string, { remaining: number; reset: number }>()
  private nextId = 1000
  private readonly lazy: boolean
  private readonly lifetime: number
  private readonly limit: number

  constructor(
    private readonly catalog: OpenApiCatalog,
    private readonly options: GitHubSimOptions
  ) {
    this.webhookUrl = options.webhookUrl
    this.lazy = options.lazyMergeability ?? true
    this.lifetime = options.tokenLifetimeSeconds ?? 3600
    this.limit = options.rateLimit ?? 5000
    this.server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => this.handle(req) })
    const base = `http://127.0.0.1:${this.server.port}`
    this.urls = { api: base, web: `${base}/_web` }
    const created = now()
    const owner = this.user("greenline-dev", "Organization")
    this.app = { id: 4242, slug: "greenline-sim", name: "Greenline (simulated)", owner, createdAt: created }
    this.ciApp = { id: 4343, slug: "sim-ci", name: "Simulated CI", owner, createdAt: created }
    this.bot = this.user(`${this.app.slug}[bot]`, "Bot")
    this.ciUser = this.user(`${this.ciApp.slug}[bot]`, "Bot")
    this.defineRoutes()
  }

  // -------------------------------------------------------------------------------------------------------------
  // Helpers

  private id() {
    return this.nextId++
  }

  private user(login: string, type: SimUser["type"] = "User"): SimUser {
    let u = this.users.get(login.toLowerCase())
    if (!u) {
      u = { login, id: this.id(), type }
      this.users.set(login.toLowerCase(), u)
    }
    return u
  }

  private repoOf(key: SimRepoKey): Repo {
    const r = this.repos.get(`${key.owner}/${key.name}`.toLowerCase())
    if (!r) throw new Error(`no simulated repository ${key.owner}/${key.name}`)
    return r
  }

  private pullOf(key: SimPrKey): { repo: Repo; pull: Pull } {
    const repo = this.repoOf(key)
    const pull = repo.pulls.get(key.number)
    if (!pull) throw new Error(`no pull request #${key.number} in ${key.owner}/${key.name}`)
    return { repo, pull }
  }

  private fullName(r: Repo) {
    return `${r.info.owner.login}/${r.info.name}`
  }

  /** Serializes the mutations of one repository. */
  private async locked<A>(repo: Repo, f: () => Promise<A>): Promise<A> {
    const previous = repo.lock
    let release = () => {}
    repo.lock = new Promise<void>((resolve) => {
      release = resolve
    })
    await previous
    try {
      return await f()
    } finally {
      release()
    }
  }

  private installationOf(repo: Repo): Installation | undefined {
    for (const i of this.installations.values()) {
      if (
        i.active &&
        i.view.account.login.toLowerCase() === repo.info.owner.login.toLowerCase() &&
        i.repos.has(this.fullName(repo).toLowerCase())
      )
        return i
    }
    return undefined
  }

  private violation(kind: SimViolation["kind"], what: string, problems: ReadonlyArray<string>) {
    if (problems.length > 0) this.problems.push({ kind, what, problems })
  }

  private async commit(repo: Repo, sha: string): Promise<CommitInfo> {
    const c = await repo.ops.readCommit(sha)
    if (!c) throw new Error(`no commit ${sha}`)
    return c
  }

  /**
   * The PR as answered. `read`: a GET of this PR (mergeability computed, lazily as GitHub does); otherwise (lists,
   * webhooks) `mergeable` is null as in GitHub's own list answers and most webhooks, and nothing is merged to know.
   */
  private async pullView(repo: Repo, p: Pull, read: boolean): Promise<PullView> {
    const baseSha = (await repo.ops.refSha(`refs/heads/${p.baseRef}`)) ?? p.headSha
    let mergeable: boolean | null = null
    let mergeableState = "unknown"
    if (p.state === "open" && read) {
      const key = `${baseSha}:${p.headSha}`
      if (p.mergeKey !== key) {
        const r = await repo.ops.mergeTree(baseSha, p.headSha)
        p.mergeKey = key
        p.mergeClean = r.clean
      }
      const pending = this.lazy && read && p.servedKey !== key
      if (read) p.servedKey = key
      if (!pending) {
        mergeable = p.mergeClean
        mergeableState = await this.mergeableState(repo, p, baseSha)
      }
    }
    const commits = await repo.ops.count(baseSha, p.headSha).catch(() => 1)
    return {
      number: p.number,
      id: p.id,
      title: p.title,
      body: p.body,
      user: p.user,
      headRef: p.headRef,
      headSha: p.headSha,
      baseRef: p.baseRef,
      baseSha,
      draft: p.draft,
      state: p.state,
      merged: p.merged,
      mergedAt: p.mergedAt,
      mergedBy: p.mergedBy,
      mergeCommitSha: p.mergeCommitSha,
      mergeable,
      mergeableState,
      createdAt: p.createdAt,
      updatedAt: p.updatedAt,
      closedAt: p.closedAt,
      commits,
      comments: repo.comments.filter((c) => c.issueNumber === p.number).length
    }
  }

  private async mergeableState(repo: Repo, p: Pull, baseSha: string): Promise<string> {
    if (p.draft) return "draft"
    if (!p.mergeClean) return "dirty"
    const protection = repo.protection.get(p.baseRef)
    if (protection) {
      if (this.missingChecks(repo, p.headSha, protection.contexts).length > 0) return "blocked"
      if (protection.strict && !(await repo.ops.isAncestor(baseSha, p.headSha))) return "behind"
    }
    const failing = this.latestStatuses(repo, p.headSha).some((s) => s.state === "failure" || s.state === "error")
    return failing ? "unstable" : "clean"
  }

  private latestStatuses(repo: Repo, sha: string): StatusView[] {
    const latest = new Map<string, StatusView>()
    for (const s of repo.statuses) if (s.sha === sha) latest.set(s.context, s)
    return [...latest.values()].sort((a, b) => b.id - a.id)
  }

  /** Required contexts that are not satisfied on `sha` (a success status or a successful check run). */
  private missingChecks(repo: Repo, sha: string, contexts: ReadonlyArray<string>): string[] {
    const statuses = this.latestStatuses(repo, sha)
    return contexts.filter((c) => {
      if (statuses.find((s) => s.context === c)?.state === "success") return false
      const run = repo.checkRuns.filter((r) => r.sha === sha && r.name === c).at(-1)
      return !(run?.status === "completed" && ["success", "neutral", "skipped"].includes(run.conclusion ?? ""))
    })
  }

  private async pullsFor(repo: Repo, sha: string): Promise<JsonObject[]> {
    const out: JsonObject[] = []
    for (const p of repo.pulls.values()) {
      if (p.state === "open" && p.headSha === sha)
        out.push(pullRequestMinimalShape(this.urls, repo.info, await this.pullView(repo, p, false)))
    }
    return out
  }

  private async findRepoBySha(sha: string): Promise<Repo> {
    for (const r of this.repos.values()) if ((await r.ops.objectType(sha)) === "commit") return r
    throw new Error(`no simulated repository has commit ${sha}`)
  }

  // -------------------------------------------------------------------------------------------------------------
  // Webhooks

  private repoPayload(repo: Repo, sender: SimUser): JsonObject {
    const inst = this.installationOf(repo)
    return {
      repository: repositoryShape(this.urls, repo.info),
      sender: userShape(this.urls, sender),
      ...(inst
        ? {
            installation: { id: inst.view.id, node_id: Buffer.from(`Installation:${inst.view.id}`).toString("base64") }
          }
        : {})
    }
  }

  /**
   * Queues a webhook; deliveries go out one at a time, in order, after the current request (never awaited by a
   * request handler: GitHub delivers asynchronously, and the service may call back while handling one).
   */
  private emit(event: string, payload: JsonObject): void {
    const action = str(payload.action)
    this.violation(
      "webhook",
      `${event}${action ? `.${action}` : ""}`,
      this.catalog.validateWebhook(event, action, payload)
    )
    const body = JSON.stringify(payload)
    const id = crypto.randomUUID()
    const signature = `sha256=${crypto.createHmac("sha256", this.options.webhookSecret).update(body).digest("hex")}`
    const next = this.deliveryChain.then(async () => {
      let outcome: SimDelivery["outcome"]
      if (this.dropNext > 0) {
        this.dropNext--
        outcome = "dropped"
      } else {
        outcome = await this.deliver(id, event, body, signature)
      }
      this.sent.push({ id, event, action, payload, body, signature, outcome })
    })
    this.deliveryChain = next.catch(() => {})
  }

  private async deliver(
    id: string,
    event: string,
    body: string,
    signature: string
  ): Promise<number | "error" | "no-url"> {
    const url = this.webhookUrl
    if (url === undefined) return "no-url"
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "GitHub-Hookshot/sim",
          "x-github-event": event,
          "x-github-delivery": id,
          "x-github-hook-id": "1",
          "x-github-hook-installation-target-id": String(this.app.id),
          "x-github-hook-installation-target-type": "integration",
          "x-hub-signature": `sha1=${crypto.createHmac("sha1", this.options.webhookSecret).update(body).digest("hex")}`,
          "x-hub-signature-256": signature
        },
        body
      })
      await response.arrayBuffer()
      return response.status
    } catch {
      return "error"
    }
  }

  private async emitPull(repo: Repo, p: Pull, action: string, sender: SimUser, extra: JsonObject = {}) {
    const view = await this.pullView(repo, p, false)
    this.emit("pull_request", {
      action,
      number: p.number,
      pull_request: pullRequestShape(this.urls, repo.info, view),
      ...extra,
      ...this.repoPayload(repo, sender)
    })
  }

  // -------------------------------------------------------------------------------------------------------------
  // Ref moves: the one place branches change (webhooks, PR synchronize, merged detection)

  private async moveBranch(
    repo: Repo,
    branch: string,
    newSha: string | null,
    expectedOld: string | null | undefined,
    pusher: SimUser
  ): Promise<boolean> {
    const ref = `refs/heads/${branch}`
    const before = await repo.ops.refSha(ref)
    if (expectedOld !== undefined && before !== expectedOld) return false
    if (newSha === null) {
      if (before === null || !(await repo.ops.deleteRef(ref, before))) return false
    } else if (!(await repo.ops.updateRef(ref, newSha, before))) {
      return false
    }
    await this.afterMove(repo, branch, before, newSha, pusher)
    return true
  }

  /** `moveBranch` for the synchronous test API: the ref and the PR heads change now, the webhooks follow. */
  private moveBranchNow(repo: Repo, branch: string, newSha: string | null, pusher: SimUser): Promise<void> {
    const before = repo.test.branchSha(branch)
    const ref = `refs/heads/${branch}`
    if (newSha === null) repo.test.git("update-ref", "-d", ref, before ?? ZERO)
    else repo.test.git("update-ref", ref, newSha, before ?? ZERO)
    return this.afterMove(repo, branch, before, newSha, pusher).catch((e) =>
      this.violation("unimplemented", `moving ${branch}`, [`the simulator failed: ${String(e)}`])
    )
  }

  /**
   * What follows a branch move, as on GitHub: the PRs whose head it is are synchronized (or closed when it was
   * deleted) at once, before the first await; then the `push` webhook, the PR webhooks, and the PRs whose base it is
   * and whose head it now contains are marked merged.
   */
  private async afterMove(repo: Repo, branch: string, before: string | null, newSha: string | null, pusher: SimUser) {
    repo.info.pushedAt = now()
    const events: Array<[Pull, string, JsonObject]> = []
    for (const p of repo.pulls.values()) {
      if (p.state !== "open" || p.headRef !== branch) continue
      if (newSha === null) {
        this.closePull(p)
        events.push([p, "closed", {}])
      } else if (p.headSha !== newSha) {
        const old = p.headSha
        p.headSha = newSha
        p.updatedAt = now()
        repo.test.git("update-ref", `refs/pull/${p.number}/head`, newSha)
        events.push([p, "synchronize", { before: old, after: newSha }])
      }
    }
    await this.emitPush(repo, branch, before, newSha, pusher)
    for (const [p, action, extra] of events) await this.emitPull(repo, p, action, pusher, extra)
    if (newSha !== null) {
      for (const p of repo.pulls.values()) {
        if (p.state !== "open" || p.baseRef !== branch) continue
        if (await repo.ops.isAncestor(p.headSha, newSha)) {
          this.closePull(p)
          p.merged = true
          p.mergedAt = p.closedAt
          p.mergedBy = pusher
          p.mergeCommitSha = newSha
          await this.emitPull(repo, p, "closed", pusher)
        }
      }
    }
  }

  private closePull(p: Pull) {
    p.state = "closed"
    p.closedAt = now()
    p.updatedAt = p.closedAt
  }

  private async emitPush(repo: Repo, branch: string, before: string | null, after: string | null, pusher: SimUser) {
    const commits: JsonObject[] = []
    let head: JsonObject | null = null
    let forced = false
    if (after !== null) {
      for (const sha of await repo.ops.commitsBetween(before, after, 20)) {
        commits.push(pushCommitShape(this.urls, repo.info, await this.commit(repo, sha), true))
      }
      head = pushCommitShape(this.urls, repo.info, await this.commit(repo, after), true)
      forced = before !== null && !(await repo.ops.isAncestor(before, after))
    }
    this.emit("push", {
      ref: `refs/heads/${branch}`,
      before: before ?? ZERO,
      after: after ?? ZERO,
      created: before === null,
      deleted: after === null,
      forced,
      base_ref: null,
      compare: `${this.urls.web}/${this.fullName(repo)}/compare/${(before ?? ZERO).slice(0, 12)}...${(after ?? ZERO).slice(0, 12)}`,
      commits,
      head_commit: head,
      pusher: { name: pusher.login, email: emailOf(pusher) },
      ...this.repoPayload(repo, pusher),
      repository: pushRepositoryShape(this.urls, repo.info)
    })
  }

  /** Why a protected branch refuses to move to `sha` (null: it may). */
  private async protectionRefuses(
    repo: Repo,
    branch: string,
    before: string | null,
    sha: string
  ): Promise<string | null> {
    const protection = repo.protection.get(branch)
    if (!protection) return null
    if (before !== null && !(await repo.ops.isAncestor(before, sha))) return "Cannot force-push to this branch"
    const missing = this.missingChecks(repo, sha, protection.contexts)
    if (missing.length > 0) return `Required status check "${missing[0]}" is expected.`
    return null
  }

  // -------------------------------------------------------------------------------------------------------------
  // HTTP

  private async handle(req: Request): Promise<Response> {
    const started = Date.now()
    const url = new URL(req.url)
    const method = req.method.toUpperCase()
    const rawPath = url.pathname
    let body: Json | undefined
    const text = await req.text()
    let answer: Answer
    let auth: SimRequest["auth"] = "none"
    const op = this.catalog.findOperation(method, rawPath)
    const what = `${method} ${rawPath}${url.search}`
    if (!op) this.violation("request", what, [`no operation ${method} ${rawPath} in GitHub's OpenAPI description`])
    let parsed = true
    if (text !== "") {
      try {
        body = JSON.parse(text) as Json
      } catch {
        parsed = false
      }
    }
    if (!parsed) {
      answer = error(400, "Problems parsing JSON")
    } else {
      if (op)
        this.violation("request", `${op.route} (${what})`, this.catalog.validateRequest(op, url.searchParams, body))
      const result = await this.dispatch(req, url, method, rawPath, body)
      answer = result.answer
      auth = result.auth
    }
    const headers: Record<string, string> = {
      "x-github-api-version-selected": "2022-11-28",
      "x-github-request-id": crypto.randomUUID(),
      "x-github-media-type": "github.v3; format=json",
      ...(answer.headers ?? {})
    }
    let responseBody: string | null = answer.body === undefined ? null : JSON.stringify(answer.body)
    let status = answer.status
    if (responseBody !== null) headers["content-type"] = "application/json; charset=utf-8"
    if (method === "GET" && status === 200 && responseBody !== null) {
      const etag = `W/"${crypto.createHash("sha256").update(responseBody).digest("hex").slice(0, 40)}"`
      headers.etag = etag
      const inm = req.headers.get("if-none-match")
      if (inm?.split(",").some((t) => t.trim() === etag || t.trim() === etag.slice(2))) {
        status = 304
        responseBody = null
        delete headers["content-type"]
        this.refund(req)
      }
    }
    if (op) {
      this.violation(
        "response",
        `${op.route} ${status} (${what})`,
        this.catalog.validateResponse(
          op,
          status,
          responseBody === null ? undefined : (JSON.parse(responseBody) as Json)
        )
      )
    }
    this.log.push({
      method,
      path: rawPath,
      query: url.search,
      route: op?.route ?? null,
      body,
      status,
      auth,
      at: started,
      ms: Date.now() - started
    })
    return new Response(status === 204 || status === 304 ? null : responseBody, { status, headers })
  }

  private bucketKey(req: Request): string {
    return req.headers.get("authorization") ?? "anonymous"
  }

  private refund(req: Request) {
    const b = this.buckets.get(this.bucketKey(req))
    if (b && b.remaining < this.limit) b.remaining++
  }

  private rateHeaders(req: Request): { headers: Record<string, string>; exhausted: boolean } {
    const key = this.bucketKey(req)
    const nowSec = Math.floor(Date.now() / 1000)
    let b = this.buckets.get(key)
    if (!b || b.reset <= nowSec) {
      b = { remaining: this.limit, reset: nowSec + 3600 }
      this.buckets.set(key, b)
    }
    const exhausted = b.remaining <= 0
    if (!exhausted) b.remaining--
    return {
      exhausted,
      headers: {
        "x-ratelimit-limit": String(this.limit),
        "x-ratelimit-remaining": String(b.remaining),
        "x-ratelimit-used": String(this.limit - b.remaining),
        "x-ratelimit-reset": String(b.reset),
        "x-ratelimit-resource": "core"
      }
    }
  }

  private async dispatch(
    req: Request,
    url: URL,
    method: string,
    rawPath: string,
    body: Json | undefined
  ): Promise<{ answer: Answer; auth: SimRequest["auth"] }> {
    const rate = this.rateHeaders(req)
    const withRate = (a: Answer): Answer => ({ ...a, headers: { ...rate.headers, ...(a.headers ?? {}) } })
    if (this.secondary.remaining > 0) {
      this.secondary.remaining--
      return {
        auth: "none",
        answer: withRate({
          ...error(
            this.secondary.status,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
          ),
          headers: { "retry-after": String(this.secondary.retryAfter) }
        })
      }
    }
    const found = matchTemplate(
      this.routes.filter((r) => r.method === method),
      rawPath
    )
    if (!found) {
      this.violation("unimplemented", `${method} ${rawPath}`, ["the simulator does not implement this endpoint"])
      return { auth: "none", answer: withRate(notFound()) }
    }
    const route = found.template
    const authn = this.authenticate(req, route.auth)
    if ("answer" in authn) return { auth: authn.auth, answer: withRate(authn.answer) }
    const principal = authn.principal
    if (rate.exhausted) {
      const who =
        principal.kind === "installation" ? `installation ID ${principal.installation.view.id}` : principal.kind
      return {
        auth: principal.kind,
        answer: withRate(error(403, `API rate limit exceeded for ${who}.`))
      }
    }
    let repo: Repo | undefined
    if (route.auth === "repo" || (found.params.owner !== undefined && found.params.repo !== undefined)) {
      repo = this.repos.get(`${found.params.owner}/${found.params.repo}`.toLowerCase())
      if (!repo) return { auth: principal.kind, answer: withRate(notFound()) }
      if (route.auth === "repo" && !this.canAccess(principal, repo)) {
        return { auth: principal.kind, answer: withRate(notFound()) }
      }
    }
    const actor = principal.kind === "pat" ? principal.token.user! : this.bot
    const ctx: Ctx = {
      params: found.params,
      query: url.searchParams,
      body: body !== null && typeof body === "object" && !Array.isArray(body) ? (body as JsonObject) : {},
      principal,
      repo: repo as Repo,
      actor,
      url
    }
    try {
      return { auth: principal.kind, answer: withRate(await route.handler(ctx)) }
    } catch (e) {
      this.violation("unimplemented", `${method} ${rawPath}`, [`the simulator failed: ${String(e)}`])
      return { auth: principal.kind, answer: withRate(error(500, "Server Error")) }
    }
  }

  private canAccess(principal: Principal, repo: Repo): boolean {
    if (principal.kind === "pat") return true
    if (principal.kind !== "installation") return false
    const name = this.fullName(repo).toLowerCase()
    if (principal.token.repos !== null && !principal.token.repos.has(name)) return false
    return principal.installation.active && this.installationOf(repo)?.view.id === principal.installation.view.id
  }

  private authenticate(
    req: Request,
    kind: Route["auth"]
  ): { principal: Principal } | { answer: Answer; auth: SimRequest["auth"] } {
    const header = req.headers.get("authorization") ?? ""
    const m = /^(bearer|token)\s+(\S+)$/i.exec(header.trim())
    if (!m) return { auth: "none", answer: error(401, "Requires authentication") }
    const credential = m[2]!
    if (kind === "app") {
      const problem = this.verifyJwt(credential)
      if (problem !== null) return { auth: "invalid", answer: error(401, problem) }
      return { principal: { kind: "app" } }
    }
    const token = this.tokens.get(credential)
    if (!token || token.expiresAt <= Date.now()) return { auth: "invalid", answer: error(401, "Bad credentials") }
    if (token.installationId !== null) {
      const installation = this.installations.get(token.installationId)
      if (!installation?.active) return { auth: "invalid", answer: error(401, "Bad credentials") }
      return { principal: { kind: "installation", installation, token } }
    }
    if (kind === "installation")
      return { auth: "pat", answer: error(403, "This endpoint requires an installation token") }
    return { principal: { kind: "pat", token } }
  }

  /** Why the JWT is refused (null: it is the App's, RS256, current, at most 10 minutes long). */
  private verifyJwt(jwt: string): string | null {
    const parts = jwt.split(".")
    if (parts.length !== 3) return "A JSON web token could not be decoded"
    let header: { alg?: unknown }
    let claims: { iss?: unknown; iat?: unknown; exp?: unknown }
    try {
      header = JSON.parse(Buffer.from(parts[0]!, "base64url").toString("utf8"))
      claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"))
    } catch {
      return "A JSON web token could not be decoded"
    }
    if (header.alg !== "RS256") return "A JSON web token could not be decoded"
    const valid = crypto.verify(
      "RSA-SHA256",
      Buffer.from(`${parts[0]}.${parts[1]}`),
      this.keys.publicKey,
      Buffer.from(parts[2]!, "base64url")
    )
    if (!valid) return "A JSON web token could not be decoded"
    if (String(claims.iss) !== String(this.app.id)) return "Integration not found"
    const nowSec = Math.floor(Date.now() / 1000)
    if (typeof claims.iat !== "number" || claims.iat > nowSec + 60)
      return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued."
    if (typeof claims.exp !== "number" || claims.exp <= nowSec)
      return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires."
    if (claims.exp - claims.iat > 600) return "'Expiration time' claim ('exp') is too far in the future."
    return null
  }

  // -------------------------------------------------------------------------------------------------------------
  // Routes

  private route(method: string, path: string, auth: Route["auth"], handler: Handler) {
    const t = compileTemplate(method, path)
    this.routes.push({
      method,
      path,
      auth,
      handler,
      strict: t.strict,
      loose: t.loose,
      literals: t.literals,
      names: t.names
    })
  }

  private defineRoutes() {
    const R = "/repos/{owner}/{repo}"
    const u = () => this.urls

    // App authentication
    this.route("POST", "/app/installations/{installation_id}/access_tokens", "app", async (c) => {
      const inst = this.installations.get(Number(c.params.installation_id))
      if (!inst?.active) return notFound()
      let limited: Set<string> | null = null
      const names = c.body.repositories
      const ids = c.body.repository_ids
      if (Array.isArray(names) || Array.isArray(ids)) {
        limited = new Set()
        for (const n of Array.isArray(names) ? names : []) {
          const full = `${inst.view.account.login}/${String(n)}`.toLowerCase()
          if (!inst.repos.has(full))
            return validationFailed(
              "Installation",
              "repositories",
              "invalid",
              `There is at least one repository that does not exist or is not accessible to the parent installation.`
            )
          limited.add(full)
        }
        for (const id of Array.isArray(ids) ? ids : []) {
          const r = [...this.repos.values()].find((x) => x.info.id === id)
          if (!r || !inst.repos.has(this.fullName(r).toLowerCase()))
            return validationFailed(
              "Installation",
              "repository_ids",
              "invalid",
              `There is at least one repository that does not exist or is not accessible to the parent installation.`
            )
          limited.add(this.fullName(r).toLowerCase())
        }
      }
      const token: Token = {
        token: `ghs_${crypto.randomBytes(18).toString("hex")}`,
        installationId: inst.view.id,
        user: null,
        expiresAt: Date.now() + this.lifetime * 1000,
        repos: limited
      }
      this.tokens.set(token.token, token)
      const repos = [...this.repos.values()].filter((r) => (limited ?? inst.repos).has(this.fullName(r).toLowerCase()))
      return {
        status: 201,
        body: {
          token: token.token,
          expires_at: gitHubTime(token.expiresAt),
          permissions: installationShape(u(), inst.view).permissions as JsonObject,
          repository_selection: inst.view.selection,
          ...(limited === null ? {} : { repositories: repos.map((r) => repositoryShape(u(), r.info)) })
        }
      }
    })
    this.route("GET", `${R}/installation`, "app", async (c) => {
      const inst = this.installationOf(c.repo)
      return inst ? { status: 200, body: installationShape(u(), inst.view) } : notFound()
    })
    this.route("GET", "/app/installations", "app", async (c) => {
      const all = [...this.installations.values()].filter((i) => i.active).map((i) => installationShape(u(), i.view))
      return this.page(c, all)
    })
    this.route("GET", "/installation/repositories", "installation", async (c) => {
      if (c.principal.kind !== "installation") return error(403, "This endpoint requires an installation token")
      const inst = c.principal.installation
      const scope = c.principal.token.repos ?? inst.repos
      const repos = [...this.repos.values()].filter((r) => scope.has(this.fullName(r).toLowerCase()))
      const { perPage, page } = this.paging(c)
      const slice = repos.slice((page - 1) * perPage, page * perPage).map((r) => repositoryShape(u(), r.info))
      return {
        status: 200,
        body: { total_count: repos.length, repository_selection: inst.view.selection, repositories: slice },
        headers: this.linkHeader(c, repos.length, perPage, page)
      }
    })

    // Pull requests
    this.route("GET", `${R}/pulls`, "repo", async (c) => {
      const state = c.query.get("state") ?? "open"
      const head = c.query.get("head")
      const base = c.query.get("base")
      const direction = c.query.get("direction") ?? "desc"
      let list = [...c.repo.pulls.values()].filter((p) => state === "all" || p.state === state)
      if (head) {
        const [owner, ref] = head.includes(":") ? head.split(":", 2) : [c.repo.info.owner.login, head]
        list =
          owner!.toLowerCase() === c.repo.info.owner.login.toLowerCase() ? list.filter((p) => p.headRef === ref) : []
      }
      if (base) list = list.filter((p) => p.baseRef === base)
      list.sort((a, b) => (direction === "asc" ? a.number - b.number : b.number - a.number))
      const views: JsonObject[] = []
      const { perPage, page } = this.paging(c)
      for (const p of list.slice((page - 1) * perPage, page * perPage))
        views.push(pullRequestSimpleShape(u(), c.repo.info, await this.pullView(c.repo, p, false)))
      return { status: 200, body: views, headers: this.linkHeader(c, list.length, perPage, page) }
    })
    this.route("GET", `${R}/pulls/{pull_number}`, "repo", async (c) => {
      const p = c.repo.pulls.get(Number(c.params.pull_number))
      if (!p) return notFound()
      return { status: 200, body: pullRequestShape(u(), c.repo.info, await this.pullView(c.repo, p, true)) }
    })
    this.route("POST", `${R}/pulls`, "repo", (c) =>
      this.locked(c.repo, async () => {
        const title = str(c.body.title)
        const headParam = str(c.body.head) ?? ""
        const base = str(c.body.base) ?? ""
        const headRef = headParam.includes(":") ? headParam.split(":", 2)[1]! : headParam
        if (title === undefined) return validationFailed("PullRequest", "title", "missing_field")
        const headSha = await c.repo.ops.refSha(`refs/heads/${headRef}`)
        if (headSha === null) return validationFailed("PullRequest", "head", "invalid")
        const baseSha = await c.repo.ops.refSha(`refs/heads/${base}`)
        if (baseSha === null) return validationFailed("PullRequest", "base", "invalid")
        if ([...c.repo.pulls.values()].some((p) => p.state === "open" && p.headRef === headRef && p.baseRef === base))
          return validationFailed(
            "PullRequest",
            "head",
            "custom",
            `A pull request already exists for ${c.repo.info.owner.login}:${headRef}.`
          )
        if (await c.repo.ops.isAncestor(headSha, baseSha))
          return validationFailed("PullRequest", "head", "custom", `No commits between ${base} and ${headRef}`)
        const p = this.newPull(c.repo, {
          title,
          body: str(c.body.body) ?? null,
          user: c.actor,
          headRef,
          headSha,
          baseRef: base,
          draft: c.body.draft === true
        })
        await c.repo.ops.updateRef(`refs/pull/${p.number}/head`, headSha)
        await this.emitPull(c.repo, p, "opened", c.actor)
        return { status: 201, body: pullRequestShape(u(), c.repo.info, await this.pullView(c.repo, p, false)) }
      })
    )
    this.route("PATCH", `${R}/pulls/{pull_number}`, "repo", (c) =>
      this.locked(c.repo, async () => {
        const p = c.repo.pulls.get(Number(c.params.pull_number))
        if (!p) return notFound()
        const events: Array<[string, JsonObject]> = []
        const changes: JsonObject = {}
        const title = str(c.body.title)
        if (title !== undefined && title !== p.title) {
          changes.title = { from: p.title }
          p.title = title
        }
        const body = c.body.body
        if (typeof body === "string" && body !== p.body) {
          changes.body = { from: p.body ?? "" }
          p.body = body
        }
        const base = str(c.body.base)
        if (base !== undefined && base !== p.baseRef) {
          if (p.state !== "open")
            return validationFailed(
              "PullRequest",
              "base",
              "invalid",
              "Cannot change the base branch of a closed pull request."
            )
          const sha = await c.repo.ops.refSha(`refs/heads/${base}`)
          if (sha === null)
            return validationFailed("PullRequest", "base", "invalid", `Proposed base branch '${base}' was not found`)
          const from = await c.repo.ops.refSha(`refs/heads/${p.baseRef}`)
          changes.base = { ref: { from: p.baseRef }, sha: { from: from ?? ZERO } }
          p.baseRef = base
        }
        if (Object.keys(changes).length > 0) events.push(["edited", { changes }])
        const state = str(c.body.state)
        if (state === "closed" && p.state === "open") {
          this.closePull(p)
          events.push(["closed", {}])
        } else if (state === "open" && p.state === "closed") {
          if (p.merged)
            return validationFailed("PullRequest", "state", "invalid", "Cannot reopen a merged pull request")
          p.state = "open"
          p.closedAt = null
          events.push(["reopened", {}])
        }
        p.updatedAt = now()
        for (const [action, extra] of events) await this.emitPull(c.repo, p, action, c.actor, extra)
        return { status: 200, body: pullRequestShape(u(), c.repo.info, await this.pullView(c.repo, p, false)) }
      })
    )
    this.route("PUT", `${R}/pulls/{pull_number}/merge`, "repo", (c) => this.locked(c.repo, () => this.mergePull(c)))

    // Git data
    const refName = (raw: string) => raw.replace(/^refs\//, "")
    this.route("GET", `${R}/git/ref/{ref}`, "repo", async (c) => {
      const ref = `refs/${refName(c.params.ref!)}`
      const sha = await c.repo.ops.refSha(ref)
      if (sha === null || !/^refs\/(heads|tags)\//.test(ref)) return notFound()
      return { status: 200, body: gitRefShape(u(), c.repo.info, ref, sha) }
    })
    this.route("GET", `${R}/git/matching-refs/{ref}`, "repo", async (c) => {
      const prefix = `refs/${refName(c.params.ref!)}`
      const refs = (await c.repo.ops.refs(prefix.replace(/\/[^/]*$/, "/")))
        .filter((r) => r.ref.startsWith(prefix) && /^refs\/(heads|tags)\//.test(r.ref))
        .map((r) => gitRefShape(u(), c.repo.info, r.ref, r.sha))
      return { status: 200, body: refs }
    })
    this.route("POST", `${R}/git/refs`, "repo", (c) =>
      this.locked(c.repo, async () => {
        const ref = str(c.body.ref) ?? ""
        const sha = str(c.body.sha) ?? ""
        if (!/^refs\/(heads|tags)\/.+/.test(ref) || ref.endsWith("/") || ref.includes(".."))
          return error(422, "Reference name is invalid")
        if ((await c.repo.ops.objectType(sha)) !== "commit") return error(422, "Object does not exist")
        if ((await c.repo.ops.refSha(ref)) !== null) return error(422, "Reference already exists")
        if (ref.startsWith("refs/heads/")) {
          const branch = ref.slice("refs/heads/".length)
          const refused = await this.protectionRefuses(c.repo, branch, null, sha)
          if (refused) return error(422, refused)
          if (!(await this.moveBranch(c.repo, branch, sha, null, c.actor)))
            return error(422, "Reference already exists")
        } else if (!(await c.repo.ops.updateRef(ref, sha, null))) {
          return error(422, "Reference already exists")
        }
        return {
          status: 201,
          body: gitRefShape(u(), c.repo.info, ref, sha),
          headers: { location: `${u().api}/repos/${this.fullName(c.repo)}/git/${ref}` }
        }
      })
    )
    this.route("PATCH", `${R}/git/refs/{ref}`, "repo", (c) =>
      this.locked(c.repo, async () => {
        const ref = `refs/${refName(c.params.ref!)}`
        const sha = str(c.body.sha) ?? ""
        const before = await c.repo.ops.refSha(ref)
        if (before === null || !ref.startsWith("refs/heads/")) return error(422, "Reference does not exist")
        if ((await c.repo.ops.objectType(sha)) !== "commit") return error(422, "Object does not exist")
        if (c.body.force !== true && !(await c.repo.ops.isAncestor(before, sha)))
          return error(422, "Update is not a fast forward")
        const branch = ref.slice("refs/heads/".length)
        const refused = await this.protectionRefuses(c.repo, branch, before, sha)
        if (refused) return error(422, refused)
        if (before !== sha && !(await this.moveBranch(c.repo, branch, sha, before, c.actor)))
          return error(422, "Update is not a fast forward")
        return { status: 200, body: gitRefShape(u(), c.repo.info, ref, sha) }
      })
    )
    this.route("DELETE", `${R}/git/refs/{ref}`, "repo", (c) =>
      this.locked(c.repo, async () => {
        const ref = `refs/${refName(c.params.ref!)}`
        const before = await c.repo.ops.refSha(ref)
        if (before === null || !/^refs\/(heads|tags)\//.test(ref)) return error(422, "Reference does not exist")
        if (ref.startsWith("refs/heads/")) {
          const branch = ref.slice("refs/heads/".length)
          if (c.repo.protection.has(branch)) return error(422, "Cannot delete this protected branch")
          if (branch === c.repo.info.defaultBranch) return error(422, "Cannot delete the default branch")
          await this.moveBranch(c.repo, branch, null, before, c.actor)
        } else {
          await c.repo.ops.deleteRef(ref, before)
        }
        return { status: 204 }
      })
    )
    this.route("GET", `${R}/git/commits/{commit_sha}`, "repo", async (c) => {
      const sha = c.params.commit_sha!
      if ((await c.repo.ops.objectType(sha)) !== "commit") return notFound()
      return { status: 200, body: gitCommitShape(u(), c.repo.info, await this.commit(c.repo, sha)) }
    })
    this.route("POST", `${R}/git/commits`, "repo", async (c) => {
      const message = str(c.body.message)
      const tree = str(c.body.tree) ?? ""
      const parents = Array.isArray(c.body.parents) ? c.body.parents.map(String) : []
      if (message === undefined) return validationFailed("Commit", "message", "missing_field")
      if ((await c.repo.ops.objectType(tree)) !== "tree")
        return validationFailed("Commit", "tree", "invalid", "Tree SHA does not exist")
      for (const p of parents)
        if ((await c.repo.ops.objectType(p)) !== "commit")
          return validationFailed("Commit", "parents", "invalid", "Parent SHA does not exist or is not a commit object")
      const ident = (v: Json | undefined) => {
        const o = v !== null && typeof v === "object" && !Array.isArray(v) ? (v as JsonObject) : {}
        return {
          name: str(o.name) ?? c.actor.login,
          email: str(o.email) ?? emailOf(c.actor),
          date: str(o.date) ?? now()
        }
      }
      const author = ident(c.body.author)
      const committer = c.body.committer === undefined ? author : ident(c.body.committer)
      const sha = await c.repo.ops.commitTree(tree, parents, message, author, committer)
      return {
        status: 201,
        body: gitCommitShape(u(), c.repo.info, await this.commit(c.repo, sha)),
        headers: { location: `${u().api}/repos/${this.fullName(c.repo)}/git/commits/${sha}` }
      }
    })
    this.route("POST", `${R}/merges`, "repo", (c) =>
      this.locked(c.repo, async () => {
        const base = str(c.body.base) ?? ""
        const head = str(c.body.head) ?? ""
        const baseSha = await c.repo.ops.refSha(`refs/heads/${base}`)
        if (baseSha === null) return error(404, "Base does not exist")
        const headSha =
          (await c.repo.ops.refSha(`refs/heads/${head}`)) ??
          (/^[0-9a-f]{40}$/.test(head) ? await c.repo.ops.commitOf(head) : null)
        if (headSha === null) return error(404, "Head does not exist")
        if (await c.repo.ops.isAncestor(headSha, baseSha)) return { status: 204 }
        const merged = await c.repo.ops.mergeTree(baseSha, headSha)
        if (!merged.clean) return error(409, "Merge conflict")
        const ident = { name: c.actor.login, email: emailOf(c.actor), date: now() }
        const message = str(c.body.commit_message) ?? `Merge ${head} into ${base}`
        const sha = await c.repo.ops.commitTree(merged.tree, [baseSha, headSha], message, ident, {
          name: "GitHub",
          email: "noreply@github.sim",
          date: ident.date
        })
        const refused = await this.protectionRefuses(c.repo, base, baseSha, sha)
        if (refused) return error(409, refused)
        if (!(await this.moveBranch(c.repo, base, sha, baseSha, c.actor))) return error(409, "Base branch was modified")
        return { status: 201, body: commitShape(u(), c.repo.info, await this.commit(c.repo, sha)) }
      })
    )
    this.route("GET", `${R}/compare/{basehead}`, "repo", async (c) => {
      const m = /^(.+?)\.\.\.?(.+)$/.exec(c.params.basehead!)
      if (!m) return notFound()
      const baseSha = await c.repo.ops.commitOf(m[1]!)
      const headSha = await c.repo.ops.commitOf(m[2]!)
      if (baseSha === null || headSha === null) return notFound()
      const mergeBase = await c.repo.ops.mergeBase(baseSha, headSha)
      if (mergeBase === null) return notFound()
      const ahead = await c.repo.ops.count(baseSha, headSha)
      const behind = await c.repo.ops.count(headSha, baseSha)
      const status =
        ahead === 0 && behind === 0 ? "identical" : behind === 0 ? "ahead" : ahead === 0 ? "behind" : "diverged"
      const { perPage, page } = this.paging(c, 250)
      const shas = (await c.repo.ops.commitsBetween(baseSha, headSha, 10_000)).slice(
        (page - 1) * perPage,
        page * perPage
      )
      const commits: CommitInfo[] = []
      for (const s of shas) commits.push(await this.commit(c.repo, s))
      return {
        status: 200,
        body: comparisonShape(
          u(),
          c.repo.info,
          c.params.basehead!,
          await this.commit(c.repo, baseSha),
          await this.commit(c.repo, mergeBase),
          status,
          ahead,
          behind,
          commits
        )
      }
    })
    this.route("GET", `${R}/contents/{path}`, "repo", async (c) => {
      const refParam = c.query.get("ref") ?? c.repo.info.defaultBranch
      const sha = await c.repo.ops.commitOf(refParam)
      if (sha === null) return error(404, `No commit found for the ref ${refParam}`)
      const path = c.params.path!.replace(/^\/+|\/+$/g, "")
      const entry = await c.repo.ops.entry(sha, path)
      if (entry === null) return notFound()
      if (entry.type === "blob")
        return { status: 200, body: contentFileShape(u(), c.repo.info, path, refParam, entry.sha, entry.content) }
      const list = entry.entries
        .filter((e) => e.type === "blob" || e.type === "tree")
        .map((e) =>
          contentEntryShape(
            u(),
            c.repo.info,
            path === "" ? e.name : `${path}/${e.name}`,
            refParam,
            e.sha,
            e.type === "tree" ? "dir" : "file",
            e.size
          )
        )
      return { status: 200, body: list }
    })

    // Statuses and checks
    this.route("POST", `${R}/statuses/{sha}`, "repo", async (c) => {
      const sha = await c.repo.ops.commitOf(c.params.sha!)
      if (sha === null || !sha.startsWith(c.params.sha!)) return error(422, `No commit found for SHA: ${c.params.sha}`)
      const state = str(c.body.state)
      if (state !== "error" && state !== "failure" && state !== "pending" && state !== "success")
        return validationFailed("Status", "state", "custom", "State is not included in the list")
      const s = await this.addStatus(
        c.repo,
        sha,
        str(c.body.context) ?? "default",
        state,
        c.actor,
        str(c.body.description) ?? null,
        str(c.body.target_url) ?? null
      )
      return {
        status: 201,
        body: statusShape(u(), c.repo.info, s),
        headers: { location: `${u().api}/repos/${this.fullName(c.repo)}/statuses/${sha}` }
      }
    })
    this.route("GET", `${R}/commits/{ref}/status`, "repo", async (c) => {
      const sha = await c.repo.ops.commitOf(c.params.ref!)
      if (sha === null) return error(404, `No commit found for SHA: ${c.params.ref}`)
      const latest = this.latestStatuses(c.repo, sha)
      const state = latest.some((s) => s.state === "failure" || s.state === "error")
        ? "failure"
        : latest.length === 0 || latest.some((s) => s.state === "pending")
          ? "pending"
          : "success"
      const { perPage, page } = this.paging(c, 100)
      return {
        status: 200,
        body: combinedStatusShape(u(), c.repo.info, sha, state, latest.slice((page - 1) * perPage, page * perPage))
      }
    })
    this.route("GET", `${R}/commits/{ref}/check-runs`, "repo", async (c) => {
      const sha = await c.repo.ops.commitOf(c.params.ref!)
      if (sha === null) return error(404, `No commit found for SHA: ${c.params.ref}`)
      const name = c.query.get("check_name")
      const status = c.query.get("status")
      const filter = c.query.get("filter") ?? "latest"
      let runs = c.repo.checkRuns.filter(
        (r) => r.sha === sha && (name === null || r.name === name) && (status === null || r.status === status)
      )
      if (filter === "latest") {
        const latest = new Map<string, CheckRunView>()
        for (const r of runs) latest.set(`${r.app.id}:${r.name}`, r)
        runs = [...latest.values()]
      }
      runs.sort((a, b) => b.id - a.id)
      const pulls = await this.pullsFor(c.repo, sha)
      const { perPage, page } = this.paging(c)
      return {
        status: 200,
        body: {
          total_count: runs.length,
          check_runs: runs
            .slice((page - 1) * perPage, page * perPage)
            .map((r) => checkRunShape(u(), c.repo.info, r, pulls))
        },
        headers: this.linkHeader(c, runs.length, perPage, page)
      }
    })
    this.route("GET", `${R}/branches/{branch}/protection/required_status_checks`, "repo", async (c) => {
      const branch = c.params.branch!
      if ((await c.repo.ops.refSha(`refs/heads/${branch}`)) === null) return error(404, "Branch not found")
      const p = c.repo.protection.get(branch)
      if (!p) return error(404, "Branch not protected")
      const url = `${u().api}/repos/${this.fullName(c.repo)}/branches/${encodeURIComponent(branch)}/protection/required_status_checks`
      return {
        status: 200,
        body: {
          url,
          strict: p.strict,
          contexts: p.contexts,
          contexts_url: `${url}/contexts`,
          checks: p.contexts.map((context) => ({ context, app_id: null }))
        }
      }
    })

    // Comments, reactions, permissions
    this.route("POST", `${R}/issues/{issue_number}/comments`, "repo", async (c) => {
      const n = Number(c.params.issue_number)
      const p = c.repo.pulls.get(n)
      if (!p) return notFound()
      const body = str(c.body.body)
      if (body === undefined || body === "") return validationFailed("IssueComment", "body", "missing_field")
      const comment = await this.addComment(c.repo, p, c.actor, body, c.principal.kind === "installation")
      return {
        status: 201,
        body: issueCommentShape(u(), c.repo.info, comment),
        headers: { location: issueCommentShape(u(), c.repo.info, comment).url as string }
      }
    })
    this.route("PATCH", `${R}/issues/comments/{comment_id}`, "repo", async (c) => {
      const comment = c.repo.comments.find((x) => x.id === Number(c.params.comment_id))
      if (!comment) return notFound()
      const body = str(c.body.body)
      if (body === undefined) return validationFailed("IssueComment", "body", "missing_field")
      if (comment.user.login !== c.actor.login) return error(403, "Resource not accessible by integration")
      const from = comment.body
      comment.body = body
      comment.updatedAt = now()
      const p = c.repo.pulls.get(comment.issueNumber)
      if (p) await this.emitComment(c.repo, p, comment, "edited", c.actor, { changes: { body: { from } } })
      return { status: 200, body: issueCommentShape(u(), c.repo.info, comment) }
    })
    this.route("POST", `${R}/issues/comments/{comment_id}/reactions`, "repo", async (c) => {
      const comment = c.repo.comments.find((x) => x.id === Number(c.params.comment_id))
      if (!comment) return notFound()
      const content = str(c.body.content) ?? ""
      if (!["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"].includes(content))
        return validationFailed("Reaction", "content", "invalid")
      const existing = comment.reactions.find((r) => r.user.login === c.actor.login && r.content === content)
      const reaction = existing ?? { id: this.id(), user: c.actor, content, createdAt: now() }
      if (!existing) comment.reactions.push(reaction)
      return {
        status: existing ? 200 : 201,
        body: {
          id: reaction.id,
          node_id: Buffer.from(`Reaction:${reaction.id}`).toString("base64"),
          user: userShape(u(), reaction.user),
          content: reaction.content,
          created_at: reaction.createdAt
        }
      }
    })
    this.route("GET", `${R}/collaborators/{username}/permission`, "repo", async (c) => {
      const user = this.users.get(c.params.username!.toLowerCase())
      if (!user || user.type === "Organization") return error(404, `${c.params.username} is not a user`)
      const level = this.permissionOf(c.repo, user)
      const permission = level === "maintain" ? "write" : level === "triage" ? "read" : level
      return {
        status: 200,
        body: {
          permission,
          role_name: level,
          user: { ...userShape(u(), user), role_name: level, permissions: this.permissionFlags(level) }
        }
      }
    })
  }

  private permissionOf(repo: Repo, user: SimUser): PermissionLevel {
    if (user.login.toLowerCase() === repo.info.owner.login.toLowerCase()) return "admin"
    return (
      repo.permissions.get(user.login.toLowerCase()) ?? this.globalPermissions.get(user.login.toLowerCase()) ?? "none"
    )
  }

  private permissionFlags(level: PermissionLevel): JsonObject {
    const rank = PERMISSION_RANK[level]
    return { admin: rank >= 5, maintain: rank >= 4, push: rank >= 3, triage: rank >= 2, pull: rank >= 1 }
  }

  private paging(c: Ctx, max = 100): { perPage: number; page: number } {
    const perPage = Math.min(max, Math.max(1, Number(c.query.get("per_page") ?? 30) || 30))
    const page = Math.max(1, Number(c.query.get("page") ?? 1) || 1)
    return { perPage, page }
  }

  private linkHeader(c: Ctx, total: number, perPage: number, page: number): Record<string, string> {
    const last = Math.max(1, Math.ceil(total / perPage))
    const link = (p: number, rel: string) => {
      const url = new URL(c.url.toString())
      url.searchParams.set("page", String(p))
      url.searchParams.set("per_page", String(perPage))
      return `<${url.toString()}>; rel="${rel}"`
    }
    const parts: string[] = []
    if (page > 1) parts.push(link(page - 1, "prev"), link(1, "first"))
    if (page < last) parts.push(link(page + 1, "next"), link(last, "last"))
    return parts.length === 0 ? {} : { link: parts.join(", ") }
  }

  private page(c: Ctx, all: JsonObject[]): Answer {
    const { perPage, page } = this.paging(c)
    return {
      status: 200,
      body: all.slice((page - 1) * perPage, page * perPage),
      headers: this.linkHeader(c, all.length, perPage, page)
    }
  }

  private newPull(
    repo: Repo,
    f: {
      title: string
      body: string | null
      user: SimUser
      headRef: string
      headSha: string
      baseRef: string
      draft: boolean
    }
  ): Pull {
    const created = now()
    const p: Pull = {
      number: repo.nextNumber++,
      id: this.id(),
      ...f,
      state: "open",
      merged: false,
      mergedAt: null,
      mergedBy: null,
      mergeCommitSha: null,
      createdAt: created,
      updatedAt: created,
      closedAt: null,
      mergeKey: null,
      mergeClean: false,
      servedKey: null
    }
    repo.pulls.set(p.number, p)
    return p
  }

  private async mergePull(c: Ctx): Promise<Answer> {
    const repo = c.repo
    const p = repo.pulls.get(Number(c.params.pull_number))
    if (!p) return notFound()
    if (p.merged) return error(405, "Pull Request is not mergeable")
    if (p.state !== "open") return error(405, "Pull Request is not mergeable")
    if (p.draft) return error(405, "Pull Request is still a draft")
    const sha = str(c.body.sha)
    if (sha !== undefined && sha !== p.headSha)
      return error(409, "Head branch was modified. Review and try the merge again.")
    const method = (str(c.body.merge_method) ?? "merge") as "merge" | "squash" | "rebase"
    if (!repo.mergeMethods[method]) {
      const names = { merge: "Merge commits", squash: "Squash merges", rebase: "Rebase merges" }
      return error(405, `${names[method]} are not allowed on this repository.`)
    }
    const baseSha = await repo.ops.refSha(`refs/heads/${p.baseRef}`)
    if (baseSha === null) return error(405, "Base branch does not exist")
    const protection = repo.protection.get(p.baseRef)
    if (protection) {
      const missing = this.missingChecks(repo, p.headSha, protection.contexts)
      if (missing.length > 0) return error(405, `Required status check "${missing[0]}" is expected.`)
      if (protection.strict && !(await repo.ops.isAncestor(baseSha, p.headSha)))
        return error(405, "Head branch is not up to date with the base branch.")
    }
    const stamp = now()
    const bot = { name: c.actor.login, email: emailOf(c.actor), date: stamp }
    const github = { name: "GitHub", email: "noreply@github.sim", date: stamp }
    const authorOfPr = { name: p.user.login, email: emailOf(p.user), date: stamp }
    let result: string
    if (method === "rebase") {
      let current = baseSha
      for (const s of await repo.ops.commitsBetween(baseSha, p.headSha, 10_000)) {
        const info = await this.commit(repo, s)
        if (info.parents.length !== 1) return error(405, "This branch can't be rebased")
        const picked = await repo.ops.mergeTree(current, s, info.parents[0])
        if (!picked.clean) return error(405, "This branch can't be rebased")
        current = await repo.ops.commitTree(
          picked.tree,
          [current],
          info.message,
          { name: info.authorName, email: info.authorEmail, date: info.authorDate },
          github
        )
      }
      result = current
    } else {
      const merged = await repo.ops.mergeTree(baseSha, p.headSha)
      if (!merged.clean) return error(405, "Pull Request is not mergeable")
      if (method === "merge") {
        const title =
          str(c.body.commit_title) ?? `Merge pull request #${p.number} from ${this.fullName(repo)}/${p.headRef}`
        const message = `${title}\n\n${str(c.body.commit_message) ?? p.title}`
        result = await repo.ops.commitTree(merged.tree, [baseSha, p.headSha], message, bot, github)
      } else {
        const title = str(c.body.commit_title) ?? `${p.title} (#${p.number})`
        const extra = str(c.body.commit_message)
        result = await repo.ops.commitTree(
          merged.tree,
          [baseSha],
          extra ? `${title}\n\n${extra}` : title,
          authorOfPr,
          github
        )
      }
    }
    // the PR is merged by this request, whatever the ancestry says
    const wasOpen = p.state === "open"
    this.closePull(p)
    p.merged = true
    p.mergedAt = p.closedAt
    p.mergedBy = c.actor
    p.mergeCommitSha = result
    if (!(await this.moveBranch(repo, p.baseRef, result, baseSha, c.actor))) {
      p.state = wasOpen ? "open" : p.state
      p.merged = false
      p.mergedAt = null
      p.mergedBy = null
      p.mergeCommitSha = null
      p.closedAt = null
      return error(409, "Base branch was modified. Review and try the merge again.")
    }
    await this.emitPull(repo, p, "closed", c.actor)
    return { status: 200, body: { sha: result, merged: true, message: "Pull Request successfully merged" } }
  }

  private async addStatus(
    repo: Repo,
    sha: string,
    context: string,
    state: StatusState,
    creator: SimUser,
    description: string | null,
    targetUrl: string | null
  ): Promise<StatusView> {
    const s: StatusView = { id: this.id(), sha, state, context, description, targetUrl, creator, createdAt: now() }
    repo.statuses.push(s)
    const c = await this.commit(repo, sha)
    const branches: JsonObject[] = []
    for (const r of await repo.ops.refs("refs/heads/")) {
      if (r.sha === sha) {
        branches.push({
          name: r.ref.slice("refs/heads/".length),
          commit: { sha, url: `${this.urls.api}/repos/${this.fullName(repo)}/commits/${sha}` },
          protected: repo.protection.has(r.ref.slice("refs/heads/".length))
        })
      }
    }
    this.emit("status", {
      id: s.id,
      sha,
      name: this.fullName(repo),
      target_url: targetUrl,
      avatar_url: `${this.urls.web}/avatars/${creator.id}`,
      context,
      description,
      state,
      commit: statusCommitShape(this.urls, repo.info, c),
      branches,
      created_at: s.createdAt,
      updated_at: s.createdAt,
      ...this.repoPayload(repo, creator)
    })
    return s
  }

  private async addComment(repo: Repo, p: Pull, user: SimUser, body: string, viaApp: boolean): Promise<CommentView> {
    const created = now()
    const comment: CommentView = {
      id: this.id(),
      issueNumber: p.number,
      user,
      body,
      createdAt: created,
      updatedAt: created,
      viaApp: viaApp ? this.app : null,
      reactions: []
    }
    repo.comments.push(comment)
    await this.emitComment(repo, p, comment, "created", user)
    return comment
  }

  private async emitComment(
    repo: Repo,
    p: Pull,
    comment: CommentView,
    action: string,
    sender: SimUser,
    extra: JsonObject = {}
  ) {
    const view = await this.pullView(repo, p, false)
    this.emit("issue_comment", {
      action,
      issue: issueOfPullShape(this.urls, repo.info, view),
      comment: issueCommentShape(this.urls, repo.info, comment),
      ...extra,
      ...this.repoPayload(repo, sender)
    })
  }

  private async checkRunEvent(repo: Repo, run: CheckRunView, action: string) {
    const pulls = await this.pullsFor(repo, run.sha)
    const suite = repo.suites.get(`${run.sha}:${run.app.id}`)!
    const head = await this.commit(repo, run.sha)
    const shape = checkRunShape(this.urls, repo.info, run, pulls)
    shape.check_suite = checkSuiteShape(this.urls, repo.info, suite, head, pulls)
    this.emit("check_run", { action, check_run: shape, ...this.repoPayload(repo, this.ciUser) })
  }

  private suiteFor(repo: Repo, sha: string, branch: string | null): Suite {
    const key = `${sha}:${this.ciApp.id}`
    let suite = repo.suites.get(key)
    if (!suite) {
      const created = now()
      suite = {
        id: this.id(),
        sha,
        headBranch: branch,
        status: "queued",
        conclusion: null,
        app: this.ciApp,
        createdAt: created,
        updatedAt: created,
        runs: 0
      }
      repo.suites.set(key, suite)
    }
    return suite
  }

  private async branchOf(repo: Repo, sha: string): Promise<string | null> {
    for (const r of await repo.ops.refs("refs/heads/")) if (r.sha === sha) return r.ref.slice("refs/heads/".length)
    return null
  }

  // -------------------------------------------------------------------------------------------------------------
  // The test-facing API

  api(): GitHubSim {
    const botLogin = this.bot.login
    /** waits for the webhooks queued so far (outside any repository lock: the service may call back meanwhile) */
    const settle = async <A>(value?: A): Promise<A> => {
      await this.settledChain()
      return value as A
    }
    const privateKeyPem = this.keys.privateKey.export({ type: "pkcs1", format: "pem" }).toString()
    const privateKeyPkcs8Pem = this.keys.privateKey.export({ type: "pkcs8", format: "pem" }).toString()
    const commitSpecs = (
      n: number,
      files?: FileChanges,
      commits?: ReadonlyArray<CommitSpec>,
      title?: string
    ): ReadonlyArray<CommitSpec> =>
      commits ?? [{ files: files ?? { [`pr-${n}.txt`]: `${n}\n` }, ...(title === undefined ? {} : { message: title }) }]
    const build = (
      repo: Repo,
      base: string,
      specs: ReadonlyArray<CommitSpec>,
      author: SimUser,
      lastMessage?: string
    ): string => {
      let sha = base
      specs.forEach((spec, i) => {
        const last = i === specs.length - 1
        sha = repo.test.commit(sha, {
          files: spec.files ?? {},
          message: spec.message ?? (last && lastMessage !== undefined ? lastMessage : `commit ${i + 1}`),
          author: spec.author ?? { name: author.login, email: emailOf(author) }
        })
      })
      return sha
    }

    /** The synchronous core of the test API: state and refs change now; `announced` resolves once the webhooks are
     * queued (in order). */
    const openNow = (input: OpenPullRequestInput) => {
      const repo = this.repoOf(input)
      const user = this.user(input.user)
      const base = input.base ?? repo.info.defaultBranch
      const baseSha = repo.test.branchSha(base)
      if (baseSha === null) throw new Error(`no branch ${base}`)
      const number = repo.nextNumber
      const head = input.head ?? `${input.user}/pr-${number}`
      const specs = commitSpecs(number, input.files, input.commits, input.title)
      const sha = build(repo, baseSha, specs, user, input.title)
      const moved = this.moveBranchNow(repo, head, sha, user)
      const p = this.newPull(repo, {
        title: input.title,
        body: input.body ?? null,
        user,
        headRef: head,
        headSha: sha,
        baseRef: base,
        draft: input.draft ?? false
      })
      repo.test.git("update-ref", `refs/pull/${p.number}/head`, sha)
      const announced = moved.then(() => this.emitPull(repo, p, "opened", user))
      return { result: { owner: input.owner, name: input.name, number: p.number, headSha: sha, head }, announced }
    }
    const pushPrNow = (key: SimPrKey, change: PushToPullRequestChange = {}) => {
      const { repo, pull } = this.pullOf(key)
      const force = change.force === true
      const start = force ? (repo.test.branchSha(pull.baseRef) ?? pull.headSha) : pull.headSha
      const specs = change.commits ?? [
        {
          files: change.files ?? { [`pr-${pull.number}.txt`]: `${pull.number} v${Date.now()}\n` },
          message: change.message ?? pull.title
        }
      ]
      const sha = build(repo, start, specs, pull.user, change.message ?? pull.title)
      const announced = this.moveBranchNow(repo, pull.headRef, sha, pull.user)
      return { result: sha, announced }
    }
    const pushBranchNow = (key: SimRepoKey, branch: string, files: FileChanges, opts: PushOptions = {}) => {
      const repo = this.repoOf(key)
      const user = this.user(opts.user ?? `${key.owner}-admin`)
      const before = repo.test.branchSha(branch)
      const sha = repo.test.commit(before, {
        files,
        message: opts.message ?? "Outside change",
        author: { name: user.login, email: emailOf(user) }
      })
      const announced = this.moveBranchNow(repo, branch, sha, user)
      return { result: sha, announced }
    }
    const closeNow = async (key: SimPrKey, login?: string) => {
      const { repo, pull } = this.pullOf(key)
      if (pull.state !== "open") return
      this.closePull(pull)
      await this.emitPull(repo, pull, "closed", this.user(login ?? pull.user.login))
    }

    return {
      url: this.urls.api,
      appId: this.app.id,
      appSlug: this.app.slug,
      botLogin,
      privateKeyPem,
      privateKeyPkcs8Pem,
      webhookSecret: this.options.webhookSecret,
      setWebhookUrl: (url) => {
        this.webhookUrl = url
      },
      createRepo: async (owner, name, files) => {
        const key = `${owner}/${name}`.toLowerCase()
        if (this.repos.has(key)) throw new Error(`repository ${owner}/${name} exists`)
        const test = createTestRepo({
          root: this.root,
          repo: { host: "github.sim", owner, name },
          ...(files === undefined ? {} : { files })
        })
        const created = now()
        const repo: Repo = {
          info: {
            id: this.id(),
            owner: this.user(owner, "Organization"),
            name,
            defaultBranch: "main",
            createdAt: created,
            pushedAt: created
          },
          test,
          ops: new GitOps(test.gitDir),
          pulls: new Map(),
          nextNumber: 1,
          statuses: [],
          checkRuns: [],
          suites: new Map(),
          protection: new Map(),
          comments: [],
          permissions: new Map(),
          mergeMethods: { merge: true, squash: true, rebase: true },
          lock: Promise.resolve()
        }
        this.repos.set(key, repo)
        return { owner, name, initialSha: test.branchSha("main")! }
      },
      installApp: async (owner, names) => {
        const account = this.user(owner, "Organization")
        const repos = names.map((n) => this.repoOf({ owner, name: n }))
        let inst = [...this.installations.values()].find(
          (i) => i.active && i.view.account.login.toLowerCase() === owner.toLowerCase()
        )
        const sender = this.user(`${owner}-admin`)
        if (inst === undefined) {
          const view: InstallationView = {
            id: this.id(),
            app: this.app,
            account,
            selection: "selected",
            createdAt: now()
          }
          inst = { view, repos: new Set(repos.map((r) => this.fullName(r).toLowerCase())), active: true }
          this.installations.set(view.id, inst)
          this.emit("installation", {
            action: "created",
            installation: installationShape(this.urls, view),
            repositories: repos.map((r) => repositoryBriefShape(r.info)),
            requester: null,
            sender: userShape(this.urls, sender)
          })
          return settle(view.id)
        }
        const added = repos.filter((r) => !inst.repos.has(this.fullName(r).toLowerCase()))
        for (const r of added) inst.repos.add(this.fullName(r).toLowerCase())
        if (added.length > 0) {
          this.emit("installation_repositories", {
            action: "added",
            installation: installationShape(this.urls, inst.view),
            repository_selection: inst.view.selection,
            repositories_added: added.map((r) => repositoryBriefShape(r.info)),
            repositories_removed: [],
            requester: null,
            sender: userShape(this.urls, sender)
          })
        }
        return settle(inst.view.id)
      },
      removeFromInstallation: async (owner, names) => {
        const inst = [...this.installations.values()].find(
          (i) => i.active && i.view.account.login.toLowerCase() === owner.toLowerCase()
        )
        if (!inst) throw new Error(`the App is not installed on ${owner}`)
        const removed = names
          .map((n) => this.repoOf({ owner, name: n }))
          .filter((r) => inst.repos.delete(this.fullName(r).toLowerCase()))
        this.emit("installation_repositories", {
          action: "removed",
          installation: installationShape(this.urls, inst.view),
          repository_selection: inst.view.selection,
          repositories_added: [],
          repositories_removed: removed.map((r) => repositoryBriefShape(r.info)),
          requester: null,
          sender: userShape(this.urls, this.user(`${owner}-admin`))
        })
        await settle()
      },
      uninstallApp: async (owner) => {
        const inst = [...this.installations.values()].find(
          (i) => i.active && i.view.account.login.toLowerCase() === owner.toLowerCase()
        )
        if (!inst) throw new Error(`the App is not installed on ${owner}`)
        inst.active = false
        this.emit("installation", {
          action: "deleted",
          installation: installationShape(this.urls, inst.view),
          repositories: [...this.repos.values()]
            .filter((r) => inst.repos.has(this.fullName(r).toLowerCase()))
            .map((r) => repositoryBriefShape(r.info)),
          requester: null,
          sender: userShape(this.urls, this.user(`${owner}-admin`))
        })
        await settle()
      },
      createPersonalToken: (login) => {
        const token: Token = {
          token: `ghp_${crypto.randomBytes(18).toString("hex")}`,
          installationId: null,
          user: this.user(login),
          expiresAt: Number.MAX_SAFE_INTEGER,
          repos: null
        }
        this.tokens.set(token.token, token)
        return token.token
      },
      expireTokens: () => {
        for (const t of this.tokens.values()) if (t.installationId !== null) t.expiresAt = Date.now() - 1
      },
      openPullRequestNow: (input) => openNow(input).result,
      openPullRequest: async (input) => {
        const { result, announced } = openNow(input)
        await announced
        return settle(result)
      },
      pushToPullRequestNow: (key, change) => pushPrNow(key, change).result,
      pushToPullRequest: async (key, change) => {
        const { result, announced } = pushPrNow(key, change)
        await announced
        return settle(result)
      },
      pushToBranchNow: (key, branch, files, opts) => pushBranchNow(key, branch, files, opts).result,
      moveBranchNow: (key, branch, sha, opts = {}) => {
        void this.moveBranchNow(this.repoOf(key), branch, sha, this.user(opts.user ?? `${key.owner}-admin`))
      },
      pushToBranch: async (key, branch, files, opts) => {
        const { result, announced } = pushBranchNow(key, branch, files, opts)
        await announced
        return settle(result)
      },
      closePullRequestNow: (key, login) => {
        void closeNow(key, login)
      },
      closePullRequest: async (key, login) => {
        await closeNow(key, login)
        await settle()
      },
      reopenPullRequest: async (key, login) => {
        const { repo, pull } = this.pullOf(key)
        if (pull.state !== "closed" || pull.merged) return
        pull.state = "open"
        pull.closedAt = null
        pull.updatedAt = now()
        await this.emitPull(repo, pull, "reopened", this.user(login ?? pull.user.login))
        await settle()
      },
      convertToDraft: async (key) => {
        const { repo, pull } = this.pullOf(key)
        pull.draft = true
        pull.updatedAt = now()
        await this.emitPull(repo, pull, "converted_to_draft", pull.user)
        await settle()
      },
      markReadyForReview: async (key) => {
        const { repo, pull } = this.pullOf(key)
        pull.draft = false
        pull.updatedAt = now()
        await this.emitPull(repo, pull, "ready_for_review", pull.user)
        await settle()
      },
      changeBase: async (key, base) => {
        const { repo, pull } = this.pullOf(key)
        const from = await repo.ops.refSha(`refs/heads/${pull.baseRef}`)
        if ((await repo.ops.refSha(`refs/heads/${base}`)) === null) throw new Error(`no branch ${base}`)
        const old = pull.baseRef
        pull.baseRef = base
        pull.updatedAt = now()
        await this.emitPull(repo, pull, "edited", pull.user, {
          changes: { base: { ref: { from: old }, sha: { from: from ?? ZERO } } }
        })
        await settle()
      },
      comment: async (login, key, body) => {
        const { repo, pull } = this.pullOf(key)
        const c = await this.addComment(repo, pull, this.user(login), body, false)
        await settle()
        return c.id
      },
      setPermission: (login, level, key) => {
        this.user(login)
        if (key === undefined) this.globalPermissions.set(login.toLowerCase(), level)
        else this.repoOf(key).permissions.set(login.toLowerCase(), level)
      },
      postStatus: async (sha, context, state, opts = {}) => {
        const repo = opts.repo ? this.repoOf(opts.repo) : await this.findRepoBySha(sha)
        await this.addStatus(repo, sha, context, state, this.ciUser, opts.description ?? null, opts.targetUrl ?? null)
        await settle()
      },
      startCheckRun: async (sha, name, opts = {}) => {
        const repo = opts.repo ? this.repoOf(opts.repo) : await this.findRepoBySha(sha)
        const suite = this.suiteFor(repo, sha, await this.branchOf(repo, sha))
        suite.status = "in_progress"
        suite.runs++
        const run: CheckRunView = {
          id: this.id(),
          suiteId: suite.id,
          sha,
          name,
          status: "in_progress",
          conclusion: null,
          startedAt: now(),
          completedAt: null,
          app: this.ciApp,
          headBranch: suite.headBranch
        }
        repo.checkRuns.push(run)
        await this.checkRunEvent(repo, run, "created")
        await settle()
        return run.id
      },
      completeCheckRun: async (sha, name, conclusion, opts = {}) => {
        const repo = opts.repo ? this.repoOf(opts.repo) : await this.findRepoBySha(sha)
        const suite = this.suiteFor(repo, sha, await this.branchOf(repo, sha))
        const index = repo.checkRuns.findIndex(
          (r) => r.sha === sha && r.name === name && r.app.id === this.ciApp.id && r.status !== "completed"
        )
        const stamp = now()
        let run: CheckRunView
        if (index >= 0) {
          run = { ...repo.checkRuns[index]!, status: "completed", conclusion, completedAt: stamp }
          repo.checkRuns[index] = run
        } else {
          suite.runs++
          run = {
            id: this.id(),
            suiteId: suite.id,
            sha,
            name,
            status: "completed",
            conclusion,
            startedAt: stamp,
            completedAt: stamp,
            app: this.ciApp,
            headBranch: suite.headBranch
          }
          repo.checkRuns.push(run)
        }
        const runs = repo.checkRuns.filter((r) => r.suiteId === suite.id)
        const done = runs.every((r) => r.status === "completed")
        suite.updatedAt = stamp
        if (done) {
          suite.status = "completed"
          const order = ["action_required", "cancelled", "timed_out", "failure", "neutral", "skipped", "success"]
          suite.conclusion =
            runs.map((r) => r.conclusion ?? "success").sort((a, b) => order.indexOf(a) - order.indexOf(b))[0] ??
            "success"
        }
        await this.checkRunEvent(repo, run, "completed")
        if (done) {
          const pulls = await this.pullsFor(repo, sha)
          this.emit("check_suite", {
            action: "completed",
            check_suite: checkSuiteShape(this.urls, repo.info, suite, await this.commit(repo, sha), pulls),
            ...this.repoPayload(repo, this.ciUser)
          })
        }
        await settle()
      },
      setRequiredStatusChecks: (key, branch, contexts, opts = {}) => {
        const repo = this.repoOf(key)
        if (contexts === null) repo.protection.delete(branch)
        else repo.protection.set(branch, { contexts: [...contexts], strict: opts.strict ?? false })
      },
      setMergeMethods: (key, methods) => {
        const repo = this.repoOf(key)
        repo.mergeMethods = { ...repo.mergeMethods, ...methods }
      },
      dropNextDeliveries: (n) => {
        this.dropNext += n
      },
      redeliver: async (id) => {
        const d = this.sent.find((x) => x.id === id)
        if (!d) throw new Error(`no delivery ${id}`)
        const outcome = await this.deliver(d.id, d.event, d.body, d.signature)
        this.sent.push({ ...d, outcome })
        return outcome
      },
      secondaryRateLimit: (n, opts = {}) => {
        this.secondary = { remaining: n, status: opts.status ?? 403, retryAfter: opts.retryAfterSeconds ?? 1 }
      },
      setRateLimitRemaining: (remaining) => {
        const reset = Math.floor(Date.now() / 1000) + 3600
        for (const key of [...this.buckets.keys()]) this.buckets.set(key, { remaining, reset })
        for (const t of this.tokens.keys()) {
          for (const scheme of ["token", "Bearer", "bearer"]) this.buckets.set(`${scheme} ${t}`, { remaining, reset })
        }
      },
      settled: () => this.settledChain(),
      deliveries: () => [...this.sent],
      requests: () => [...this.log],
      clearRequests: () => {
        this.log.length = 0
      },
      comments: (key) => {
        const { repo } = this.pullOf(key)
        return repo.comments
          .filter((c) => c.issueNumber === key.number)
          .map((c) => ({
            id: c.id,
            user: c.user.login,
            body: c.body,
            reactions: c.reactions.map((r) => ({ user: r.user.login, content: r.content })),
            createdAt: c.createdAt,
            updatedAt: c.updatedAt
          }))
      },
      pullRequest: (key) => {
        const { pull } = this.pullOf(key)
        const repo = this.repoOf(key)
        return {
          number: pull.number,
          id: pull.id,
          title: pull.title,
          body: pull.body,
          user: pull.user,
          headRef: pull.headRef,
          headSha: pull.headSha,
          baseRef: pull.baseRef,
          baseSha: repo.test.branchSha(pull.baseRef) ?? "",
          draft: pull.draft,
          state: pull.state,
          merged: pull.merged,
          mergedAt: pull.mergedAt,
          mergedBy: pull.mergedBy,
          mergeCommitSha: pull.mergeCommitSha,
          mergeable: pull.mergeKey === null ? null : pull.mergeClean,
          mergeableState: "unknown",
          createdAt: pull.createdAt,
          updatedAt: pull.updatedAt,
          closedAt: pull.closedAt,
          commits: 0,
          comments: repo.comments.filter((c) => c.issueNumber === pull.number).length
        }
      },
      branchSha: (key, branch) => this.repoOf(key).test.branchSha(branch),
      readFile: (key, ref, path) => {
        try {
          return this.repoOf(key).test.git("show", `${ref}:${path}`)
        } catch {
          return null
        }
      },
      git: (key, ...args) => this.repoOf(key).test.git(...args),
      gitDir: (key) => this.repoOf(key).test.gitDir,
      statuses: (key, sha) =>
        this.latestStatuses(this.repoOf(key), sha).map((s) => ({
          context: s.context,
          state: s.state,
          creator: s.creator.login
        })),
      violations: () => [...this.problems],
      stop: async () => {
        await this.settledChain()
        this.server.stop(true)
        for (const r of this.repos.values()) r.test.cleanup()
        removeDir(this.root)
      }
    }
  }

  private async settledChain(): Promise<void> {
    for (;;) {
      const chain = this.deliveryChain
      await chain
      // deliveries queued while waiting (a webhook's handler may have caused more)
      await Bun.sleep(0)
      if (chain === this.deliveryChain) return
    }
  }
}
