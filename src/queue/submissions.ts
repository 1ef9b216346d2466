import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Deferred, Effect, Queue } from "effect"
import type { Submission, SubmitOutcome } from "./Engine.ts"
import type { makeEngineRepo } from "./engineRepo.ts"
import { DEFAULT_PRIORITY } from "./schemas.ts"
import { type InboxEvent, iso, type Store, TERMINAL } from "./store.ts"

/** A submission waiting for the next batch. */
interface PendingSubmission {
  readonly submission: Submission
  readonly done: Deferred.Deferred<SubmitOutcome, SqlError>
}

/**
 * The engine's submission writer: `write` puts submissions in the current transaction with a fixed number of
 * statements; `submitBatched` waits for the group commit of the API's submissions (a background fiber of the scope).
 */
export const makeSubmissionWriter = (
  sql: SqlClient.SqlClient,
  repo: ReturnType<typeof makeEngineRepo>,
  enqueueEvents: Store["enqueueEvents"],
  wake: (queueId: string) => Effect.Effect<void>
) =>
  Effect.gen(function* () {
    /**
     * Writes submissions (to any queues) in the current transaction with a fixed number of statements, whatever
     * their number: one read of the queues, entries and stored targets, one upsert of new entries, one update of
     * those already active, one insert of the runner's events in order. An element of the answer says what became of
     * that submission (`SubmitOutcome`). No two submissions may name the same queue and PR.
     */
    const writeSubmissions = (items: ReadonlyArray<Submission>) =>
      Effect.gen(function* () {
        if (items.length === 0) return [] as ReadonlyArray<SubmitOutcome>
        const at = iso(yield* Clock.currentTimeMillis)
        const keys = items.map((s, i) => ({ i, queue_id: s.queue.id, pr: s.prNumber, sha: s.pr.headSha }))
        const found = yield* repo.submissionTargets(keys)
        const byIndex = new Map(found.map((row) => [Number(row.i), row]))
        const inserts: Array<Record<string, unknown>> = []
        const updates: Array<Record<string, unknown>> = []
        const events: Array<{ readonly i: number; readonly queue_id: string; readonly event: InboxEvent }> = []
        // the index of each entry's Submitted event in `events`: its sequence number goes into the row (request_seq)
        const submitted = (
          s: Submission,
          entryId: string,
          headSha: string,
          priority: number,
          noBatch: boolean,
          update: boolean
        ) =>
          events.push({
            i: events.length,
            queue_id: s.queue.id,
            event: {
              _tag: "Planner",
              event: {
                _tag: "Submitted",
                entryId,
                prNumber: s.prNumber,
                headSha,
                priority,
                noBatch,
                ready: true,
                ...(update ? { update: true } : {}),
                ...(s.ignoreFreeze === true ? { ignoreFreeze: true } : {})
              }
            }
          })
        const refused = new Set<number>()
        items.forEach((s, i) => {
          const row = byIndex.get(i)
          if (row === undefined) return
          if (row.id !== null && row.state === "merged" && row.head_sha === s.pr.headSha) {
            // the queue merged this PR at this head: it is not queued again
            refused.add(i)
            return
          }
          if (row.id !== null && row.state !== null && !TERMINAL.has(row.state)) {
            // already in the queue: a new priority or batching choice, the head it was submitted with
            const priority = s.priority ?? row.priority ?? DEFAULT_PRIORITY
            const noBatch = s.noBatch ?? row.no_batch ?? false
            const ev = submitted(s, row.id, row.head_sha ?? s.pr.headSha, priority, noBatch, true) - 1
            updates.push({ id: row.id, priority, no_batch: noBatch, ev })
            return
          }
          const id = row.id ?? crypto.randomUUID()
          const priority = s.priority ?? DEFAULT_PRIORITY
          const noBatch = s.noBatch ?? false
          const ev = submitted(s, id, s.pr.headSha, priority, noBatch, false) - 1
          inserts.push({
            id,
            queue_id: s.queue.id,
            pr_number: s.prNumber,
            state: row.mode === "parallel" && !row.has_targets ? "not_ready" : "pending",
            at,
            priority,
            no_batch: noBatch,
            head_sha: s.pr.headSha,
            title: s.pr.title,
            author: s.pr.author,
            ev
          })
          if (row.has_targets) {
            events.push({
              i: events.length,
              queue_id: s.queue.id,
              event: { _tag: "TargetsSet", prNumber: s.prNumber, sha: s.pr.headSha }
            })
          }
        })
        const seqs = events.length > 0 ? yield* enqueueEvents(events) : []
        const withSeq = (rows: ReadonlyArray<Record<string, unknown>>) =>
          JSON.stringify(rows.map((r) => ({ ...r, request_seq: seqs[r.ev as number] ?? null })))
        if (inserts.length > 0) {
          yield* repo.insertEntries(withSeq(inserts))
        }
        if (updates.length > 0) {
          yield* repo.updateEntries(withSeq(updates))
        }
        return items.map((_, i): SubmitOutcome => (!byIndex.has(i) ? "gone" : refused.has(i) ? "merged" : "written"))
      })

    // Submissions through the API wait here and are written together, a batch per transaction (group commit):
    // what arrives while one batch commits goes into the next. A batch that fails is written again one submission
    // per transaction, so one bad submission fails alone.
    const MAX_BATCH = 256
    const submissions = yield* Queue.unbounded<PendingSubmission>()
    const flush = (batch: ReadonlyArray<PendingSubmission>) =>
      sql.withTransaction(writeSubmissions(batch.map((p) => p.submission))).pipe(
        Effect.flatMap((written) =>
          Effect.forEach(batch, (p, i) => Deferred.succeed(p.done, written[i] ?? "gone"), { discard: true })
        ),
        Effect.catchAllCause(() =>
          Effect.forEach(
            batch,
            (p) =>
              sql.withTransaction(writeSubmissions([p.submission])).pipe(
                Effect.flatMap(([written]) => Deferred.succeed(p.done, written ?? "gone")),
                Effect.catchAllCause((cause) => Deferred.failCause(p.done, cause))
              ),
            { discard: true }
          )
        ),
        Effect.zipRight(Effect.forEach(new Set(batch.map((p) => p.submission.queue.id)), wake, { discard: true }))
      )
    let carried: Array<PendingSubmission> = []
    let current: ReadonlyArray<PendingSubmission> = []
    const submitLoop = Effect.gen(function* () {
      const taken =
        carried.length === 0
          ? yield* Queue.takeBetween(submissions, 1, MAX_BATCH)
          : yield* Queue.takeUpTo(submissions, MAX_BATCH)
      const batch: Array<PendingSubmission> = []
      const later: Array<PendingSubmission> = []
      const keys = new Set<string>()
      for (const p of [...carried, ...taken]) {
        // the same PR twice goes into the next batch, after this one
        const key = `${p.submission.queue.id}#${p.submission.prNumber}`
        if (keys.has(key)) later.push(p)
        else {
          keys.add(key)
          batch.push(p)
        }
      }
      carried = later
      current = batch
      yield* flush(batch)
    })
    yield* Effect.forkScoped(
      Effect.forever(submitLoop).pipe(
        Effect.ensuring(
          // at shutdown, what waits is told so (a submission already answered is not touched)
          Effect.flatMap(Queue.takeAll(submissions), (left) =>
            Effect.forEach([...current, ...carried, ...left], (p) => Deferred.interrupt(p.done), { discard: true })
          )
        )
      )
    )

    const submitBatched = (submission: Submission) =>
      Effect.gen(function* () {
        const done = yield* Deferred.make<SubmitOutcome, SqlError>()
        yield* Queue.offer(submissions, { submission, done })
        return yield* Deferred.await(done)
      })

    return { writeSubmissions, submitBatched }
  })
