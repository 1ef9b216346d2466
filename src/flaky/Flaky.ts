import { createHash } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { AppConfig } from "../config.ts"
import { EventLog, type NewEvent } from "../kernel/EventLog.ts"
import { describeParseError, dieUnless } from "../kernel/errors.ts"
import { copyClient } from "../kernel/pgCopy.ts"
import { GitHost } from "../queue/GitHost.ts"
import type { RepoRef } from "../queue/schemas.ts"
import { type Organization, type Repository, Tenancy } from "../tenancy/Tenancy.ts"
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
import { type Codeowners, locations, ownersOf, parseCodeowners } from "./codeowners.ts"
import { CsvError, parseCsv, toCsv } from "./csv.ts"
import {
  type FlakyError,
  InvalidJunit,
  InvalidPageToken,
  InvalidQuarantineInput,
  InvalidUpload,
  isFlakyError,
  RepositoryNotFound,
  TestCaseNotFound,
  TimeRangeInvalid
} from "./errors.ts"
import {
  FlakyEvents,
  type FlakyEventsShape,
  noFlakyEvents,
  type QuarantineSettingChanged,
  quarantineSettingChanged,
  statusChanged
} from "./events.ts"
import {
  BATCH_ROWS,
  type ClassifyInput as ClassifyCandidate,
  FAILURE_TIME_SLACK_MS,
  FlakyRepo,
  FlakyRepoLive,
  type FlakySettings,
  type LapsedOverride,
  type PageOf,
  type QuarantineOverride,
  type StatusUpdate,
  type TestCaseRecord,
  type TestCaseStats
} from "./FlakyRepo.ts"
import { collectYoung, PartFailure, PartsReader, UploadRows } from "./ingest.ts"
import { JunitError, type JunitResult } from "./junit.ts"
import type * as F from "./schemas.ts"
import { QuarantineImportEntry, UploadMetadata } from "./schemas.ts"
import { isUuidV5, testCaseId, testCaseRawKey } from "./testCaseIds.ts"
import { IdSet, testCaseDigests, uuidBytes, uuidString, uuidV5String } from "./testCaseIdsBinary.ts"

/**
 * The flaky-test service (semantics §8, contract §3): the upload pipeline and the queries.
 *
 * Upload: one transaction. The `junit` parts are parsed as streams (gunzip when needed) and their rows go to the
 * database while parsing goes on (`ingest.ts`): on PostgreSQL one streamed `COPY` (the server loads what was sent
 * while the next rows are made), on PGlite batches of multi-row inserts. Any unreadable part fails the whole upload
 * with `INVALID_JUNIT` (the COPY is aborted and the transaction rolls back: nothing is stored, not even a claimed
 * repository). Then the touched test cases that can be other than healthy (a failure in the last 7 days, or not
 * healthy now) are classified from their 7-day history and their quarantine recomputed, so the queries see the new
 * state as soon as the upload answers; the database finds them from the stored rows. Uploads where ≥ 80% of the
 * tests failed are stored with `infra` set and take no part in detection.
 */

export interface UploadPart {
  /** the part's file name (or "junit" when it has none), for error messages */
  readonly filename: string
  readonly bytes: Uint8Array
}

