/**
 * GitHub's REST and webhook objects as the simulated GitHub answers them: the fields GitHub's OpenAPI description
 * requires (users, repositories, pull requests, refs, commits, statuses, check runs, comments, installations), built
 * from the simulator's state. Every answer and payload built here is validated against the description at run time.
 */
import type { Json } from "./openapi.ts"

export type JsonObject = { [key: string]: Json }

/** A user, bot or organization of the simulated GitHub. */
export interface SimUser {
  readonly login: string
  readonly id: number
  readonly type: "User" | "Bot" | "Organization"
}

export interface RepoInfo {
  readonly id: number
  readonly owner: SimUser
  readonly name: string
  readonly defaultBranch: string
  readonly createdAt: string
  pushedAt: string
}

/** A commit as `git cat-file` tells it. */
export interface CommitInfo {
  readonly sha: string
  readonly tree: string
  readonly parents: ReadonlyArray<string>
  readonly authorName: string
  readonly authorEmail: string
  readonly authorDate: string
  readonly committerName: string
  readonly committerEmail: string
  readonly committerDate: string
  readonly message: string
}

export interface PullView {
  readonly number: number
  readonly id: number
  readonly title: string
  readonly body: string | null
  readonly user: SimUser
  readonly headRef: string
  readonly headSha: string
  readonly baseRef: string
  readonly baseSha: string
  readonly draft: boolean
  readonly state: "open" | "closed"
  readonly merged: boolean
  readonly mergedAt: string | null
  readonly mergedBy: SimUser | null
  readonly mergeCommitSha: string | null
  readonly mergeable: boolean | null
  readonly mergeableState: string
  readonly createdAt: string
  readonly updatedAt: string
  readonly closedAt: string | null
  readonly commits: number
  readonly comments: number
}

/** Where the simulator's URLs point. */
export interface Urls {
  /** The REST API root (no trailing slash). */
  readonly api: string
  /** The "web" root used for html_url fields. */
  readonly web: string
}

const nodeId = (kind: string, id: number | string) => Buffer.from(`${kind}:${id}`).toString("base64")

export const userShape = (u: Urls, user: SimUser): JsonObject => {
  const url = `${u.api}/users/${encodeURIComponent(user.login)}`
  return {
    login: user.login,
    id: user.id,
    node_id: nodeId(user.type, user.id),
    avatar_url: `${u.web}/avatars/${user.id}`,
    gravatar_id: "",
    url,
    html_url: `${u.web}/${encodeURIComponent(user.login)}`,
    followers_url: `${url}/followers`,
    following_url: `${url}/following{/other_user}`,
    gists_url: `${url}/gists{/gist_id}`,
    starred_url: `${url}/starred{/owner}{/repo}`,
    subscriptions_url: `${url}/subscriptions`,
    organizations_url: `${url}/orgs`,
    repos_url: `${url}/repos`,
    events_url: `${url}/events{/privacy}`,
    received_events_url: `${url}/received_events`,
    type: user.type,
    site_admin: false
  }
}

