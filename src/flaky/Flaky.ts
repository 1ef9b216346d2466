import { createHash } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer, Option, Schema, Stream } from "effect"
import { AppConfig } from "../config.ts"
import { GitHost } from "../git/GitHost.ts"
import { ApiError, fromParseError, invalidRequest, notFound } from "../http/errors.ts"
import type { RepoRef } from "../queue/schemas.ts"
import { type Organization, type Repository, Tenancy } from "../tenancy/Tenancy.ts"
import { classify, DAY, type HistoryResult, isInfraFailureUpload, isStableBranch } from "./classify.ts"
import { type Codeowners, locations, ownersOf, parseCodeowners } from "./codeowners.ts"
import {
  BATCH_ROWS,
  FlakyRepo,
  FlakyRepoLive,
  type PageOf,
  type QuarantineOverride,
  type StatusUpdate,
  type TestCaseRecord,
  type TestCaseStats
} from "./FlakyRepo.ts"
import { isUuidV5, testCaseId, testCaseRawKey } from "./ids.ts"
import { gunzipIfNeeded, JunitError, type JunitResult, junitResults } from "./junit.ts"
import { failureGroupKey } from "./normalize.ts"
import type * as F from "./schemas.ts"
import { UploadMetadata } from "./schemas.ts"

/**
 * The flaky-test service (semantics §8, contract §3): the upload pipeline and the queries.
 *
 * Upload: one transaction. Each `junit` part is parsed as a stream (gunzip when needed); batches of results are
 * written while the next batch is parsed (`Stream.buffer`), so parsing and the database work side by side. Any
 * unreadable part fails the whole upload with `INVALID_JUNIT` (the transaction rolls back: nothing is stored, not
 * even a claimed repository). Then the touched test cases that can be other than healthy (a failure in the last
 * 7 days, or not healthy now) are classified from their 7-day history and their quarantine recomputed, so the
 * queries see the new state as soon as the upload answers. Uploads where ≥ 80% of the tests failed are stored with
 * `infra` set and take no part in detection.
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
  ) => Effect.Effect<F.UploadSummary, ApiError>
  readonly listFailingTests: (
    org: Organization,
    req: typeof F.ListFailingTestsRequest.Type
  ) => Effect.Effect<typeof F.ListFailingTestsResponse.Type, ApiError>
  readonly listQuarantinedTests: (
    org: Organization,
    req: typeof F.ListQuarantinedRequest.Type
  ) => Effect.Effect<typeof F.ListQuarantinedResponse.Type, ApiError>
  readonly getTestDetails: (
    org: Organization,
    req: typeof F.GetTestDetailsRequest.Type
  ) => Effect.Effect<typeof F.GetTestDetailsResponse.Type, ApiError>
  readonly listUnhealthyTests: (
    org: Organization,
    req: typeof F.ListUnhealthyRequest.Type
  ) => Effect.Effect<typeof F.ListUnhealthyResponse.Type, ApiError>
  readonly linkTicket: (org: Organization, req: typeof F.LinkTicketRequest.Type) => Effect.Effect<{}, ApiError>
  readonly setQuarantineOverride: (
    org: Organization,
    req: typeof F.SetQuarantineOverrideRequest.Type
  ) => Effect.Effect<{}, ApiError>
  readonly getSettings: (
    org: Organization,
    req: typeof F.SettingsRequest.Type
  ) => Effect.Effect<typeof F.Settings.Type, ApiError>
  readonly updateSettings: (
    org: Organization,
    req: typeof F.UpdateSettingsRequest.Type
  ) => Effect.Effect<typeof F.Settings.Type, ApiError>
  /** Deletes results older than the retention (default 30 days); returns how many. */
  readonly prune: (retentionDays?: number) => Effect.Effect<number>
}

export class Flaky extends Context.Tag("greenline/Flaky")<Flaky, FlakyShape>() {}

const MAX_KNOWN_IDS = 1_000_000
export const DEFAULT_RETENTION_DAYS = 30
const WINDOW_7D = 7 * DAY
export const MAX_RANGE_MS = 7 * DAY

const repoPath = (repo: RepoRef) => `${repo.host}/${repo.owner}/${repo.name}`

const orDie = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, ApiError, R> =>
  Effect.catchAll(effect, (e) => (e instanceof ApiError ? Effect.fail(e) : Effect.die(e)))

