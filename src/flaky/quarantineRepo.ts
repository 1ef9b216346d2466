import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import type { FlakyRepoShape, FlakySettings, LapsedOverride, QuarantineOverride } from "./FlakyRepo.ts"
import { DEFAULT_AUTO_RELEASE_CLEAN_RUNS } from "./FlakyRepo.ts"
import { dateOrNull, noDetails, plainArray, TC_COLUMNS, type TestCaseRow, toTestCase } from "./rowsRepo.ts"

/** Per-repository settings and quarantine: overrides, their expiry, recomputing `quarantined`, the export. */
export const quarantineRepo = Effect.gen(function* () {
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

  const shape = {
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
      )
  } satisfies Partial<FlakyRepoShape>
  return shape
})