export interface FlakyShape {
  readonly upload: (
    org: Organization,
    metadata: string,
    parts: ReadonlyArray<UploadPart>
  ) => Effect.Effect<F.UploadSummary, FlakyError>
  readonly listFailingTests: (
    org: Organization,
    req: typeof F.ListFailingTestsRequest.Type
  ) => Effect.Effect<typeof F.ListFailingTestsResponse.Type, FlakyError>
  readonly listQuarantinedTests: (
    org: Organization,
    req: typeof F.ListQuarantinedRequest.Type
  ) => Effect.Effect<typeof F.ListQuarantinedResponse.Type, FlakyError>
  readonly getTestDetails: (
    org: Organization,
    req: typeof F.GetTestDetailsRequest.Type
  ) => Effect.Effect<typeof F.GetTestDetailsResponse.Type, FlakyError>
  readonly listUnhealthyTests: (
    org: Organization,
    req: typeof F.ListUnhealthyRequest.Type
  ) => Effect.Effect<typeof F.ListUnhealthyResponse.Type, FlakyError>
  readonly linkTicket: (org: Organization, req: typeof F.LinkTicketRequest.Type) => Effect.Effect<{}, FlakyError>
  readonly setQuarantineOverride: (
    org: Organization,
    req: typeof F.SetQuarantineOverrideRequest.Type
  ) => Effect.Effect<{}, FlakyError>
  readonly getSettings: (
    org: Organization,
    req: typeof F.SettingsRequest.Type
  ) => Effect.Effect<typeof F.Settings.Type, FlakyError>
  readonly updateSettings: (
    org: Organization,
    req: typeof F.UpdateSettingsRequest.Type
  ) => Effect.Effect<typeof F.Settings.Type, FlakyError>
  /** Extension: the repository's quarantine state (overrides with owner, reason, ticket, expiry; quarantined tests). */
  readonly exportQuarantine: (
    org: Organization,
    req: typeof F.QuarantineExportQuery.Type
  ) => Effect.Effect<typeof F.QuarantineExport.Type, FlakyError>
  /** The same as CSV text (header row first). */
  readonly exportQuarantineCsv: (
    org: Organization,
    req: typeof F.QuarantineExportQuery.Type
  ) => Effect.Effect<string, FlakyError>
  /** Extension: sets the overrides of an export (JSON `tests` or `csv`), one transaction; creates unknown tests. */
  readonly importQuarantine: (
    org: Organization,
    req: typeof F.QuarantineImportRequest.Type
  ) => Effect.Effect<typeof F.QuarantineImportResponse.Type, FlakyError>
  /** Deletes results older than the retention (default 30 days); returns how many. */
  readonly prune: (retentionDays?: number) => Effect.Effect<number>
}

export class Flaky extends Context.Tag("greenline/Flaky")<Flaky, FlakyShape>() {}

const MAX_KNOWN_IDS = 1_000_000

/** The export's CSV columns (the JSON entry's fields, in this order). */
export const CSV_COLUMNS = [
  "test_case_id",
  "name",
  "classname",
  "file",
  "parent",
  "variant",
  "quarantine_setting",
  "quarantined",
  "status",
  "owner",
  "reason",
  "ticket_url",
  "expires_at",
  "set_at"
] as const satisfies ReadonlyArray<keyof F.QuarantineEntry>

const csvValue = (v: string | boolean | null): string => (v === null ? "" : String(v))
export const DEFAULT_RETENTION_DAYS = 30
const WINDOW_7D = 7 * DAY
export const MAX_RANGE_MS = 7 * DAY

const repoPath = (repo: RepoRef) => `${repo.host}/${repo.owner}/${repo.name}`

const orDie = dieUnless(isFlakyError)

const repoNotFound = (repo: RepoRef) => new RepositoryNotFound({ message: `repository ${repoPath(repo)} not found` })
const testNotFound = (id: string) => new TestCaseNotFound({ message: `no test case ${id} in this repository` })

const invalidJunit = (part: UploadPart, index: number, error: JunitError) =>
  new InvalidJunit({
    message: `junit part ${index + 1} ("${part.filename}")${error.line > 0 ? ` line ${error.line}` : ""}: ${error.message}`,
    details: [{ path: `junit[${index}]`, message: `${part.filename}:${error.line}: ${error.message}` }]
  })

// ---- page tokens: base64url of {q: hash of the query, o: offset}

const queryHash = (parts: ReadonlyArray<unknown>) =>
  createHash("sha256").update(JSON.stringify(parts)).digest("base64url").slice(0, 22)

const encodeToken = (q: string, o: number) => Buffer.from(JSON.stringify({ q, o }), "utf8").toString("base64url")

const invalidToken = () => new InvalidPageToken({ message: "the page_token was not issued for this query" })