const repoUrls = (u: Urls, r: RepoInfo): JsonObject => {
  const url = `${u.api}/repos/${r.owner.login}/${r.name}`
  const names: ReadonlyArray<[string, string]> = [
    ["archive_url", "/{archive_format}{/ref}"],
    ["assignees_url", "/assignees{/user}"],
    ["blobs_url", "/git/blobs{/sha}"],
    ["branches_url", "/branches{/branch}"],
    ["collaborators_url", "/collaborators{/collaborator}"],
    ["comments_url", "/comments{/number}"],
    ["commits_url", "/commits{/sha}"],
    ["compare_url", "/compare/{base}...{head}"],
    ["contents_url", "/contents/{+path}"],
    ["contributors_url", "/contributors"],
    ["deployments_url", "/deployments"],
    ["downloads_url", "/downloads"],
    ["events_url", "/events"],
    ["forks_url", "/forks"],
    ["git_commits_url", "/git/commits{/sha}"],
    ["git_refs_url", "/git/refs{/sha}"],
    ["git_tags_url", "/git/tags{/sha}"],
    ["hooks_url", "/hooks"],
    ["issue_comment_url", "/issues/comments{/number}"],
    ["issue_events_url", "/issues/events{/number}"],
    ["issues_url", "/issues{/number}"],
    ["keys_url", "/keys{/key_id}"],
    ["labels_url", "/labels{/name}"],
    ["languages_url", "/languages"],
    ["merges_url", "/merges"],
    ["milestones_url", "/milestones{/number}"],
    ["notifications_url", "/notifications{?since,all,participating}"],
    ["pulls_url", "/pulls{/number}"],
    ["releases_url", "/releases{/id}"],
    ["stargazers_url", "/stargazers"],
    ["statuses_url", "/statuses/{sha}"],
    ["subscribers_url", "/subscribers"],
    ["subscription_url", "/subscription"],
    ["tags_url", "/tags"],
    ["teams_url", "/teams"],
    ["trees_url", "/git/trees{/sha}"]
  ]
  const out: JsonObject = { url }
  for (const [k, suffix] of names) out[k] = `${url}${suffix}`
  return out
}

/** The `repository` schema (REST answers, pull request head/base, most webhooks). */
export const repositoryShape = (u: Urls, r: RepoInfo): JsonObject => {
  const web = `${u.web}/${r.owner.login}/${r.name}`
  return {
    id: r.id,
    node_id: nodeId("Repository", r.id),
    name: r.name,
    full_name: `${r.owner.login}/${r.name}`,
    private: true,
    owner: userShape(u, r.owner),
    html_url: web,
    description: null,
    fork: false,
    ...repoUrls(u, r),
    clone_url: `${web}.git`,
    git_url: `${web}.git`,
    ssh_url: `${web}.git`,
    svn_url: web,
    mirror_url: null,
    homepage: null,
    language: null,
    forks: 0,
    forks_count: 0,
    stargazers_count: 0,
    watchers: 0,
    watchers_count: 0,
    size: 1,
    default_branch: r.defaultBranch,
    open_issues: 0,
    open_issues_count: 0,
    is_template: false,
    topics: [],
    has_issues: true,
    has_projects: false,
    has_wiki: false,
    has_pages: false,
    has_downloads: false,
    has_discussions: false,
    archived: false,
    disabled: false,
    visibility: "private",
    license: null,
    pushed_at: r.pushedAt,
    created_at: r.createdAt,
    updated_at: r.pushedAt,
    allow_forking: false,
    web_commit_signoff_required: false
  }
}

/** The repository of a `push` webhook (owner with name/email, timestamps as epoch seconds). */
export const pushRepositoryShape = (u: Urls, r: RepoInfo): JsonObject => {
  const base = repositoryShape(u, r)
  return {
    ...base,
    owner: { ...userShape(u, r.owner), name: r.owner.login, email: null },
    created_at: Math.floor(Date.parse(r.createdAt) / 1000),
    pushed_at: Math.floor(Date.parse(r.pushedAt) / 1000),
    stargazers: 0,
    master_branch: r.defaultBranch
  }
}

/** A repository in installation lists and installation webhooks. */
export const repositoryBriefShape = (r: RepoInfo): JsonObject => ({
  id: r.id,
  node_id: nodeId("Repository", r.id),
  name: r.name,
  full_name: `${r.owner.login}/${r.name}`,
  private: true
})

const prLinks = (u: Urls, r: RepoInfo, n: number, head: string): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  return {
    self: { href: `${api}/pulls/${n}` },
    html: { href: `${web}/pull/${n}` },
    issue: { href: `${api}/issues/${n}` },
    comments: { href: `${api}/issues/${n}/comments` },
    review_comments: { href: `${api}/pulls/${n}/comments` },
    review_comment: { href: `${api}/pulls/comments{/number}` },
    commits: { href: `${api}/pulls/${n}/commits` },
    statuses: { href: `${api}/statuses/${head}` }
  }
}

