/**
 * Instances share the queues (#37): three servers in their own processes on one PostgreSQL with 30 queues. Each
 * takes its fair share (ceil(30 / live) and a slack of 2 at most); after a SIGKILL the dead one's queues are owned
 * again by the others; after a join the shares are balanced again; at every settled point each queue has exactly one
 * owner, a live instance, and what each instance says it holds (/readyz) is what the database says. A queue moves
 * only after its owner held it a minute: the test ages the leases in the database instead of waiting that minute.
 */
import { describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { SQL } from "bun"
import { createTestRepo, type TestRepo } from "../support/git.ts"
import { type ServerProcess, spawnServer } from "../support/process.ts"
import { eventually, freshPostgres, pgUrl, TEST_TOKEN, tempDir } from "../support/server.ts"

const QUEUES = 30
const SLACK = 2

interface Share {
  readonly instance: string
  readonly owned: number
  readonly fair: number
  readonly most: number
  readonly live: number
  readonly queues: number
  readonly hasShare: boolean
}

const shareOf = async (server: ServerProcess): Promise<Share | null> => {
  const r = await fetch(`${server.url}/readyz`)
  const body = (await r.json()) as { runners: { share: Share | null } }
  return body.runners.share
}

describe.if(pgUrl !== undefined)("instances share the queues (PostgreSQL)", () => {
  test("3 instances, 30 queues: fair shares, a kill, a join, one owner each", async () => {
    const root = tempDir("greenline-shares-git-")
    const repos: Array<TestRepo> = []
    for (let i = 0; i < QUEUES / 2; i++) {
      const repo = createTestRepo({ root, repo: { host: "local", owner: "acme", name: `s${i}` } })
      repo.setBranch("release", repo.branchSha("main") ?? "")
      repos.push(repo)
    }
    const pg = await freshPostgres()
    const db = new SQL(pg.url)
    const env = { DATABASE_URL: pg.url, GIT_ROOT: root, GIT_POLL_MS: "300" }
    const spawn = () => spawnServer({ ...env, DATA_DIR: tempDir() }, TEST_TOKEN)
    const servers: Array<ServerProcess> = []
    try {
      const a = await spawn()
      servers.push(a)
      for (const repo of repos) {
        for (const targetBranch of ["main", "release"]) {
          const r = await a.post("createQueue", { repo: repo.repo, targetBranch })
          expect(r.status).toBe(200)
        }
      }
      // queues held a minute may move: the test ages them instead of waiting
      const age = () => db`update queue_runtime set owned_since = now() - interval '2 minutes' where owner is not null`

      /** The shares once settled: each live instance has its share, and the database agrees with each. */
      const balanced = async (live: ReadonlyArray<ServerProcess>, what: string) =>
        eventually(
          async () => {
            await age()
            const shares = await Promise.all(live.map(shareOf))
            if (shares.some((s) => s === null || s.live !== live.length || !s.hasShare)) return undefined
            const rows = (await db`select owner, count(*)::int as n from queue_runtime
                                   where owner is not null and lease_until > now() group by owner`) as Array<{
              owner: string
              n: number
            }>
            const byOwner = new Map(rows.map((r) => [r.owner, r.n]))
            const total = rows.reduce((sum, r) => sum + r.n, 0)
            if (total !== QUEUES) return undefined
            // each instance holds what the database says it holds, and no other owner holds any
            if (shares.some((s) => byOwner.get(s?.instance ?? "") !== s?.owned)) return undefined
            if (byOwner.size !== live.length) return undefined
            return shares as ReadonlyArray<Share>
          },
          45_000,
          what
        )

      const b = await spawn()
      const c = await spawn()
      servers.push(b, c)
      const three = await balanced([a, b, c], "3 instances sharing 30 queues")
      for (const s of three) {
        expect(s.fair).toBe(10)
        expect(s.owned).toBeGreaterThanOrEqual(QUEUES - 2 * 12)
        expect(s.owned).toBeLessThanOrEqual(10 + SLACK)
      }
      expect(three.reduce((sum, s) => sum + s.owned, 0)).toBe(QUEUES)

      // a SIGKILL: its leases expire, the two others take its queues
      await c.kill("SIGKILL")
      servers.splice(servers.indexOf(c), 1)
      const two = await balanced([a, b], "the dead instance's queues taken over")
      for (const s of two) {
        expect(s.fair).toBe(15)
        expect(s.owned).toBeLessThanOrEqual(15 + SLACK)
      }

      // a join: the others let queues go to the newcomer
      const d = await spawn()
      servers.push(d)
      const again = await balanced([a, b, d], "a new instance given its share")
      for (const s of again) expect(s.owned).toBeLessThanOrEqual(10 + SLACK)
      const dShare = again[2]
      expect(dShare?.owned).toBeGreaterThanOrEqual(QUEUES - 2 * 12)
      // fencing: each queue's token went up once per owner it had, never two owners under one token
      const tokens = (await db`select count(*)::int as n from queue_runtime where fencing < 1`) as Array<{ n: number }>
      expect(tokens[0]?.n).toBe(0)
    } finally {
      for (const s of servers) await s.kill("SIGTERM").catch(() => undefined)
      await db.close()
      await pg.drop()
      for (const r of repos) r.cleanup()
      fs.rmSync(root, { recursive: true, force: true })
    }
  }, 240_000)
})