export const decodePageToken = (token: string, q: string): Effect.Effect<number, InvalidPageToken> => {
  if (token === "") return Effect.succeed(0)
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(token)) return Effect.fail(invalidToken())
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown
    if (typeof parsed === "object" && parsed !== null) {
      const { q: tq, o } = parsed as { q?: unknown; o?: unknown }
      if (tq === q && typeof o === "number" && Number.isSafeInteger(o) && o >= 0) return Effect.succeed(o)
    }
  } catch {
    // garbage
  }
  return Effect.fail(invalidToken())
}

export const pageOf = (q: string, offset: number, size: number, total: number): F.Page => {
  const totalPages = Math.ceil(total / size)
  return {
    total_rows: total,
    total_pages: totalPages,
    next_page_token: offset + size < total ? encodeToken(q, offset + size) : "",
    prev_page_token: offset > 0 ? encodeToken(q, Math.max(0, offset - size)) : "",
    last_page_token: totalPages > 0 ? encodeToken(q, (totalPages - 1) * size) : "",
    page_index: Math.floor(offset / size)
  }
}

// ---- test case ids (the upload pipeline keeps them as bytes, see fastIds.ts)

/** `testCaseId` of ids.ts, faster. */
export const fastTestCaseId = (key: Parameters<typeof testCaseId>[0]): string => {
  const given = key.id?.trim()
  if (given !== undefined && isUuidV5(given)) return testCaseId(key)
  return uuidV5String(testCaseRawKey(key))
}

