import { copyText } from "../kernel/pgCopy.ts"
import type { TestStatusValue } from "./classify.ts"
import type {
  OverrideDetails,
  QuarantineOverride,
  ResultBatch,
  ResultContext,
  StatusCandidate,
  TestCaseRecord
} from "./FlakyRepo.ts"

/** What the flaky repository's parts share: PostgreSQL array literals, COPY rows, the test case row and its columns. */

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
export const plainArray = (values: ReadonlyArray<string | number>): string => `{${values.join(",")}}`
export const boolArray = (values: ReadonlyArray<boolean>): string => {
  const parts = new Array<string>(values.length)
  for (let i = 0; i < values.length; i++) parts[i] = values[i] ? "t" : "f"
  return `{${parts.join(",")}}`
}
export const dateArray = (values: ReadonlyArray<Date | null>): string =>
  `{${values.map((d) => (d === null ? "NULL" : `"${d.toISOString()}"`)).join(",")}}`

// ---- COPY text rows (PostgreSQL): the per-row columns first, the upload's constant columns as one suffix

export const COPY_RESULTS = `copy test_results (test_case_id, ord, status, retry, failure_key, failure_summary,
  repo_id, upload_id, run_at, sha, branch, pr_number, infra) from stdin`

/** The same in COPY's binary format (what the upload pipeline streams, see `ingest.ts`). */
export const COPY_RESULTS_BINARY = `${COPY_RESULTS} with (format binary)`

/** The batch as COPY text rows. */
export const copyRows = (c: ResultContext, b: ResultBatch): Uint8Array => {
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

export const STAGING = `create temporary table if not exists flaky_new_cases (
  id uuid not null, name text not null, classname text not null, file text not null, parent text not null
) on commit delete rows`

export const date = (v: unknown): Date => (v instanceof Date ? v : new Date(String(v)))
export const dateOrNull = (v: unknown): Date | null => (v === null || v === undefined ? null : date(v))

export interface TestCaseRow {
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

export const TC_COLUMNS = `tc.repo_id, tc.id, tc.name, tc.classname, tc.file, tc.parent, tc.variant, tc.status, tc.status_reason,
  tc.status_at, tc.flaky_signal_at, tc.quarantine_override, tc.quarantined, tc.quarantined_at, tc.ticket_id, tc.ticket_url,
  tc.override_owner, tc.override_reason, tc.override_ticket_url, tc.override_expires_at, tc.override_set_at`

export const toTestCase = (r: TestCaseRow): TestCaseRecord => ({
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

export interface CandidateRow {
  readonly id: string
  readonly status: string
  readonly status_reason: string
  readonly status_at: unknown
  readonly flaky_signal_at: unknown
  readonly clean_runs: number
}
export const toCandidate = (r: CandidateRow): StatusCandidate => ({
  id: r.id,
  status: r.status as TestStatusValue,
  statusReason: r.status_reason,
  statusAt: date(r.status_at),
  flakySignalAt: dateOrNull(r.flaky_signal_at),
  cleanRuns: Number(r.clean_runs ?? 0)
})

export const noDetails: OverrideDetails = { owner: null, reason: null, ticketUrl: null, expiresAt: null }

export const chunks = <A>(list: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size))
  return out
}
