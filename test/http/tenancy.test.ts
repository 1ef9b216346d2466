import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Tenancy } from "../../src/tenancy/Tenancy.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const repo = { host: "local", owner: "acme", name: "tenancy" }

for (const db of databases) {
  describe(`tenancy (${db})`, () => {
    let server: TestServer
    let otherToken: string
    let otherTokenId: string
    beforeAll(async () => {
      server = await startTestServer({ db })
      const created = await server.run(
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          yield* tenancy.createOrg("other-org")
          return yield* tenancy.createToken("other-org", "test", "admin")
        })
      )
      otherToken = created.token
      otherTokenId = created.id
    })
    afterAll(async () => {
      await server.close()
    })

    test("tokens are 32 random bytes or more and stored only as hashes", async () => {
      expect(otherToken.length).toBeGreaterThanOrEqual(43)
      const rows = await server.run(
        Effect.gen(function* () {
          const { SqlClient } = yield* Effect.promise(() => import("@effect/sql/SqlClient"))
          const sql = yield* SqlClient
          return yield* sql<{ token_hash: Uint8Array }>`select token_hash from api_tokens`
        })
      )
      for (const row of rows) {
        expect(Buffer.from(row.token_hash).length).toBe(32)
        expect(Buffer.from(row.token_hash).toString("utf8")).not.toContain(otherToken)
      }
    })

    test("another organization's queue is a 404, exactly as if it did not exist", async () => {
      expect((await server.post("createQueue", { repo, targetBranch: "main" })).status).toBe(200)
      const other = { "x-api-token": otherToken }
      const get = await server.post("getQueue", { repo, targetBranch: "main" }, other)
      expect(get.status).toBe(404)
      expect(get.body).toEqual({ error: { code: "QUEUE_NOT_FOUND", message: "no queue local/acme/tenancy@main" } })
      const missing = await server.post("getQueue", { repo: { ...repo, name: "nothing" }, targetBranch: "main" }, other)
      expect(missing.status).toBe(404)
      // an organization without claim-on-first-use cannot create a queue on an unclaimed repository
      const create = await server.post("createQueue", { repo: { ...repo, name: "fresh" }, targetBranch: "main" }, other)
      expect(create.status).toBe(404)
      // nor on one that belongs to someone else
      const steal = await server.post("createQueue", { repo, targetBranch: "dev" }, other)
      expect(steal.status).toBe(404)
      const update = await server.post("updateQueue", { repo, targetBranch: "main", state: "paused" }, other)
      expect(update.status).toBe(404)
      const del = await server.post("deleteQueue", { repo, targetBranch: "main" }, other)
      expect(del.status).toBe(200)
      expect((await server.post("getQueue", { repo, targetBranch: "main" })).status).toBe(200)
      const metrics = await fetch(`${server.url}/v1/getMergeQueueMetrics?repo=acme/tenancy&repoHost=local`, {
        headers: { authorization: `Bearer ${otherToken}` }
      })
      expect(metrics.status).toBe(404)
    })

    test("a revoked token is refused at once", async () => {
      const before = await server.post("getQueue", { repo, targetBranch: "x" }, { "x-api-token": otherToken })
      expect(before.status).toBe(404)
      await server.run(Effect.flatMap(Tenancy, (t) => t.revokeToken(otherTokenId)))
      const after = await server.post("getQueue", { repo, targetBranch: "x" }, { "x-api-token": otherToken })
      expect(after.status).toBe(401)
    })

    test("the rate limit answers 429 with Retry-After", async () => {
      const limited = await startTestServer({ db: "pglite", rateLimitPerSecond: 1 })
      try {
        // one burst of 12 at 1 a second: only a machine that took 11 s to take them in would refuse none
        const answers = await Promise.all(
          Array.from({ length: 12 }, () =>
            fetch(`${limited.url}/v1/getQueue`, {
              method: "POST",
              headers: { "content-type": "application/json", "x-api-token": limited.token },
              body: JSON.stringify({ repo, targetBranch: "main" })
            })
          )
        )
        const refused = answers.filter((a) => a.status === 429)
        expect(refused.length).toBeGreaterThan(0)
        expect(await refused[0]?.json()).toMatchObject({ error: { code: "RATE_LIMITED" } })
        for (const r of refused) expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      } finally {
        await limited.close()
      }
    })
  })
}
