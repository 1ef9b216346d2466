/** Periodic reconciliation with GitHub, so that a missed webhook delays a queue and never stalls it (docs/architecture.md). */
import { Duration, Effect, Layer } from "effect"
import { Engine, type HostChange, type WatchedQueue } from "../queue/Engine.ts"
import type { RepoRef } from "../queue/GitHost.ts"
import { Statuses } from "../queue/Statuses.ts"
import { GitHubAuth, GitHubClient, type GitHubClientService, githubConfigured } from "./GitHubClient.ts"
import { GitHubEnv } from "./GitHubEnv.ts"
import { makeGitHubHost } from "./GitHubHost.ts"
import type { OpenPull } from "./githubRepo.ts"
import { commitStatusState, ingestStatuses } from "./ingest.ts"

/** The reasons the webhooks use for the same changes (src/github/webhookPullRequests.ts). */
export const Reasons = {
  closed: "PR_CLOSED",
  baseChanged: "PR_BASE_BRANCH_CHANGED",
  draft: "PR_CONVERTED_TO_DRAFT"
} as const

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
    const engine = yield* Engine
    const statuses = yield* Statuses
    const config = yield* GitHubEnv
    const host = makeGitHubHost(client)
    const rows = yield* engine.watchedQueues(config.githubHost.toLowerCase())
    const byRepo = new Map<string, Array<WatchedQueue>>()
    for (const row of rows) {
      const list = byRepo.get(row.repo.id) ?? []
      list.push(row)
      byRepo.set(row.repo.id, list)
    }
    const totals = { queues: rows.length, events: 0, shas: 0, statuses: 0, checkRuns: 0, failures: 0 }

    const reconcileRepo = (queues: ReadonlyArray<WatchedQueue>) =>
      Effect.gen(function* () {
        const first = queues[0]!
        const repo: RepoRef = { host: first.repo.host, owner: first.repo.owner, name: first.repo.name }
        const auth = GitHubAuth.repository(repo.owner, repo.name)
        // pull requests: closed, pushed to, retargeted, drafted
        const open = queues.some((q) => q.active.length > 0)
          ? new Map<number, OpenPull>((yield* host.listOpenPulls(repo)).map((p) => [p.number, p] as const))
          : new Map<number, OpenPull>()
        for (const q of queues) {
          const changes: Array<HostChange> = []
          for (const entry of q.active) {
            if (entry.merging) continue
            const pull = open.get(entry.prNumber)
            const prNumber = entry.prNumber
            const cancel = (reason: string): HostChange => ({ _tag: "PrCancelled", prNumber, reason })
            if (pull === undefined) {
              // closed, or merged outside the queue (GitHub's merge button, a push of its head): asked once
              const merged = yield* host.getPullRequest(repo, prNumber).pipe(
                Effect.as(false),
                Effect.catchAll((e) => Effect.succeed(e._tag === "PrMerged"))
              )
              changes.push(merged ? { _tag: "PrMerged", prNumber, sha: entry.headSha } : cancel(Reasons.closed))
            } else if (pull.headSha !== entry.headSha)
              changes.push({ _tag: "PrHeadMoved", prNumber, sha: pull.headSha })
            else if (pull.baseRef !== q.branch) changes.push(cancel(Reasons.baseChanged))
            else if (pull.draft) changes.push(cancel(Reasons.draft))
          }
          // the target's tip, unless a merge is under way (the runner reads it then)
          if (q.targetSha !== null && !q.merging) {
            const tip = yield* host.getBranchSha(repo, q.branch)
            if (tip !== null && tip !== q.targetSha) changes.push({ _tag: "BranchMoved" })
          }
          if (changes.length > 0) {
            const handed = yield* engine.hostChanged(q.queueId, changes)
            yield* engine.wake(q.queueId)
            totals.events += handed
          }
        }
        // CI results of what the queues wait on
        const shas = new Set<string>()
        for (const q of queues) {
          for (const sha of q.testedShas) shas.add(sha)
          if (q.directMerge) for (const entry of q.active) if (entry.state === "pending") shas.add(entry.headSha)
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
            first.repo.id,
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
            yield* statuses.reportCheckRun(first.repo.id, sha, {
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

const repoName = (queues: ReadonlyArray<WatchedQueue>): string => {
  const q = queues[0]
  return q === undefined ? "" : `${q.repo.host}/${q.repo.owner}/${q.repo.name}`
}

/** Reconciles every GITHUB_RECONCILE_MS while the application runs (nothing when GitHub is not configured). */
export const GitHubReconcileLive: Layer.Layer<never, never, GitHubEnv | GitHubClient | Engine | Statuses> =
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const config = yield* GitHubEnv
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