/** The `pull-request-simple` schema (list answers). */
export const pullRequestSimpleShape = (u: Urls, r: RepoInfo, p: PullView): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  const repo = repositoryShape(u, r)
  const owner = userShape(u, r.owner)
  return {
    url: `${api}/pulls/${p.number}`,
    id: p.id,
    node_id: nodeId("PullRequest", p.id),
    html_url: `${web}/pull/${p.number}`,
    diff_url: `${web}/pull/${p.number}.diff`,
    patch_url: `${web}/pull/${p.number}.patch`,
    issue_url: `${api}/issues/${p.number}`,
    commits_url: `${api}/pulls/${p.number}/commits`,
    review_comments_url: `${api}/pulls/${p.number}/comments`,
    review_comment_url: `${api}/pulls/comments{/number}`,
    comments_url: `${api}/issues/${p.number}/comments`,
    statuses_url: `${api}/statuses/${p.headSha}`,
    number: p.number,
    state: p.state,
    locked: false,
    title: p.title,
    user: userShape(u, p.user),
    body: p.body,
    labels: [],
    milestone: null,
    active_lock_reason: null,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
    closed_at: p.closedAt,
    merged_at: p.mergedAt,
    merge_commit_sha: p.mergeCommitSha,
    assignee: null,
    assignees: [],
    requested_reviewers: [],
    requested_teams: [],
    head: { label: `${r.owner.login}:${p.headRef}`, ref: p.headRef, sha: p.headSha, user: owner, repo },
    base: { label: `${r.owner.login}:${p.baseRef}`, ref: p.baseRef, sha: p.baseSha, user: owner, repo },
    _links: prLinks(u, r, p.number, p.headSha),
    author_association: p.user.login === r.owner.login ? "OWNER" : "COLLABORATOR",
    auto_merge: null,
    draft: p.draft
  }
}

/** The `pull-request` schema (single answers and pull_request webhooks). */
export const pullRequestShape = (u: Urls, r: RepoInfo, p: PullView): JsonObject => ({
  ...pullRequestSimpleShape(u, r, p),
  merged: p.merged,
  mergeable: p.mergeable,
  rebaseable: p.mergeable,
  mergeable_state: p.mergeableState,
  merged_by: p.mergedBy === null ? null : userShape(u, p.mergedBy),
  comments: p.comments,
  review_comments: 0,
  maintainer_can_modify: false,
  commits: p.commits,
  additions: 0,
  deletions: 0,
  changed_files: 0
})

/** The `pull-request-minimal` schema (check runs, check suites). */
export const pullRequestMinimalShape = (u: Urls, r: RepoInfo, p: PullView): JsonObject => {
  const repo = { id: r.id, url: `${u.api}/repos/${r.owner.login}/${r.name}`, name: r.name }
  return {
    id: p.id,
    number: p.number,
    url: `${u.api}/repos/${r.owner.login}/${r.name}/pulls/${p.number}`,
    head: { ref: p.headRef, sha: p.headSha, repo },
    base: { ref: p.baseRef, sha: p.baseSha, repo }
  }
}

export const gitRefShape = (u: Urls, r: RepoInfo, ref: string, sha: string): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  return {
    ref,
    node_id: nodeId("Ref", `${r.id}:${ref}`),
    url: `${api}/git/${ref}`,
    object: { type: "commit", sha, url: `${api}/git/commits/${sha}` }
  }
}

const verification: JsonObject = {
  verified: false,
  reason: "unsigned",
  signature: null,
  payload: null,
  verified_at: null
}

