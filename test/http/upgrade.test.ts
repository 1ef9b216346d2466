import { afterAll, describe, expect, test } from "bun:test"
import * as path from "node:path"
import { SQL } from "bun"
import { APP_VERSION } from "../../src/db/schema.ts"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { freshPostgres, pgUrl, startTestServer } from "../support/server.ts"
import { removeDir } from "../support/tmp.ts"

/**
 * Upgrades (issue 38): a server older than its database's schema refuses to start, naming the version it needs,
 * and changes nothing; `greenline migrate --dry-run` says what a version would apply and whether each migration is
 * safe while older instances run; servers on PostgreSQL list themselves in `greenline_instances` while they run.
 */

const ROOT = path.join(import.meta.dir, "..", "..")

const run = async (args: ReadonlyArray<string>, env: Record<string, string>, timeoutMs = 60_000) => {
  const child = Bun.spawn([process.execPath, "--max-http-header-size=65536", ...args], {
    cwd: ROOT,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "error", BOOTSTRAP_TOKEN: "", ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
  const [out, err, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  clearTimeout(timer)
  return { code, out, err }
}

describe("upgrades", () => {
  const dirs: Array<string> = []
  afterAll(() => {
    for (const d of dirs) removeDir(d)
  })

  test("a server older than its database's schema refuses to start, names the version it needs, changes nothing", async () => {
    const dataDir = await seededDataDir()
    dirs.push(dataDir)
    const { PGlite } = await import("@electric-sql/pglite")
    const db = await PGlite.create(path.join(dataDir, "pg"))
    await db.exec(`insert into greenline_migrations (migration_id, name) values (9999, 'from_the_future');
                   insert into greenline_schema (migration_id, name, app_version, safe_with_older_instances)
                   values (9999, 'from_the_future', '9.1.0', false)`)
    const count = async () =>
      Number((await db.query<{ n: number }>("select count(*)::int as n from greenline_migrations")).rows[0]?.n)
    const migrations = await count()
    await db.close()

    const server = await run(["src/main.ts"], { DATA_DIR: dataDir, DATABASE_URL: "" })
    expect(server.code).not.toBe(0)
    expect(server.err).toContain("greenline could not start")
    expect(server.err).toContain(
      `migration 9999_from_the_future was applied by Greenline 9.1.0, and this is Greenline ${APP_VERSION}`
    )
    expect(server.err).toContain("run Greenline 9.1.0 or later")

    // the same entry point runs the CLI: the dry run says so too, and so does a migrate
    const plan = await run(["src/main.ts", "migrate", "--dry-run"], { DATA_DIR: dataDir, DATABASE_URL: "" })
    expect(plan.code).toBe(0)
    expect(plan.out).toContain("refused: the database's schema is newer than this server")
    const migrate = await run(["src/main.ts", "migrate"], { DATA_DIR: dataDir, DATABASE_URL: "" })
    expect(migrate.code).not.toBe(0)
    expect(migrate.err).toContain("run Greenline 9.1.0 or later")

    const again = await PGlite.create(path.join(dataDir, "pg"))
    expect(
      Number((await again.query<{ n: number }>("select count(*)::int as n from greenline_migrations")).rows[0]?.n)
    ).toBe(migrations)
    await again.close()
  }, 120_000)

  test("migrate --dry-run on an up-to-date embedded database: nothing to apply", async () => {
    const dataDir = await seededDataDir()
    dirs.push(dataDir)
    const plan = await run(["src/cli.ts", "migrate", "--dry-run"], { DATA_DIR: dataDir, DATABASE_URL: "" })
    expect(plan.err).toBe("")
    expect(plan.out).toContain(`Greenline ${APP_VERSION}; the database's schema:`)
    expect(plan.out).toContain("no migration to apply")
  }, 60_000)

  test.if(pgUrl !== undefined)(
    "PostgreSQL: a running server is listed in greenline_instances, which migrate --dry-run shows; a clean stop removes it",
    async () => {
      const pg = await freshPostgres({ empty: true })
      try {
        const empty = await run(["src/cli.ts", "migrate", "--dry-run"], { DATABASE_URL: pg.url })
        expect(empty.out).toContain("the database's schema: empty")
        expect(empty.out).toContain("to apply: 0001_foundation  safe while older instances run")
        expect(empty.out).toContain("to apply: 0103_timeline_in_event_log  NOT safe while older instances run")
        const migrated = await run(["src/cli.ts", "migrate"], { DATABASE_URL: pg.url })
        expect(migrated.code).toBe(0)
        expect(migrated.out).toContain("applied 0231_instances")

        const server = await startTestServer({ db: "postgres", databaseUrl: pg.url })
        const sql = new SQL(pg.url)
        try {
          const rows = await sql`select app_version, pid from greenline_instances`
          expect(rows).toEqual([{ app_version: APP_VERSION, pid: process.pid }])
          const plan = await run(["src/cli.ts", "migrate", "--dry-run"], { DATABASE_URL: pg.url })
          expect(plan.out).toContain("no migration to apply")
          expect(plan.out).toContain(`running: Greenline ${APP_VERSION} on`)
        } finally {
          await server.close()
        }
        expect([...(await sql`select id from greenline_instances`)]).toEqual([])
        await sql.close()
      } finally {
        await pg.drop()
      }
    },
    120_000
  )
})