const repoNotFound = (repo: RepoRef) => notFound("NOT_FOUND", `repository ${repoPath(repo)} not found`)
const testNotFound = (id: string) => notFound("TEST_CASE_NOT_FOUND", `no test case ${id} in this repository`)

const invalidJunit = (part: UploadPart, index: number, error: JunitError) =>
  new ApiError({
    status: 400,
    code: "INVALID_JUNIT",
    message: `junit part ${index + 1} ("${part.filename}")${error.line > 0 ? ` line ${error.line}` : ""}: ${error.message}`,
    details: [{ path: `junit[${index}]`, message: `${part.filename}:${error.line}: ${error.message}` }]
  })

// ---- page tokens: base64url of {q: hash of the query, o: offset}

const queryHash = (parts: ReadonlyArray<unknown>) =>
  createHash("sha256").update(JSON.stringify(parts)).digest("base64url").slice(0, 22)

const encodeToken = (q: string, o: number) => Buffer.from(JSON.stringify({ q, o }), "utf8").toString("base64url")

const invalidToken = () =>
  new ApiError({ status: 400, code: "INVALID_PAGE_TOKEN", message: "the page_token was not issued for this query" })

export const decodePageToken = (token: string, q: string): Effect.Effect<number, ApiError> => {
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

// ---- test case ids: the same UUID v5 as `ids.ts`, hashed with Bun's SHA-1 (4× faster than node:crypto per id)

const URL_NAMESPACE_BYTES = Buffer.from("6ba7b8119dad11d180b400c04fd430c8", "hex")

const HEX_CODES = new TextEncoder().encode("0123456789abcdef")
const uuidText = Buffer.alloc(36)
const digest = new Uint8Array(20)
/** namespace bytes, then the name (grown for long names) */
let hashInput = Buffer.alloc(4096)
URL_NAMESPACE_BYTES.copy(hashInput, 0)

/**
 * UUID v5 of `name`, with no allocation but the answer: one reused input buffer and digest (a hasher object and a
 * digest buffer per id are native memory the collector does not see, and made a large upload's RSS climb), and the
 * answer built as one flat string (not a rope of 20 pieces, which costs again wherever the id is used).
 */
const uuidV5Fast = (name: string): string => {
  if (16 + name.length * 3 > hashInput.length) {
    hashInput = Buffer.alloc(16 + name.length * 3)
    URL_NAMESPACE_BYTES.copy(hashInput, 0)
  }
  const n = hashInput.write(name, 16, "utf8")
  Bun.SHA1.hash(hashInput.subarray(0, 16 + n), digest)
  const b = digest
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x50
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80
  let o = 0
  for (let i = 0; i < 16; i++) {
    const v = b[i] ?? 0
    uuidText[o++] = HEX_CODES[v >> 4] ?? 48
    uuidText[o++] = HEX_CODES[v & 15] ?? 48
    if (i === 3 || i === 5 || i === 7 || i === 9) uuidText[o++] = 45
  }
  return uuidText.toString("latin1")
}

/** `testCaseId` of ids.ts, faster. */
export const fastTestCaseId = (key: Parameters<typeof testCaseId>[0]): string => {
  const given = key.id?.trim()
  if (given !== undefined && isUuidV5(given)) return testCaseId(key)
  return uuidV5Fast(testCaseRawKey(key))
}

/**
 * The id of each parsed result, for one upload: the raw key's constant head and tail are built once, and a retry
 * (the same testcase again, right after) reuses the previous id.
 */
export const testCaseIds = (orgUrlSlug: string, repo: RepoRef, variant: string) => {
  const head = `${orgUrlSlug}#${repoPath(repo)}#`
  const tail = variant === "" ? "#JUNIT_TESTCASE" : `#JUNIT_TESTCASE#${variant}`
  let last: JunitResult | undefined
  let lastId = ""
  return (x: JunitResult): string => {
    if (
      last !== undefined &&
      x.name === last.name &&
      x.classname === last.classname &&
      x.file === last.file &&
      x.parent === last.parent &&
      x.id === last.id
    ) {
      return lastId
    }
    last = x
    const given = x.id?.trim()
    lastId =
      given !== undefined && isUuidV5(given)
        ? testCaseId({ orgUrlSlug, repo, name: x.name, variant, id: given })
        : uuidV5Fast(`${head}${x.file}#${x.classname}#${x.parent}#${x.name}${tail}`)
    return lastId
  }
}

// ---- upload parsing

const summaryOf = (message: string, text: string): string => {
  const line = (
    message.split(/\r?\n/).find((l) => l.trim() !== "") ??
    text.split(/\r?\n/).find((l) => l.trim() !== "") ??
    ""
  ).trim()
  return line.length > 200 ? `${line.slice(0, 199)}…` : line
}

interface MutableBatch {
  testCaseIds: string[]
  statuses: Array<"passed" | "failed" | "skipped">
  retries: boolean[]
  failureKeys: Array<string | null>
  failureSummaries: Array<string | null>
  ords: number[]
  newIds: string[]
  newNames: string[]
  newClassnames: string[]
  newFiles: string[]
  newParents: string[]
  newFailing: boolean[]
}

const emptyBatch = (): MutableBatch => ({
  testCaseIds: [],
  statuses: [],
  retries: [],
  failureKeys: [],
  failureSummaries: [],
  ords: [],
  newIds: [],
  newNames: [],
  newClassnames: [],
  newFiles: [],
  newParents: [],
  newFailing: []
})

interface UploadState {
  tests: number
  passed: number
  failed: number
  skipped: number
  ignored: number
  ord: number
  readonly seen: Set<string>
  /** test cases the service knows exist (not inserted again) */
  readonly known: ReadonlySet<string>
  readonly failing: Set<string>
  /** test cases inserted with their failure time */
  readonly recorded: Set<string>
  /** one entry per failed primary result */
  readonly failedPrimary: string[]
}

/** Notes which new test cases of the batch are inserted with their failure (the others are recorded at the end). */
const flush = (batch: MutableBatch, state: UploadState): MutableBatch => {
  for (const id of batch.newIds) {
    const failing = state.failing.has(id)
    batch.newFailing.push(failing)
    if (failing) state.recorded.add(id)
  }
  return batch
}

/**
 * Keeps the memory of a large upload flatter. Parsing makes garbage much faster than the collector comes back for it
 * (a 20 MiB file took the process ~170 MiB higher with a live heap of ~50 MiB; a collection does not lower the
 * resident size afterwards, so the peak is set by how much garbage piles up in between). A full collection after
 * every `GC_EVERY_BATCHES` batches bounds that pile: ~50 ms each on the JS thread, while PostgreSQL works on the
 * batches already sent. Uploads under 20,000 results never trigger it.
 */
const GC_EVERY_BATCHES = 4
class MemoryGuard {
  private batches = 0
  check(): void {
    if (++this.batches % GC_EVERY_BATCHES === 0) Bun.gc(true)
  }
}

/** Batches of parsed results, ready to insert. */
async function* batchesOf(
  part: UploadPart,
  state: UploadState,
  idOf: (r: JunitResult) => string
): AsyncGenerator<MutableBatch, void, undefined> {
  let batch = emptyBatch()
  const memory = new MemoryGuard()
  for await (const r of junitResults(gunzipIfNeeded(part.bytes))) {
    if (r.ignored || r.name === "") {
      if (!r.retry) state.ignored++
      continue
    }
    const id = idOf(r)
    if (!r.retry) {
      state.tests++
      if (r.status === "passed") state.passed++
      else if (r.status === "failed") {
        state.failed++
        state.failedPrimary.push(id)
      } else state.skipped++
    }
    if (!state.seen.has(id)) {
      state.seen.add(id)
      if (!state.known.has(id)) {
        batch.newIds.push(id)
        batch.newNames.push(r.name)
        batch.newClassnames.push(r.classname)
        batch.newFiles.push(r.file)
        batch.newParents.push(r.parent)
      }
    }
    batch.testCaseIds.push(id)
    batch.statuses.push(r.status)
    batch.retries.push(r.retry)
    batch.ords.push(state.ord++)
    if (r.status === "failed") {
      state.failing.add(id)
      batch.failureKeys.push(failureGroupKey(r.message, r.text))
      batch.failureSummaries.push(summaryOf(r.message, r.text))
    } else {
      batch.failureKeys.push(null)
      batch.failureSummaries.push(null)
    }
    if (batch.testCaseIds.length >= BATCH_ROWS) {
      yield flush(batch, state)
      batch = emptyBatch()
      memory.check()
    }
  }
  if (batch.testCaseIds.length > 0) yield flush(batch, state)
}

class Unexpected {
  readonly _tag = "Unexpected"
  constructor(readonly cause: unknown) {}
}

const sameStatus = (
  u: StatusUpdate,
  c: { status: string; statusReason: string; statusAt: Date; flakySignalAt: Date | null }
) =>
  u.status === c.status &&
  u.reason === c.statusReason &&
  u.statusAt.getTime() === c.statusAt.getTime() &&
  (u.flakySignalAt?.getTime() ?? null) === (c.flakySignalAt?.getTime() ?? null)

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

    const describe = (r: Repository, rows: ReadonlyArray<TestCaseRecord>) =>
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
          { concurrency: 2 }
        )
        return rows.map((t) => toTestCase(r, t, stats.get(t.id), co))
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

    const reclassify = (r: Repository, touched: ReadonlySet<string>) =>
      Effect.gen(function* () {
        const at = yield* now
        const since = new Date(at.getTime() - WINDOW_7D)
        const candidates = (yield* repo.statusCandidates(r.id, since)).filter((c) => touched.has(c.id))
        if (candidates.length === 0) return
        const history = yield* repo.history(
          r.id,
          candidates.map((c) => c.id),
          since
        )
        const byTest = new Map<string, HistoryResult[]>()
        for (const h of history) {
          const list = byTest.get(h.testCaseId)
          if (list === undefined) byTest.set(h.testCaseId, [h])
          else list.push(h)
        }
        const queueBranches = yield* repo.queueBranches(r.id)
        const stable = (branch: string) => isStableBranch(branch, queueBranches)
        const updates: StatusUpdate[] = []
        for (const c of candidates) {
          const result = classify({
            now: at.getTime(),
            results: byTest.get(c.id) ?? [],
            previous: {
              value: c.status,
              reason: c.statusReason,
              since: c.statusAt.getTime(),
              ...(c.flakySignalAt !== null ? { flakySignalAt: c.flakySignalAt.getTime() } : {})
            },
            stableBranches: stable
          })
          const update: StatusUpdate = {
            id: c.id,
            status: result.value,
            reason: result.reason,
            statusAt: new Date(result.timestamp),
            flakySignalAt: result.flakySignalAt === undefined ? null : new Date(result.flakySignalAt)
          }
          if (!sameStatus(update, c)) updates.push(update)
        }
        yield* repo.saveStatuses(r.id, updates)
        yield* repo.refreshQuarantine(
          r.id,
          updates.map((u) => u.id),
          at
        )
      })

    // ---- upload

    /** Test cases known to exist, per repository (filled after commits; only spares re-inserting them). */
    const knownIds = new Map<string, Set<string>>()
    let knownCount = 0
    const remember = (repoId: string, ids: ReadonlySet<string>) => {
      if (knownCount + ids.size > MAX_KNOWN_IDS) {
        knownIds.clear()
        knownCount = 0
      }
      if (ids.size > MAX_KNOWN_IDS) return
      let set = knownIds.get(repoId)
      if (set === undefined) {
        set = new Set()
        knownIds.set(repoId, set)
      }
      for (const id of ids) {
        if (!set.has(id)) {
          set.add(id)
          knownCount++
        }
      }
    }

    const upload: FlakyShape["upload"] = (org, metadataText, parts) =>
      Effect.gen(function* () {
        let raw: unknown
        try {
          raw = JSON.parse(metadataText)
        } catch {
          return yield* invalidRequest("the metadata part is not valid JSON")
        }
        const meta = yield* Schema.decodeUnknown(UploadMetadata, { errors: "all", onExcessProperty: "ignore" })(
          raw
        ).pipe(Effect.mapError(fromParseError))
        if (parts.length === 0) return yield* invalidRequest("the upload has no junit part")
        const received = yield* now
        const runAt = meta.run_at === undefined || meta.run_at === null ? received : new Date(meta.run_at)
        const variant = meta.variant ?? ""

        return yield* orDie(
          sql.withTransaction(
            Effect.gen(function* () {
              const r = yield* requireRepo(org, meta.org_url_slug, meta.repo, true)
              const uploadId = crypto.randomUUID()
              const state: UploadState = {
                tests: 0,
                passed: 0,
                failed: 0,
                skipped: 0,
                ignored: 0,
                ord: 0,
                seen: new Set(),
                known: knownIds.get(r.id) ?? new Set(),
                failing: new Set(),
                recorded: new Set(),
                failedPrimary: []
              }
              const ref = { host: r.host, owner: r.owner, name: r.name }
              const idOf = testCaseIds(org.slug, ref, variant)
              const context = {
                repoId: r.id,
                uploadId,
                runAt,
                sha: meta.sha,
                branch: meta.branch,
                prNumber: meta.pr_number ?? null
              }
              for (let i = 0; i < parts.length; i++) {
                const part = parts[i]
                if (part === undefined) continue
                yield* Stream.fromAsyncIterable(batchesOf(part, state, idOf), (e) =>
                  e instanceof JunitError ? invalidJunit(part, i, e) : new Unexpected(e)
                ).pipe(
                  Stream.buffer({ capacity: 2 }),
                  Stream.runForEach((b) =>
                    Effect.zipRight(
                      repo.insertTestCases(
                        r.id,
                        variant,
                        {
                          ids: b.newIds,
                          names: b.newNames,
                          classnames: b.newClassnames,
                          files: b.newFiles,
                          parents: b.newParents,
                          lastFailureAt: b.newFailing.map((f) => (f ? runAt : null))
                        },
                        received
                      ),
                      repo.insertResults(context, b)
                    )
                  ),
                  Effect.catchIf(
                    (e): e is Unexpected => e instanceof Unexpected,
                    (e) => Effect.die(e.cause)
                  )
                )
              }
              const infra = isInfraFailureUpload({ passed: state.passed, failed: state.failed })
              yield* repo.insertUpload({
                id: uploadId,
                repoId: r.id,
                sha: meta.sha,
                branch: meta.branch,
                prNumber: meta.pr_number ?? null,
                jobName: meta.job_name ?? null,
                variant,
                runAt,
                tests: state.tests,
                passed: state.passed,
                failed: state.failed,
                skipped: state.skipped,
                ignored: state.ignored,
                infra
              })
              if (infra) {
                yield* repo.markInfra(r.id, uploadId, runAt)
              } else {
                yield* repo.recordFailures(
                  r.id,
                  [...state.failing].filter((id) => !state.recorded.has(id)),
                  runAt
                )
                yield* reclassify(r, state.seen)
              }
              const quarantined = yield* repo.quarantinedAmong(r.id, [...new Set(state.failedPrimary)])
              let quarantinedFailures = 0
              for (const id of state.failedPrimary) if (quarantined.has(id)) quarantinedFailures++
              const unquarantined = state.failedPrimary.length - quarantinedFailures
              const summary: F.UploadSummary = {
                upload_id: uploadId,
                tests: state.tests,
                passed: state.passed,
                failed: state.failed,
                skipped: state.skipped,
                ignored: state.ignored,
                quarantined_failures: quarantinedFailures,
                unquarantined_failures: unquarantined,
                all_failures_quarantined: unquarantined === 0
              }
              return { repoId: r.id, seen: state.seen, summary }
            })
          )
        ).pipe(
          Effect.map(({ repoId, seen, summary }) => {
            remember(repoId, seen)
            return summary
          })
        )
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
              return yield* new ApiError({
                status: 400,
                code: "TIME_RANGE_INVALID",
                message: "start_time must be before end_time"
              })
            }
            if (end.getTime() - start.getTime() > MAX_RANGE_MS) {
              return yield* new ApiError({
                status: 400,
                code: "TIME_RANGE_INVALID",
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
              const id = req.test_case_id.toLowerCase()
              const found = yield* repo.setOverride(r.id, id, req.override as QuarantineOverride)
              if (!found) return yield* testNotFound(req.test_case_id)
              yield* repo.refreshQuarantine(r.id, [id], yield* now)
              return {}
            })
          )
        ),

      getSettings: (org, req) =>
        orDie(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            const s = yield* repo.settings(r.id)
            return { quarantining_enabled: s.quarantiningEnabled, auto_quarantine: s.autoQuarantine }
          })
        ),

      updateSettings: (org, req) =>
        orDie(
          sql.withTransaction(
            Effect.gen(function* () {
              const r = yield* requireRepo(org, req.org_url_slug, req.repo, true)
              const s = yield* repo.updateSettings(r.id, {
                quarantiningEnabled: req.quarantining_enabled,
                autoQuarantine: req.auto_quarantine
              })
              yield* repo.refreshQuarantine(r.id, null, yield* now)
              return { quarantining_enabled: s.quarantiningEnabled, auto_quarantine: s.autoQuarantine }
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