/** The `git-commit` schema (Git data API). */
export const gitCommitShape = (u: Urls, r: RepoInfo, c: CommitInfo): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  return {
    sha: c.sha,
    node_id: nodeId("Commit", c.sha),
    url: `${api}/git/commits/${c.sha}`,
    html_url: `${u.web}/${r.owner.login}/${r.name}/commit/${c.sha}`,
    author: { name: c.authorName, email: c.authorEmail, date: c.authorDate },
    committer: { name: c.committerName, email: c.committerEmail, date: c.committerDate },
    tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
    message: c.message,
    parents: c.parents.map((p) => ({
      sha: p,
      url: `${api}/git/commits/${p}`,
      html_url: `${u.web}/${r.owner.login}/${r.name}/commit/${p}`
    })),
    verification
  }
}

/** The `commit` schema (merges API, compare). */
export const commitShape = (u: Urls, r: RepoInfo, c: CommitInfo): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  return {
    url: `${api}/commits/${c.sha}`,
    sha: c.sha,
    node_id: nodeId("Commit", c.sha),
    html_url: `${web}/commit/${c.sha}`,
    comments_url: `${api}/commits/${c.sha}/comments`,
    commit: {
      url: `${api}/git/commits/${c.sha}`,
      author: { name: c.authorName, email: c.authorEmail, date: c.authorDate },
      committer: { name: c.committerName, email: c.committerEmail, date: c.committerDate },
      message: c.message,
      comment_count: 0,
      tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
      verification
    },
    author: null,
    committer: null,
    parents: c.parents.map((p) => ({ sha: p, url: `${api}/commits/${p}`, html_url: `${web}/commit/${p}` }))
  }
}

export const comparisonShape = (
  u: Urls,
  r: RepoInfo,
  basehead: string,
  base: CommitInfo,
  mergeBase: CommitInfo,
  status: "ahead" | "behind" | "identical" | "diverged",
  aheadBy: number,
  behindBy: number,
  commits: ReadonlyArray<CommitInfo>
): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  return {
    url: `${api}/compare/${basehead}`,
    html_url: `${web}/compare/${basehead}`,
    permalink_url: `${web}/compare/${basehead}`,
    diff_url: `${web}/compare/${basehead}.diff`,
    patch_url: `${web}/compare/${basehead}.patch`,
    base_commit: commitShape(u, r, base),
    merge_base_commit: commitShape(u, r, mergeBase),
    status,
    ahead_by: aheadBy,
    behind_by: behindBy,
    total_commits: aheadBy,
    commits: commits.map((c) => commitShape(u, r, c))
  }
}

export const contentFileShape = (
  u: Urls,
  r: RepoInfo,
  path: string,
  ref: string,
  blob: string,
  content: Buffer
): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  const self = `${api}/contents/${path}?ref=${encodeURIComponent(ref)}`
  const base64 = content.toString("base64").replace(/.{1,60}/g, "$&\n")
  return {
    type: "file",
    encoding: "base64",
    size: content.length,
    name: path.split("/").pop() ?? path,
    path,
    content: base64,
    sha: blob,
    url: self,
    git_url: `${api}/git/blobs/${blob}`,
    html_url: `${web}/blob/${ref}/${path}`,
    download_url: `${u.web}/raw/${r.owner.login}/${r.name}/${ref}/${path}`,
    _links: { self, git: `${api}/git/blobs/${blob}`, html: `${web}/blob/${ref}/${path}` }
  }
}

export const contentEntryShape = (
  u: Urls,
  r: RepoInfo,
  path: string,
  ref: string,
  sha: string,
  type: "file" | "dir",
  size: number
): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  const self = `${api}/contents/${path}?ref=${encodeURIComponent(ref)}`
  const git = `${api}/git/${type === "dir" ? "trees" : "blobs"}/${sha}`
  const html = `${web}/${type === "dir" ? "tree" : "blob"}/${ref}/${path}`
  return {
    type,
    size,
    name: path.split("/").pop() ?? path,
    path,
    sha,
    url: self,
    git_url: git,
    html_url: html,
    download_url: type === "dir" ? null : `${u.web}/raw/${r.owner.login}/${r.name}/${ref}/${path}`,
    _links: { self, git, html }
  }
}

