import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option } from "effect"
import type { QueueRow } from "../queue/QueueRepo.ts"
import { Statuses } from "../queue/Statuses.ts"
import type { FailureBlock, SubmittedPullRequest } from "../queue/schemas.ts"
import { type FailedTest, TestVerdicts } from "../queue/TestVerdicts.ts"
import type { QueueFailures } from "./schemas.ts"
import { makeTriageRepo } from "./triageRepo.ts"

/**
 * Failure triage (issue #33): why a PR left the queue, joining the queue's records (the failing run, its required
 * statuses, the PR whose failure took it out) with the flaky-test data (the failed tests of the JUnit uploads whose
 * commit is the run's test-branch sha, through the queue's `TestVerdicts` port, which the flaky feature implements).
 * Everything is read when asked: an upload that arrives after the failure shows at once, and nothing is stored twice.
 */

/** The failed tests shown per failure (the rest is counted as truncated). */
export const MAX_FAILED_TESTS = 50

export interface TriageShape {
  /** The record with its `failure` block (when it failed) and the causing PR's run of each restart. */
  readonly explain: (queue: QueueRow, record: SubmittedPullRequest) => Effect.Effect<SubmittedPullRequest, SqlError>
  /** The queue's last `limit` failures, grouped by reason, by causing PR and by test failure kind. */
  readonly failures: (queue: QueueRow, limit: number) => Effect.Effect<QueueFailures, SqlError>
}

export class Triage extends Context.Tag("greenline/Triage")<Triage, TriageShape>() {}

const iso = (at: Date | string) => new Date(at).toISOString()

const isPrerequisite = (reason: string) => reason.startsWith("PREREQUISITE_")

