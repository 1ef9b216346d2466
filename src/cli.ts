import { stripVTControlCharacters } from "node:util"
import { Args, Command, Options } from "@effect/cli"
import * as BunContext from "@effect/platform-bun/BunContext"
import * as BunRuntime from "@effect/platform-bun/BunRuntime"
import { ConfigError, Console, Effect, Layer, Option } from "effect"
import { CLIENT_COMMANDS, runClient } from "./client/main.ts"
import { AppConfig, AppConfigLive } from "./config.ts"
import { backupLocally, backupThroughServer, restoreEmbedded } from "./db/backup.ts"
import { DatabaseLive, DatabaseLocked, DatabaseUnmigrated } from "./db/Database.ts"
import {
  APP_VERSION,
  migrate as migrateSchema,
  type SchemaPlan,
  schemaPlan,
  tooNewMessage,
  unsafeMessage
} from "./db/schema.ts"
import { GitHubClientLive } from "./github/GitHubClient.ts"
import { InstallationClaimGuardLive } from "./github/installations.ts"
import { Database } from "./kernel/Database.ts"
import { configProblems } from "./kernel/settings.ts"
import { VERSION } from "./kernel/version.ts"
import { EXIT_CONFIG } from "./startup.ts"
import { ROLES, type Role } from "./tenancy/principal.ts"
import { Tenancy, TenancyLive } from "./tenancy/Tenancy.ts"

/**
 * `npm run cli -- <command>` (contract.md §7): serve, migrate, backup, restore, orgs, tokens, repos, and the CI client's commands
 * (upload, test, quarantine, queue, submit, cancel; the same sources as `GET /cli/greenline.mjs`).
 * Database commands open the configured database: PostgreSQL with DATABASE_URL (any time), or the embedded one,
 * which belongs to one process: while a running server holds it, they go through that server's admin API instead
 * (GREENLINE_URL, default http://127.0.0.1:$PORT, with an admin token in GREENLINE_TOKEN or BOOTSTRAP_TOKEN).
 */

const Db = Layer.provideMerge(DatabaseLive, AppConfigLive)
// with a GitHub App, `repos add` claims only repositories the App is installed on (as createQueue does)
const WithTenancy = Layer.provideMerge(
  TenancyLive,
  Layer.provideMerge(InstallationClaimGuardLive.pipe(Layer.provide(GitHubClientLive)), Db)
)

const fail = (message: string) => Effect.fail(new Error(message))

const heldByServer = (error: unknown): boolean => {
  if (error instanceof DatabaseLocked) return true
  if (typeof error !== "object" || error === null) return false
  return "cause" in error && heldByServer((error as { cause: unknown }).cause)
}