/** The id of each parsed result of one upload, as a string (see `testCaseDigests`). */
export const testCaseIds = (orgUrlSlug: string, repo: RepoRef, variant: string) => {
  const digests = testCaseDigests(orgUrlSlug, repo, variant)
  return (x: JunitResult): string => uuidString(digests(x))
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

class Unexpected {
  readonly _tag = "Unexpected"
  constructor(readonly cause: unknown) {}
}

export interface FlakyOptions {
  readonly retentionDays?: number
}

export const makeFlaky = (options: FlakyOptions = {}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* FlakyRepo
    const tenancy = yield* Tenancy
    const config = yield* AppConfig
    const git = yield* GitHost
    // the event log the status and quarantine changes are appended to, when the application has one
    const eventLog = yield* Effect.serviceOption(EventLog)
    // quarantine changes: to the event log (contract.md §8), unless the application provides its own port
    const events: FlakyEventsShape = Option.getOrElse(yield* Effect.serviceOption(FlakyEvents), () =>
      Option.isNone(eventLog)
        ? noFlakyEvents
        : {
            quarantiningSettingChanged: (changes) =>
              Effect.forEach(
                changes,
                (c) =>
                  appendEvents(c.repo, [c.testCaseId], (tc) =>
                    quarantineSettingChanged(c.orgId, c.repo.id, tc, {
                      actor: { full_name: c.actor, email: null },
                      at: c.at.getTime(),
                      previous: c.previous,
                      updated: c.current
                    })
                  ),
                { discard: true }
              )
          }
    )

    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    /** The repository, when it belongs to `org` and `slug` is the org's slug; else 404. */
    const requireRepo = (org: Organization, slug: string | undefined, ref: RepoRef, claim = false) =>
      Effect.gen(function* () {
        if (slug !== undefined && slug !== org.slug) return yield* repoNotFound(ref)
        const found = yield* orDie(tenancy.findRepo(org, ref, { claim }))
        if (Option.isNone(found)) return yield* repoNotFound(ref)
        return found.value
      })

    // ---- code owners, cached per (repository, sha)
    const codeownersCache = new Map<string, Codeowners | null>()
    const codeownersAt = (r: Repository, sha: string | undefined) =>
      Effect.gen(function* () {
        if (sha === undefined) return null
        const key = `${r.id}#${sha}`
        const cached = codeownersCache.get(key)
        if (cached !== undefined) return cached
        const ref = { host: r.host, owner: r.owner, name: r.name }
        let found: Codeowners | null = null
        for (const path of locations) {
          const text = yield* git.readFile(ref, sha, path).pipe(Effect.orElseSucceed(() => null))
          if (text !== null) {
            found = parseCodeowners(text)
            break
          }
        }
        if (codeownersCache.size > 1000) codeownersCache.clear()
        codeownersCache.set(key, found)
        return found
      })

    const repoUrl = (r: Repository) => `${config.publicUrl}/repos/${r.host}/${r.owner}/${r.name}`

    // ---- quarantine overrides with an end

    const changeOf = (
      org: Organization,
      r: Repository,
      o: LapsedOverride,
      current: QuarantineOverride,
      cause: QuarantineSettingChanged["cause"],
      at: Date
    ): QuarantineSettingChanged => ({
      orgId: org.id,
      repo: r,
      actor: cause === "set" ? org.slug : "greenline",
      testCaseId: o.id,
      name: o.name,
      previous: o.override,
      current,
      cause,
      owner: o.owner,
      reason: o.reason,
      ticketUrl: o.ticketUrl,
      expiresAt: o.expiresAt,
      at
    })

    /**
     * Lets the repository's expired overrides lapse (to `unspecified`), recomputes those tests' quarantine and sends
     * `test_case.quarantining_setting_changed` for each. Runs in the caller's transaction.
     */
    const lapseExpired = (org: Organization, r: Repository, at: Date) =>
      Effect.gen(function* () {
        const lapsed = yield* repo.lapseExpired(r.id, at)
        if (lapsed.length === 0) return
        yield* repo.refreshQuarantine(
          r.id,
          lapsed.map((l) => l.id),
          at
        )
        yield* events.quarantiningSettingChanged(lapsed.map((l) => changeOf(org, r, l, "unspecified", "expired", at)))
      })

    const settingsOut = (s: FlakySettings): typeof F.Settings.Type => ({
      quarantining_enabled: s.quarantiningEnabled,
      auto_quarantine: s.autoQuarantine,
      auto_release_clean_runs: s.autoReleaseCleanRuns
    })

    const rate = (failed: number, runs: number) => (runs === 0 ? 0 : failed / runs)

    const toTestCase = (
      r: Repository,
      tc: TestCaseRecord,
      stats: TestCaseStats | undefined,
      co: Codeowners | null
    ): F.TestCase => ({
      id: tc.id,
      repository: { html_url: repoUrl(r) },
      html_url: `${repoUrl(r)}/tests/${tc.id}`,
      name: tc.name,
      variant: tc.variant,
      status: { value: tc.status, reason: tc.statusReason, timestamp: tc.statusAt.toISOString() },
      most_common_failures: (stats?.failures ?? []).map((f) => ({
        summary: f.summary,
        occurrence_count: f.count,
        last_occurrence: f.last.toISOString()
      })),
      failure_rate_last_7d: rate(stats?.failed7d ?? 0, stats?.runs7d ?? 0),
      failure_rate_last_24h: rate(stats?.failed24h ?? 0, stats?.runs24h ?? 0),
      codeowners: co === null || tc.file === "" ? [] : [...ownersOf(co, tc.file)],
      pull_requests_impacted_last_7d: stats?.pullRequests7d ?? 0,
      quarantined: tc.quarantined,
      file_path: tc.file,
      parent: tc.parent,
      classname: tc.classname,
      ticket: tc.ticketId === null ? null : { html_url: tc.ticketUrl ?? "", external_ticket_id: tc.ticketId }
    })

    /** `concurrency` 1 inside a transaction: its one connection runs one statement at a time. */
    const describe = (r: Repository, rows: ReadonlyArray<TestCaseRecord>, concurrency = 2) =>
      Effect.gen(function* () {
        const at = yield* now
        const [stats, co] = yield* Effect.all(
          [
            repo.stats(
              r.id,
              rows.map((t) => t.id),
              at
            ),
            rows.length === 0
              ? Effect.succeed(null)
              : Effect.flatMap(repo.latestSha(r.id), (sha) => codeownersAt(r, sha))
          ],
          { concurrency }
        )
        return rows.map((t) => toTestCase(r, t, stats.get(t.id), co))
      })

    /** Appends an event per test case (at most 1000 per change), in the caller's transaction, when there is a log. */
    const appendEvents = (r: Repository, ids: ReadonlyArray<string>, event: (tc: F.TestCase) => NewEvent) =>
      Effect.gen(function* () {
        if (ids.length === 0 || Option.isNone(eventLog)) return
        const records: Array<TestCaseRecord> = []
        for (const id of ids.slice(0, 1000)) {
          const record = yield* repo.findTestCase(r.id, id)
          if (record !== undefined) records.push(record)
        }
        const cases = yield* describe(r, records, 1)
        yield* eventLog.value.append(cases.map(event))
      })

    const paged = <A>(
      q: ReadonlyArray<unknown>,
      pageQuery: F.PageQuery,
      load: (limit: number, offset: number) => Effect.Effect<PageOf<TestCaseRecord>, unknown>,
      present: (rows: ReadonlyArray<TestCaseRecord>) => Effect.Effect<ReadonlyArray<A>, unknown>
    ) =>
      Effect.gen(function* () {
        const hash = queryHash([...q, pageQuery.page_size])
        const offset = yield* decodePageToken(pageQuery.page_token, hash)
        const found = yield* load(pageQuery.page_size, offset)
        const items = yield* present(found.rows)
        return { items, page: pageOf(hash, offset, pageQuery.page_size, found.total) }
      })

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
          collectYoung()
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
        const reader = new PartsReader(parts, rows)
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

    const upload: FlakyShape["upload"] = (org, metadataText, parts) =>
      Effect.gen(function* () {
        let raw: unknown
        try {
          raw = JSON.parse(metadataText)
        } catch {
          return yield* new InvalidUpload({ message: "the metadata part is not valid JSON" })
        }
        const meta = yield* Schema.decodeUnknown(UploadMetadata, { errors: "all", onExcessProperty: "ignore" })(
          raw
        ).pipe(Effect.mapError((e) => new InvalidUpload(describeParseError(e))))
        if (parts.length === 0) return yield* new InvalidUpload({ message: "the upload has no junit part" })
        const received = yield* now
        const runAt = meta.run_at === undefined || meta.run_at === null ? received : new Date(meta.run_at)
        const variant = meta.variant ?? ""

        return yield* orDie(
          sql.withTransaction(
            Effect.gen(function* () {
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
                testCaseDigests(org.slug, ref, variant),
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
              return { repoId: r.id, fresh: rows.fresh, summary }
            })
          )
        ).pipe(
          Effect.map(({ repoId, fresh, summary }) => {
            remember(repoId, fresh)
            return summary
          })
        )
      })

    // ---- quarantine export and import

    const quarantineInput = (message: string, details: ReadonlyArray<{ path: string; message: string }>) =>
      Effect.fail(new InvalidQuarantineInput({ message, details }))

    /** `host/owner/name`, or `owner/name` on github.com */
    const parseRepoParam = (text: string): Effect.Effect<RepoRef, InvalidQuarantineInput> => {
      const parts = text.split("/")
      if (parts.length === 2 && parts.every((p) => p !== ""))
        return Effect.succeed({ host: "github.com", owner: parts[0] as string, name: parts[1] as string })
      if (parts.length === 3 && parts.every((p) => p !== ""))
        return Effect.succeed({ host: parts[0] as string, owner: parts[1] as string, name: parts[2] as string })
      return quarantineInput("repo must be host/owner/name or owner/name", [
        { path: "repo", message: "must be host/owner/name or owner/name" }
      ])
    }

    const exportState = (org: Organization, req: typeof F.QuarantineExportQuery.Type) =>
      Effect.gen(function* () {
        const ref = yield* parseRepoParam(req.repo)
        const r = yield* requireRepo(org, req.org_url_slug, ref)
        const at = yield* now
        yield* sql.withTransaction(lapseExpired(org, r, at))
        const [settings, rows] = yield* Effect.all([repo.settings(r.id), repo.quarantineState(r.id)])
        const tests = rows.map(
          (t): F.QuarantineEntry => ({
            test_case_id: t.id,
            name: t.name,
            classname: t.classname,
            file: t.file,
            parent: t.parent,
            variant: t.variant,
            quarantine_setting: t.override === "unspecified" ? "auto_quarantine" : t.override,
            quarantined: t.quarantined,
            status: t.status,
            owner: t.overrideOwner,
            reason: t.overrideReason,
            ticket_url: t.overrideTicketUrl,
            expires_at: t.overrideExpiresAt?.toISOString() ?? null,
            set_at: t.overrideSetAt?.toISOString() ?? null
          })
        )
        return { repo: ref, exported_at: at.toISOString(), settings: settingsOut(settings), tests }
      })

    /** An override's details, checked: the expiry must be in the future. */
    const overrideDetails = (
      e: {
        readonly owner?: string | null | undefined
        readonly reason?: string | null | undefined
        readonly ticket_url?: string | null | undefined
        readonly expires_at?: string | null | undefined
      },
      at: Date,
      path: string
    ) =>
      Effect.gen(function* () {
        const expiresAt = e.expires_at === undefined || e.expires_at === null ? null : new Date(e.expires_at)
        if (expiresAt !== null && expiresAt.getTime() <= at.getTime()) {
          return yield* quarantineInput("expires_at must be in the future", [
            { path: `${path}expires_at`, message: "must be in the future" }
          ])
        }
        return {
          owner: e.owner ?? null,
          reason: e.reason === undefined || e.reason === null || e.reason === "" ? null : e.reason,
          ticketUrl: e.ticket_url === undefined || e.ticket_url === null || e.ticket_url === "" ? null : e.ticket_url,
          expiresAt
        }
      })

    const decodeEntry = Schema.decodeUnknown(QuarantineImportEntry, { errors: "all", onExcessProperty: "ignore" })

    /** The import's entries: its JSON `tests`, or its CSV rows decoded with the same schema (empty cells = absent). */
    const importEntries = (req: typeof F.QuarantineImportRequest.Type) =>
      Effect.gen(function* () {
        if ((req.tests === undefined) === (req.csv === undefined)) {
          return yield* quarantineInput("give either tests (JSON) or csv (the export's CSV text)", [
            { path: req.tests === undefined ? "tests" : "csv", message: "exactly one of tests and csv" }
          ])
        }
        if (req.tests !== undefined) return req.tests
        let rows: string[][]
        try {
          rows = parseCsv(req.csv ?? "")
        } catch (e) {
          if (e instanceof CsvError) return yield* quarantineInput(e.message, [{ path: "csv", message: e.message }])
          throw e
        }
        const [header, ...body] = rows
        if (header === undefined) return []
        const out: QuarantineImportEntry[] = []
        for (const [i, row] of body.entries()) {
          const object: Record<string, string> = {}
          header.forEach((name, k) => {
            const v = row[k]
            if (v !== undefined && v !== "") object[name.trim()] = v
          })
          const decoded = yield* decodeEntry(object).pipe(
            Effect.mapError((e) => {
              const base = describeParseError(e)
              return new InvalidQuarantineInput({
                message: `csv row ${i + 2}: ${base.message}`,
                details: base.details.map((d) => ({ path: `csv[${i + 1}].${d.path}`, message: d.message }))
              })
            })
          )
          out.push(decoded)
        }
        return out
      })

    // ---- queries

    const shape: FlakyShape = {
      upload,

      listFailingTests: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            const start = new Date(req.start_time)
            const end = new Date(req.end_time)
            if (!(start.getTime() < end.getTime())) {
              return yield* new TimeRangeInvalid({ message: "start_time must be before end_time" })
            }
            if (end.getTime() - start.getTime() > MAX_RANGE_MS) {
              return yield* new TimeRangeInvalid({
                message: "start_time and end_time must be at most 7 days apart"
              })
            }
            const { items, page } = yield* paged(
              ["failing", r.id, start.toISOString(), end.toISOString()],
              req.page_query,
              (limit, offset) => repo.failingPage(r.id, start, end, limit, offset),
              (rows) => describe(r, rows)
            )
            return { tests: items, page }
          })
        ),

      listQuarantinedTests: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            yield* sql.withTransaction(Effect.flatMap(now, (at) => lapseExpired(org, r, at)))
            const { items, page } = yield* paged(
              ["quarantined", r.id],
              req.page_query,
              (limit, offset) => repo.quarantinedPage(r.id, limit, offset),
              (rows) =>
                Effect.gen(function* () {
                  const co = rows.length === 0 ? null : yield* codeownersAt(r, yield* repo.latestSha(r.id))
                  return rows.map(
                    (t): F.QuarantinedTest => ({
                      name: t.name,
                      parent: t.parent,
                      file: t.file,
                      classname: t.classname,
                      codeowners: co === null || t.file === "" ? [] : [...ownersOf(co, t.file)],
                      quarantined_at: (t.quarantinedAt ?? t.statusAt).toISOString(),
                      status_last_updated_at: t.statusAt.toISOString(),
                      test_case_id: t.id,
                      variant: t.variant,
                      status: { value: t.status, reason: t.statusReason, timestamp: t.statusAt.toISOString() },
                      quarantine_setting: t.override === "always_quarantine" ? "always_quarantine" : "auto_quarantine"
                    })
                  )
                })
            )
            return { quarantined_tests: items, page }
          })
        ),

      getTestDetails: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            const id = req.test_id.toLowerCase()
            const tc = yield* repo.findTestCase(r.id, id)
            if (tc === undefined) return yield* testNotFound(req.test_id)
            const [test] = yield* describe(r, [tc])
            if (test === undefined) return yield* testNotFound(req.test_id)
            return { test }
          })
        ),

      listUnhealthyTests: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            const status = req.status
            const { items, page } = yield* paged(
              ["unhealthy", r.id, status],
              req.page_query,
              (limit, offset) => repo.unhealthyPage(r.id, status, limit, offset),
              (rows) => describe(r, rows)
            )
            return { tests: items, page }
          })
        ),

      linkTicket: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            const found = yield* repo.setTicket(
              r.id,
              req.test_case_id.toLowerCase(),
              req.external_ticket_id,
              req.html_url ?? null
            )
            if (!found) return yield* testNotFound(req.test_case_id)
            return {}
          })
        ),

      setQuarantineOverride: (org, req) =>
        orDie(
          sql.withTransaction(
            Effect.gen(function* () {
              const r = yield* requireRepo(org, req.org_url_slug, req.repo)
              const at = yield* now
              const override = req.override.toLowerCase() as QuarantineOverride
              const details = yield* overrideDetails(req, at, "")
              const id = req.test_case_id.toLowerCase()
              const before = yield* repo.findTestCase(r.id, id)
              if (before === undefined) return yield* testNotFound(req.test_case_id)
              yield* repo.setOverride(r.id, id, override, details, at)
              yield* repo.refreshQuarantine(r.id, [id], at)
              if (before.override !== override || override !== "unspecified") {
                yield* events.quarantiningSettingChanged([
                  changeOf(
                    org,
                    r,
                    { id, name: before.name, override: before.override, ...details },
                    override,
                    "set",
                    at
                  )
                ])
              }
              return {}
            })
          )
        ),

      getSettings: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            return settingsOut(yield* repo.settings(r.id))
          })
        ),

      updateSettings: (org, req) =>
        orDie(
          sql.withTransaction(
            Effect.gen(function* () {
              const r = yield* requireRepo(org, req.org_url_slug, req.repo, true)
              const s = yield* repo.updateSettings(r.id, {
                quarantiningEnabled: req.quarantining_enabled,
                autoQuarantine: req.auto_quarantine,
                autoReleaseCleanRuns: req.auto_release_clean_runs
              })
              yield* repo.refreshQuarantine(r.id, null, yield* now)
              return settingsOut(s)
            })
          )
        ),

      exportQuarantine: (org, req) => orDie(exportState(org, req)),

      exportQuarantineCsv: (org, req) =>
        orDie(
          Effect.map(exportState(org, req), (e) =>
            toCsv(
              CSV_COLUMNS,
              e.tests.map((t) => CSV_COLUMNS.map((c) => csvValue(t[c])))
            )
          )
        ),

      importQuarantine: (org, req) =>
        orDie(
          sql.withTransaction(
            Effect.gen(function* () {
              const r = yield* requireRepo(org, req.org_url_slug, req.repo, true)
              const at = yield* now
              const entries = yield* importEntries(req)
              let created = 0
              let cleared = 0
              const changes: QuarantineSettingChanged[] = []
              for (const [index, e] of entries.entries()) {
                const path = req.tests !== undefined ? `tests[${index}]` : `csv[${index + 1}]`
                const details = yield* overrideDetails(e, at, `${path}.`)
                const ref = { host: r.host, owner: r.owner, name: r.name }
                const variant = e.variant ?? ""
                const id =
                  e.test_case_id?.toLowerCase() ??
                  fastTestCaseId({
                    orgUrlSlug: org.slug,
                    repo: ref,
                    file: e.file ?? "",
                    classname: e.classname ?? "",
                    parent: e.parent ?? "",
                    name: e.name ?? "",
                    variant
                  })
                let before = yield* repo.findTestCase(r.id, id)
                if (before === undefined) {
                  if (e.name === undefined) {
                    return yield* quarantineInput("no test case has this id; give its name to create it", [
                      { path: `${path}.test_case_id`, message: "no test case has this id; give its name to create it" }
                    ])
                  }
                  yield* repo.insertTestCases(
                    r.id,
                    variant,
                    {
                      ids: [id],
                      names: [e.name],
                      classnames: [e.classname ?? ""],
                      files: [e.file ?? ""],
                      parents: [e.parent ?? ""],
                      lastFailureAt: [null]
                    },
                    at
                  )
                  created++
                  before = yield* repo.findTestCase(r.id, id)
                }
                const setting = e.quarantine_setting.toLowerCase()
                const override: QuarantineOverride =
                  setting === "always_quarantine" || setting === "never_quarantine" ? setting : "unspecified"
                if (override === "unspecified") cleared++
                yield* repo.setOverride(r.id, id, override, details, at)
                if (before !== undefined && (before.override !== override || override !== "unspecified"))
                  changes.push(
                    changeOf(
                      org,
                      r,
                      { id, name: before.name, override: before.override, ...details },
                      override,
                      "imported",
                      at
                    )
                  )
              }
              yield* repo.refreshQuarantine(r.id, null, at)
              yield* events.quarantiningSettingChanged(changes)
              return { imported: entries.length, created, cleared }
            })
          )
        ),

      prune: (retentionDays) =>
        Effect.gen(function* () {
          const at = yield* now
          const days = retentionDays ?? options.retentionDays ?? DEFAULT_RETENTION_DAYS
          return yield* repo.prune(new Date(at.getTime() - days * DAY))
        }).pipe(Effect.orDie)
    }
    return shape
  })

/** The service alone; needs `FlakyRepo` besides the database, tenancy, configuration and Git host. */
export const FlakyServiceLive = (options: FlakyOptions = {}) => Layer.effect(Flaky, makeFlaky(options))

/** The service with its storage: needs `SqlClient`, `Tenancy`, `AppConfig` and `GitHost`. */
export const FlakyLive: Layer.Layer<Flaky | FlakyRepo, never, SqlClient.SqlClient | Tenancy | AppConfig | GitHost> =
  Layer.provideMerge(FlakyServiceLive(), FlakyRepoLive)
