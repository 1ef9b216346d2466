/** Periodic reconciliation with GitHub, so that a missed webhook delays a queue and never stalls it (docs/architecture.md). */
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Layer } from "effect"
import { AppConfig } from "../config.ts"
import { Database } from "../kernel/Database.ts"
import type { RepoRef } from "../queue/GitHost.ts"
import { Statuses, WAKE_CHANNEL } from "../queue/Statuses.ts"
import { type InboxEvent, makeStore, TERMINAL } from "../queue/store.ts"
import { GitHubAuth, GitHubClient, type GitHubClientService, githubConfigured } from "./GitHubClient.ts"
import { makeGitHubHost } from "./GitHubHost.ts"
import type { OpenPull } from "./githubRepo.ts"
import { commitStatusState, ingestStatuses } from "./ingest.ts"

/** The reasons the webhooks use for the same changes (src/github/webhooks.ts). */
export const Reasons = {
  closed: "PR_CLOSED",
  baseChanged: "PR_BASE_BRANCH_CHANGED",
  draft: "PR_CONVERTED_TO_DRAFT"
} as const

interface QueueRow {
  readonly queue_id: string
  readonly branch: string
  readonly direct: boolean
  readonly repo_id: string
  readonly host: string
  readonly owner: string
  readonly name: string
  readonly entries: unknown
  readonly runs: unknown
  readonly target_sha: string | null
  readonly merging: boolean | null
}

interface EntryView {
  readonly prNumber: number
  readonly headSha: string
  readonly state: string
  readonly merging?: boolean
}

interface RunView {
  readonly status: string
  readonly testBranchSha: string | null
}

const parse = <A>(value: unknown): ReadonlyArray<A> => {
  const v = typeof value === "string" ? JSON.parse(value) : value
  return Array.isArray(v) ? (v as ReadonlyArray<A>) : []
}

export interface ReconcileReport {
  readonly queues: number
  /** Inbox events sent (cancellations, heads moved, target moved). */
  readonly events: number
  /** SHAs whose CI results were read. */
  readonly shas: number
  /** Commit statuses recorded (new or changed). */
  readonly statuses: number
  /** Check runs reported. */
  readonly checkRuns: number
  /** Repositories that failed (logged). */
  readonly failures: number
}

