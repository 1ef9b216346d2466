import { Args, Command, Options } from "@effect/cli"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Console, Effect, Layer } from "effect"
import { AppConfigLive } from "./config.ts"
import { DatabaseLive } from "./db/Database.ts"
import { GitHubClientLive } from "./github/GitHubClient.ts"
import { InstallationClaimGuardLive } from "./github/installations.ts"
import { Tenancy, TenancyLive } from "./tenancy/Tenancy.ts"

/**
 * `bun run cli -- <command>` (contract.md §7): serve, migrate, orgs, tokens, repos, upload.
 * Database commands open the configured database: PostgreSQL with DATABASE_URL (any time), or the embedded one,
 * which belongs to one process (a running server holds it, and then these commands refuse with a clear message).
 */

const Db = Layer.provideMerge(DatabaseLive, AppConfigLive)
// with a GitHub App, `repos add` claims only repositories the App is installed on (as createQueue does)
const WithTenancy = Layer.provideMerge(
  TenancyLive,
  Layer.provideMerge(InstallationClaimGuardLive.pipe(Layer.provide(GitHubClientLive)), Db)
)

const fail = (message: string) => Effect.fail(new Error(message))

const serve = Command.make("serve", {}, () =>
  Effect.promise(async () => {
    await import("./main.ts")
    await new Promise<never>(() => {})
  })
).pipe(Command.withDescription("Start the HTTP server and the queue runners"))

const migrate = Command.make("migrate", {}, () =>
  Effect.gen(function* () {
    yield* Effect.void
    yield* Console.log("migrations applied")
  }).pipe(Effect.provide(Db))
).pipe(Command.withDescription("Apply the database migrations"))

const slugArg = Args.text({ name: "slug" })
const orgs = Command.make("orgs").pipe(
  Command.withSubcommands([
    Command.make("create", { slug: slugArg }, ({ slug }) =>
      Effect.gen(function* () {
        const tenancy = yield* Tenancy
        const org = yield* tenancy.createOrg(slug)
        yield* Console.log(`${org.id} ${org.slug}`)
      }).pipe(Effect.provide(WithTenancy))
    )
  ])
)

const orgOption = Options.text("org").pipe(Options.withDescription("organization slug"))
const tokens = Command.make("tokens").pipe(
  Command.withSubcommands([
    Command.make(
      "create",
      { org: orgOption, name: Options.text("name").pipe(Options.withDefault("")) },
      ({ org, name }) =>
        Effect.gen(function* () {
          const tenancy = yield* Tenancy
          const token = yield* tenancy.createToken(org, name)
          yield* Console.log(token.id)
          yield* Console.log(token.token)
        }).pipe(Effect.provide(WithTenancy))
    ),
    Command.make("list", { org: orgOption }, ({ org }) =>
      Effect.gen(function* () {
        const tenancy = yield* Tenancy
        const list = yield* tenancy.listTokens(org)
        for (const t of list) {
          yield* Console.log(
            `${t.id}\t${t.name || "-"}\t${t.createdAt.toISOString()}\t${t.revokedAt ? `revoked ${t.revokedAt.toISOString()}` : "active"}`
          )
        }
      }).pipe(Effect.provide(WithTenancy))
    ),
    Command.make("revoke", { id: Args.text({ name: "id" }) }, ({ id }) =>
      Effect.gen(function* () {
        const tenancy = yield* Tenancy
        const revoked = yield* tenancy.revokeToken(id)
        if (!revoked) return yield* fail(`no token ${id}`)
        yield* Console.log(`revoked ${id}`)
      }).pipe(Effect.provide(WithTenancy))
    )
  ])
)

const repos = Command.make("repos").pipe(
  Command.withSubcommands([
    Command.make("add", { org: orgOption, repo: Args.text({ name: "host/owner/name" }) }, ({ org, repo }) =>
      Effect.gen(function* () {
        const parts = repo.split("/")
        const [host, owner, name] = parts
        if (parts.length !== 3 || !host || !owner || !name)
          return yield* fail("the repository is <host>/<owner>/<name>")
        const tenancy = yield* Tenancy
        const added = yield* tenancy.addRepo(org, { host, owner, name })
        yield* Console.log(`${added.id} ${host}/${owner}/${name}`)
      }).pipe(Effect.provide(WithTenancy))
    )
  ])
)

const upload = Command.make("upload", { rest: Args.text({ name: "args" }).pipe(Args.repeated) }, ({ rest }) =>
  Effect.gen(function* () {
    const args = process.argv.slice(process.argv.indexOf("upload") + 1)
    void rest
    const { runUpload } = yield* Effect.promise(() => import("./flaky/uploadCli.ts"))
    const code = yield* Effect.promise(() => runUpload(args, process.env))
    process.exit(code)
  })
).pipe(Command.withDescription("Upload JUnit results to a running server (see README)"))

const root = Command.make("greenline").pipe(Command.withSubcommands([serve, migrate, orgs, tokens, repos, upload]))

const cli = Command.run(root, { name: "greenline", version: "0.1.0" })

const argv = process.argv.filter((a, i) => !(a === "--" && i === 2))
cli(argv).pipe(
  Effect.catchAll((error) =>
    Effect.sync(() => {
      // @effect/cli has already shown usage errors; our own failures are Errors with a message
      if (error instanceof Error) process.stderr.write(`error: ${error.message}\n`)
      else if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") {
        process.stderr.write(`error: ${error.message}\n`)
      }
      process.exitCode = 1
    })
  ),
  Effect.provide(BunContext.layer),
  BunRuntime.runMain
)
