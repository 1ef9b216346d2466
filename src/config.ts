import { Config, ConfigError, Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { parseRoleRules, type RoleRule } from "./tenancy/roleRules.ts"

/** Everything the service reads from the environment (contract.md §5), with its defaults. */
export interface AppConfigShape {
  readonly port: number
  readonly host: string
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  /**
   * PostgreSQL connections one instance opens at most (DATABASE_POOL_MAX, default 20). Instances on one database
   * together must stay below its `max_connections` (100 by default).
   */
  readonly databasePoolMax: number
  readonly dataDir: string
  readonly gitRoot: string
  readonly ciCommand: Option.Option<string>
  readonly ciContext: string
  readonly bootstrapOrg: string
  readonly bootstrapToken: Option.Option<Redacted.Redacted<string>>
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  /**
   * PUBLIC_URL: the address people and clients reach the server at, as they type it (scheme, host, port, path
   * prefix; behind a TLS-terminating proxy, the proxy's https address). Links the server gives out start with it,
   * the OIDC redirect URI is `<PUBLIC_URL>/login/oidc/callback`, cookies are Secure when it is https, and its origin
   * is the one a sign-in form post must come from (docs/security.md). Default `http://localhost:$PORT`.
   */
  readonly publicUrl: string
  /** Whether PUBLIC_URL was set: unset, a form post may also come from the origin the request was addressed to. */
  readonly publicUrlConfigured: boolean
  /**
   * TRUST_PROXY (default false): the request's X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-For count (the
   * client's address is the last X-Forwarded-For entry). Set it only when a proxy that sets them is the only way in.
   */
  readonly trustProxy: boolean
  /** OIDC_ISSUER_URL: the identity provider people sign in with (OpenID Connect); unset, only token sign-in. */
  readonly oidcIssuerUrl: Option.Option<string>
  /** OIDC_CLIENT_ID: Greenline's client id at the provider (required with OIDC_ISSUER_URL). */
  readonly oidcClientId: Option.Option<string>
  /** OIDC_CLIENT_SECRET: the client's secret; unset, a public client (PKCE only). */
  readonly oidcClientSecret: Option.Option<Redacted.Redacted<string>>
  /** OIDC_SCOPES (default `openid profile email`): add `groups` (Dex, Okta) or `offline_access` where needed. */
  readonly oidcScopes: string
  /** OIDC_ROLE_CLAIM (default `groups`): the claim whose values the rules map to roles; a dotted path is followed. */
  readonly oidcRoleClaim: string
  /** OIDC_ROLE_RULES: `<org>:<role>=<claim value>` rules, `;`- or newline-separated (tenancy/roleRules.ts). */
  readonly oidcRoleRules: ReadonlyArray<RoleRule>
  /**
   * OIDC_REFRESH_SECONDS (default 300): how long a person's role is used before it is read again from the provider
   * (with the refresh token; without one the person signs in again). docs/decisions.md, "When a person's role is
   * read".
   */
  readonly oidcRefreshSeconds: number
  /** OIDC_PROVIDER_NAME (default `your identity provider`): the sign-in button's "Sign in with …". */
  readonly oidcProviderName: string
  readonly rateLimitPerSecond: number
  readonly logLevel: string
  readonly logFormat: "json" | "pretty"
  /** How often the local Git provider looks for pushed PR heads and target branches (ms). */
  readonly gitPollMs: number
  /** OTLP/HTTP base URL of a trace collector (OTEL_EXPORTER_OTLP_ENDPOINT); unset, no spans are made. */
  readonly otlpEndpoint: Option.Option<string>
  /** The traces' `service.name` (OTEL_SERVICE_NAME). */
  readonly otelServiceName: string
  /** GitHub REST API base URL (GITHUB_API_URL; Enterprise: `https://<host>/api/v3`). */
  readonly githubApiUrl: string
  /** Host name of repositories served by the GitHub provider (GITHUB_HOST, default github.com). */
  readonly githubHost: string
  /** GitHub App id (GITHUB_APP_ID); with githubAppPrivateKey it enables the GitHub provider. */
  readonly githubAppId: Option.Option<string>
  /** The App's private key: PEM text, or a path to a PEM file (GITHUB_APP_PRIVATE_KEY). */
  readonly githubAppPrivateKey: Option.Option<Redacted.Redacted<string>>
  /** A personal access token (GITHUB_TOKEN), the alternative to an App. */
  readonly githubToken: Option.Option<Redacted.Redacted<string>>
  /** Secret of the webhook signatures (GITHUB_WEBHOOK_SECRET). */
  readonly githubWebhookSecret: Option.Option<Redacted.Redacted<string>>
  /** How often the GitHub provider reconciles queued PRs, targets and CI statuses with GitHub (ms). */
  readonly githubReconcileMs: number
  /** Webhook deliveries to private and loopback addresses are allowed (WEBHOOK_ALLOW_PRIVATE, default false). */
  readonly webhookAllowPrivate: boolean
  /** This instance sends webhook messages (WEBHOOK_WORKER, default true); any number of instances may. */
  readonly webhookWorker: boolean
  /** Days the event log keeps events, with their webhook messages (EVENT_RETENTION_DAYS, default 30). */
  readonly eventRetentionDays: number
  /**
   * Days the audit log keeps its events: EVENT_RETENTION_DAYS when it is set, else 365 (a year; the event log's 30
   * days are too short to answer "who did this last quarter": docs/decisions.md).
   */
  readonly auditRetentionDays: number
  /** Live event streams (GET /v1/events/stream) open at once per organization and instance (default 20). */
  readonly eventStreamsPerOrg: number
  /**
   * How often an idle live stream reads the log without a wake-up (EVENT_STREAM_POLL_MS, default 5000): the bound on
   * the delay of an event whose wake-up was missed (events/StreamWakeups.ts).
   */
  readonly eventStreamPollMs: number
  /**
   * Check every answer against its operation's schema (CHECK_ANSWERS, default false; the tests turn it on). Answers
   * whose schema transforms values are always encoded; the others are plain JSON that the compiler already checked.
   */
  readonly checkAnswers: boolean
  /**
   * Not from the environment: a dumped data directory (PGlite's `dumpDataDir`) that an in-memory embedded database
   * starts from instead of an empty one. Tests pass a migrated one: a fresh PGlite costs seconds of CPU, a seeded one
   * a tenth of that.
   */
  readonly embeddedSeed?: Blob
}

/** How long the audit log keeps events when EVENT_RETENTION_DAYS is not set: a year. */
export const DEFAULT_AUDIT_RETENTION_DAYS = 365

/** The default of DATABASE_POOL_MAX. */
export const DEFAULT_POOL_MAX = 20

export class AppConfig extends Context.Tag("greenline/AppConfig")<AppConfig, AppConfigShape>() {}

export const appConfig: Config.Config<AppConfigShape> = Config.all({
  port: Config.integer("PORT").pipe(Config.withDefault(8080)),
  host: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
  databaseUrl: Config.option(Config.redacted("DATABASE_URL")),
  databasePoolMax: Config.integer("DATABASE_POOL_MAX").pipe(
    Config.validate({ message: "DATABASE_POOL_MAX must be at least 1", validation: (n) => n >= 1 }),
    Config.withDefault(DEFAULT_POOL_MAX)
  ),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  gitRoot: Config.option(Config.string("GIT_ROOT")),
  ciCommand: Config.option(Config.string("CI_COMMAND")),
  ciContext: Config.string("CI_CONTEXT").pipe(Config.withDefault("ci")),
  bootstrapOrg: Config.string("BOOTSTRAP_ORG").pipe(Config.withDefault("default")),
  bootstrapToken: Config.option(Config.redacted("BOOTSTRAP_TOKEN")),
  metricsToken: Config.option(Config.redacted("METRICS_TOKEN")),
  publicUrl: Config.option(Config.string("PUBLIC_URL")),
  trustProxy: Config.boolean("TRUST_PROXY").pipe(Config.withDefault(false)),
  oidcIssuerUrl: Config.option(Config.string("OIDC_ISSUER_URL")),
  oidcClientId: Config.option(Config.string("OIDC_CLIENT_ID")),
  oidcClientSecret: Config.option(Config.redacted("OIDC_CLIENT_SECRET")),
  oidcScopes: Config.string("OIDC_SCOPES").pipe(Config.withDefault("openid profile email")),
  oidcRoleClaim: Config.string("OIDC_ROLE_CLAIM").pipe(Config.withDefault("groups")),
  oidcRoleRules: Config.string("OIDC_ROLE_RULES").pipe(
    Config.withDefault(""),
    Config.mapOrFail((text) => {
      const parsed = parseRoleRules(text)
      return "error" in parsed
        ? Either.left(ConfigError.InvalidData(["OIDC_ROLE_RULES"], parsed.error))
        : Either.right(parsed.rules)
    })
  ),
  oidcRefreshSeconds: Config.integer("OIDC_REFRESH_SECONDS").pipe(
    Config.validate({ message: "OIDC_REFRESH_SECONDS must be at least 1", validation: (n) => n >= 1 }),
    Config.withDefault(300)
  ),
  oidcProviderName: Config.string("OIDC_PROVIDER_NAME").pipe(Config.withDefault("your identity provider")),
  rateLimitPerSecond: Config.integer("RATE_LIMIT_PER_SECOND").pipe(Config.withDefault(100)),
  logLevel: Config.string("LOG_LEVEL").pipe(Config.withDefault("info")),
  logFormat: Config.literal("json", "pretty")("LOG_FORMAT").pipe(Config.withDefault("json" as const)),
  gitPollMs: Config.integer("GIT_POLL_MS").pipe(Config.withDefault(2000)),
  otlpEndpoint: Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")),
  otelServiceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("greenline")),
  githubApiUrl: Config.string("GITHUB_API_URL").pipe(Config.withDefault("https://api.github.com")),
  githubHost: Config.string("GITHUB_HOST").pipe(Config.withDefault("github.com")),
  githubAppId: Config.option(Config.string("GITHUB_APP_ID")),
  githubAppPrivateKey: Config.option(Config.redacted("GITHUB_APP_PRIVATE_KEY")),
  githubToken: Config.option(Config.redacted("GITHUB_TOKEN")),
  githubWebhookSecret: Config.option(Config.redacted("GITHUB_WEBHOOK_SECRET")),
  githubReconcileMs: Config.integer("GITHUB_RECONCILE_MS").pipe(Config.withDefault(60_000)),
  webhookAllowPrivate: Config.boolean("WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  webhookWorker: Config.boolean("WEBHOOK_WORKER").pipe(Config.withDefault(true)),
  eventRetentionDays: Config.integer("EVENT_RETENTION_DAYS").pipe(Config.withDefault(30)),
  auditRetentionDays: Config.option(Config.integer("EVENT_RETENTION_DAYS")),
  eventStreamsPerOrg: Config.integer("EVENT_STREAMS_PER_ORG").pipe(Config.withDefault(20)),
  eventStreamPollMs: Config.integer("EVENT_STREAM_POLL_MS").pipe(Config.withDefault(5000)),
  checkAnswers: Config.boolean("CHECK_ANSWERS").pipe(Config.withDefault(false))
}).pipe(
  Config.map((c) => ({
    ...c,
    databaseUrl: Option.filter(c.databaseUrl, (u) => Redacted.value(u).trim() !== ""),
    bootstrapToken: Option.filter(c.bootstrapToken, (t) => Redacted.value(t).trim() !== ""),
    gitRoot: Option.getOrElse(c.gitRoot, () => `${c.dataDir.replace(/\/+$/, "")}/git`),
    otlpEndpoint: Option.filter(c.otlpEndpoint, (u) => u.trim() !== "").pipe(Option.map((u) => u.trim())),
    githubApiUrl: c.githubApiUrl.trim().replace(/\/+$/, ""),
    githubHost: c.githubHost.trim().toLowerCase(),
    githubAppId: Option.filter(c.githubAppId, (id) => id.trim() !== ""),
    githubAppPrivateKey: Option.filter(c.githubAppPrivateKey, (k) => Redacted.value(k).trim() !== ""),
    githubToken: Option.filter(c.githubToken, (t) => Redacted.value(t).trim() !== ""),
    githubWebhookSecret: Option.filter(c.githubWebhookSecret, (t) => Redacted.value(t) !== ""),
    publicUrl: Option.getOrElse(
      Option.filter(c.publicUrl, (u) => u.trim() !== ""),
      () => `http://localhost:${c.port}`
    )
      .trim()
      .replace(/\/+$/, ""),
    publicUrlConfigured: Option.isSome(Option.filter(c.publicUrl, (u) => u.trim() !== "")),
    oidcIssuerUrl: Option.filter(c.oidcIssuerUrl, (u) => u.trim() !== "").pipe(Option.map((u) => u.trim())),
    oidcClientId: Option.filter(c.oidcClientId, (id) => id.trim() !== "").pipe(Option.map((id) => id.trim())),
    oidcClientSecret: Option.filter(c.oidcClientSecret, (s) => Redacted.value(s) !== ""),
    oidcRoleClaim: c.oidcRoleClaim.trim(),
    auditRetentionDays: Option.getOrElse(c.auditRetentionDays, () => DEFAULT_AUDIT_RETENTION_DAYS)
  })),
  Config.validate({
    message: "OIDC_ISSUER_URL needs OIDC_CLIENT_ID, and PUBLIC_URL must be an http or https URL",
    validation: (c) =>
      (Option.isNone(c.oidcIssuerUrl) || Option.isSome(c.oidcClientId)) && /^https?:\/\/[^/]/i.test(c.publicUrl)
  })
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
