import { createHash } from "node:crypto"
import { Effect, Option, Schema } from "effect"
import { describeParseError } from "../kernel/errors.ts"
import { copyClient } from "../kernel/pgCopy.ts"
import type { RuntimeHostShape } from "../kernel/RuntimeHost.ts"
import type { Organization, Repository } from "../tenancy/Tenancy.ts"
import {
  type ClassifyInput,
  classify,
  DAY,
  isInfraFailureUpload,
  isStableBranch,
  type PreviousStatus,
  type TestStatusValue,
  trailingCleanRuns
} from "./classify.ts"
import { type FlakyCommon, orDie } from "./common.ts"
import { InvalidJunit, InvalidUpload } from "./errors.ts"
import { statusChanged } from "./events.ts"
import {
  BATCH_ROWS,
  type ClassifyInput as ClassifyCandidate,
  FAILURE_TIME_SLACK_MS,
  type StatusUpdate
} from "./FlakyRepo.ts"
import type { FlakyShape, UploadPart } from "./FlakyShape.ts"
import { PartFailure, PartsReader, UploadRows } from "./ingest.ts"
import { JunitError } from "./junit/model.ts"
import type * as F from "./schemas.ts"
import { UploadMetadata } from "./schemas.ts"
import { type IdHasher, IdSet, uuidBytes } from "./testCaseIdsBinary.ts"

const MAX_KNOWN_IDS = 1_000_000
const WINDOW_7D = 7 * DAY

const invalidJunit = (part: UploadPart, index: number, error: JunitError) =>
  new InvalidJunit({
    message: `junit part ${index + 1} ("${part.filename}")${error.line > 0 ? ` line ${error.line}` : ""}: ${error.message}`,
    details: [{ path: `junit[${index}]`, message: `${part.filename}:${error.line}: ${error.message}` }]
  })

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

class Unexpected {
  readonly _tag = "Unexpected"
  constructor(readonly cause: unknown) {}
}

/**
 * The upload: its parts stored in one transaction, the touched test cases classified, their quarantine recomputed.
 * `host`: the runtime's (kernel/RuntimeHost.ts), for the collector; `ids`: the test case ids' hashing over it.
 */
