/**
 * The baseline of bench:api: a bare Bun.serve that does what Greenline does for getSubmittedPullRequest and getQueue
 * — the same token check (SHA-256, one indexed lookup), the same SQL through the same driver (node-postgres, or
 * PGlite), the same JSON — with nothing else: no schema decoding, no Effect runtime, no envelope.
 * Usage: bun test/bench/baseline-server.ts <postgres-url | pglite-dir>
 */

import { createHash } from "node:crypto"
import { PGlite } from "@electric-sql/pglite"
import pg from "pg"

const target = process.argv[2] ?? ""
type Query = (sql: string, params: ReadonlyArray<unknown>) => Promise<ReadonlyArray<Record<string, unknown>>>
let query: Query
if (target.startsWith("postgres")) {
  const pool = new pg.Pool({ connectionString: target, max: 20 })
  query = async (sql, params) => (await pool.query(sql, [...params])).rows
} else {
  const db = await PGlite.create(target)
  query = async (sql, params) => (await db.query<Record<string, unknown>>(sql, [...params])).rows
}

const entryFields = (r: Record<string, unknown>) => ({
  id: r.id,
  state: r.state,
  stateChangedAt: new Date(String(r.state_changed_at)).toISOString(),
  priorityValue: r.priority,
  prNumber: Number(r.pr_number),
  prTitle: r.title,
  prSha: r.head_sha,
  prAuthor: r.author
})

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(request) {
    const token = request.headers.get("x-api-token") ?? ""
    const hash = createHash("sha256").update(token).digest()
    const org = await query(
      "select o.id from api_tokens t join organizations o on o.id = t.org_id where t.token_hash = $1 and t.revoked_at is null",
      [hash]
    )
    if (org.length === 0) return Response.json({ error: { code: "UNAUTHORIZED" } }, { status: 401 })
    const body = (await request.json()) as {
      repo: { host: string; owner: string; name: string }
      targetBranch: string
      pr?: { number: number }
    }
    const queue = await query(
      "select q.id from queues q join repositories r on r.id = q.repo_id where r.host = $1 and r.owner = $2 and r.name = $3 and r.org_id = $4 and q.branch = $5",
      [body.repo.host, body.repo.owner, body.repo.name, org[0]?.id, body.targetBranch]
    )
    const queueId = queue[0]?.id
    if (queueId === undefined) return Response.json({ error: { code: "QUEUE_NOT_FOUND" } }, { status: 404 })
    const path = new URL(request.url).pathname
    if (path.endsWith("/getSubmittedPullRequest")) {
      const rows = await query("select * from entries where queue_id = $1 and pr_number = $2", [
        queueId,
        body.pr?.number
      ])
      const row = rows[0]
      if (row === undefined) return Response.json({ error: { code: "PR_NOT_FOUND" } }, { status: 404 })
      return Response.json(entryFields(row))
    }
    const rows = await query(
      "select * from entries where queue_id = $1 and state in ('pending','testing','tests_passed','pending_failure') order by priority, submitted_at",
      [queueId]
    )
    return Response.json({ state: "running", enqueuedPullRequests: rows.map(entryFields) })
  }
})
process.stdout.write(`baseline listening ${server.port}\n`)
