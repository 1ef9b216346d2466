import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option } from "effect"
import { copyClient, copyIn, copyInStream, copyText } from "../kernel/pgCopy.ts"
import type { HistoryResult, ResultStatus, TestStatusValue } from "./classify.ts"

/**
 * Storage of the flaky-test service: uploads, test cases, results and per-repository settings (tables in
 * `migration.ts`). Results are written in bulk: one statement per batch of rows, the columns sent as PostgreSQL
 * array literals and spread with `unnest` (the same SQL on PostgreSQL and PGlite, a dozen parameters per statement
 * whatever the number of rows).
 */

export type QuarantineOverride = "always_quarantine" | "never_quarantine" | "unspecified"

export interface FlakySettings {
  readonly quarantiningEnabled: boolean
  readonly autoQuarantine: boolean
  /** an auto-quarantined test leaves quarantine after this many runs in a row without a failed attempt */
  readonly autoReleaseCleanRuns: number
}

export const DEFAULT_AUTO_RELEASE_CLEAN_RUNS = 20

/** What an override carries besides its value (all optional). */
export interface OverrideDetails {
  readonly owner: string | null
  readonly reason: string | null
  readonly ticketUrl: string | null
  readonly expiresAt: Date | null
}

/** An override that lapsed (its expiry passed) and was reset to `unspecified`. */
export interface LapsedOverride extends OverrideDetails {
  readonly id: string
  readonly name: string
  readonly override: QuarantineOverride
}

export interface UploadRecord {
  readonly id: string
  readonly repoId: string
  readonly sha: string
  readonly branch: string
  readonly prNumber: number | null
  readonly jobName: string | null
  readonly variant: string
  readonly runAt: Date
  readonly tests: number
  readonly passed: number
  readonly failed: number
  readonly skipped: number
  readonly ignored: number
  readonly infra: boolean
}

/** Test cases first seen in an upload (columns of equal length; `variant` is the upload's). */
export interface NewTestCases {
  readonly ids: ReadonlyArray<string>
  readonly names: ReadonlyArray<string>
  readonly classnames: ReadonlyArray<string>
  readonly files: ReadonlyArray<string>
  readonly parents: ReadonlyArray<string>
  /** when the test failed in the upload, else null */
  readonly lastFailureAt: ReadonlyArray<Date | null>
}

/** One batch of results of one upload, as columns of equal length. */
export interface ResultBatch {
  readonly testCaseIds: ReadonlyArray<string>
  readonly statuses: ReadonlyArray<ResultStatus>
  readonly retries: ReadonlyArray<boolean>
  readonly failureKeys: ReadonlyArray<string | null>
  readonly failureSummaries: ReadonlyArray<string | null>
  readonly ords: ReadonlyArray<number>
}

export interface ResultContext {
  readonly repoId: string
  readonly uploadId: string
  readonly runAt: Date
  readonly sha: string
  readonly branch: string
  readonly prNumber: number | null
}

export interface TestCaseRecord {
  readonly repoId: string
  readonly id: string
  readonly name: string
  readonly classname: string
  readonly file: string
  readonly parent: string
  readonly variant: string
  readonly status: TestStatusValue
  readonly statusReason: string
  readonly statusAt: Date
  readonly flakySignalAt: Date | null
  readonly override: QuarantineOverride
  readonly quarantined: boolean
  readonly quarantinedAt: Date | null
  readonly ticketId: string | null
  readonly ticketUrl: string | null
  readonly overrideOwner: string | null
  readonly overrideReason: string | null
  readonly overrideTicketUrl: string | null
  readonly overrideExpiresAt: Date | null
  readonly overrideSetAt: Date | null
}

export interface StatusCandidate {
  readonly id: string
  readonly status: TestStatusValue
  readonly statusReason: string
  readonly statusAt: Date
  readonly flakySignalAt: Date | null
  /** runs in a row without a failed attempt, as last stored */
  readonly cleanRuns: number
}

/** A test case to classify, with its history (oldest first). */
export interface ClassifyInput extends StatusCandidate {
  readonly lastFailureAt: Date | null
  readonly history: ReadonlyArray<HistoryResult>
}

export interface HistoryRow {
  readonly testCaseId: string
  readonly at: number
  readonly sha: string
  readonly branch: string
  readonly status: ResultStatus
  readonly uploadId: string
  readonly infra: boolean
}

export interface StatusUpdate {
  readonly id: string
  readonly status: TestStatusValue
  readonly reason: string
  readonly statusAt: Date
  readonly flakySignalAt: Date | null
  readonly cleanRuns: number
}

export interface TestCaseStats {
  readonly runs7d: number
  readonly failed7d: number
  readonly runs24h: number
  readonly failed24h: number
  readonly pullRequests7d: number
  readonly failures: ReadonlyArray<{ readonly summary: string; readonly count: number; readonly last: Date }>
}

export interface PageOf<A> {
  readonly rows: ReadonlyArray<A>
  readonly total: number
}