export const TriageLive = Layer.effect(
  Triage,
  Effect.gen(function* () {
    const repo = yield* makeTriageRepo
    const statuses = yield* Statuses
    const verdicts = yield* Effect.serviceOption(TestVerdicts)

    const testsAt = (queue: QueueRow, sha: string | null) =>
      sha === null || Option.isNone(verdicts)
        ? Effect.succeed({ uploads: 0, tests: [] as ReadonlyArray<FailedTest> })
        : verdicts.value.failedTests(queue.repo.id, sha, queue.branch, MAX_FAILED_TESTS + 1)

    /** The failure block of a failure record of entry `entryId`; `runId` when the caller knows the failing run. */
    const blockOf = (
      queue: QueueRow,
      entryId: string,
      failure: { readonly at: string; readonly reason: string },
      knownRunId: string | null
    ): Effect.Effect<FailureBlock, SqlError> =>
      Effect.gen(function* () {
        const prerequisite = isPrerequisite(failure.reason)
        const cause = prerequisite ? yield* repo.causeAt(queue.id, entryId, failure.at) : undefined
        const causedBy =
          cause === undefined
            ? null
            : { prNumber: cause.prNumber, testRunId: yield* repo.failedRunOf(queue.id, cause.entryId, failure.at) }
        // a PR taken out by another's failure has no failing run of its own: the cause's run is the one to read
        const runId = prerequisite
          ? (causedBy?.testRunId ?? null)
          : (knownRunId ?? (yield* repo.failedRunOf(queue.id, entryId, failure.at)))
        const sha = runId === null ? null : ((yield* repo.runSha(queue.id, runId)) ?? null)
        const required = runId === null ? null : yield* statuses.requirements(runId)
        const reported = sha === null ? [] : yield* statuses.forSha(queue.repo.id, sha)
        const wanted = new Set(required?.statuses ?? [])
        const failedStatuses = reported
          .filter((s) => (s.state === "failure" || s.state === "error") && (wanted.size === 0 || wanted.has(s.context)))
          .map((s) => ({
            context: s.context,
            state: s.state === "failure" ? ("FAILURE" as const) : ("ERROR" as const),
            url: s.targetUrl
          }))
        const found = yield* testsAt(queue, sha)
        return {
          at: failure.at,
          reason: failure.reason,
          testRunId: runId,
          testBranchSha: sha,
          failedStatuses,
          causedBy,
          tests: {
            uploads: found.uploads,
            failed: found.tests.slice(0, MAX_FAILED_TESTS).map((t) => ({
              testCaseId: t.testCaseId,
              name: t.name,
              classname: t.classname,
              file: t.file,
              message: t.message,
              failureKey: t.failureKey,
              mark: t.mark,
              failureRate: t.failureRate,
              quarantined: t.quarantined
            })),
            truncated: found.tests.length > MAX_FAILED_TESTS
          }
        }
      })

    const explain: TriageShape["explain"] = (queue, record) =>
      Effect.gen(function* () {
        const restarts = record.timeBreakdown?.restarts ?? []
        const withRuns =
          restarts.length === 0
            ? record.timeBreakdown
            : {
                ...record.timeBreakdown!,
                restarts: yield* Effect.forEach(restarts, (r) =>
                  r.causedByPr === null
                    ? Effect.succeed({ ...r, causedByTestRunId: null })
                    : Effect.gen(function* () {
                        const cause = yield* repo.entryOf(queue.id, r.causedByPr!)
                        const run = cause === undefined ? null : yield* repo.failedRunOf(queue.id, cause, r.at)
                        return { ...r, causedByTestRunId: run }
                      })
                )
              }
        const base = withRuns === undefined ? record : { ...record, timeBreakdown: withRuns }
        if (record.state !== "failed") return base
        const last = yield* repo.lastFailure(record.id)
        if (last === undefined) return base
        const failure = yield* blockOf(queue, record.id, { at: iso(last.at), reason: last.reason }, record.testRunId)
        return { ...base, failure }
      })

    const failures: TriageShape["failures"] = (queue, limit) =>
      Effect.gen(function* () {
        const rows = yield* repo.recentFailures(queue.id, limit)
        const items = yield* Effect.forEach(rows, (row) =>
          Effect.map(blockOf(queue, row.entry_id, { at: iso(row.at), reason: row.reason }, null), (failure) => ({
            prNumber: Number(row.pr_number),
            title: row.title,
            failure
          }))
        )
        const byReason = new Map<string, Array<number>>()
        const byCause = new Map<number, Array<number>>()
        const byTest = new Map<
          string,
          { message: string; tests: Set<string>; prs: Array<number>; marks: Set<FailedTest["mark"]> }
        >()
        for (const { prNumber, failure } of items) {
          byReason.set(failure.reason, [...(byReason.get(failure.reason) ?? []), prNumber])
          if (failure.causedBy !== null)
            byCause.set(failure.causedBy.prNumber, [...(byCause.get(failure.causedBy.prNumber) ?? []), prNumber])
          // a PR taken out by another's failure shows the cause's tests: counted with the cause, not again
          if (failure.causedBy !== null) continue
          for (const t of failure.tests.failed) {
            const key =
              t.failureKey !== null
                ? `key:${t.failureKey}`
                : t.message === ""
                  ? `test:${t.classname}.${t.name}`
                  : `message:${t.message}`
            const group = byTest.get(key) ?? { message: t.message, tests: new Set(), prs: [], marks: new Set() }
            group.tests.add(t.classname === "" ? t.name : `${t.classname}.${t.name}`)
            if (!group.prs.includes(prNumber)) group.prs.push(prNumber)
            group.marks.add(t.mark)
            byTest.set(key, group)
          }
        }
        const desc = <A extends { readonly count: number }>(xs: Array<A>) => xs.sort((a, b) => b.count - a.count)
        return {
          failures: items.map((i) => ({
            prNumber: i.prNumber,
            title: i.title,
            at: i.failure.at,
            reason: i.failure.reason,
            testRunId: i.failure.testRunId,
            causedByPr: i.failure.causedBy?.prNumber ?? null,
            failedTests: i.failure.tests.failed.length
          })),
          byReason: desc([...byReason].map(([reason, prs]) => ({ reason, count: prs.length, prs }))),
          byCausingPr: desc([...byCause].map(([prNumber, prs]) => ({ prNumber, count: prs.length, prs }))),
          byTest: desc(
            [...byTest].map(([, g]) => ({
              message: g.message,
              tests: [...g.tests].sort(),
              count: g.prs.length,
              prs: g.prs,
              marks: [...g.marks].sort()
            }))
          )
        }
      })

    return { explain, failures }
  })
)
