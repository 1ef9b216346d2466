import { afterAll, describe, expect, test } from "bun:test"
import * as path from "node:path"
import { Option, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { startServer } from "../../src/server.ts"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { databases, freshPostgres, tempDir } from "../support/server.ts"

/**
 * First run (issue 19): a database with no organization and no token gets the default organization and one admin
 * token, printed once; BOOTSTRAP_TOKEN replaces the previous bootstrap token and must be 32 characters or more; the
 * CLI manages tokens through the running server's admin API when the server holds the embedded database.
 */

const ROOT = path.join(import.meta.dir, "..", "..")

interface Spawned {
  readonly url: string
  readonly lines: ReadonlyArray<string>
  readonly stop: () => Promise<void>
}

/** `bun src/main.ts` in its own process; resolves once it listens, with every line it printed until then. */
const spawnMain = async (env: Record<string, string>): Promise<Spawned> => {
  const child = Bun.spawn([process.execPath, "src/main.ts"], {
    cwd: ROOT,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "error", BOOTSTRAP_TOKEN: "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit"
  })
  const reader = child.stdout.getReader()
  const decoder = new TextDecoder()
  let buffered = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) throw new Error(`the server exited before listening: ${buffered}`)
    buffered += decoder.decode(value, { stream: true })
    const port = /"message":"greenline listening","port":(\d+)/.exec(buffered)?.[1]
    if (port !== undefined) {
      void (async () => {
        for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return
      })()
      return {
        url: `http://127.0.0.1:${port}`,
        lines: buffered.split("\n").filter((l) => l !== ""),
        stop: async () => {
          child.kill("SIGTERM")
          await child.exited
        }
      }
    }
  }
}

