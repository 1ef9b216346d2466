import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

/** Everything the service reads from the environment (contract.md §5), with its defaults. */
export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  readonly gitRoot: string
  readonly ciCommand: Option.Option<string>
  readonly ciContext: string
  readonly bootstrapOrg: string
  readonly bootstrapToken: Option.Option<Redacted.Redacted<string>>
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  readonly publicUrl: string
  readonly rateLimitPerSecond: number
  readonly logLevel: string
  readonly logFormat: "json" | "pretty"
  /** How often the local Git provider looks for pushed PR heads and target branches (ms). */
  readonly gitPollMs: number
}

export class AppConfig extends Context.Tag("greenline/AppConfig")<AppConfig, AppConfigShape>() {}

export const appConfig: Config.Config<AppConfigShape> = Config.all({
  port: Config.integer("PORT").pipe(Config.withDefault(8080)),
  host: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  gitRoot: Config.option(Config.string("GIT_ROOT")),
  ciCommand: Config.option(Config.string("CI_COMMAND")),
  ciContext: Config.string("CI_CONTEXT").pipe(Config.withDefault("ci")),
  bootstrapOrg: Config.string("BOOTSTRAP_ORG").pipe(Config.withDefault("default")),
  bootstrapToken: Config.option(Config.redacted("BOOTSTRAP_TOKEN")),
  metricsToken: Config.option(Config.redacted("METRICS_TOKEN")),
  publicUrl: Config.option(Config.string("PUBLIC_URL")),
  rateLimitPerSecond: Config.integer("RATE_LIMIT_PER_SECOND").pipe(Config.withDefault(100)),
  logLevel: Config.string("LOG_LEVEL").pipe(Config.withDefault("info")),
  logFormat: Config.literal("json", "pretty")("LOG_FORMAT").pipe(Config.withDefault("json" as const)),
  gitPollMs: Config.integer("GIT_POLL_MS").pipe(Config.withDefault(2000))
}).pipe(
  Config.map((c) => ({
    ...c,
    databaseUrl: Option.filter(c.databaseUrl, (u) => Redacted.value(u).trim() !== ""),
    gitRoot: Option.getOrElse(c.gitRoot, () => `${c.dataDir.replace(/\/+$/, "")}/git`),
    publicUrl: Option.getOrElse(c.publicUrl, () => `http://localhost:${c.port}`).replace(/\/+$/, "")
  }))
)

export const AppConfigLive: Layer.Layer<AppConfig, import("effect/ConfigError").ConfigError> = Layer.effect(
  AppConfig,
  Effect.gen(function* () {
    return yield* appConfig
  })
)

export const makeAppConfig = (
  overrides: Partial<AppConfigShape>
): Layer.Layer<AppConfig, import("effect/ConfigError").ConfigError> =>
  Layer.effect(
    AppConfig,
    Effect.map(appConfig, (c) => ({ ...c, ...overrides }))
  )
