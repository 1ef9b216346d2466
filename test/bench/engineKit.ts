/**
 * What the engine benchmarks share: a fresh PostgreSQL database per run, and CI that answers at once (every run
 * with a test branch gets a `ci: success` status).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SQL } from "bun"
import { Effect } from "effect"
import { Statuses } from "../../src/queue/Statuses.ts"
import type { RunningServer } from "../../src/server.ts"

/** Creates database `name` next to `adminUrl`; returns its URL and a function that drops it. */
export const freshBenchDatabase = async (adminUrl: string, name: string) => {
  const admin = new SQL(adminUrl)
  await admin.unsafe(`drop database if exists ${name}`)
  await admin.unsafe(`create database ${name}`)
  await admin.close()
  const u = new URL(adminUrl)
  u.pathname = `/${name}`
  return {
    url: u.toString(),
    drop: async () => {
      const a = new SQL(adminUrl)
      await a.unsafe(`drop database if exists ${name} with (force)`)
      await a.close()
    }
  }
}

/** Starts CI that passes every in-progress run of the server at once; the returned function stops it. */
export const instantCi = (server: RunningServer): (() => Promise<void>) => {
  let stop = false
  const reported = new Set<string>()
  const loop = (async () => {
    while (!stop) {
      const runs = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ sha: string; repo_id: string }>`
            select t.test_branch_sha as sha, q.repo_id from test_runs t join queues q on q.id = t.queue_id
            where t.status = 'in_progress' and t.test_branch_sha is not null`
        )
      )
      for (const r of runs) {
        if (reported.has(r.sha)) continue
        reported.add(r.sha)
        await server.run(Effect.flatMap(Statuses, (s) => s.report(r.repo_id, r.sha, "ci", "success", null, null)))
      }
      await Bun.sleep(5)
    }
  })()
  return async () => {
    stop = true
    await loop
  }
}
