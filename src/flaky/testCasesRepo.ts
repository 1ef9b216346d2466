import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { FlakyRepoShape, TestCaseStats } from "./FlakyRepo.ts"
import { date, plainArray, TC_COLUMNS, type TestCaseRow, toTestCase } from "./rowsRepo.ts"

/** Test case reads for the queries: one test case, the pages, their statistics; tickets. */
export const testCasesRepo = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  const page = (rows: ReadonlyArray<TestCaseRow>, count: Effect.Effect<number, SqlError>, offset: number) =>
    Effect.gen(function* () {
      const first = rows[0]
      const total = first !== undefined ? Number(first.total ?? 0) : offset > 0 ? yield* count : 0
      return { rows: rows.map(toTestCase), total }
    })

  const shape = {
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
      )
  } satisfies Partial<FlakyRepoShape>
  return shape
})