export interface StatusView {
  readonly id: number
  readonly sha: string
  readonly state: "error" | "failure" | "pending" | "success"
  readonly context: string
  readonly description: string | null
  readonly targetUrl: string | null
  readonly creator: SimUser
  readonly createdAt: string
}

export const statusShape = (u: Urls, r: RepoInfo, s: StatusView): JsonObject => ({
  url: `${u.api}/repos/${r.owner.login}/${r.name}/statuses/${s.sha}`,
  avatar_url: `${u.web}/avatars/${s.creator.id}`,
  id: s.id,
  node_id: nodeId("StatusContext", s.id),
  state: s.state,
  description: s.description,
  target_url: s.targetUrl,
  context: s.context,
  created_at: s.createdAt,
  updated_at: s.createdAt,
  creator: userShape(u, s.creator)
})

export const combinedStatusShape = (
  u: Urls,
  r: RepoInfo,
  sha: string,
  state: string,
  statuses: ReadonlyArray<StatusView>
): JsonObject => {
  const repo = repositoryShape(u, r)
  return {
    state,
    sha,
    total_count: statuses.length,
    statuses: statuses.map((s) => {
      const { creator: _creator, ...rest } = statusShape(u, r, s)
      return rest
    }),
    repository: repo,
    commit_url: `${u.api}/repos/${r.owner.login}/${r.name}/commits/${sha}`,
    url: `${u.api}/repos/${r.owner.login}/${r.name}/commits/${sha}/status`
  }
}

export interface AppView {
  readonly id: number
  readonly slug: string
  readonly name: string
  readonly owner: SimUser
  readonly createdAt: string
}

export const appShape = (u: Urls, a: AppView): JsonObject => ({
  id: a.id,
  slug: a.slug,
  node_id: nodeId("App", a.id),
  client_id: `Iv1.sim${a.id}`,
  owner: userShape(u, a.owner),
  name: a.name,
  description: null,
  external_url: `${u.web}/apps/${a.slug}`,
  html_url: `${u.web}/apps/${a.slug}`,
  created_at: a.createdAt,
  updated_at: a.createdAt,
  permissions: {
    checks: "write",
    contents: "write",
    issues: "write",
    metadata: "read",
    pull_requests: "write",
    statuses: "write"
  },
  events: ["check_run", "check_suite", "issue_comment", "pull_request", "push", "status"]
})

export interface CheckRunView {
  readonly id: number
  readonly suiteId: number
  readonly sha: string
  readonly name: string
  readonly status: "queued" | "in_progress" | "completed"
  readonly conclusion:
    | "success"
    | "failure"
    | "neutral"
    | "cancelled"
    | "skipped"
    | "timed_out"
    | "action_required"
    | null
  readonly startedAt: string
  readonly completedAt: string | null
  readonly app: AppView
  readonly headBranch: string | null
}

export const checkRunShape = (u: Urls, r: RepoInfo, c: CheckRunView, pulls: ReadonlyArray<JsonObject>): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  return {
    id: c.id,
    node_id: nodeId("CheckRun", c.id),
    head_sha: c.sha,
    external_id: "",
    url: `${api}/check-runs/${c.id}`,
    html_url: `${u.web}/${r.owner.login}/${r.name}/runs/${c.id}`,
    details_url: `${u.web}/${r.owner.login}/${r.name}/runs/${c.id}`,
    status: c.status,
    conclusion: c.conclusion,
    started_at: c.startedAt,
    completed_at: c.completedAt,
    output: {
      title: null,
      summary: null,
      text: null,
      annotations_count: 0,
      annotations_url: `${api}/check-runs/${c.id}/annotations`
    },
    name: c.name,
    check_suite: { id: c.suiteId },
    app: appShape(u, c.app),
    pull_requests: [...pulls]
  }
}