const cli = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const r = Bun.spawnSync([process.execPath, "src/cli.ts", ...args], {
    cwd: ROOT,
    env: { ...process.env, BOOTSTRAP_TOKEN: "", ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() }
}

const post = async (url: string, op: string, token: string, body: unknown) => {
  const r = await fetch(`${url}/v1/${op}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-token": token },
    body: JSON.stringify(body)
  })
  return { status: r.status, body: (await r.json()) as { error?: { code: string; message: string } } }
}

const queueKey = { repo: { host: "local", owner: "acme", name: "first" }, targetBranch: "main" }

for (const db of databases) {
  describe(`first run (${db})`, () => {
    const cleanups: Array<() => Promise<void>> = []
    afterAll(async () => {
      for (const c of cleanups.reverse()) await c()
    })

    /** A new database: empty, or (`seeded`, for what is not about the first start) migrated already. */
    const storage = async (seeded = false): Promise<Record<string, string>> => {
      const dataDir = seeded && db === "pglite" ? await seededDataDir() : tempDir()
      if (db === "pglite") return { DATA_DIR: dataDir }
      const pg = await freshPostgres({ empty: true })
      cleanups.push(pg.drop)
      return { DATA_DIR: dataDir, DATABASE_URL: pg.url }
    }

    test("an empty database gets the default organization and one admin token, printed once; BOOTSTRAP_TOKEN revokes it", async () => {
      const env = await storage()
      const first = await spawnMain(env)
      cleanups.push(first.stop)
      const marked = first.lines.filter((l) => l.includes("FIRST RUN"))
      expect(marked).toHaveLength(1)
      const line = JSON.parse(marked[0] ?? "{}") as { token: string; dashboard: string; org: string }
      expect(line.org).toBe("default")
      expect(line.token).toMatch(/^glt_/)
      expect(line.dashboard).toMatch(/^http:\/\/localhost:\d+\/login$/)
      // the token once in its line (issue 38 found it twice)
      expect((marked[0] ?? "").split(line.token)).toHaveLength(2)
      // the token works: the default organization claims the repository on first use
      expect((await post(first.url, "createQueue", line.token, queueKey)).status).toBe(200)

      // the CLI manages tokens while the server runs: through the admin API when the embedded database is held
      const viaCli = cli(["tokens", "create", "--org", "default", "--name", "ci"], {
        ...env,
        GREENLINE_URL: first.url,
        GREENLINE_TOKEN: line.token
      })
      expect(viaCli.err).toBe("")
      expect(viaCli.code).toBe(0)
      const [id, ciToken] = viaCli.out.trim().split("\n")
      expect(id).toMatch(/^[0-9a-f-]{36}$/)
      expect((await post(first.url, "getQueue", ciToken ?? "", queueKey)).status).toBe(200)
      const list = cli(["tokens", "list", "--org", "default"], {
        ...env,
        GREENLINE_URL: first.url,
        GREENLINE_TOKEN: line.token
      })
      expect(list.code).toBe(0)
      expect(list.out).toContain("first-run admin\tadmin\t")
      expect(list.out).toContain(`${id}\tci\twrite\t`)
      // a token below the role admin may not use the admin API
      const refused = await post(first.url, "admin/createToken", ciToken ?? "", { org: "default" })
      expect(refused.status).toBe(403)
      expect(refused.body.error?.code).toBe("PERMISSION_DENIED")
      const revoke = cli(["tokens", "revoke", id ?? ""], {
        ...env,
        GREENLINE_URL: first.url,
        GREENLINE_TOKEN: line.token
      })
      expect(revoke.out.trim()).toBe(`revoked ${id}`)
      expect((await post(first.url, "getQueue", ciToken ?? "", queueKey)).status).toBe(401)
      await first.stop()

      // a restart on the same database prints no token and makes none
      const second = await spawnMain(env)
      cleanups.push(second.stop)
      expect(second.lines.filter((l) => l.includes("FIRST RUN"))).toHaveLength(0)
      expect((await post(second.url, "getQueue", line.token, queueKey)).status).toBe(200)
      await second.stop()

      // BOOTSTRAP_TOKEN set later replaces the first-run token: revoked, and the log says so (docs/decisions.md)
      const bootstrap = "c".repeat(40)
      const third = await spawnMain({ ...env, BOOTSTRAP_TOKEN: bootstrap })
      cleanups.push(third.stop)
      expect(third.lines.filter((l) => l.includes("the first-run admin token is revoked"))).toHaveLength(1)
      expect((await post(third.url, "getQueue", line.token, queueKey)).status).toBe(401)
      expect((await post(third.url, "getQueue", bootstrap, queueKey)).status).toBe(200)
      await third.stop()
    }, 120_000)

    test("BOOTSTRAP_TOKEN replaces the previous bootstrap token; a short one is refused at start-up", async () => {
      const env = await storage(true)
      const config = (token: string) =>
        makeAppConfig({
          port: 0,
          host: "127.0.0.1",
          dataDir: env.DATA_DIR ?? "",
          databaseUrl: env.DATABASE_URL ? Option.some(Redacted.make(env.DATABASE_URL)) : Option.none(),
          bootstrapToken: Option.some(Redacted.make(token)),
          logLevel: "error"
        })
      const a = "a".repeat(32)
      const b = "b".repeat(40)
      let server = await startServer(config(a))
      expect((await post(server.url, "createQueue", a, queueKey)).status).toBe(200)
      await server.stop()
      server = await startServer(config(b))
      expect((await post(server.url, "getQueue", b, queueKey)).status).toBe(200)
      expect((await post(server.url, "getQueue", a, queueKey)).status).toBe(401)
      const tokens = await post(server.url, "admin/listTokens", b, { org: "default" })
      const list = (tokens.body as unknown as { tokens: ReadonlyArray<{ name: string; revokedAt: string | null }> })
        .tokens
      expect(list.filter((t) => t.name === "bootstrap" && t.revokedAt === null)).toHaveLength(1)
      // the same token again (a plain restart) keeps it
      await server.stop()
      server = await startServer(config(b))
      expect((await post(server.url, "getQueue", b, queueKey)).status).toBe(200)
      await server.stop()

      await expect(startServer(config("abc"))).rejects.toThrow(
        /BOOTSTRAP_TOKEN is 3 characters long; it must have at least 32/
      )
      // the refused start released the database: a good token starts again
      server = await startServer(config(b))
      await server.stop()
    }, 60_000)
  })
}