export interface FlakyRepoShape {
  readonly settings: (repoId: string) => Effect.Effect<FlakySettings, SqlError>
  readonly updateSettings: (
    repoId: string,
    update: {
      readonly quarantiningEnabled?: boolean | undefined
      readonly autoQuarantine?: boolean | undefined
      readonly autoReleaseCleanRuns?: number | undefined
    }
  ) => Effect.Effect<FlakySettings, SqlError>
  /** Target branches of the repository's queues (stable branches for detection). */
  readonly queueBranches: (repoId: string) => Effect.Effect<ReadonlyArray<string>, SqlError>
  readonly insertUpload: (upload: UploadRecord) => Effect.Effect<void, SqlError>
  /**
   * Inserts test cases that do not exist yet (`on conflict do nothing`); existing ones only get `lastFailureAt` when
   * it is set (and later than theirs).
   */
  readonly insertTestCases: (
    repoId: string,
    variant: string,
    cases: NewTestCases,
    now: Date
  ) => Effect.Effect<void, SqlError>
  readonly insertResults: (context: ResultContext, batch: ResultBatch) => Effect.Effect<void, SqlError>
  /**
   * Streams result rows (COPY binary data of `test_results`, see `COPY_RESULTS_BINARY`) from `next` into the table while
   * `next` makes them: PostgreSQL inside a transaction only; `None` (and `next` not called) elsewhere. An error of
   * `next` aborts the COPY and is the effect's error, through `onSourceError`.
   */
  readonly copyResults: <E>(
    next: () => Promise<Uint8Array | null>,
    onSourceError: (error: unknown) => E
  ) => Effect.Effect<Option.Option<number>, SqlError | E>
  /**
   * Inserts staged test cases (COPY text rows `id, name, classname, file, parent`) that do not exist yet (PostgreSQL
   * inside a transaction, through a temporary staging table).
   */
  readonly mergeNewCases: (
    repoId: string,
    variant: string,
    rows: Uint8Array,
    now: Date
  ) => Effect.Effect<void, SqlError>
  /**
   * What classifying an upload needs, from the database in one statement: the test cases that may not be healthy
   * (not healthy now, or a failure since `since` less the slack) and that have a result in the upload, or (when
   * `ids` is given) exactly those test cases; each with its state, `last_failure_at` and its history since `since`
   * (as `history` reads it).
   */
  readonly classifyInputs: (
    repoId: string,
    upload: { readonly id: string; readonly runAt: Date },
    since: Date,
    ids?: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<ClassifyInput>, SqlError>
  /** Failed primary results of an upload whose test case is quarantined. */
  readonly quarantinedFailures: (repoId: string, uploadId: string, runAt: Date) => Effect.Effect<number, SqlError>
  /** Marks every result of an upload as coming from an infrastructure failure. */
  readonly markInfra: (repoId: string, uploadId: string, runAt: Date) => Effect.Effect<void, SqlError>
  /** Advances `last_failure_at` of `ids` to `at` (when it is more than `FAILURE_TIME_SLACK_MS` older). */
  readonly recordFailures: (repoId: string, ids: ReadonlyArray<string>, at: Date) => Effect.Effect<void, SqlError>
  readonly statusOf: (
    repoId: string,
    ids: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<StatusCandidate>, SqlError>
  /** Results of `ids` since `since` that count for detection (not skipped, not infra), oldest first. */
  readonly history: (
    repoId: string,
    ids: ReadonlyArray<string>,
    since: Date
  ) => Effect.Effect<ReadonlyArray<HistoryRow>, SqlError>
  readonly saveStatuses: (repoId: string, updates: ReadonlyArray<StatusUpdate>) => Effect.Effect<void, SqlError>
  /** Recomputes `quarantined` from the settings, status and override (all test cases of the repo, or `ids`). */
  readonly refreshQuarantine: (
    repoId: string,
    ids: ReadonlyArray<string> | null,
    now: Date
  ) => Effect.Effect<void, SqlError>
  readonly findTestCase: (repoId: string, id: string) => Effect.Effect<TestCaseRecord | undefined, SqlError>
  readonly failingPage: (
    repoId: string,
    start: Date,
    end: Date,
    limit: number,
    offset: number
  ) => Effect.Effect<PageOf<TestCaseRecord>, SqlError>
  readonly unhealthyPage: (
    repoId: string,
    status: "flaky" | "broken",
    limit: number,
    offset: number
  ) => Effect.Effect<PageOf<TestCaseRecord>, SqlError>
  readonly quarantinedPage: (
    repoId: string,
    limit: number,
    offset: number
  ) => Effect.Effect<PageOf<TestCaseRecord>, SqlError>
  readonly stats: (
    repoId: string,
    ids: ReadonlyArray<string>,
    now: Date
  ) => Effect.Effect<ReadonlyMap<string, TestCaseStats>, SqlError>
  readonly setTicket: (
    repoId: string,
    id: string,
    ticketId: string,
    url: string | null
  ) => Effect.Effect<boolean, SqlError>
  readonly setOverride: (
    repoId: string,
    id: string,
    override: QuarantineOverride,
    details?: OverrideDetails,
    at?: Date
  ) => Effect.Effect<boolean, SqlError>
  /**
   * The failed tests of the uploads for `sha` (a test that passed on retry in the same upload did not fail), and how
   * many of them are quarantined now.
   */
  readonly failuresAt: (
    repoId: string,
    sha: string
  ) => Effect.Effect<
    { readonly uploads: number; readonly failed: number; readonly quarantined: number; readonly flaky: number },
    SqlError
  >
  /** Resets the overrides whose expiry is at or before `now` to `unspecified`; returns what they were. */
  readonly lapseExpired: (repoId: string, now: Date) => Effect.Effect<ReadonlyArray<LapsedOverride>, SqlError>
  /** The test cases with an override or in quarantine (the export), by name. */
  readonly quarantineState: (repoId: string) => Effect.Effect<ReadonlyArray<TestCaseRecord>, SqlError>
  /** The sha of the repository's most recent upload. */
  readonly latestSha: (repoId: string) => Effect.Effect<string | undefined, SqlError>
  /** Deletes results (and uploads) older than `olderThan`; returns the number of results deleted. */
  readonly prune: (olderThan: Date) => Effect.Effect<number, SqlError>
}

export class FlakyRepo extends Context.Tag("greenline/FlakyRepo")<FlakyRepo, FlakyRepoShape>() {}

/**
 * `test_cases.last_failure_at` only selects the tests an upload must classify (a failure in the last 7 days), so it
 * is advanced only when it is more than this much older than a new failure: the tests that fail in every upload are
 * not rewritten each time. `classifyInputs` widens its window by the same amount.
 */
export const FAILURE_TIME_SLACK_MS = 3_600_000

/** Rows per bulk statement. */
export const BATCH_ROWS = 5000

// ---- PostgreSQL array literals (sent as text, cast by the server: `$1::text[]`)

const needsQuote = /[",\\{}\s]|^$|^null$/i

/** `{"a","b",NULL}` */
export const textArray = (values: ReadonlyArray<string | null>): string => {
  const parts = new Array<string>(values.length)
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (v === null || v === undefined) parts[i] = "NULL"
    else if (!needsQuote.test(v)) parts[i] = v
    else parts[i] = `"${v.replace(/[\\"]/g, "\\$&")}"`
  }
  return `{${parts.join(",")}}`
}

/** Values that need no quoting (uuids, numbers). */
const plainArray = (values: ReadonlyArray<string | number>): string => `{${values.join(",")}}`
const boolArray = (values: ReadonlyArray<boolean>): string => {
  const parts = new Array<string>(values.length)
  for (let i = 0; i < values.length; i++) parts[i] = values[i] ? "t" : "f"
  return `{${parts.join(",")}}`
}
const dateArray = (values: ReadonlyArray<Date | null>): string =>
  `{${values.map((d) => (d === null ? "NULL" : `"${d.toISOString()}"`)).join(",")}}`

// ---- COPY text rows (PostgreSQL): the per-row columns first, the upload's constant columns as one suffix

export const COPY_RESULTS = `copy test_results (test_case_id, ord, status, retry, failure_key, failure_summary,
  repo_id, upload_id, run_at, sha, branch, pr_number, infra) from stdin`

/** The same in COPY's binary format (what the upload pipeline streams, see `ingest.ts`). */
export const COPY_RESULTS_BINARY = `${COPY_RESULTS} with (format binary)`

/** The batch as COPY text rows. */
const copyRows = (c: ResultContext, b: ResultBatch): Uint8Array => {
  const suffix = `\t${c.repoId}\t${c.uploadId}\t${c.runAt.toISOString()}\t${copyText(c.sha)}\t${copyText(c.branch)}\t${
    c.prNumber === null ? "\\N" : String(c.prNumber)
  }\tf\n`
  const lines: string[] = []
  for (let i = 0; i < b.testCaseIds.length; i++) {
    const key = b.failureKeys[i]
    const summary = b.failureSummaries[i]
    lines.push(
      `${b.testCaseIds[i]}\t${b.ords[i]}\t${b.statuses[i]}\t${b.retries[i] ? "t" : "f"}\t${
        key === null || key === undefined ? "\\N" : copyText(key)
      }\t${summary === null || summary === undefined ? "\\N" : copyText(summary)}${suffix}`
    )
  }
  return Buffer.from(lines.join(""), "utf8")
}

const STAGING = `create temporary table if not exists flaky_new_cases (
  id uuid not null, name text not null, classname text not null, file text not null, parent text not null
) on commit delete rows`

const date = (v: unknown): Date => (v instanceof Date ? v : new Date(String(v)))
const dateOrNull = (v: unknown): Date | null => (v === null || v === undefined ? null : date(v))

interface TestCaseRow {
  readonly repo_id: string
  readonly id: string
  readonly name: string
  readonly classname: string
  readonly file: string
  readonly parent: string
  readonly variant: string
  readonly status: string
  readonly status_reason: string
  readonly status_at: unknown
  readonly flaky_signal_at: unknown
  readonly quarantine_override: string
  readonly quarantined: boolean
  readonly quarantined_at: unknown
  readonly ticket_id: string | null
  readonly ticket_url: string | null
  readonly override_owner: string | null
  readonly override_reason: string | null
  readonly override_ticket_url: string | null
  readonly override_expires_at: unknown
  readonly override_set_at: unknown
  readonly total?: number
}

const TC_COLUMNS = `tc.repo_id, tc.id, tc.name, tc.classname, tc.file, tc.parent, tc.variant, tc.status, tc.status_reason,
  tc.status_at, tc.flaky_signal_at, tc.quarantine_override, tc.quarantined, tc.quarantined_at, tc.ticket_id, tc.ticket_url,
  tc.override_owner, tc.override_reason, tc.override_ticket_url, tc.override_expires_at, tc.override_set_at`

const toTestCase = (r: TestCaseRow): TestCaseRecord => ({
  repoId: r.repo_id,
  id: r.id,
  name: r.name,
  classname: r.classname,
  file: r.file,
  parent: r.parent,
  variant: r.variant,
  status: r.status as TestStatusValue,
  statusReason: r.status_reason,
  statusAt: date(r.status_at),
  flakySignalAt: dateOrNull(r.flaky_signal_at),
  override: r.quarantine_override as QuarantineOverride,
  quarantined: r.quarantined,
  quarantinedAt: dateOrNull(r.quarantined_at),
  ticketId: r.ticket_id,
  ticketUrl: r.ticket_url,
  overrideOwner: r.override_owner,
  overrideReason: r.override_reason,
  overrideTicketUrl: r.override_ticket_url,
  overrideExpiresAt: dateOrNull(r.override_expires_at),
  overrideSetAt: dateOrNull(r.override_set_at)
})

interface CandidateRow {
  readonly id: string
  readonly status: string
  readonly status_reason: string
  readonly status_at: unknown
  readonly flaky_signal_at: unknown
  readonly clean_runs: number
}
const toCandidate = (r: CandidateRow): StatusCandidate => ({
  id: r.id,
  status: r.status as TestStatusValue,
  statusReason: r.status_reason,
  statusAt: date(r.status_at),
  flakySignalAt: dateOrNull(r.flaky_signal_at),
  cleanRuns: Number(r.clean_runs ?? 0)
})

const noDetails: OverrideDetails = { owner: null, reason: null, ticketUrl: null, expiresAt: null }

const chunks = <A>(list: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size))
  return out
}