/** Calls the running server's admin API (`/v1/admin/<op>`). */
const viaServer = <A>(op: string, body: unknown) =>
  Effect.tryPromise({
    try: async () => {
      const url = (process.env.GREENLINE_URL || `http://127.0.0.1:${process.env.PORT || "8080"}`).replace(/\/+$/, "")
      const token = process.env.GREENLINE_TOKEN || process.env.BOOTSTRAP_TOKEN || ""
      if (token === "") {
        throw new Error(
          "a running server holds the embedded database: set GREENLINE_TOKEN to an admin token (the one the first run printed, or BOOTSTRAP_TOKEN) to manage it through the admin API"
        )
      }
      let response: Response
      try {
        response = await fetch(`${url}/v1/admin/${op}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-api-token": token },
          body: JSON.stringify(body)
        })
      } catch (e) {
        throw new Error(
          `a running server holds the embedded database, but ${url} does not answer (${e instanceof Error ? e.message : String(e)}); set GREENLINE_URL`
        )
      }
      const answer = (await response.json().catch(() => ({}))) as { error?: { message?: string } }
      if (!response.ok) throw new Error(answer.error?.message ?? `${url} answered ${response.status}`)
      return answer as A
    },
    catch: (e) => (e instanceof Error ? e : new Error(String(e)))
  })

/** Runs `local` on the database; when a running server holds the embedded database, `remote` (its admin API). */
const locallyOrViaServer = <A>(
  local: Effect.Effect<A, unknown, Tenancy>,
  remote: () => Effect.Effect<A, Error>
): Effect.Effect<A, unknown> =>
  local.pipe(
    Effect.provide(WithTenancy),
    Effect.catchAll((error) => (heldByServer(error) ? remote() : Effect.fail(error)))
  )

// `serve` alone is taken before the CLI runs (see the end): the server's own signal handling, not the CLI runtime's
const serve = Command.make("serve", {}, () =>
  Effect.promise(async () => {
    await import("./serve.ts")
    await new Promise<never>(() => {})
  })
).pipe(Command.withDescription("Start the HTTP server and the queue runners (what `npm start` and the container run)"))

const PG_DUMP_HINT = "docs/operations.md, Backups"

const fileArg = (description: string) => Args.text({ name: "file" }).pipe(Args.withDescription(description))

const backup = Command.make("backup", { file: fileArg("where to write the backup (a gzipped tar)") }, ({ file }) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      return yield* fail(
        `backup and restore are for the embedded database; with DATABASE_URL, back up PostgreSQL with pg_dump (${PG_DUMP_HINT})`
      )
    }
    if (config.dataDir === ":memory:") return yield* fail("DATA_DIR is :memory:: there is nothing on disk to back up")
    const served = yield* Effect.tryPromise({
      try: () => backupThroughServer(config.dataDir, file),
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    })
    const info =
      served ??
      (yield* backupLocally(config.dataDir, file).pipe(
        Effect.mapError((e) =>
          heldByServer(e)
            ? new Error(
                `${e instanceof Error ? e.message : String(e)}; its control socket (${config.dataDir}/greenline.sock) does not answer: stop it, then back up`
              )
            : e
        )
      ))
    const by = served === undefined ? "" : ` (made by the running server, process ${served.pid})`
    yield* Console.log(
      `backup of ${config.dataDir} written to ${file}${by}: ${info.bytes} bytes, schema at migration ${info.migration}`
    )
  }).pipe(Effect.provide(AppConfigLive))
).pipe(
  Command.withDescription(
    "Back up the embedded database (DATA_DIR) to a file, consistent even while a server runs on it (PostgreSQL: pg_dump)"
  )
)

const restore = Command.make("restore", { file: fileArg("a file written by `greenline backup`") }, ({ file }) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isSome(config.databaseUrl)) {
      return yield* fail(
        `backup and restore are for the embedded database; with DATABASE_URL, restore PostgreSQL with pg_restore or psql (${PG_DUMP_HINT})`
      )
    }
    if (config.dataDir === ":memory:")
      return yield* fail("DATA_DIR is :memory:: set it to the directory to restore into")
    const info = yield* Effect.tryPromise({
      try: () => restoreEmbedded(config.dataDir, file),
      catch: (e) =>
        e instanceof DatabaseLocked
          ? new Error(`${e.message}; a restore goes into a data directory no server runs on`)
          : e instanceof Error
            ? e
            : new Error(String(e))
    })
    yield* Console.log(
      `restored ${file} into ${config.dataDir}: ${info.bytes} bytes, schema at migration ${info.migration}; start the server on it (it applies newer migrations)`
    )
  }).pipe(Effect.provide(AppConfigLive))
).pipe(
  Command.withDescription(
    "Restore a backup into DATA_DIR, which must not hold a database yet (the repositories under GIT_ROOT are not in it)"
  )
)

const describePlan = (plan: SchemaPlan) => {
  const lines: Array<string> = []
  const latest = plan.applied.at(-1)
  lines.push(
    `Greenline ${APP_VERSION}; the database's schema: ${latest === undefined ? "empty" : `${plan.applied.length} migrations applied, the newest ${String(latest.id).padStart(4, "0")}_${latest.name}`}`
  )
  if (plan.unknown.length > 0) lines.push(`refused: ${tooNewMessage(plan.unknown)}`)
  if (plan.pending.length === 0) lines.push("no migration to apply")
  for (const m of plan.pending) {
    lines.push(
      `to apply: ${m.key}  ${m.safeWithOlderInstances ? "safe while older instances run" : `NOT safe while older instances run${m.declared ? "" : " (it does not say)"}`}`
    )
  }
  for (const i of plan.running) {
    lines.push(`running: Greenline ${i.appVersion} on ${i.host} (pid ${i.pid}, seen ${i.seenSecondsAgo} s ago)`)
  }
  const unsafe = plan.pending.filter((m) => !m.safeWithOlderInstances)
  if (unsafe.length > 0 && plan.running.length > 0) lines.push(`refused: ${unsafeMessage(unsafe, plan.running)}`)
  return lines.join("\n")
}

const migrate = Command.make(
  "migrate",
  {
    dryRun: Options.boolean("dry-run").pipe(
      Options.withDescription(
        "only show the schema's state, each migration to apply and whether it is safe while older instances run, and the instances running"
      )
    )
  },
  ({ dryRun }) =>
    Effect.gen(function* () {
      if (dryRun) {
        yield* Console.log(describePlan(yield* schemaPlan()))
        return
      }
      const db = yield* Database
      const applied = yield* migrateSchema({ guardInstances: db.kind === "postgres" })
      if (applied.length === 0) yield* Console.log("the schema is up to date: no migration to apply")
      for (const key of applied) yield* Console.log(`applied ${key}`)
    }).pipe(Effect.provide(Layer.provideMerge(DatabaseUnmigrated, AppConfigLive)))
).pipe(
  Command.withDescription(
    "Apply the database migrations and exit (servers do it at start); --dry-run shows what it would do"
  )
)

const slugArg = Args.text({ name: "slug" }).pipe(
  Args.withDescription("the organization's slug: letters, digits, . _ -")
)
const orgs = Command.make("orgs").pipe(
  Command.withDescription("Manage organizations"),
  Command.withSubcommands([
    Command.make("create", { slug: slugArg }, ({ slug }) =>
      Effect.gen(function* () {
        const org = yield* locallyOrViaServer(
          Effect.flatMap(Tenancy, (t) => t.createOrg(slug)),
          () => viaServer<{ id: string; slug: string }>("createOrganization", { slug })
        )
        yield* Console.log(`${org.id} ${org.slug}`)
      })
    ).pipe(Command.withDescription("Create an organization (nothing happens when it exists)"))
  ])
)

const orgOption = Options.text("org").pipe(Options.withDescription("the organization's slug"))
interface TokenRow {
  readonly id: string
  readonly name: string
  readonly role: Role
  readonly createdAt: string
  readonly revokedAt: string | null
}
const tokens = Command.make("tokens").pipe(
  Command.withDescription("Manage API tokens"),
  Command.withSubcommands([
    Command.make(
      "create",
      {
        org: orgOption,
        name: Options.text("name").pipe(Options.withDefault(""), Options.withDescription("a name to recognise it by")),
        role: Options.choice("role", ROLES).pipe(
          Options.optional,
          Options.withDescription("what the token may do: read, write (default), maintain or admin (docs/security.md)")
        ),
        admin: Options.boolean("admin").pipe(Options.withDescription("the same as --role admin"))
      },
      ({ org, name, role, admin }) =>
        Effect.gen(function* () {
          const chosen: Role = Option.getOrElse(role, () => (admin ? "admin" : "write"))
          const token = yield* locallyOrViaServer(
            Effect.flatMap(Tenancy, (t) => t.createToken(org, name, chosen)),
            () => viaServer<{ id: string; token: string }>("createToken", { org, name, role: chosen })
          )
          yield* Console.log(token.id)
          yield* Console.log(token.token)
        })
    ).pipe(Command.withDescription("Create a token: prints its id, then the token itself (shown only once)")),
    Command.make("list", { org: orgOption }, ({ org }) =>
      Effect.gen(function* () {
        const list = yield* locallyOrViaServer(
          Effect.flatMap(Tenancy, (t) => t.listTokens(org)).pipe(
            Effect.map(
              (rows): ReadonlyArray<TokenRow> =>
                rows.map((r) => ({
                  id: r.id,
                  name: r.name,
                  role: r.role,
                  createdAt: r.createdAt.toISOString(),
                  revokedAt: r.revokedAt?.toISOString() ?? null
                }))
            )
          ),
          () => Effect.map(viaServer<{ tokens: ReadonlyArray<TokenRow> }>("listTokens", { org }), (a) => a.tokens)
        )
        for (const t of list) {
          yield* Console.log(
            `${t.id}\t${t.name || "-"}\t${t.role}\t${t.createdAt}\t${t.revokedAt ? `revoked ${t.revokedAt}` : "active"}`
          )
        }
      })
    ).pipe(Command.withDescription("List an organization's tokens: id, name, role, created, active or revoked")),
    Command.make("revoke", { id: Args.text({ name: "id" }).pipe(Args.withDescription("the token's id")) }, ({ id }) =>
      Effect.gen(function* () {
        const revoked = yield* locallyOrViaServer(
          Effect.flatMap(Tenancy, (t) => t.revokeToken(id)),
          () => Effect.as(viaServer("revokeToken", { id }), true)
        )
        if (!revoked) return yield* fail(`no token ${id}`)
        yield* Console.log(`revoked ${id}`)
      })
    ).pipe(Command.withDescription("Revoke a token by its id (every instance stops accepting it at once)"))
  ])
)

const repos = Command.make("repos").pipe(
  Command.withDescription("Manage which organization owns which repository"),
  Command.withSubcommands([
    Command.make(
      "add",
      {
        org: orgOption,
        repo: Args.text({ name: "host/owner/name" }).pipe(Args.withDescription("e.g. github.com/acme/web"))
      },
      ({ org, repo }) =>
        Effect.gen(function* () {
          const parts = repo.split("/")
          const [host, owner, name] = parts
          if (parts.length !== 3 || !host || !owner || !name)
            return yield* fail("the repository is <host>/<owner>/<name>")
          const ref = { host, owner, name }
          const added = yield* locallyOrViaServer(
            Effect.flatMap(Tenancy, (t) => t.addRepo(org, ref)),
            () => viaServer<{ id: string }>("addRepository", { org, repo: ref })
          )
          yield* Console.log(`${added.id} ${host}/${owner}/${name}`)
        })
    ).pipe(Command.withDescription("Give a repository to an organization"))
  ])
)

// The CI client's commands: listed here for the help, run by the client itself (see `main` below), which prints
// their options with `<command> --help`.
const clientCommand = (name: string, description: string) =>
  Command.make(name, { args: Args.text({ name: "args" }).pipe(Args.repeated) }).pipe(
    Command.withDescription(`${description} (--help for its options)`)
  )
const clientCommands = [
  clientCommand("upload", CLIENT_COMMANDS.upload),
  clientCommand("test", CLIENT_COMMANDS.test),
  Command.make("quarantine").pipe(
    Command.withDescription("List quarantined tests, or override quarantine for one test"),
    Command.withSubcommands([
      clientCommand("list", CLIENT_COMMANDS["quarantine list"]),
      clientCommand("set", CLIENT_COMMANDS["quarantine set"])
    ])
  ),
  Command.make("queue").pipe(
    Command.withDescription("Read a merge queue"),
    Command.withSubcommands([clientCommand("status", CLIENT_COMMANDS["queue status"])])
  ),
  clientCommand("submit", CLIENT_COMMANDS.submit),
  clientCommand("cancel", CLIENT_COMMANDS.cancel)
]
const CLIENT_NAMES = new Set(["upload", "test", "quarantine", "queue", "submit", "cancel"])

const root = Command.make("greenline").pipe(
  Command.withDescription("Greenline: a self-hosted merge queue and flaky-test service"),
  Command.withSubcommands([serve, migrate, backup, restore, orgs, tokens, repos, ...clientCommands])
)

const cli = Command.run(root, { name: "greenline", version: VERSION })

/** Help and errors in colour only on a terminal, and never with NO_COLOR set (https://no-color.org). */
const plain = !process.stdout.isTTY || (process.env.NO_COLOR ?? "") !== ""
const withoutColour = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  plain
    ? Console.consoleWith((console) => {
        const strip = (args: ReadonlyArray<unknown>) =>
          args.map((a) => (typeof a === "string" ? stripVTControlCharacters(a) : a))
        return Effect.withConsole(effect, {
          ...console,
          log: (...args) => console.log(...strip(args)),
          error: (...args) => console.error(...strip(args)),
          info: (...args) => console.info(...strip(args)),
          warn: (...args) => console.warn(...strip(args)),
          unsafe: {
            ...console.unsafe,
            log: (...args) => console.unsafe.log(...strip(args)),
            error: (...args) => console.unsafe.error(...strip(args))
          }
        })
      })
    : effect

const argv = process.argv.filter((a, i) => !(a === "--" && i === 2))
const command = argv[2]
if (command === "serve" && argv.length === 3) {
  // the server handles its own signals (a clean stop within a grace period), which the CLI's runtime would cut short
  await import("./serve.ts")
} else if (command !== undefined && CLIENT_NAMES.has(command)) {
  process.exitCode = await runClient(argv.slice(2), process.env)
} else {
  cli(argv).pipe(
    withoutColour,
    Effect.catchAll((error) =>
      Effect.sync(() => {
        // settings refused: each on its line, with the exit code of a refused server start
        if (ConfigError.isConfigError(error)) {
          for (const problem of configProblems(error)) process.stderr.write(`error: ${problem}\n`)
          process.exitCode = EXIT_CONFIG
          return
        }
        // @effect/cli has already shown usage errors; our own failures are Errors with a message
        if (error instanceof Error) process.stderr.write(`error: ${error.message}\n`)
        else if (
          typeof error === "object" &&
          error !== null &&
          "message" in error &&
          typeof error.message === "string"
        ) {
          process.stderr.write(`error: ${error.message}\n`)
        }
        process.exitCode = 1
      })
    ),
    Effect.provide(BunContext.layer),
    BunRuntime.runMain
  )
}