export interface SuiteView {
  readonly id: number
  readonly sha: string
  readonly headBranch: string | null
  readonly status: "queued" | "in_progress" | "completed"
  readonly conclusion: string | null
  readonly app: AppView
  readonly createdAt: string
  readonly updatedAt: string
  readonly runs: number
}

/** The check suite of check_run and check_suite webhooks. */
export const checkSuiteShape = (
  u: Urls,
  r: RepoInfo,
  s: SuiteView,
  head: CommitInfo,
  pulls: ReadonlyArray<JsonObject>
): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  return {
    id: s.id,
    node_id: nodeId("CheckSuite", s.id),
    head_branch: s.headBranch,
    head_sha: s.sha,
    status: s.status,
    conclusion: s.conclusion,
    url: `${api}/check-suites/${s.id}`,
    before: null,
    after: s.sha,
    pull_requests: [...pulls],
    app: appShape(u, s.app),
    created_at: s.createdAt,
    updated_at: s.updatedAt,
    rerequestable: true,
    runs_rerequestable: true,
    latest_check_runs_count: s.runs,
    check_runs_url: `${api}/check-suites/${s.id}/check-runs`,
    head_commit: {
      id: head.sha,
      tree_id: head.tree,
      message: head.message,
      timestamp: head.committerDate,
      author: { name: head.authorName, email: head.authorEmail },
      committer: { name: head.committerName, email: head.committerEmail }
    }
  }
}

export interface CommentView {
  readonly id: number
  readonly issueNumber: number
  readonly user: SimUser
  body: string
  readonly createdAt: string
  updatedAt: string
  readonly viaApp: AppView | null
  readonly reactions: Array<{
    readonly id: number
    readonly user: SimUser
    readonly content: string
    readonly createdAt: string
  }>
}

const REACTIONS = ["+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket"] as const

export const reactionsShape = (url: string, list: CommentView["reactions"]): JsonObject => {
  const out: JsonObject = { url, total_count: list.length }
  for (const k of REACTIONS) out[k] = list.filter((x) => x.content === k).length
  return out
}

export const issueCommentShape = (u: Urls, r: RepoInfo, c: CommentView): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  return {
    id: c.id,
    node_id: nodeId("IssueComment", c.id),
    url: `${api}/issues/comments/${c.id}`,
    html_url: `${u.web}/${r.owner.login}/${r.name}/pull/${c.issueNumber}#issuecomment-${c.id}`,
    issue_url: `${api}/issues/${c.issueNumber}`,
    body: c.body,
    user: userShape(u, c.user),
    created_at: c.createdAt,
    updated_at: c.updatedAt,
    author_association: c.user.login === r.owner.login ? "OWNER" : c.user.type === "Bot" ? "NONE" : "COLLABORATOR",
    performed_via_github_app: c.viaApp === null ? null : appShape(u, c.viaApp),
    reactions: reactionsShape(`${api}/issues/comments/${c.id}/reactions`, c.reactions)
  }
}

/** The issue of an issue_comment webhook on a pull request. */
export const issueOfPullShape = (u: Urls, r: RepoInfo, p: PullView): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  return {
    url: `${api}/issues/${p.number}`,
    repository_url: api,
    labels_url: `${api}/issues/${p.number}/labels{/name}`,
    comments_url: `${api}/issues/${p.number}/comments`,
    events_url: `${api}/issues/${p.number}/events`,
    html_url: `${web}/pull/${p.number}`,
    id: p.id,
    node_id: nodeId("Issue", p.id),
    number: p.number,
    title: p.title,
    user: userShape(u, p.user),
    labels: [],
    state: p.state,
    locked: false,
    assignee: null,
    assignees: [],
    milestone: null,
    comments: p.comments,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
    closed_at: p.closedAt,
    author_association: p.user.login === r.owner.login ? "OWNER" : "COLLABORATOR",
    active_lock_reason: null,
    draft: p.draft,
    pull_request: {
      url: `${api}/pulls/${p.number}`,
      html_url: `${web}/pull/${p.number}`,
      diff_url: `${web}/pull/${p.number}.diff`,
      patch_url: `${web}/pull/${p.number}.patch`,
      merged_at: p.mergedAt
    },
    body: p.body,
    reactions: reactionsShape(`${api}/issues/${p.number}/reactions`, []),
    timeline_url: `${api}/issues/${p.number}/timeline`,
    performed_via_github_app: null,
    state_reason: null
  }
}