export const FlakyRepoLive = Layer.effect(
  FlakyRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const settings = (repoId: string) =>
      Effect.map(
        sql<{ quarantining_enabled: boolean; auto_quarantine: boolean; auto_release_clean_runs: number }>`
          select quarantining_enabled, auto_quarantine, auto_release_clean_runs from flaky_settings
          where repo_id = ${repoId}`,
        (rows): FlakySettings => ({
          quarantiningEnabled: rows[0]?.quarantining_enabled ?? false,
          autoQuarantine: rows[0]?.auto_quarantine ?? false,
          autoReleaseCleanRuns: rows[0]?.auto_release_clean_runs ?? DEFAULT_AUTO_RELEASE_CLEAN_RUNS
        })
      )

    const page = (rows: ReadonlyArray<TestCaseRow>, count: Effect.Effect<number, SqlError>, offset: number) =>
      Effect.gen(function* () {
        const first = rows[0]
        const total = first !== undefined ? Number(first.total ?? 0) : offset > 0 ? yield* count : 0
        return { rows: rows.map(toTestCase), total }
      })

    const shape: FlakyRepoShape = {
      settings,

      updateSettings: (repoId, update) =>
        Effect.gen(function* () {
          const current = yield* settings(repoId)
          const next = {
            quarantiningEnabled: update.quarantiningEnabled ?? current.quarantiningEnabled,
            autoQuarantine: update.autoQuarantine ?? current.autoQuarantine,
            autoReleaseCleanRuns: update.autoReleaseCleanRuns ?? current.autoReleaseCleanRuns
          }
          yield* sql`
            insert into flaky_settings (repo_id, quarantining_enabled, auto_quarantine, auto_release_clean_runs,
              updated_at)
            values (${repoId}, ${next.quarantiningEnabled}, ${next.autoQuarantine}, ${next.autoReleaseCleanRuns}, now())
            on conflict (repo_id) do update set quarantining_enabled = excluded.quarantining_enabled,
              auto_quarantine = excluded.auto_quarantine, auto_release_clean_runs = excluded.auto_release_clean_runs,
              updated_at = excluded.updated_at`
          return next
        }),

      queueBranches: (repoId) =>
        Effect.map(sql<{ branch: string }>`select branch from queues where repo_id = ${repoId}`, (rows) =>
          rows.map((r) => r.branch)
        ),

      insertUpload: (u) =>
        sql`insert into test_uploads (id, repo_id, sha, branch, pr_number, job_name, variant, run_at,
              tests, passed, failed, skipped, ignored, infra)
            values (${u.id}, ${u.repoId}, ${u.sha}, ${u.branch}, ${u.prNumber}, ${u.jobName}, ${u.variant},
              ${u.runAt.toISOString()}::timestamptz, ${u.tests}, ${u.passed}, ${u.failed}, ${u.skipped}, ${u.ignored},
              ${u.infra})`.pipe(Effect.asVoid),

      insertTestCases: (repoId, variant, cases, now) => {
        if (cases.ids.length === 0) return Effect.void
        // the failing ones set (or advance) last_failure_at on conflict; the others do nothing on conflict, so that
        // existing rows are neither locked nor rewritten
        const failing: number[] = []
        const passing: number[] = []
        for (let i = 0; i < cases.ids.length; i++) (cases.lastFailureAt[i] ? failing : passing).push(i)
        const insert = (rows: ReadonlyArray<number>, onFailure: boolean) => {
          if (rows.length === 0) return Effect.void
          const col = <A>(values: ReadonlyArray<A>) =>
            rows.length === values.length ? values : rows.map((i) => values[i] as A)
          const conflict = onFailure
            ? sql`on conflict (repo_id, id) do update
                  set last_failure_at = greatest(test_cases.last_failure_at, excluded.last_failure_at)`
            : sql`on conflict (repo_id, id) do nothing`
          return sql`insert into test_cases (repo_id, id, name, classname, file, parent, variant, status_at,
                  last_failure_at)
                select ${repoId}::uuid, t.id, t.name, t.classname, t.file, t.parent, ${variant}::text,
                  ${now.toISOString()}::timestamptz, t.last_failure_at
                from unnest(${plainArray(col(cases.ids))}::uuid[], ${textArray(col(cases.names))}::text[],
                  ${textArray(col(cases.classnames))}::text[], ${textArray(col(cases.files))}::text[],
                  ${textArray(col(cases.parents))}::text[], ${dateArray(col(cases.lastFailureAt))}::timestamptz[])
                  as t(id, name, classname, file, parent, last_failure_at)
                ${conflict}`.pipe(Effect.asVoid)
        }
        return Effect.zipRight(insert(passing, false), insert(failing, true))
      },

      insertResults: (c, b) =>
        b.testCaseIds.length === 0
          ? Effect.void
          : Effect.flatMap(copyClient, (copy) =>
              Option.isSome(copy)
                ? Effect.asVoid(copyIn(copy.value, COPY_RESULTS, copyRows(c, b)))
                : sql`insert into test_results (repo_id, test_case_id, upload_id, run_at, ord, sha, branch, pr_number,
                  status, retry, failure_key, failure_summary, infra)
                select ${c.repoId}::uuid, t.id, ${c.uploadId}::uuid, ${c.runAt.toISOString()}::timestamptz, t.ord,
                  ${c.sha}::text, ${c.branch}::text, ${c.prNumber}::bigint, t.status, t.retry, t.fkey, t.fsum, false
                from unnest(${plainArray(b.testCaseIds)}::uuid[], ${plainArray(b.ords)}::int[],
                  ${textArray(b.statuses)}::text[], ${boolArray(b.retries)}::bool[],
                  ${textArray(b.failureKeys)}::text[], ${textArray(b.failureSummaries)}::text[])
                  as t(id, ord, status, retry, fkey, fsum)`.pipe(Effect.asVoid)
            ),

      copyResults: (next, onSourceError) =>
        Effect.flatMap(copyClient, (copy) =>
          Option.isNone(copy)
            ? Effect.succeed(Option.none())
            : Effect.map(copyInStream(copy.value, COPY_RESULTS_BINARY, next, onSourceError), Option.some)
        ),

      mergeNewCases: (repoId, variant, rows, now) =>
        Effect.gen(function* () {
          const copy = yield* copyClient
          if (Option.isNone(copy)) return yield* Effect.dieMessage("mergeNewCases needs COPY (PostgreSQL)")
          yield* sql.unsafe(STAGING)
          yield* copyIn(copy.value, "copy flaky_new_cases (id, name, classname, file, parent) from stdin", rows)
          yield* sql`
            with staged as (delete from flaky_new_cases returning id, name, classname, file, parent)
            insert into test_cases (repo_id, id, name, classname, file, parent, variant, status_at)
            select ${repoId}::uuid, s.id, s.name, s.classname, s.file, s.parent, ${variant}::text,
              ${now.toISOString()}::timestamptz
            from staged s
            on conflict (repo_id, id) do nothing`
        }),

      classifyInputs: (repoId, upload, since, ids) =>
        Effect.gen(function* () {
          // the scan goes back to the upload's own time when that is older than the window (its rows say whether
          // a candidate was touched), the history keeps the window
          const s = since.toISOString()
          const from = new Date(Math.min(since.getTime(), upload.runAt.getTime())).toISOString()
          const set =
            ids === undefined
              ? sql`
                select id, status, status_reason, status_at, flaky_signal_at, clean_runs, last_failure_at from test_cases
                where repo_id = ${repoId} and status <> 'healthy'
                union
                select id, status, status_reason, status_at, flaky_signal_at, clean_runs, last_failure_at from test_cases
                where repo_id = ${repoId}
                  and last_failure_at >= ${new Date(since.getTime() - FAILURE_TIME_SLACK_MS).toISOString()}::timestamptz`
              : sql`
                select tc.id, tc.status, tc.status_reason, tc.status_at, tc.flaky_signal_at, tc.clean_runs,
                  tc.last_failure_at
                from unnest(${plainArray(ids)}::uuid[]) as i(id)
                join test_cases tc on tc.repo_id = ${repoId} and tc.id = i.id`
          // each test's results through the (test case, time) index, one scan per test (fenced, so that stale
          // statistics cannot turn this into a scan of the repository's week); its runs come back as one string,
          // `<upload id><p|f>,…` oldest first, and the uploads' sha, branch and time once
          const rows = yield* sql<CandidateRow & { last_failure_at: unknown; runs: string | null }>`
            with c as materialized (${set})
            select c.id, c.status, c.status_reason, c.status_at, c.flaky_signal_at, c.clean_runs, c.last_failure_at,
              h.runs
            from c cross join lateral (
              select
                string_agg(r.upload_id::text || case when r.status = 'failed' then 'f' else 'p' end, ','
                           order by r.run_at, r.ord)
                  filter (where r.status <> 'skipped' and not r.infra and r.run_at >= ${s}::timestamptz) as runs,
                bool_or(r.upload_id = ${upload.id}) as touched
              from (
                select upload_id, status, run_at, ord, infra from test_results
                where test_case_id = c.id and repo_id::text = ${repoId}::text and run_at >= ${from}::timestamptz
                offset 0) r
            ) h
            where h.touched or ${ids !== undefined}`
          if (rows.length === 0) return []
          const uploads = yield* sql<{ id: string; sha: string; branch: string; at: number }>`
            select id, sha, branch, (extract(epoch from run_at) * 1000)::float8 as at from test_uploads
            where repo_id = ${repoId} and run_at >= ${s}::timestamptz`
          // one shared (immutable) history entry per upload and status
          const byUpload = new Map<string, { passed: HistoryResult; failed: HistoryResult }>()
          const of = (id: string, status: ResultStatus, u: { sha: string; branch: string; at: number }) => ({
            at: Math.round(Number(u.at)),
            sha: u.sha,
            branch: u.branch,
            status,
            uploadId: id,
            infra: false
          })
          for (const u of uploads) byUpload.set(u.id, { passed: of(u.id, "passed", u), failed: of(u.id, "failed", u) })
          let missing = false
          const out = rows.map((row): ClassifyInput => {
            const history: HistoryResult[] = []
            if (row.runs !== null && row.runs !== "") {
              for (const run of row.runs.split(",")) {
                const u = byUpload.get(run.slice(0, 36))
                if (u === undefined) missing = true
                else history.push(run.charCodeAt(36) === 0x66 ? u.failed : u.passed)
              }
            }
            return { ...toCandidate(row), lastFailureAt: dateOrNull(row.last_failure_at), history }
          })
          if (!missing) return out
          // results whose upload row is not there (not written by this service): read them the long way
          const full = yield* shape.history(
            repoId,
            rows.map((r) => r.id),
            since
          )
          const byTest = new Map<string, HistoryResult[]>()
          for (const h of full) {
            const list = byTest.get(h.testCaseId)
            if (list === undefined) byTest.set(h.testCaseId, [h])
            else list.push(h)
          }
          return out.map((c) => ({ ...c, history: byTest.get(c.id) ?? [] }))
        }),

      quarantinedFailures: (repoId, uploadId, runAt) =>
        Effect.map(
          sql<{ n: number }>`
            select count(*)::int as n from test_results r
            join test_cases tc on tc.repo_id = ${repoId} and tc.id = r.test_case_id
            where r.repo_id = ${repoId} and r.run_at = ${runAt.toISOString()}::timestamptz and r.status = 'failed'
              and r.upload_id = ${uploadId} and not r.retry and tc.quarantined
              and exists (select 1 from test_cases q where q.repo_id = ${repoId} and q.quarantined)`,
          (rows) => rows[0]?.n ?? 0
        ),

      markInfra: (repoId, uploadId, runAt) =>
        sql`update test_results set infra = true
            where repo_id = ${repoId} and run_at = ${runAt.toISOString()}::timestamptz and upload_id = ${uploadId}`.pipe(
          Effect.asVoid
        ),

      recordFailures: (repoId, ids, at) =>
        Effect.forEach(
          chunks(ids, BATCH_ROWS),
          (part) =>
            sql`update test_cases set last_failure_at = ${at.toISOString()}::timestamptz
                where repo_id = ${repoId} and id = any(${plainArray(part)}::uuid[])
                  and (last_failure_at is null
                    or last_failure_at < ${new Date(at.getTime() - FAILURE_TIME_SLACK_MS).toISOString()}::timestamptz)`,
          { discard: true }
        ),

      statusOf: (repoId, ids) =>
        ids.length === 0
          ? Effect.succeed([])
          : Effect.map(
              Effect.forEach(
                chunks(ids, BATCH_ROWS),
                (part) => sql<CandidateRow>`
                  select id, status, status_reason, status_at, flaky_signal_at, clean_runs from test_cases
                  where repo_id = ${repoId} and id = any(${plainArray(part)}::uuid[])`
              ),
              (parts) => parts.flat().map(toCandidate)
            ),

      history: (repoId, ids, since) =>
        ids.length === 0
          ? Effect.succeed([])
          : Effect.map(
              Effect.forEach(
                chunks(ids, BATCH_ROWS),
                (part) => sql<{
                  test_case_id: string
                  at: number
                  sha: string
                  branch: string
                  status: string
                  upload_id: string
                }>`
                  select r.test_case_id, (extract(epoch from r.run_at) * 1000)::float8 as at, r.sha, r.branch,
                    r.status, r.upload_id
                  from unnest(${plainArray(part)}::uuid[]) as c(id)
                  cross join lateral (
                    select test_case_id, run_at, ord, sha, branch, status, upload_id, infra from test_results
                    where test_case_id = c.id and repo_id::text = ${repoId}::text
                      and run_at >= ${since.toISOString()}::timestamptz and status <> 'skipped' and not infra
                    offset 0
                  ) r
                  order by r.test_case_id, r.run_at, r.ord`
              ),
              (parts) =>
                parts.flat().map(
                  (r): HistoryRow => ({
                    testCaseId: r.test_case_id,
                    at: Math.round(Number(r.at)),
                    sha: r.sha,
                    branch: r.branch,
                    status: r.status as ResultStatus,
                    uploadId: r.upload_id,
                    infra: false
                  })
                )
            ),

      saveStatuses: (repoId, updates) =>
        Effect.forEach(
          chunks(updates, BATCH_ROWS),
          (part) =>
            sql`update test_cases tc set status = u.status, status_reason = u.reason, status_at = u.status_at,
                  flaky_signal_at = u.flaky_signal_at, clean_runs = u.clean_runs
                from unnest(${plainArray(part.map((u) => u.id))}::uuid[], ${textArray(part.map((u) => u.status))}::text[],
                  ${textArray(part.map((u) => u.reason))}::text[],
                  ${dateArray(part.map((u) => u.statusAt))}::timestamptz[],
                  ${dateArray(part.map((u) => u.flakySignalAt))}::timestamptz[],
                  ${plainArray(part.map((u) => u.cleanRuns))}::int[])
                  as u(id, status, reason, status_at, flaky_signal_at, clean_runs)
                where tc.repo_id = ${repoId} and tc.id = u.id`,
          { discard: true }
        ),

      refreshQuarantine: (repoId, ids, now) =>
        Effect.gen(function* () {
          if (ids !== null && ids.length === 0) return
          const s = yield* settings(repoId)
          const filter = ids === null ? sql`` : sql`and tc.id = any(${plainArray(ids)}::uuid[])`
          yield* sql`
            update test_cases tc set quarantined = q.v,
              quarantined_at = case when q.v then ${now.toISOString()}::timestamptz else null end
            from (
              select id, (${s.quarantiningEnabled}::boolean and (quarantine_override = 'always_quarantine'
                or (${s.autoQuarantine}::boolean and status = 'flaky' and quarantine_override <> 'never_quarantine'
                  and clean_runs < ${s.autoReleaseCleanRuns}::int))) as v
              from test_cases tc where tc.repo_id = ${repoId} ${filter}
            ) q
            where tc.repo_id = ${repoId} and tc.id = q.id and tc.quarantined <> q.v`
        }),

      findTestCase: (repoId, id) =>
        Effect.map(
          sql<TestCaseRow>`select ${sql.literal(TC_COLUMNS)} from test_cases tc
                           where tc.repo_id = ${repoId} and tc.id = ${id}`,
          (rows) => (rows[0] === undefined ? undefined : toTestCase(rows[0]))
        ),

      failingPage: (repoId, start, end, limit, offset) =>
        Effect.gen(function* () {
          const s = start.toISOString()
          const e = end.toISOString()
          const rows = yield* sql<TestCaseRow>`
            with f as (
              select distinct test_case_id from test_results
              where repo_id = ${repoId} and status = 'failed' and run_at >= ${s}::timestamptz
                and run_at < ${e}::timestamptz
            )
            select ${sql.literal(TC_COLUMNS)}, (count(*) over ())::int as total
            from f join test_cases tc on tc.repo_id = ${repoId} and tc.id = f.test_case_id
            order by tc.name, tc.id limit ${limit} offset ${offset}`
          const count = Effect.map(
            sql<{ n: number }>`
              select count(distinct test_case_id)::int as n from test_results
              where repo_id = ${repoId} and status = 'failed' and run_at >= ${s}::timestamptz
                and run_at < ${e}::timestamptz`,
            (r) => r[0]?.n ?? 0
          )
          return yield* page(rows, count, offset)
        }),

      unhealthyPage: (repoId, status, limit, offset) =>
        Effect.gen(function* () {
          const rows = yield* sql<TestCaseRow>`
            select ${sql.literal(TC_COLUMNS)}, (count(*) over ())::int as total from test_cases tc
            where tc.repo_id = ${repoId} and tc.status <> 'healthy' and tc.status = ${status}
            order by tc.name, tc.id limit ${limit} offset ${offset}`
          const count = Effect.map(
            sql<{ n: number }>`select count(*)::int as n from test_cases
                               where repo_id = ${repoId} and status <> 'healthy' and status = ${status}`,
            (r) => r[0]?.n ?? 0
          )
          return yield* page(rows, count, offset)
        }),

      quarantinedPage: (repoId, limit, offset) =>
        Effect.gen(function* () {
          const rows = yield* sql<TestCaseRow>`
            select ${sql.literal(TC_COLUMNS)}, (count(*) over ())::int as total from test_cases tc
            where tc.repo_id = ${repoId} and tc.quarantined
            order by tc.name, tc.id limit ${limit} offset ${offset}`
          const count = Effect.map(
            sql<{ n: number }>`select count(*)::int as n from test_cases where repo_id = ${repoId} and quarantined`,
            (r) => r[0]?.n ?? 0
          )
          return yield* page(rows, count, offset)
        }),

      stats: (repoId, ids, now) =>
        Effect.gen(function* () {
          const out = new Map<string, TestCaseStats>()
          if (ids.length === 0) return out
          const since7d = new Date(now.getTime() - 7 * 86_400_000).toISOString()
          const since24h = new Date(now.getTime() - 86_400_000).toISOString()
          const list = plainArray(ids)
          const countsQuery = sql<{
            test_case_id: string
            runs7: number
            failed7: number
            runs24: number
            failed24: number
            prs: number
          }>`
            select c.id as test_case_id, s.runs7, s.failed7, s.runs24, s.failed24, s.prs
            from unnest(${list}::uuid[]) as c(id)
            cross join lateral (
              select
                (count(*) filter (where status <> 'skipped'))::int as runs7,
                (count(*) filter (where status = 'failed'))::int as failed7,
                (count(*) filter (where status <> 'skipped' and run_at >= ${since24h}::timestamptz))::int as runs24,
                (count(*) filter (where status = 'failed' and run_at >= ${since24h}::timestamptz))::int as failed24,
                (count(distinct pr_number) filter (where status = 'failed'))::int as prs
              from test_results
              where test_case_id = c.id and repo_id = ${repoId} and run_at >= ${since7d}::timestamptz
            ) s`
          const failuresQuery = sql<{ test_case_id: string; summary: string; n: number; last: unknown }>`
            select test_case_id, summary, n, last from (
              select test_case_id, failure_key, n, last, summary,
                row_number() over (partition by test_case_id order by n desc, last desc, failure_key) as k
              from (
                select c.id as test_case_id, g.failure_key, g.n, g.last, g.summary
                from unnest(${list}::uuid[]) as c(id)
                cross join lateral (
                  select failure_key, count(*)::int as n, max(run_at) as last,
                    (array_agg(failure_summary order by run_at desc))[1] as summary
                  from test_results
                  where test_case_id = c.id and repo_id = ${repoId} and status = 'failed'
                    and run_at >= ${since7d}::timestamptz
                  group by failure_key
                ) g
              ) g
            ) r where k <= 5
            order by test_case_id, k`
          // two statements side by side (two pool connections on PostgreSQL)
          const [counts, failures] = yield* Effect.all([countsQuery, failuresQuery], { concurrency: 2 })
          const grouped = new Map<string, Array<{ summary: string; count: number; last: Date }>>()
          for (const f of failures) {
            const list = grouped.get(f.test_case_id) ?? []
            list.push({ summary: f.summary ?? "", count: f.n, last: date(f.last) })
            grouped.set(f.test_case_id, list)
          }
          for (const c of counts) {
            out.set(c.test_case_id, {
              runs7d: c.runs7,
              failed7d: c.failed7,
              runs24h: c.runs24,
              failed24h: c.failed24,
              pullRequests7d: c.prs,
              failures: grouped.get(c.test_case_id) ?? []
            })
          }
          return out
        }),

      setTicket: (repoId, id, ticketId, url) =>
        Effect.map(
          sql<{ id: string }>`update test_cases set ticket_id = ${ticketId}, ticket_url = ${url}
                              where repo_id = ${repoId} and id = ${id} returning id`,
          (rows) => rows.length > 0
        ),

      setOverride: (repoId, id, override, details, at) => {
        const d = override === "unspecified" || details === undefined ? noDetails : details
        return Effect.map(
          sql<{ id: string }>`update test_cases set quarantine_override = ${override},
                                override_owner = ${d.owner}, override_reason = ${d.reason},
                                override_ticket_url = ${d.ticketUrl},
                                override_expires_at = ${d.expiresAt === null ? null : d.expiresAt.toISOString()}::timestamptz,
                                override_set_at = ${override === "unspecified" || at === undefined ? null : at.toISOString()}::timestamptz
                              where repo_id = ${repoId} and id = ${id} returning id`,
          (rows) => rows.length > 0
        )
      },

      failuresAt: (repoId, sha) =>
        Effect.map(
          sql<{ uploads: number; failed: number; quarantined: number; flaky: number }>`
            with u as (select id, run_at from test_uploads where repo_id = ${repoId} and sha = ${sha}),
            f as (
              select r.test_case_id from u
              join test_results r on r.repo_id = ${repoId} and r.upload_id = u.id and r.run_at = u.run_at
              group by r.upload_id, r.test_case_id
              having bool_or(r.status = 'failed') and not bool_or(r.status = 'passed')
            )
            select (select count(*) from u)::int as uploads, count(distinct f.test_case_id)::int as failed,
              (count(distinct f.test_case_id) filter (where tc.quarantined))::int as quarantined,
              (count(distinct f.test_case_id) filter (where not tc.quarantined and tc.status = 'flaky'))::int as flaky
            from f join test_cases tc on tc.repo_id = ${repoId} and tc.id = f.test_case_id`,
          (rows) => ({
            uploads: rows[0]?.uploads ?? 0,
            failed: rows[0]?.failed ?? 0,
            quarantined: rows[0]?.quarantined ?? 0,
            flaky: rows[0]?.flaky ?? 0
          })
        ),

      lapseExpired: (repoId, now) =>
        Effect.map(
          sql<{
            id: string
            name: string
            quarantine_override: string
            override_owner: string | null
            override_reason: string | null
            override_ticket_url: string | null
            override_expires_at: unknown
          }>`
            update test_cases tc set quarantine_override = 'unspecified', override_owner = null,
              override_reason = null, override_ticket_url = null, override_expires_at = null, override_set_at = null
            from (select id, quarantine_override, override_owner, override_reason, override_ticket_url,
                    override_expires_at from test_cases
                  where repo_id = ${repoId} and override_expires_at <= ${now.toISOString()}::timestamptz
                  for update) old
            where tc.repo_id = ${repoId} and tc.id = old.id
            returning tc.id, tc.name, old.quarantine_override, old.override_owner, old.override_reason,
              old.override_ticket_url, old.override_expires_at`,
          (rows) =>
            rows.map(
              (r): LapsedOverride => ({
                id: r.id,
                name: r.name,
                override: r.quarantine_override as QuarantineOverride,
                owner: r.override_owner,
                reason: r.override_reason,
                ticketUrl: r.override_ticket_url,
                expiresAt: dateOrNull(r.override_expires_at)
              })
            )
        ),

      quarantineState: (repoId) =>
        Effect.map(
          sql<TestCaseRow>`select ${sql.literal(TC_COLUMNS)} from test_cases tc
                           where tc.repo_id = ${repoId} and (tc.quarantine_override <> 'unspecified' or tc.quarantined)
                           order by tc.name, tc.id`,
          (rows) => rows.map(toTestCase)
        ),

      latestSha: (repoId) =>
        Effect.map(
          sql<{ sha: string }>`select sha from test_uploads where repo_id = ${repoId}
                               order by run_at desc, created_at desc limit 1`,
          (rows) => rows[0]?.sha
        ),

      prune: (olderThan) =>
        Effect.gen(function* () {
          const at = olderThan.toISOString()
          const deleted = yield* sql<{ n: number }>`
            with d as (
              delete from test_results where repo_id in (select id from repositories)
                and run_at < ${at}::timestamptz returning 1
            ) select count(*)::int as n from d`
          yield* sql`delete from test_uploads where run_at < ${at}::timestamptz`
          return deleted[0]?.n ?? 0
        })
    }
    return shape
  })
)
