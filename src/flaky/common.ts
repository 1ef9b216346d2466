import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Effect, Option } from "effect"
import { EventLog, type NewEvent } from "../kernel/EventLog.ts"
import { dieUnless } from "../kernel/errors.ts"
import { GitHost } from "../queue/GitHost.ts"
import type { RepoRef } from "../queue/schemas.ts"
import { type Organization, type Repository, Tenancy } from "../tenancy/Tenancy.ts"
import { type Codeowners, locations, ownersOf, parseCodeowners } from "./codeowners.ts"
import { isFlakyError, RepositoryNotFound, TestCaseNotFound } from "./errors.ts"
import {
  FlakyEvents,
  type FlakyEventsShape,
  noFlakyEvents,
  type QuarantineSettingChanged,
  quarantineSettingChanged
} from "./events.ts"
import { FlakyEnv } from "./FlakyEnv.ts"
import {
  FlakyRepo,
  type FlakySettings,
  type LapsedOverride,
  type QuarantineOverride,
  type TestCaseRecord,
  type TestCaseStats
} from "./FlakyRepo.ts"
import type * as F from "./schemas.ts"

const repoPath = (repo: RepoRef) => `${repo.host}/${repo.owner}/${repo.name}`

export const orDie = dieUnless(isFlakyError)

const repoNotFound = (repo: RepoRef) => new RepositoryNotFound({ message: `repository ${repoPath(repo)} not found` })
export const testNotFound = (id: string) => new TestCaseNotFound({ message: `no test case ${id} in this repository` })

/**
 * What the flaky service's parts (upload, queries, quarantine) share: its ports, the repository check, presenting a
 * test case, lapsing overrides, events.
 */
export const makeFlakyCommon = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* FlakyRepo
  const tenancy = yield* Tenancy
  const config = yield* FlakyEnv
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
                    updated: c.current,
                    // a lapse is Greenline's doing: the override's own reason no longer applies
                    reason: c.cause === "expired" ? "the override expired" : c.reason
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
          rows.length === 0 ? Effect.succeed(null) : Effect.flatMap(repo.latestSha(r.id), (sha) => codeownersAt(r, sha))
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

  return {
    sql,
    repo,
    events,
    now,
    requireRepo,
    codeownersAt,
    changeOf,
    lapseExpired,
    settingsOut,
    describe,
    appendEvents
  }
})

export type FlakyCommon = Effect.Effect.Success<typeof makeFlakyCommon>