export interface InstallationView {
  readonly id: number
  readonly app: AppView
  readonly account: SimUser
  readonly selection: "all" | "selected"
  readonly createdAt: string
}

export const installationShape = (u: Urls, i: InstallationView): JsonObject => ({
  id: i.id,
  // GET /app/installations describes the account as simple-user AND enterprise (allOf): carry both sets of fields
  account: {
    ...userShape(u, i.account),
    name: i.account.login,
    slug: i.account.login.toLowerCase(),
    created_at: i.createdAt,
    updated_at: i.createdAt
  },
  repository_selection: i.selection,
  access_tokens_url: `${u.api}/app/installations/${i.id}/access_tokens`,
  repositories_url: `${u.api}/installation/repositories`,
  html_url: `${u.web}/settings/installations/${i.id}`,
  app_id: i.app.id,
  app_slug: i.app.slug,
  client_id: `Iv1.sim${i.app.id}`,
  target_id: i.account.id,
  target_type: i.account.type === "Organization" ? "Organization" : "User",
  permissions: {
    checks: "write",
    contents: "write",
    issues: "write",
    metadata: "read",
    pull_requests: "write",
    statuses: "write"
  },
  events: ["check_run", "check_suite", "issue_comment", "pull_request", "push", "status"],
  created_at: i.createdAt,
  updated_at: i.createdAt,
  single_file_name: null,
  has_multiple_single_files: false,
  single_file_paths: [],
  suspended_by: null,
  suspended_at: null
})

/** A commit of a `push` webhook. */
export const pushCommitShape = (u: Urls, r: RepoInfo, c: CommitInfo, distinct: boolean): JsonObject => ({
  id: c.sha,
  tree_id: c.tree,
  distinct,
  message: c.message,
  timestamp: c.committerDate,
  url: `${u.web}/${r.owner.login}/${r.name}/commit/${c.sha}`,
  author: { name: c.authorName, email: c.authorEmail },
  committer: { name: c.committerName, email: c.committerEmail },
  added: [],
  removed: [],
  modified: []
})

/** The commit of a `status` webhook. */
export const statusCommitShape = (u: Urls, r: RepoInfo, c: CommitInfo): JsonObject => {
  const api = `${u.api}/repos/${r.owner.login}/${r.name}`
  const web = `${u.web}/${r.owner.login}/${r.name}`
  return {
    sha: c.sha,
    node_id: nodeId("Commit", c.sha),
    commit: {
      author: { name: c.authorName, email: c.authorEmail, date: c.authorDate },
      committer: { name: c.committerName, email: c.committerEmail, date: c.committerDate },
      message: c.message,
      tree: { sha: c.tree, url: `${api}/git/trees/${c.tree}` },
      url: `${api}/git/commits/${c.sha}`,
      comment_count: 0,
      verification
    },
    url: `${api}/commits/${c.sha}`,
    html_url: `${web}/commit/${c.sha}`,
    comments_url: `${api}/commits/${c.sha}/comments`,
    author: null,
    committer: null,
    parents: c.parents.map((p) => ({ sha: p, url: `${api}/commits/${p}`, html_url: `${web}/commit/${p}` }))
  }
}
