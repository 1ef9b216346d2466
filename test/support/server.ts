import * as SqlClient from "@effect/sql/SqlClient"
import { SQL } from "bun"
import { Effect } from "effect"
import { type AppConfigShape, makeAppConfig } from "../../src/config.ts"
import type { RunnerProbeShape } from "../../src/queue/runner/probe.ts"
import { type RunningServer, startServer } from "../../src/server.ts"
import { pgliteSeed } from "./pgliteSeed.ts"
import { makeRunnerSignal, type RunnerSignal } from "./rounds.ts"
import { tempDir } from "./tmp.ts"

/**
 * Test helpers: a real server on a loopback port, over PGlite or a fresh PostgreSQL database, and a small client.
 * PostgreSQL comes from TEST_DATABASE_URL; when it is set (as in CI) the PostgreSQL variants must run, never skip.
 */

export const TEST_TOKEN = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"
export const pgUrl = process.env.TEST_DATABASE_URL
export const databases: ReadonlyArray<"pglite" | "postgres"> = pgUrl ? ["pglite", "postgres"] : ["pglite"]

/**
 * Creates a fresh database on the TEST_DATABASE_URL server; `drop` removes it. Under `npm test` it is a copy of a
 * database migrated once for the suite (GREENLINE_TEST_PG_TEMPLATE, scripts/test.ts): the migrations cost about half
 * a second of each PostgreSQL server's start. `empty` for what is about an empty database (first run, migrations).
 */
export const freshPostgres = async (options?: {
  readonly empty?: boolean
}): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  if (!pgUrl) throw new Error("TEST_DATABASE_URL is not set")
  const name = `gl_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`
  const template = options?.empty ? undefined : process.env.GREENLINE_TEST_PG_TEMPLATE
  const admin = new SQL(pgUrl)
  await admin.unsafe(`create database ${name}${template ? ` template ${template}` : ""}`)
  await admin.close()
  const url = new URL(pgUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      const a = new SQL(pgUrl)
      await a.unsafe(`drop database if exists ${name} with (force)`)
      await a.close()
    }
  }
}

export { tempDir }

export interface TestServer extends RunningServer {
  /** Resolves when a runner's next round settles (any queue), or after `maxMs`. */
  readonly nextRound: (maxMs: number) => Promise<void>
  /** Runs a round of the queue's runner now; resolves when a round begun after the call settled (rounds.ts). */
  readonly tick: (queueId: string) => Promise<void>
  /** Resolves when the queue's runner next settles, whatever ran its round (rounds.ts). */
  readonly settled: (queueId: string) => Promise<void>
  /** Steps the queue until `check` gives a value: a tick, then its runner settling again (rounds.ts). */
  readonly until: RunnerSignal["until"]
  /** The id of the queue of `repo` and `targetBranch` (the test server's organization). */
  readonly queueId: (key: {
    readonly repo: { readonly host: string; readonly owner: string; readonly name: string }
    readonly targetBranch: string
  }) => Promise<string>
  /** Runs the lease loop's next pass now (ahead of its timer); resolves when that pass ended. */
  readonly leasePass: () => Promise<void>
  /** Resolves with the queue's id when a runner next finds its lease gone (call it before what makes it lose it). */
  readonly lostLease: () => Promise<string>
  readonly token: string
  readonly gitRoot: string
  readonly dataDir: string
  readonly post: (
    op: string,
    body: unknown,
    headers?: Record<string, string>
  ) => Promise<{ status: number; body: unknown }>
  /** Stops the server and removes what it created. */
  readonly close: () => Promise<void>
}

export interface TestServerOptions {
  readonly db: "pglite" | "postgres"
  /** Reuse a data directory (restart tests); a PostgreSQL URL to reuse for postgres. */
  readonly dataDir?: string
  readonly databaseUrl?: string
  readonly gitRoot?: string
  readonly ciCommand?: string
  readonly rateLimitPerSecond?: number
  readonly metricsToken?: string
  readonly gitPollMs?: number
  /** Points where the test watches or interrupts the runners. */
  readonly probe?: RunnerProbeShape
  /** false: the lease loop's timer is off, its passes run only at `leasePass` (or a wake-up); default true */
  readonly leaseTimer?: boolean
  /** Any other settings (e.g. the GITHUB_* ones), applied last. */
  readonly config?: Partial<AppConfigShape>
}

export const startTestServer = async (options: TestServerOptions): Promise<TestServer> => {
  const rounds = makeRunnerSignal({ inner: options.probe, leaseTimer: options.leaseTimer ?? true })
  const dataDir = options.dataDir ?? (options.db === "pglite" ? ":memory:" : tempDir())
  const gitRoot = options.gitRoot ?? tempDir("greenline-git-")
  const pg = options.db === "postgres" && options.databaseUrl === undefined ? await freshPostgres() : undefined
  const databaseUrl = options.databaseUrl ?? pg?.url
  const { Option, Redacted } = await import("effect")
  const server = await startServer(
    makeAppConfig({
      port: 0,
      host: "127.0.0.1",
      dataDir,
      gitRoot,
      databaseUrl: databaseUrl ? Option.some(Redacted.make(databaseUrl)) : Option.none(),
      bootstrapToken: Option.some(Redacted.make(TEST_TOKEN)),
      bootstrapOrg: "acme-org",
      ciCommand: options.ciCommand ? Option.some(options.ciCommand) : Option.none(),
      rateLimitPerSecond: options.rateLimitPerSecond ?? 100_000,
      metricsToken: options.metricsToken ? Option.some(Redacted.make(options.metricsToken)) : Option.none(),
      gitPollMs: options.gitPollMs ?? 200,
      logLevel: "error",
      // every answer checked against its schema (servers in their own process run as in production, unchecked)
      checkAnswers: true,
      ...(dataDir === ":memory:" ? { embeddedSeed: await pgliteSeed() } : {}),
      ...options.config
    }),
    rounds.probe
  )
  const post = async (op: string, body: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${server.url}/v1/${op}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-token": TEST_TOKEN, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {}
    return { status: response.status, body: parsed }
  }
  const queueId = async (key: Parameters<TestServer["queueId"]>[0]) => {
    const rows = await server.run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ id: string }>`select q.id from queues q join repositories r on r.id = q.repo_id
          where r.host = ${key.repo.host} and r.owner = ${key.repo.owner} and r.name = ${key.repo.name}
            and q.branch = ${key.targetBranch}`
      )
    )
    if (rows.length !== 1) throw new Error(`${rows.length} queues of ${JSON.stringify(key)}`)
    return rows[0]!.id
  }
  return {
    ...server,
    nextRound: rounds.nextRound,
    tick: rounds.tick,
    settled: rounds.settled,
    until: rounds.until,
    queueId,
    leasePass: rounds.leasePass,
    lostLease: rounds.lostLease,
    token: TEST_TOKEN,
    gitRoot,
    dataDir,
    post,
    close: async () => {
      await server.stop()
      await pg?.drop()
    }
  }
}

/** Waits until `check` returns a value (not undefined), polling; fails after `timeoutMs`. */
export const eventually = async <A>(
  check: () => Promise<A | undefined>,
  timeoutMs = 20_000,
  what = "condition"
): Promise<A> => {
  const deadline = performance.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (e) {
      last = e
    }
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`)
    await Bun.sleep(25)
  }
}
