import * as dns from "node:dns/promises"
import * as fs from "node:fs"
import * as net from "node:net"
import { Effect, Either, Option, Redacted } from "effect"
import Pg from "pg"
import { type AppConfigShape, appConfig, settingList } from "./config.ts"
import { maskPassword, sortedProblems } from "./kernel/settings.ts"

/**
 * What `src/main.ts` checks before it starts anything (issue 38): every setting, then what the settings point at
 * (the listening address, the database). Nothing here writes: a refusal leaves the data directory and the database
 * as they were (no migration, no retention pass, no lock file).
 */

/** The exit code of a start refused for its settings or its surroundings (sysexits' EX_CONFIG). */
export const EXIT_CONFIG = 78

/** How long a check may wait on the network (a name lookup, a database's answer). */
const CHECK_MS = 5_000

export type Checked<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly problems: string[] }

const refused = <A>(problems: string[]): Checked<A> => ({ ok: false, problems })

/** Every setting from the environment; all refusals at once, in the order the variables are declared. */
export const readSettings = async (): Promise<Checked<AppConfigShape>> => {
  const result = await Effect.runPromise(Effect.either(appConfig))
  return Either.isRight(result)
    ? { ok: true, value: result.right }
    : refused(
        sortedProblems(
          result.left,
          settingList.map((s) => s.variable)
        )
      )
}

const timeout = <A>(ms: number, work: Promise<A>, what: string): Promise<A> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  return Promise.race([
    work,
    new Promise<A>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms)
    })
  ]).finally(() => clearTimeout(timer))
}

const codeOf = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e ? String((e as { code: unknown }).code) : undefined

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** HOST resolves to an address of this machine, and PORT is free there. */
const checkListen = async (config: AppConfigShape): Promise<string[]> => {
  let address = config.host
  if (net.isIP(address) === 0) {
    try {
      address = (await timeout(CHECK_MS, dns.lookup(config.host), `looking up ${config.host}`)).address
    } catch (e) {
      const code = codeOf(e)
      return [
        `HOST=${config.host}: the name does not resolve (${code === "ENOTFOUND" || code === "EAI_NONAME" ? "no such host" : (code ?? messageOf(e))}); HOST takes a host name or IP address of this machine (0.0.0.0: every address)`
      ]
    }
  }
  if (config.port === 0) return []
  const error = await new Promise<unknown>((resolve) => {
    const probe = net.createServer()
    probe.once("error", resolve)
    probe.listen({ host: address, port: config.port, exclusive: true }, () => probe.close(() => resolve(undefined)))
  })
  if (error === undefined) return []
  switch (codeOf(error)) {
    case "EADDRINUSE":
      return [
        `PORT=${config.port}: the port is in use on ${config.host} (another process listens there); PORT takes a free port, or 0 for any`
      ]
    case "EADDRNOTAVAIL":
      return [`HOST=${config.host}: ${address} is not an address of this machine, so the server cannot listen on it`]
    case "EACCES":
      return [`PORT=${config.port}: listening on it needs privileges this process lacks (use a port above 1023)`]
    default:
      return [`HOST=${config.host}, PORT=${config.port}: cannot listen there (${messageOf(error)})`]
  }
}

/** DATA_DIR, when the embedded database uses it, is a directory or can be made one (nothing is made here). */
const checkDataDir = (config: AppConfigShape): string[] => {
  if (Option.isSome(config.databaseUrl) || config.dataDir === ":memory:") return []
  try {
    const stat = fs.statSync(config.dataDir)
    return stat.isDirectory() ? [] : [`DATA_DIR=${config.dataDir}: it exists and is not a directory`]
  } catch (e) {
    return codeOf(e) === "ENOENT" ? [] : [`DATA_DIR=${config.dataDir}: cannot be read (${messageOf(e)})`]
  }
}

/** Why a connection to DATABASE_URL failed, named for an operator. */
export const describeDatabaseFailure = (url: string, error: unknown): string => {
  let where = "the server"
  try {
    const u = new URL(url)
    where = `${u.hostname || u.searchParams.get("host") || "localhost"}:${u.port || "5432"}`
  } catch {}
  const shown = `DATABASE_URL=${maskPassword(url)}`
  const code = codeOf(error)
  const message = messageOf(error)
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EAI_NONAME")
    return `${shown}: the host ${where.replace(/:\d+$/, "")} does not resolve`
  if (code === "ECONNREFUSED") return `${shown}: nothing accepts connections at ${where} (is PostgreSQL running?)`
  if (code === "ETIMEDOUT" || /did not finish within|timeout/i.test(message))
    return `${shown}: ${where} did not answer as PostgreSQL does within ${CHECK_MS / 1000} s`
  // PostgreSQL's own refusals carry a SQLSTATE: wrong password, no such database, too many clients
  if (code !== undefined && /^[0-9A-Z]{5}$/.test(code)) return `${shown}: PostgreSQL refused the connection: ${message}`
  if (/self.signed|certificate|SSL|TLS/i.test(message)) return `${shown}: the TLS connection failed: ${message}`
  return `${shown}: the server at ${where} does not answer as PostgreSQL does (${message})`
}

/** DATABASE_URL answers, and is PostgreSQL. */
const checkDatabase = async (config: AppConfigShape): Promise<string[]> => {
  if (Option.isNone(config.databaseUrl)) return []
  const url = Redacted.value(config.databaseUrl.value)
  const client = new Pg.Client({
    connectionString: url,
    connectionTimeoutMillis: CHECK_MS,
    application_name: "greenline"
  })
  client.on("error", () => {})
  try {
    await timeout(CHECK_MS + 1000, client.connect(), "connecting")
    const rows = await timeout(CHECK_MS, client.query<{ version: string }>("select version() as version"), "a query")
    const version = rows.rows[0]?.version ?? ""
    if (!/^PostgreSQL \d+/.test(version)) {
      return [
        `DATABASE_URL=${maskPassword(url)}: the server is not PostgreSQL (it says "${version.slice(0, 80)}"); Greenline needs PostgreSQL`
      ]
    }
    return []
  } catch (e) {
    return [describeDatabaseFailure(url, e)]
  } finally {
    await timeout(1000, client.end(), "closing").catch(() => {})
  }
}

/** What the settings point at: the address to listen on, the data directory, the database. */
export const checkSurroundings = async (config: AppConfigShape): Promise<string[]> => {
  const [listen, db] = await Promise.all([checkListen(config), checkDatabase(config)])
  return [...listen, ...checkDataDir(config), ...db]
}

/** Names the real cause of a start that failed after the checks (a port taken in between, say). */
export const explainListenError = (config: AppConfigShape, error: unknown): Error => {
  const code = codeOf(error)
  if (code === "EADDRINUSE" || /in use/i.test(messageOf(error))) {
    return new Error(`PORT=${config.port}: the port is in use on ${config.host} (another process listens there)`)
  }
  if (code === "EADDRNOTAVAIL") return new Error(`HOST=${config.host}: not an address of this machine`)
  return error instanceof Error ? error : new Error(String(error))
}
