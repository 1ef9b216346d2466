import { Effect } from "effect"
import { DAY } from "./classify.ts"
import { ownersOf } from "./codeowners.ts"
import { type FlakyCommon, orDie, testNotFound } from "./common.ts"
import { TimeRangeInvalid } from "./errors.ts"

import type { FlakyShape } from "./FlakyShape.ts"
import { paged } from "./paging.ts"
import type * as F from "./schemas.ts"

export const MAX_RANGE_MS = 7 * DAY

/** The queries: failing, quarantined and unhealthy tests, one test's details; linking a ticket. */
export const makeQueries = (
  common: FlakyCommon
): Pick<
  FlakyShape,
  "listFailingTests" | "listQuarantinedTests" | "getTestDetails" | "listUnhealthyTests" | "linkTicket"
> => {
  const { sql, repo, now, requireRepo, codeownersAt, lapseExpired, describe } = common
  return {
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
      )
  }
}