/** One pass over every queue of a GitHub repository. */
export const reconcileOnce = (client: GitHubClientService) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const db = yield* Database
    const statuses = yield* Statuses
    const config = yield* AppConfig
    const { enqueueEvent } = makeStore(sql)
    const host = makeGitHubHost(client)
    const rows = yield* sql<QueueRow>`
      select q.id as queue_id, q.branch, coalesce(q.config->>'directMergeMode', 'off') = 'always' as direct,
             r.id as repo_id, r.host, r.owner, r.name, rt.state->'entries' as entries, rt.state->'runs' as runs,
             rt.state->>'targetSha' as target_sha, (rt.state->'merging') is not null and rt.state->'merging' <> 'null'::jsonb as merging
      from queues q join repositories r on r.id = q.repo_id
      left join lateral (select state::jsonb as state from queue_runtime where queue_id = q.id) rt on true
      where lower(r.host) = ${config.githubHost.toLowerCase()}
      order by r.id, q.id`
    const byRepo = new Map<string, Array<QueueRow>>()
    for (const row of rows) {
      const list = byRepo.get(row.repo_id) ?? []
      list.push(row)
      byRepo.set(row.repo_id, list)
    }
    const totals = { queues: rows.length, events: 0, shas: 0, statuses: 0, checkRuns: 0, failures: 0 }

    const reconcileRepo = (queues: ReadonlyArray<QueueRow>) =>
      Effect.gen(function* () {
        const first = queues[0]!
        const repo: RepoRef = { host: first.host, owner: first.owner, name: first.name }
        const auth = GitHubAuth.repository(repo.owner, repo.name)
        const active = new Map<string, ReadonlyArray<EntryView>>()
        for (const q of queues) {
          active.set(
            q.queue_id,
            parse<EntryView>(q.entries).filter((e) => !TERMINAL.has(e.state))
          )
        }
        // pull requests: closed, pushed to, retargeted, drafted
        const open = [...active.values()].some((entries) => entries.length > 0)
          ? new Map<number, OpenPull>((yield* host.listOpenPulls(repo)).map((p) => [p.number, p] as const))
          : new Map<number, OpenPull>()
        for (const q of queues) {
          const events: Array<InboxEvent> = []
          for (const entry of active.get(q.queue_id) ?? []) {
            if (entry.merging === true) continue
            const pull = open.get(entry.prNumber)
            const prNumber = entry.prNumber
            const cancel = (reason: string): InboxEvent => ({
              _tag: "Planner",
              event: { _tag: "Cancelled", prNumber, reason }
            })
            if (pull === undefined) events.push(cancel(Reasons.closed))
            else if (pull.headSha !== entry.headSha) {
              events.push({ _tag: "Planner", event: { _tag: "PrHeadMoved", prNumber, sha: pull.headSha } })
            } else if (pull.baseRef !== q.branch) events.push(cancel(Reasons.baseChanged))
            else if (pull.draft) events.push(cancel(Reasons.draft))
          }
          // the target's tip, unless a merge is under way (the runner reads it then)
          if (q.target_sha !== null && q.merging !== true) {
            const tip = yield* host.getBranchSha(repo, q.branch)
            if (tip !== null && tip !== q.target_sha) events.push({ _tag: "GitChanged" })
          }
          if (events.length > 0) {
            for (const event of events) yield* enqueueEvent(q.queue_id, event)
            yield* db.notify(WAKE_CHANNEL, q.queue_id)
            totals.events += events.length
          }
        }
        // CI results of what the queues wait on
        const shas = new Set<string>()
        for (const q of queues) {
          for (const run of parse<RunView>(q.runs)) {
            if (run.status === "in_progress" && run.testBranchSha !== null) shas.add(run.testBranchSha)
          }
          if (q.direct) {
            for (const entry of active.get(q.queue_id) ?? []) if (entry.state === "pending") shas.add(entry.headSha)
          }
        }
        for (const sha of shas) {
          totals.shas++
          const combined = yield* client.request(
            "GET /repos/{owner}/{repo}/commits/{ref}/status",
            { owner: repo.owner, repo: repo.name, ref: sha, per_page: 100 },
            auth,
            { conditional: true }
          )
          totals.statuses += yield* ingestStatuses(
            first.repo_id,
            sha,
            combined.data.statuses.map((s) => ({
              context: s.context,
              state: commitStatusState(s.state),
              targetUrl: s.target_url ?? null,
              description: s.description ?? null
            }))
          )
          const checks = yield* client.request(
            "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
            { owner: repo.owner, repo: repo.name, ref: sha, per_page: 100 },
            auth,
            { conditional: true }
          )
          for (const run of checks.data.check_runs) {
            yield* statuses.reportCheckRun(first.repo_id, sha, {
              checkRunId: Number(run.id),
              suiteId: run.check_suite?.id ?? null,
              name: run.name,
              status: run.status,
              conclusion: run.conclusion ?? null,
              url: run.details_url ?? run.html_url ?? null
            })
            totals.checkRuns++
          }
        }
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.logWarning(`reconciling ${repoName(queues)} with GitHub failed`, cause),
            Effect.sync(() => {
              totals.failures++
            })
          )
        )
      )

    for (const queues of byRepo.values()) yield* reconcileRepo(queues)
    return totals satisfies ReconcileReport
  })

const repoName = (queues: ReadonlyArray<QueueRow>): string => {
  const q = queues[0]
  return q === undefined ? "" : `${q.host}/${q.owner}/${q.name}`
}

/** Reconciles every GITHUB_RECONCILE_MS while the application runs (nothing when GitHub is not configured). */
export const GitHubReconcileLive: Layer.Layer<
  never,
  never,
  AppConfig | GitHubClient | SqlClient.SqlClient | Statuses | Database
> = Layer.scopedDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const client = yield* GitHubClient
    if (!githubConfigured(config) || client.mode === "none") return
    const period = Duration.millis(Math.max(1000, config.githubReconcileMs))
    const pass = reconcileOnce(client).pipe(
      Effect.tap((r) =>
        r.events + r.statuses + r.checkRuns > 0 ? Effect.logInfo("reconciled with GitHub", r) : Effect.void
      ),
      Effect.catchAllCause((cause) => Effect.logWarning("reconciliation with GitHub failed", cause))
    )
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(period), pass)))
  })
)
