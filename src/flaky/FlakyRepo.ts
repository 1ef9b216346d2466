import type { SqlError } from "@effect/sql/SqlError"
import { Context, type Effect, type Option } from "effect"
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
