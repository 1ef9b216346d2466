import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Duration, Effect, type Fiber, FiberMap, Option, Queue } from "effect"
import { AppConfig } from "../config.ts"
import { CommandCi } from "../git-local/CommandCi.ts"
import { PrFeedback } from "../github/feedback.ts"
import { EventLog } from "../kernel/EventLog.ts"
import type { Repository } from "../tenancy/Tenancy.ts"
import { makeRoundEventWriter } from "./events.ts"
import { GitHost, type RepoRef } from "./GitHost.ts"
import {
  activePrNumbers,
  type Command,
  type Comment,
  type Entry,
  joinsSubmissions,
  type Lane,
  type PlannerConfig,
  type PlannerEvent,
  type PrStatusState,
  type QueueState,
  Reasons,
  type RunRecord,
  type SetStatus,
  step,
  stepMany,
  type Transition
} from "./planner/index.ts"
import { QueueRepo } from "./QueueRepo.ts"
import { Statuses } from "./Statuses.ts"
import type { StoredQueueConfig } from "./schemas.ts"
import { type InboxEvent, makeStore } from "./store.ts"
import { hashTargets, sharesTarget } from "./targetSets.ts"
import { readRequiredStatuses } from "./trunkConfig.ts"

/**
 * The runner of one queue: it owns the queue's planner state while its instance holds the lease. Each round it
 * reads the inbox, asks Git what moved, steps the planner through every event, persists the result with the
 * outbox of commands in one transaction, then executes the commands; their results are the next round's events.
 * Commands are idempotent (run ids in branch names, compare-and-swap merges), so a crash between persisting and
 * executing only repeats them.
 */

export const plannerConfig = (c: StoredQueueConfig): PlannerConfig => ({
  state: c.state === "switching_modes" ? (c.previousState ?? "running") : c.state,
  mode: c.mode,
  concurrency: c.concurrency,
  bisectionConcurrency: c.bisectionConcurrency,
  testingTimeoutMinutes: c.testingTimeoutMinutes,
  notReadyTimeoutHours: c.notReadyTimeoutHours,
  pendingFailureDepth: c.pendingFailureDepth,
  canOptimisticallyMerge: c.canOptimisticallyMerge,
  batch: c.batch,
  batchingMaxWaitTimeMinutes: c.batchingMaxWaitTimeMinutes,
  batchingMinSize: c.batchingMinSize,
  directMergeMode: c.directMergeMode,
  optimizationMode: c.optimizationMode,
  mergeMethod: c.mergeMethod
})

export const statusCheckName = (branch: string) => `Trunk Merge Queue (${branch})`

/** The commit status that shows a PR's place in the queue. */
const commitStatusOf = (state: PrStatusState) =>
  state === "merged" ? "success" : state === "failed" ? "failure" : state === "cancelled" ? "error" : "pending"

/**
 * Rounds shorter than MIN_SPACED_ROUND_MS are not spaced out; a longer one delays the next by ROUND_SPACING times
 * its own length, up to the maximum (the runner then spends at most a third of its time in rounds).
 */
const MIN_SPACED_ROUND_MS = 20
const ROUND_SPACING = 2
const MAX_ROUND_SPACING_MS = 250

/** Events read from the inbox per round at most. */
const INBOX_BATCH = 1000

/** How long a command that failed unexpectedly waits before it runs again. */
const RETRY_MS = 2_000

const newIds = (config: PlannerConfig) =>
  Array.from({ length: 2 * config.concurrency + config.bisectionConcurrency + 8 }, () => crypto.randomUUID())

export interface RunnerHooks {
  readonly observeLag: (seconds: number) => void
  /** Wall time of one planner step (a measurement of the shell, not an input of the planner). */
  readonly observeStep: (seconds: number) => void
  /** The round could not be saved: the queue is under another token (`fencing` is this runner's); it stops. */
  readonly lostLease: (queueId: string, fencing: number) => Effect.Effect<void>
}

export const repoRefOf = (repo: Repository): RepoRef => ({ host: repo.host, owner: repo.owner, name: repo.name })