export const makeUpload = (common: FlakyCommon, host: RuntimeHostShape, ids: IdHasher): FlakyShape["upload"] => {
  const { sql, repo, now, requireRepo, lapseExpired, appendEvents } = common
  // ---- classification of the touched test cases

  /**
   * Classifies the test cases of an upload that may not be healthy, from their 7-day history, and recomputes the
   * quarantine of those whose status changed. The database finds the repository's candidates (through partial
   * indexes) that the upload touched and returns each with its history as one compact string; the tests that
   * failed in the upload but were no candidates yet are read by id, `BATCH_ROWS` at a time (a first upload can
   * have tens of thousands: only one batch of them is held at once, and a young-generation collection after each
   * lets the next reuse its memory). `last_failure_at` is advanced only for the failing tests whose value is not
   * recent already.
   */
  const reclassify = (r: Repository, upload: { readonly id: string; readonly runAt: Date }, failingIds: IdSet) =>
    Effect.gen(function* () {
      const at = yield* now
      const since = new Date(at.getTime() - WINDOW_7D)
      const touched = yield* repo.classifyInputs(r.id, upload, since)
      if (touched.length === 0 && failingIds.size === 0) return
      const recent = upload.runAt.getTime() - FAILURE_TIME_SLACK_MS
      const touchedIds = new IdSet(touched.length)
      const key = new Uint8Array(16)
      const stale: string[] = []
      for (const c of touched) {
        touchedIds.add(uuidBytes(c.id, key))
        if (failingIds.has(key) && (c.lastFailureAt === null || c.lastFailureAt.getTime() < recent)) stale.push(c.id)
      }
      yield* repo.recordFailures(r.id, stale, upload.runAt)
      const queueBranches = yield* repo.queueBranches(r.id)
      const stable = (branch: string) => isStableBranch(branch, queueBranches)
      const updates: StatusUpdate[] = []
      // the previous status of the test cases whose status changed: their test_case.status_changed events
      const statusWas = new Map<string, TestStatusValue>()
      // one input for every candidate (`classify` keeps nothing of it): most keep their status, and then nothing
      // is made for them but the classification
      const previous: Mutable<PreviousStatus> = { value: "healthy", reason: "", since: 0 }
      const input: Mutable<ClassifyInput> = { now: at.getTime(), results: [], previous, stableBranches: stable }
      const classifyAll = (candidates: ReadonlyArray<ClassifyCandidate>) => {
        for (const c of candidates) {
          const since = c.statusAt.getTime()
          const signalAt = c.flakySignalAt === null ? undefined : c.flakySignalAt.getTime()
          previous.value = c.status
          previous.reason = c.statusReason
          previous.since = since
          previous.flakySignalAt = signalAt
          input.results = c.history
          const result = classify(input)
          // only a flaky test can be auto-quarantined, and only it needs its clean runs counted
          const cleanRuns = result.value === "flaky" ? trailingCleanRuns(c.history) : 0
          if (
            result.value === c.status &&
            result.reason === c.statusReason &&
            result.timestamp === since &&
            result.flakySignalAt === signalAt &&
            cleanRuns === c.cleanRuns
          ) {
            continue
          }
          if (result.value !== c.status) statusWas.set(c.id, c.status)
          updates.push({
            id: c.id,
            status: result.value,
            reason: result.reason,
            statusAt: new Date(result.timestamp),
            flakySignalAt: result.flakySignalAt === undefined ? null : new Date(result.flakySignalAt),
            cleanRuns
          })
        }
      }
      classifyAll(touched)
      // the tests that failed in the upload and were no candidates yet
      for (const ids of failingIds.stringChunks(BATCH_ROWS, touchedIds)) {
        classifyAll(yield* repo.classifyInputs(r.id, upload, since, ids))
        yield* repo.recordFailures(r.id, ids, upload.runAt)
        // a young-generation collection after each batch: left alone, the collector comes back only after about as
        // many bytes as the heap holds (the upload's input included), and the process keeps the memory it grew to
        host.collectYoung()
      }
      yield* repo.saveStatuses(r.id, updates)
      yield* repo.refreshQuarantine(
        r.id,
        updates.map((u) => u.id),
        at
      )
      yield* appendEvents(r, [...statusWas.keys()], (tc) =>
        statusChanged(r.orgId, r.id, tc, statusWas.get(tc.id) ?? "healthy")
      )
    })

  // ---- upload

  /** Test cases known to exist, per repository (filled after commits; only spares staging them again). */
  const knownIds = new Map<string, IdSet>()
  let knownCount = 0
  const remember = (repoId: string, ids: IdSet) => {
    if (ids.size === 0) return
    if (knownCount + ids.size > MAX_KNOWN_IDS) {
      knownIds.clear()
      knownCount = 0
    }
    if (ids.size > MAX_KNOWN_IDS) return
    const set = knownIds.get(repoId)
    if (set === undefined) {
      // the upload's own set (it is done with it): not a copy of it
      knownIds.set(repoId, ids)
      knownCount += ids.size
      return
    }
    const before = set.size
    set.addAll(ids)
    knownCount += set.size - before
  }

  /** A part that could not be read: INVALID_JUNIT naming it; anything else is a defect. */
  const partError = (parts: ReadonlyArray<UploadPart>) => (e: unknown) => {
    if (e instanceof PartFailure) {
      const part = parts[e.index]
      if (e.error instanceof JunitError && part !== undefined) return invalidJunit(part, e.index, e.error)
      return new Unexpected(e.error)
    }
    return new Unexpected(e)
  }

  /**
   * Stores the results of every part. PostgreSQL: one streamed COPY while the parts are parsed (more than one when
   * many new test cases are staged, which are merged in between). PGlite: batches of multi-row inserts.
   */
  const storeResults = (
    r: Repository,
    variant: string,
    received: Date,
    parts: ReadonlyArray<UploadPart>,
    rows: UploadRows
  ) =>
    Effect.gen(function* () {
      const reader = new PartsReader(parts, rows, host)
      const toError = partError(parts)
      if (rows.copy) {
        for (;;) {
          yield* repo.copyResults(() => reader.nextCopyChunk(), toError)
          if (rows.cases.length > 0) {
            yield* repo.mergeNewCases(r.id, variant, rows.cases.view(), received)
            rows.cases.reset()
          }
          if (reader.done) return
        }
      }
      for (;;) {
        const more = yield* Effect.tryPromise({ try: () => reader.step(), catch: toError })
        if (rows.batchLength >= BATCH_ROWS || (!more && rows.batchLength > 0)) {
          const { results, cases } = rows.takeBatch()
          yield* repo.insertTestCases(r.id, variant, cases, received)
          yield* repo.insertResults(rows.context, results)
        }
        if (!more) return
      }
    })

  /** What an upload is, for its idempotency key: the metadata and every part, in order. */
  const digestOf = (metadataText: string, parts: ReadonlyArray<UploadPart>) => {
    const hash = createHash("sha256").update(metadataText)
    for (const part of parts) hash.update(`\u0000${part.filename}\u0000`).update(part.bytes)
    return hash.digest("hex")
  }

  /**
   * Claims `key` for this upload in the transaction: a summary when an upload with the key was stored already (it is
   * answered again), undefined when this one is the first. A key of another upload is refused.
   */
  const claimKey = (org: Organization, key: string, digest: string) =>
    Effect.gen(function* () {
      yield* sql`delete from flaky_upload_keys where org_id = ${org.id} and created_at < now() - interval '1 day'`
      const claimed =
        yield* sql`insert into flaky_upload_keys (org_id, key, digest) values (${org.id}, ${key}, ${digest})
                                 on conflict do nothing returning key`
      if (claimed.length > 0) return undefined
      // the same key was stored (a concurrent upload with it waited for that one's commit)
      const prior = yield* sql<{ digest: string; summary: unknown }>`
        select digest, summary from flaky_upload_keys where org_id = ${org.id} and key = ${key}`
      const row = prior[0]
      if (row === undefined || row.summary === null) return undefined
      if (row.digest !== digest) {
        return yield* new InvalidUpload({
          message: "the Idempotency-Key was used for another upload: a new upload needs a new key",
          details: [{ path: "Idempotency-Key", message: "was used for another upload" }]
        })
      }
      return (typeof row.summary === "string" ? JSON.parse(row.summary) : row.summary) as F.UploadSummary
    })

  const upload: FlakyShape["upload"] = (org, metadataText, parts, idempotencyKey) =>
    Effect.gen(function* () {
      let raw: unknown
      try {
        raw = JSON.parse(metadataText)
      } catch {
        return yield* new InvalidUpload({ message: "the metadata part is not valid JSON" })
      }
      const meta = yield* Schema.decodeUnknown(UploadMetadata, { errors: "all", onExcessProperty: "ignore" })(raw).pipe(
        Effect.mapError((e) => new InvalidUpload(describeParseError(e)))
      )
      if (parts.length === 0) return yield* new InvalidUpload({ message: "the upload has no junit part" })
      const received = yield* now
      const runAt = meta.run_at === undefined || meta.run_at === null ? received : new Date(meta.run_at)
      const variant = meta.variant ?? ""

      const digest = idempotencyKey === undefined ? "" : digestOf(metadataText, parts)
      return yield* orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            const replay = idempotencyKey === undefined ? undefined : yield* claimKey(org, idempotencyKey, digest)
            if (replay !== undefined) return { repoId: undefined, fresh: undefined, summary: replay }
            const r = yield* requireRepo(org, meta.org_url_slug, meta.repo, true)
            const uploadId = crypto.randomUUID()
            const ref = { host: r.host, owner: r.owner, name: r.name }
            const context = {
              repoId: r.id,
              uploadId,
              runAt,
              sha: meta.sha,
              branch: meta.branch,
              prNumber: meta.pr_number ?? null
            }
            const canCopy = Option.isSome(yield* copyClient)
            // the upload's statements are many small index probes: compiling them would cost more than it saves
            if (canCopy) yield* sql.unsafe("set local jit = off")
            const rows = new UploadRows(
              ids.testCaseDigests(org.slug, ref, variant),
              knownIds.get(r.id) ?? new IdSet(),
              context,
              canCopy
            )
            yield* storeResults(r, variant, received, parts, rows).pipe(
              Effect.catchIf(
                (e): e is Unexpected => e instanceof Unexpected,
                (e) => Effect.die(e.cause)
              )
            )
            rows.releaseBuffers()
            const infra = isInfraFailureUpload({ passed: rows.passed, failed: rows.failed })
            yield* repo.insertUpload({
              id: uploadId,
              repoId: r.id,
              sha: meta.sha,
              branch: meta.branch,
              prNumber: meta.pr_number ?? null,
              jobName: meta.job_name ?? null,
              variant,
              runAt,
              tests: rows.tests,
              passed: rows.passed,
              failed: rows.failed,
              skipped: rows.skipped,
              ignored: rows.ignored,
              infra
            })
            if (infra) {
              yield* repo.markInfra(r.id, uploadId, runAt)
            } else {
              yield* reclassify(r, { id: uploadId, runAt }, rows.failing)
            }
            yield* lapseExpired(org, r, received)
            const quarantinedFailures =
              rows.failedPrimary === 0 ? 0 : yield* repo.quarantinedFailures(r.id, uploadId, runAt)
            const unquarantined = rows.failedPrimary - quarantinedFailures
            const summary: F.UploadSummary = {
              upload_id: uploadId,
              tests: rows.tests,
              passed: rows.passed,
              failed: rows.failed,
              skipped: rows.skipped,
              ignored: rows.ignored,
              quarantined_failures: quarantinedFailures,
              unquarantined_failures: unquarantined,
              all_failures_quarantined: unquarantined === 0
            }
            if (idempotencyKey !== undefined) {
              yield* sql`update flaky_upload_keys set summary = ${JSON.stringify(summary)}::jsonb
                         where org_id = ${org.id} and key = ${idempotencyKey}`
            }
            return { repoId: r.id, fresh: rows.fresh, summary }
          })
        )
      ).pipe(
        Effect.map(({ repoId, fresh, summary }) => {
          if (repoId !== undefined && fresh !== undefined) remember(repoId, fresh)
          return summary
        })
      )
    })

  return upload
}
