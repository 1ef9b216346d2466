import { describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { freshPostgres, pgUrl, startTestServer } from "../support/server.ts"

const key = { repo: { host: "local", owner: "acme", name: "restart" }, targetBranch: "main" }
const ROOT = path.join(import.meta.dir, "..", "..")

describe("restart", () => {
  test("a queue and its configuration survive a restart on the same DATA_DIR (PGlite)", async () => {
    const dataDir = await seededDataDir()
    try {
      const first = await startTestServer({ db: "pglite", dataDir })
      await first.post("createQueue", key)
      await first.post("updateQueue", { ...key, concurrency: 7, mergeMethod: "rebase", state: "paused" })
      await first.close()
      const second = await startTestServer({ db: "pglite", dataDir })
      const got = await second.post("getQueue", key)
      await second.close()
      expect(got.status).toBe(200)
      expect(got.body).toMatchObject({ concurrency: 7, mergeMethod: "rebase", state: "paused" })
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })

  test("the embedded database belongs to one process: without an admin token the CLI refuses while a server holds it", async () => {
    const dataDir = await seededDataDir()
    const server = await startTestServer({ db: "pglite", dataDir })
    try {
      const cli = Bun.spawnSync([process.execPath, "src/cli.ts", "orgs", "create", "someone"], {
        cwd: ROOT,
        env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "", GREENLINE_TOKEN: "", BOOTSTRAP_TOKEN: "" },
        stderr: "pipe",
        stdout: "pipe"
      })
      expect(cli.exitCode).not.toBe(0)
      // the database stays the server's; the CLI says how to go through the server's admin API instead
      expect(cli.stderr.toString()).toContain("a running server holds the embedded database")
    } finally {
      await server.close()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  })

  test.if(pgUrl !== undefined)("the CLI manages organizations, tokens and repositories on PostgreSQL", async () => {
    const pg = await freshPostgres({ empty: true })
    const env = { ...process.env, DATABASE_URL: pg.url }
    const cli = (...args: Array<string>) => {
      const r = Bun.spawnSync([process.execPath, "src/cli.ts", ...args], {
        cwd: ROOT,
        env,
        stdout: "pipe",
        stderr: "pipe"
      })
      return { code: r.exitCode, out: r.stdout.toString().trim(), err: r.stderr.toString() }
    }
    try {
      expect(cli("migrate").code).toBe(0)
      expect(cli("orgs", "create", "cli-org").code).toBe(0)
      // a queue is made with the role maintain (the default, write, is what CI needs)
      const created = cli("tokens", "create", "--org", "cli-org", "--name", "ci", "--role", "maintain")
      expect(created.code).toBe(0)
      const lines = created.out.split("\n")
      const token = lines.at(-1) ?? ""
      const id = lines[0] ?? ""
      expect(token).toStartWith("glt_")
      expect(cli("repos", "add", "--org", "cli-org", "local/cli/repo").code).toBe(0)
      expect(cli("tokens", "list", "--org", "cli-org").out).toContain(`${id}\tci\tmaintain\t`)
      const server = await startTestServer({ db: "postgres", databaseUrl: pg.url })
      try {
        const withToken = { "x-api-token": token }
        const made = await server.post(
          "createQueue",
          { repo: { host: "local", owner: "cli", name: "repo" }, targetBranch: "main" },
          withToken
        )
        expect(made.status).toBe(200)
        expect(cli("tokens", "revoke", id).code).toBe(0)
        const refused = await server.post(
          "getQueue",
          { repo: { host: "local", owner: "cli", name: "repo" }, targetBranch: "main" },
          withToken
        )
        expect(refused.status).toBe(401)
      } finally {
        await server.close()
      }
      expect(cli("tokens", "revoke", "00000000-0000-0000-0000-000000000000").code).not.toBe(0)
    } finally {
      await pg.drop()
    }
  })
})