export const runQueue = (
  queueId: string,
  owner: string,
  fencing: number,
  signal: Queue.Queue<void>,
  hooks: RunnerHooks
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const git = yield* GitHost
      const queues = yield* QueueRepo
      const statuses = yield* Statuses
      const config = yield* AppConfig
      const ci = yield* CommandCi
      // what the Git host shows on the pull request besides (GitHub: its comment and status check); optional
      const feedback = yield* Effect.serviceOption(PrFeedback)
      const ciJobs = yield* FiberMap.make<string>()
      // the round's events (PR, batch and test run changes) go to the event log in the round's transaction
      const eventLog = yield* Effect.serviceOption(EventLog)
      const { loadRuntime, persistStep, readInbox, readTargets, saveOutbox } = makeStore(
        sql,
        Option.isSome(eventLog) ? makeRoundEventWriter(sql, eventLog.value, config.publicUrl) : undefined
      )

      const loaded = yield* loadRuntime(queueId)
      if (Option.isNone(loaded)) return
      let state: QueueState = loaded.value.state
      let pendingCommands: ReadonlyArray<Command> = loaded.value.outbox
      let memEvents: Array<PlannerEvent> = []
      let nextWake = Number.POSITIVE_INFINITY
      let lastPoll = 0
      const ciSemaphore = yield* Effect.makeSemaphore(Math.max(1, state.config.concurrency))

      const queueRow = () =>
        Effect.flatMap(queues.findById(queueId), (q) =>
          Option.match(q, { onNone: () => Effect.interrupt, onSome: Effect.succeed })
        )
      let queue = yield* queueRow()
      const repo = repoRefOf(queue.repo)

      const runOf = (runId: string): RunRecord | undefined => state.runs.find((r) => r.id === runId)

      // ------------------------------------------------------------------ status evaluation

      const evaluate = (run: RunRecord) =>
        Effect.gen(function* () {
          if (run.status !== "in_progress" || run.testBranchSha === null) return Option.none<PlannerEvent>()
          const verdict = yield* statuses.verdict(queue.repo.id, run.id, run.testBranchSha, run.createdAt)
          if (verdict === "pending") return Option.none<PlannerEvent>()
          return Option.some<PlannerEvent>({
            _tag: "RunCompleted",
            runId: run.id,
            outcome: verdict === "success" ? "succeeded" : "failed",
            reason: verdict === "success" ? Reasons.testsPassed : Reasons.requiredStatusFailed
          })
        })

      // ------------------------------------------------------------------ built-in command CI

      const startCi = (run: RunRecord, sha: string) =>
        Option.match(config.ciCommand, {
          onNone: () => Effect.void,
          onSome: (command) =>
            FiberMap.run(
              ciJobs,
              run.id,
              ciSemaphore.withPermits(1)(
                Effect.gen(function* () {
                  const outputId = crypto.randomUUID()
                  const url = `${config.publicUrl}/ci/output/${outputId}`
                  yield* sql`insert into ci_outputs (id, run_id, repo_id, sha, output) values (${outputId}, ${run.id}, ${queue.repo.id}, ${sha}, '')`
                  yield* statuses.report(queue.repo.id, sha, config.ciContext, "pending", url, "running CI_COMMAND")
                  const result = yield* ci.run({
                    repo,
                    sha,
                    command,
                    timeoutMs: queue.config.testingTimeoutMinutes * 60_000,
                    env: { GREENLINE_TEST_RUN_ID: run.id, GREENLINE_TEST_BRANCH: run.branch }
                  })
                  yield* sql`update ci_outputs set output = ${result.output}, exit_code = ${result.exitCode} where id = ${outputId}`
                  const ok = result.exitCode === 0 && !result.timedOut
                  yield* statuses.report(
                    queue.repo.id,
                    sha,
                    config.ciContext,
                    ok ? "success" : "failure",
                    url,
                    result.timedOut ? "timed out" : `exit code ${result.exitCode}`
                  )
                }).pipe(
                  Effect.catchAllCause((cause) =>
                    Effect.logWarning("built-in CI failed to run", cause).pipe(
                      Effect.zipRight(
                        statuses
                          .report(queue.repo.id, sha, config.ciContext, "error", null, "CI_COMMAND could not run")
                          .pipe(Effect.ignore)
                      )
                    )
                  )
                )
              )
            ).pipe(Effect.asVoid)
        })

      // ------------------------------------------------------------------ commands

      const titles = (entryIds: ReadonlyArray<string>) =>
        Effect.map(
          sql<{ id: string; title: string }>`select id, title from entries where id in ${sql.in(entryIds)}`,
          (rows) => new Map(rows.map((r) => [r.id, r.title]))
        )

      /**
       * What the planner tells a PR's author (comments and the queue's status on the PR head), all of a round's with
       * two statements; then the Git host's view of them (GitHub: its comment and status check), which never fails.
       */
      const recordNotes = (notes: ReadonlyArray<Comment | SetStatus>) =>
        Effect.gen(function* () {
          const comments = queue.config.commentsEnabled ? notes.filter((n) => n._tag === "Comment") : []
          if (comments.length > 0) {
            const rows = comments.map((c) => ({ pr_number: c.prNumber, entry_id: c.entryId, body: c.body }))
            yield* sql`insert into pr_comments (repo_id, pr_number, entry_id, body)
                       select ${queue.repo.id}, v.pr_number, v.entry_id, v.body
                       from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as v(pr_number bigint, entry_id uuid, body text)`
          }
          const context = statusCheckName(queue.branch)
          if (queue.config.statusCheckEnabled) {
            yield* statuses.recordMany(
              queue.repo.id,
              notes.flatMap((n) =>
                n._tag === "SetStatus"
                  ? [
                      {
                        sha: n.headSha,
                        context,
                        state: commitStatusOf(n.state),
                        targetUrl: null,
                        description: n.description
                      }
                    ]
                  : []
              )
            )
          }
          if (Option.isNone(feedback)) return
          const host = feedback.value
          yield* Effect.forEach(
            notes,
            (n) =>
              n._tag === "SetStatus"
                ? host.status(queue, n, context)
                : queue.config.commentsEnabled
                  ? host.comment(queue, n)
                  : Effect.void,
            { concurrency: 4, discard: true }
          )
        })

      /** The commands of the current round that failed unexpectedly; they run again in a later round. */
      let failed: Array<Command> = []

      const execute = (command: Command): Effect.Effect<ReadonlyArray<PlannerEvent>, never, never> => {
        const effect: Effect.Effect<ReadonlyArray<PlannerEvent>, unknown> = Effect.gen(function* () {
          switch (command._tag) {
            case "BuildRun": {
              const run = command.run
              const names = yield* titles(run.items.map((i) => i.entryId))
              // statuses count for this run from now on (database clock), not those of an earlier run that built
              // the same test-branch sha
              const since = yield* statuses.clock
              const built = yield* git
                .buildTestBranch({
                  repo,
                  branch: run.branch,
                  baseSha: run.baseSha,
                  method: command.mergeMethod,
                  items: run.items.map((i) => ({
                    prNumber: i.prNumber,
                    headSha: i.headSha,
                    title: names.get(i.entryId) ?? ""
                  })),
                  pullRequest: queue.config.createPrsForTestingBranches ? { base: queue.branch } : undefined
                })
                .pipe(Effect.either)
              if (built._tag === "Left") {
                const error = built.left
                const entryId = error._tag === "MergeConflict" ? (run.items[error.index]?.entryId ?? null) : null
                if (error._tag !== "MergeConflict") yield* Effect.logWarning("building a test branch failed", error)
                return [
                  {
                    _tag: "RunBuildFailed",
                    runId: run.id,
                    entryId,
                    reason: error._tag === "MergeConflict" ? Reasons.mergeConflict : "START_TEST_RUN_FAILED"
                  }
                ]
              }
              const { sha, commits } = built.right
              const required = yield* resolveRequired(sha)
              yield* statuses.setRequirements(run.id, required.statuses, required.source, since)
              const events: Array<PlannerEvent> = [{ _tag: "RunBuilt", runId: run.id, testBranchSha: sha, commits }]
              if (required.statuses.length === 0) {
                events.push({
                  _tag: "RunCompleted",
                  runId: run.id,
                  outcome: "failed",
                  reason: "START_TEST_RUN_NO_REQUIRED_STATUSES"
                })
              } else {
                yield* startCi(run, sha)
                const verdict = yield* statuses.verdict(queue.repo.id, run.id, sha, run.createdAt)
                if (verdict !== "pending") {
                  events.push({
                    _tag: "RunCompleted",
                    runId: run.id,
                    outcome: verdict === "success" ? "succeeded" : "failed",
                    reason: verdict === "success" ? Reasons.testsPassed : Reasons.requiredStatusFailed
                  })
                }
              }
              return events
            }
            case "DeleteBranch": {
              yield* FiberMap.remove(ciJobs, command.runId)
              yield* git.deleteBranch(repo, command.branch)
              return []
            }
            case "Merge":
              return yield* merge(command)
            case "TryDirectMerge":
              return yield* directMerge(command)
            case "Comment":
            case "SetStatus":
              yield* recordNotes([command])
              return []
            case "ScheduleWake":
              nextWake = Math.min(nextWake, command.at)
              return []
            case "Wake":
              return [{ _tag: "Tick" }]
          }
        })
        return effect.pipe(
          Effect.catchAllCause((cause) => {
            // commands are idempotent: one that failed unexpectedly is tried again (a Merge left unanswered would
            // leave its entries merging for good)
            failed.push(command)
            return Effect.as(
              Effect.logError(`command ${command._tag} failed; trying it again in ${RETRY_MS} ms`, cause),
              [] as ReadonlyArray<PlannerEvent>
            )
          })
        )
      }

      const resolveRequired = (sha: string) =>
        Effect.gen(function* () {
          if (queue.config.requiredStatuses.length > 0) {
            return { statuses: queue.config.requiredStatuses, source: "merge_instance" as const }
          }
          const fromFile = yield* readRequiredStatuses(repo, sha).pipe(
            Effect.provideService(GitHost, git),
            Effect.orElseSucceed(() => null)
          )
          if (fromFile !== null && fromFile.statuses.length > 0) {
            return { statuses: fromFile.statuses, source: "trunk_config" as const }
          }
          // the queue's own status check (set on PR heads) may be required by the branch; it never runs on test branches
          const own = statusCheckName(queue.branch)
          const fromProtection = (yield* git
            .requiredStatusChecks(repo, queue.branch)
            .pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))).filter((name) => name !== own)
          if (fromProtection.length > 0) {
            return { statuses: fromProtection, source: "repo_provider_branch_protection" as const }
          }
          return { statuses: [] as ReadonlyArray<string>, source: null }
        })

      // ------------------------------------------------------------------ lanes (parallel mode)

      const isTerminalState = (e: Entry) => e.state === "merged" || e.state === "failed" || e.state === "cancelled"

      /** Sorted target hashes of the active entries' lists, by `<pr>@<sha>` (see targetSets.ts). */
      const targetHashes = new Map<string, Float64Array>()

      /** Reduces the targets stored for a PR's head to its lane: which active entries share a target with it. */
      const laneEvent = (prNumber: number, sha: string) =>
        Effect.gen(function* () {
          const self = state.entries.find((e) => e.prNumber === prNumber && e.headSha === sha && !isTerminalState(e))
          if (self === undefined) return []
          const targets = yield* readTargets(queue.repo.id, prNumber, sha)
          if (targets === null) return []
          const event = (lane: Lane): ReadonlyArray<PlannerEvent> => [
            { _tag: "ImpactedTargetsSet", prNumber, sha, lane }
          ]
          if (targets === "ALL") return event("ALL")
          if (targets.length === 0) return event("NONE")
          const mine = hashTargets(targets)
          const live = new Map<string, Float64Array>([[`${prNumber}@${sha}`, mine]])
          const overlaps: Array<string> = []
          for (const e of state.entries) {
            if (e === self || isTerminalState(e) || e.lane === null || typeof e.lane === "string") continue
            const key = `${e.prNumber}@${e.headSha}`
            let theirs = targetHashes.get(key)
            if (theirs === undefined) {
              const other = yield* readTargets(queue.repo.id, e.prNumber, e.headSha)
              if (other === null || other === "ALL") continue
              theirs = hashTargets(other)
            }
            live.set(key, theirs)
            if (sharesTarget(mine, theirs)) overlaps.push(e.id)
          }
          // keep only the lists of entries still active
          targetHashes.clear()
          for (const [key, hashes] of live) targetHashes.set(key, hashes)
          return event({ overlaps })
        })

      const headsMoved = (prNumbers: ReadonlyArray<number>) =>
        Effect.gen(function* () {
          const heads = yield* git.listPullHeads(repo)
          const events: Array<PlannerEvent> = []
          for (const pr of prNumbers) {
            const entry = state.entries.find((e) => e.prNumber === pr)
            const head = heads.get(pr)
            if (entry === undefined) continue
            if (head === undefined) events.push({ _tag: "Cancelled", prNumber: pr, reason: "PR_CLOSED" })
            else if (head !== entry.headSha) events.push({ _tag: "PrHeadMoved", prNumber: pr, sha: head })
          }
          return events
        })

      /** The commit the Merge lands: the tested one, or the lane replayed onto the expected target (null: it failed). */
      const laneTip = (command: Extract<Command, { _tag: "Merge" }>) =>
        Effect.gen(function* () {
          if (!command.rebaseOnto) return command.newSha
          const run = runOf(command.runId)
          const base = run?.effectiveBase ?? run?.baseSha ?? command.expectedSha
          const rebased = yield* git
            .rebaseOnto({ repo, baseSha: base, laneSha: command.newSha, ontoSha: command.expectedSha })
            .pipe(Effect.either)
          return rebased._tag === "Left" ? null : rebased.right
        })

      /** Asks the host to merge; null when the target was not at the expected tip (nothing merged). */
      const land = (command: Extract<Command, { _tag: "Merge" }>, newSha: string) =>
        Effect.gen(function* () {
          const names = yield* titles(command.entryIds)
          const pulls = command.entryIds.flatMap((id) => {
            const entry = state.entries.find((e) => e.id === id)
            return entry === undefined
              ? []
              : [{ prNumber: entry.prNumber, headSha: entry.headSha, title: names.get(id) ?? "" }]
          })
          const merged = yield* git
            .merge({
              repo,
              branch: queue.branch,
              expectedOld: command.expectedSha,
              newSha,
              method: command.mergeMethod,
              pulls
            })
            .pipe(Effect.either)
          if (merged._tag === "Left" && merged.left._tag === "MergeRefused") {
            // the host refused to merge (GitHub's pull request merge API): the entries fail with its reason
            yield* Effect.logWarning(merged.left.message)
            return [
              {
                _tag: "MergeFailed",
                runId: command.runId,
                entryIds: command.entryIds,
                reason: "GITHUB_API_MERGE_PR_FAILED",
                actualTargetSha: merged.left.actualSha ?? command.expectedSha
              }
            ] satisfies ReadonlyArray<PlannerEvent>
          }
          if (merged._tag === "Left") return yield* merged.left
          if (merged.right === null) return null
          return [
            { _tag: "MergeSucceeded", runId: command.runId, entryIds: command.entryIds, newSha: merged.right }
          ] satisfies ReadonlyArray<PlannerEvent>
        })

      const merge = (command: Extract<Command, { _tag: "Merge" }>) =>
        Effect.gen(function* () {
          const current = yield* git.getBranchSha(repo, queue.branch)
          if (current === command.newSha && !command.rebaseOnto) {
            return [
              { _tag: "MergeSucceeded", runId: command.runId, entryIds: command.entryIds, newSha: command.newSha }
            ] as const
          }
          if (current !== null && current !== command.expectedSha) {
            // a replayed Merge (the service stopped before recording its result): a host that merges through its
            // pull requests (GitHub) recognises what it merged and finishes the rest; nothing merged is null
            const tip = yield* laneTip(command)
            const landed = tip === null ? null : yield* land(command, tip)
            if (landed !== null) return landed
          }
          const moved = yield* headsMoved(command.prNumbers)
          if (moved.length > 0) {
            return [
              ...moved,
              {
                _tag: "MergeFailed",
                runId: command.runId,
                entryIds: command.entryIds,
                reason: Reasons.prPushedTo,
                actualTargetSha: current ?? command.expectedSha
              }
            ] satisfies ReadonlyArray<PlannerEvent>
          }
          if (current !== command.expectedSha) {
            return [
              {
                _tag: "MergeFailed",
                runId: command.runId,
                entryIds: command.entryIds,
                reason: "TARGET_MOVED",
                actualTargetSha: current ?? command.expectedSha
              }
            ] satisfies ReadonlyArray<PlannerEvent>
          }
          const newSha = yield* laneTip(command)
          if (newSha === null) {
            return [
              {
                _tag: "MergeFailed",
                runId: command.runId,
                entryIds: command.entryIds,
                reason: Reasons.mergeRebaseFailed,
                actualTargetSha: command.expectedSha
              }
            ] satisfies ReadonlyArray<PlannerEvent>
          }
          const landed = yield* land(command, newSha)
          if (landed !== null) return landed
          const actual = yield* git.getBranchSha(repo, queue.branch)
          return [
            {
              _tag: "MergeFailed",
              runId: command.runId,
              entryIds: command.entryIds,
              reason: "TARGET_MOVED",
              actualTargetSha: actual ?? command.expectedSha
            }
          ] satisfies ReadonlyArray<PlannerEvent>
        })

      const directMerge = (command: Extract<Command, { _tag: "TryDirectMerge" }>) =>
        Effect.gen(function* () {
          const refuse = [
            { _tag: "DirectMergeResult", entryId: command.entryId, merged: false, newSha: null }
          ] satisfies ReadonlyArray<PlannerEvent>
          const upToDate = yield* git.isAncestor(repo, command.expectedSha, command.headSha)
          if (!upToDate) return refuse
          const required = yield* resolveRequired(command.headSha)
          if (required.statuses.length === 0) return refuse
          const verdict = yield* statuses.verdict(queue.repo.id, null, command.headSha, 0, required.statuses)
          if (verdict !== "success") return refuse
          const swapped = yield* git.compareAndSwap(repo, queue.branch, command.expectedSha, command.headSha)
          if (!swapped) return refuse
          return [
            { _tag: "DirectMergeResult", entryId: command.entryId, merged: true, newSha: command.headSha }
          ] satisfies ReadonlyArray<PlannerEvent>
        })

      // ------------------------------------------------------------------ the round

      const translate = (event: InboxEvent): Effect.Effect<ReadonlyArray<PlannerEvent>, unknown> => {
        switch (event._tag) {
          case "Planner":
            // an event stored before lanes carried the target list itself: reduce it as a TargetsSet
            if (event.event._tag === "ImpactedTargetsSet" && event.event.lane === undefined) {
              return laneEvent(event.event.prNumber, event.event.sha)
            }
            return Effect.succeed([event.event])
          case "ConfigChanged":
            return Effect.gen(function* () {
              queue = yield* queueRow()
              return [
                { _tag: "ConfigChanged", config: plannerConfig(queue.config) }
              ] satisfies ReadonlyArray<PlannerEvent>
            })
          case "GitChanged":
            // the Git host said a branch or pull request moved (a webhook): look in this round
            lastPoll = 0
            return Effect.succeed([])
          case "TargetsSet":
            return laneEvent(event.prNumber, event.sha)
          case "StatusReported":
            return Effect.gen(function* () {
              const out: Array<PlannerEvent> = []
              for (const run of state.runs) {
                if (run.testBranchSha !== event.sha) continue
                const e = yield* evaluate(run)
                if (Option.isSome(e)) out.push(e.value)
              }
              return out
            })
        }
      }

      const poll = Effect.gen(function* () {
        const out: Array<PlannerEvent> = []
        const tip = yield* git.getBranchSha(repo, queue.branch).pipe(Effect.orElseSucceed(() => null))
        if (tip !== null && tip !== state.targetSha && state.merging === null)
          out.push({ _tag: "TargetMoved", sha: tip })
        if (state.entries.length > 0) {
          const moved = yield* headsMoved(state.entries.map((e) => e.prNumber)).pipe(Effect.orElseSucceed(() => []))
          out.push(...moved)
        }
        return out
      })

      const round = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const inbox = yield* readInbox(queueId, INBOX_BATCH)
        const transitions: Array<Transition> = []
        const runChanges = new Map<string, RunRecord>()
        const commands: Array<Command> = [...pendingCommands]
        const record = (result: ReturnType<typeof step>, started: number) => {
          hooks.observeStep((performance.now() - started) / 1000)
          state = result.state
          transitions.push(...result.transitions)
          for (const r of result.runChanges) runChanges.set(r.id, r)
          commands.push(...result.commands)
        }
        // a run of new submissions is stepped together (stepMany): one reconciliation of the queue, not one each
        let group: Array<PlannerEvent> = []
        let groupActive: Set<number> | null = null
        const flushGroup = () => {
          if (group.length === 0) return
          const started = performance.now()
          record(group.length === 1 ? step(state, group[0] as PlannerEvent, now) : stepMany(state, group, now), started)
          group = []
          groupActive = null
        }
        const apply = (event: PlannerEvent) => {
          const withIds = { ...event, newIds: newIds(state.config) }
          if (event._tag === "Submitted") {
            groupActive ??= activePrNumbers(state)
            if (joinsSubmissions(groupActive, group, event)) {
              group.push(withIds)
              return
            }
          }
          flushGroup()
          const started = performance.now()
          record(step(state, withIds, now), started)
        }
        // results of the last commands first, then the inbox, translated against the state they arrive in
        const results = memEvents
        memEvents = []
        for (const event of results) apply(event)
        for (const item of inbox) {
          hooks.observeLag(Math.max(0, (now - item.createdAt) / 1000))
          const event = item.event
          if (event._tag === "Planner" && event.event._tag === "Submitted") {
            apply(event.event)
            continue
          }
          // what translation reads (the entries, for lanes) includes the submissions before it
          flushGroup()
          for (const translated of yield* translate(event)) apply(translated)
        }
        flushGroup()
        if (now - lastPoll >= config.gitPollMs) {
          lastPoll = now
          for (const event of yield* poll) apply(event)
        }
        if (now >= nextWake) nextWake = Number.POSITIVE_INFINITY
        apply({ _tag: "Tick" })

        const saved = yield* persistStep(queueId, owner, fencing, {
          state,
          outbox: commands,
          transitions,
          runChanges: [...runChanges.values()],
          processed: inbox.map((item) => item.seq)
        })
        if (!saved) return yield* hooks.lostLease(queueId, fencing).pipe(Effect.zipRight(Effect.interrupt))
        pendingCommands = []
        failed = []
        const notes = commands.filter((c): c is Comment | SetStatus => c._tag === "Comment" || c._tag === "SetStatus")
        if (notes.length > 0) {
          yield* recordNotes(notes).pipe(
            Effect.catchAllCause((cause) => {
              failed.push(...notes)
              return Effect.logError(`recording ${notes.length} comments and statuses failed; trying again`, cause)
            })
          )
        }
        const others = commands.filter((c) => c._tag !== "Comment" && c._tag !== "SetStatus")
        const executed = yield* Effect.forEach(others, execute, { concurrency: 4 })
        memEvents = executed.flat()
        if (failed.length > 0) {
          pendingCommands = failed
          nextWake = Math.min(nextWake, now + RETRY_MS)
        }
        if (memEvents.length === 0 && commands.length > 0) {
          // clear the outbox once every command ran (but the failed ones), so a restart does not repeat them
          // (the state is the one just saved: only the outbox is written)
          yield* saveOutbox(queueId, owner, fencing, pendingCommands)
        }
        return inbox.length === INBOX_BATCH || memEvents.length > 0
      })

      // Built-in CI jobs do not survive a crash: start them again for the runs still waiting on them.
      if (Option.isSome(config.ciCommand)) {
        for (const run of state.runs) {
          if (run.status !== "in_progress" || run.testBranchSha === null) continue
          const reported = yield* statuses.forSha(queue.repo.id, run.testBranchSha)
          const since = (yield* statuses.requirements(run.id))?.sinceMs ?? run.createdAt - 1000
          const final = reported.some(
            (s) => s.context === config.ciContext && s.state !== "pending" && s.updatedAt.getTime() >= since
          )
          if (!final) yield* startCi(run, run.testBranchSha)
        }
      }

      for (;;) {
        const started = performance.now()
        const again = yield* round
        // a round costs about the queue's length (its state is written whole): under a stream of events the next
        // one waits twice as long as this one took, so that more events share it and the runner keeps up
        const took = performance.now() - started
        if (again) continue
        const now = yield* Clock.currentTimeMillis
        const until = Math.min(nextWake, now + config.gitPollMs)
        const waitMs = Math.max(0, until - now)
        yield* Effect.raceFirst(Queue.take(signal), Effect.sleep(Duration.millis(waitMs)))
        if (took >= MIN_SPACED_ROUND_MS) {
          yield* Effect.sleep(Duration.millis(Math.min(took * ROUND_SPACING, MAX_ROUND_SPACING_MS)))
        }
        yield* Queue.takeAll(signal)
      }
    })
  ).pipe(Effect.onInterrupt(() => Effect.void))

export type RunnerFiber = Fiber.RuntimeFiber<void, unknown>
