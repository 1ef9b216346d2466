import { Config, ConfigError, Context, Effect, Either, Layer, Option } from "effect"
import { AuditEnv } from "./audit/AuditEnv.ts"
import { DatabaseEnv, DEFAULT_POOL_MAX } from "./db/DatabaseEnv.ts"
import { EventsEnv } from "./events/EventsEnv.ts"
import { FlakyEnv } from "./flaky/FlakyEnv.ts"
import { GitHubEnv } from "./github/GitHubEnv.ts"
import { HttpEnv } from "./http/HttpEnv.ts"
import {
  boolean,
  filePath,
  host,
  integer,
  type Kind,
  oneOf,
  optional,
  pemOrFile,
  postgresUrl,
  type Setting,
  secret,
  text,
  url,
  withDefault
} from "./kernel/settings.ts"
import { TracingEnv } from "./metrics/TracingEnv.ts"
import { QueueEnv } from "./queue/QueueEnv.ts"
import { parseRoleRules, type RoleRule } from "./tenancy/roleRules.ts"

export { DEFAULT_POOL_MAX }

/** The audit log's retention when EVENT_RETENTION_DAYS is unset (docs/decisions.md, issue #30). */
export const DEFAULT_AUDIT_RETENTION_DAYS = 365

/** OIDC_ROLE_RULES: `<org>:<role>=<claim value>` rules, `;`- or newline-separated (tenancy/roleRules.ts). */
const roleRules: Kind<ReadonlyArray<RoleRule>> = {
  accepts:
    "rules `<org>:<role>=<claim value>`, separated by `;` (role: read, write, maintain or admin; `*` matches everyone)",
  parse: (raw) => {
    const parsed = parseRoleRules(raw)
    return "error" in parsed ? Either.left(parsed.error) : Either.right(parsed.rules)
  },
  invalid: ["acme:owner=devs", "no-rule-here"]
}

/** BOOTSTRAP_TOKEN is an admin credential: anything shorter than this is refused at start-up. */
export const MIN_BOOTSTRAP_TOKEN_LENGTH = 32

/** Effect's log levels by their labels (LOG_LEVEL). */
export const LOG_LEVELS = ["all", "trace", "debug", "info", "warn", "error", "fatal", "off"] as const

/**
 * Every environment variable the server reads (contract.md §5), one declaration each: its kind (type and range),
 * its default and what it does (`src/kernel/settings.ts`).
 *
 * To add a variable: add one entry here (`withDefault` or `optional`, with a kind from kernel/settings.ts, or a
 * `Kind` of your own), then run `npm run docs:config` to rewrite docs/configuration.md. The entry's key becomes the
 * field of `AppConfigShape`, typed by the kind; the start-up check and the generated test
 * (test/unit/config.test.ts) pick it up by themselves. A check between variables goes in `crossChecks` below. Code
 * outside the composition root never reads `AppConfig`: when a feature or adapter needs the value, add a field to its
 * folder's `*Env.ts` tag (queue/QueueEnv.ts, github/GitHubEnv.ts, ...) and fill it in `FeatureEnvsLive` below.
 */
export const settings = {
  port: withDefault("PORT", integer(0, 65535, "0: any free port"), 8080, "8080", {
    description: "the TCP port the server listens on"
  }),
  host: withDefault("HOST", host, "0.0.0.0", "0.0.0.0", {
    description:
      "the address the server listens on; a name must resolve (checked at start), and must be one of this machine's addresses"
  }),
  databaseUrl: optional("DATABASE_URL", postgresUrl, {
    unset: "the embedded PGlite under `DATA_DIR`",
    description:
      "the PostgreSQL database (`postgres://user:password@host:5432/database`); the server checks at start that it answers and is PostgreSQL"
  }),
  databasePoolMax: withDefault("DATABASE_POOL_MAX", integer(1, 1000), DEFAULT_POOL_MAX, String(DEFAULT_POOL_MAX), {
    description:
      "PostgreSQL connections one instance opens at most; instances on one database together stay below its `max_connections` (100 by default)"
  }),
  dataDir: withDefault("DATA_DIR", filePath, "./data", "`./data`", {
    description:
      "the embedded database (its `pg` folder) and the default Git root; `:memory:` keeps the embedded database in memory"
  }),
  gitRoot: optional("GIT_ROOT", filePath, {
    unset: "`$DATA_DIR/git`",
    description: "bare repositories of the local Git provider (`<host>/<owner>/<name>.git`)"
  }),
  gitPollMs: withDefault("GIT_POLL_MS", integer(100, 3_600_000), 2000, "2000", {
    description:
      "how often (ms) the runner of a queue with work looks for pushed PR heads and a moved target branch (GitHub: conditional requests, free of rate-limit budget when nothing changed; webhooks and `GITHUB_RECONCILE_MS` also cover it, so a larger value saves requests); an idle queue runs no rounds: the local provider's one shared check of the watched refs, this often, wakes it on a push"
  }),
  ciCommand: optional("CI_COMMAND", text({ what: "a shell command (not blank)", max: 65_536 }), {
    unset: "no built-in CI",
    description:
      "shell command the built-in CI runs in a checkout of every test branch (at most `concurrency` at once per queue)"
  }),
  ciContext: withDefault("CI_CONTEXT", text({ max: 255 }), "ci", "`ci`", {
    description: "status context of the built-in CI"
  }),
  bootstrapOrg: withDefault(
    "BOOTSTRAP_ORG",
    text({
      pattern: /^[a-z0-9][a-z0-9._-]{0,62}$/i,
      what: "an organization slug (letters, digits, . _ -; at most 63)"
    }),
    "default",
    "`default`",
    {
      description:
        "the organization that `BOOTSTRAP_TOKEN` (or the first run) makes; it claims repositories on first use",
      invalid: ["no spaces"]
    }
  ),
  bootstrapToken: optional("BOOTSTRAP_TOKEN", secret(MIN_BOOTSTRAP_TOKEN_LENGTH, "e.g. openssl rand -hex 32"), {
    unset: "on an empty database, a first-run admin token printed once (`FIRST RUN`)",
    description:
      "the admin token of `BOOTSTRAP_ORG`, ensured at every start; it replaces the previous bootstrap token and revokes the first-run token (docs/decisions.md)"
  }),
  metricsToken: optional("METRICS_TOKEN", secret(), {
    unset: "`/metrics` needs no token",
    description: "token for `GET /metrics`: when set, a scrape without it answers 401"
  }),
  publicUrl: optional("PUBLIC_URL", url(["http", "https"], { plain: true }), {
    unset: "`http://localhost:$PORT`",
    description: "the address users reach the server at (links in PR comments, to CI output and tests, the dashboard)"
  }),
  trustProxy: withDefault("TRUST_PROXY", boolean, false, "false", {
    description:
      "the proxy's `X-Forwarded-Proto`, `X-Forwarded-Host` and `X-Forwarded-For` count (the client's address is the last `X-Forwarded-For` entry); set it only when a proxy that sets them is the only way in (docs/security.md)"
  }),
  oidcIssuerUrl: optional("OIDC_ISSUER_URL", url(["https", "http"]), {
    unset: "only token sign-in",
    description: "the OpenID Connect provider people sign in with (its issuer URL); needs `OIDC_CLIENT_ID`"
  }),
  oidcClientId: optional("OIDC_CLIENT_ID", text({ max: 1024 }), {
    description: "Greenline's client id at the provider"
  }),
  oidcClientSecret: optional("OIDC_CLIENT_SECRET", secret(), {
    unset: "a public client (PKCE only)",
    description: "the client's secret at the provider"
  }),
  oidcScopes: withDefault("OIDC_SCOPES", text({ max: 1024 }), "openid profile email", "`openid profile email`", {
    description: "scopes asked for (add `groups` or `offline_access` where the provider needs them)"
  }),
  oidcRoleClaim: withDefault("OIDC_ROLE_CLAIM", text({ max: 255 }), "groups", "`groups`", {
    description:
      "the claim whose values `OIDC_ROLE_RULES` maps to roles; a dotted path (`realm_access.roles`) is followed"
  }),
  oidcRoleRules: withDefault("OIDC_ROLE_RULES", roleRules, [], "none", {
    description:
      "the rules that give a person a role (`read`, `write`, `maintain`, `admin`) per organization from the claim's values, e.g. `acme:maintain=platform;acme:write=*`; a person holds the highest role a rule gives"
  }),
  oidcRefreshSeconds: withDefault("OIDC_REFRESH_SECONDS", integer(1, 86_400), 300, "300", {
    description:
      "how long a person's role is used before it is read again from the provider (a person who lost it loses it then)"
  }),
  oidcProviderName: withDefault(
    "OIDC_PROVIDER_NAME",
    text({ max: 255 }),
    "your identity provider",
    "`your identity provider`",
    {
      description: 'the sign-in button\'s "Sign in with …"'
    }
  ),
  rateLimitPerSecond: withDefault("RATE_LIMIT_PER_SECOND", integer(1, 1_000_000_000), 100, "100", {
    description: "requests per second per token, then 429 with `Retry-After`"
  }),
  logLevel: withDefault("LOG_LEVEL", oneOf(LOG_LEVELS, "verbose"), "info", "`info`", {
    description: "the least severe level logged"
  }),
  logFormat: withDefault("LOG_FORMAT", oneOf(["json", "pretty"] as const), "json", "`json`", {
    description: "JSON lines, or Effect's pretty format for a terminal"
  }),
  otlpEndpoint: optional("OTEL_EXPORTER_OTLP_ENDPOINT", url(["http", "https"]), {
    unset: "tracing off (no spans are made)",
    description:
      "base URL of an OpenTelemetry collector: traces are sent to `<endpoint>/v1/traces` over OTLP/HTTP (JSON); the SDK's own `OTEL_*` variables apply too (README, Observability)"
  }),
  otelServiceName: withDefault("OTEL_SERVICE_NAME", text({ max: 255 }), "greenline", "`greenline`", {
    description: "the traces' `service.name`"
  }),
  githubApiUrl: withDefault(
    "GITHUB_API_URL",
    url(["https", "http"]),
    "https://api.github.com",
    "`https://api.github.com`",
    {
      description: "GitHub's REST API (Enterprise Server: `https://<host>/api/v3`)"
    }
  ),
  githubHost: withDefault("GITHUB_HOST", host, "github.com", "`github.com`", {
    description: "host name of the repositories the GitHub provider serves"
  }),
  githubAppId: optional(
    "GITHUB_APP_ID",
    text({ pattern: /^\d{1,20}$/, what: "a GitHub App's numeric id", bad: "my-app" }),
    {
      description: "the GitHub App's id; with `GITHUB_APP_PRIVATE_KEY` it turns the GitHub provider on"
    }
  ),
  githubAppPrivateKey: optional("GITHUB_APP_PRIVATE_KEY", pemOrFile, {
    description: "the App's private key (RSA, PKCS#1 or PKCS#8)"
  }),
  githubToken: optional("GITHUB_TOKEN", secret(), {
    description: "a personal access token, the alternative to an App"
  }),
  githubWebhookSecret: optional("GITHUB_WEBHOOK_SECRET", secret(), {
    unset: "GitHub's webhooks are refused",
    description: "the secret of GitHub's webhook signatures"
  }),
  githubReconcileMs: withDefault("GITHUB_RECONCILE_MS", integer(1000, 86_400_000), 60_000, "60000", {
    description: "how often (ms) the GitHub provider reconciles queued PRs, targets and CI statuses with GitHub"
  }),
  webhookAllowPrivate: withDefault("WEBHOOK_ALLOW_PRIVATE", boolean, false, "false", {
    description: "allow webhook endpoints on loopback and private addresses"
  }),
  webhookWorker: withDefault("WEBHOOK_WORKER", boolean, true, "true", {
    description: "this instance sends webhook messages (any number of instances may)"
  }),
  eventRetentionDays: withDefault("EVENT_RETENTION_DAYS", integer(1, 36_500), 30, "30", {
    description:
      "days the event log keeps events, with their webhook messages and attempts; a pull request's timeline (its records in the log) is kept while it is in a queue and for that many days after it ended"
  }),
  eventStreamsPerOrg: withDefault("EVENT_STREAMS_PER_ORG", integer(1, 100_000), 20, "20", {
    description: "live event streams open at once per organization and instance"
  }),
  eventStreamPollMs: withDefault("EVENT_STREAM_POLL_MS", integer(100, 3_600_000), 5000, "5000", {
    description:
      "how often (ms) an idle live stream reads the log without a wake-up (bounds the delay of an event whose wake-up was missed)"
  }),
  checkAnswers: withDefault("CHECK_ANSWERS", boolean, false, "false", {
    description:
      "check every answer against its operation's schema before sending it (a 500 when it does not match); the test suite and the fuzz run turn it on. Off, only answers whose schema transforms values are encoded: the others are plain JSON the compiler checked"
  })
} satisfies Record<string, Setting<unknown>>

/** The variables as declared, in order (docs/configuration.md, the generated test). */
export const settingList: ReadonlyArray<Setting<unknown>> = Object.values(settings)

type Values = { readonly [K in keyof typeof settings]: (typeof settings)[K] extends Setting<infer A> ? A : never }

/** Everything the service reads from the environment (contract.md §5), with its defaults. */
export type AppConfigShape = Omit<Values, "gitRoot" | "publicUrl"> & {
  readonly gitRoot: string
  readonly publicUrl: string
  /** Whether PUBLIC_URL was set: unset, a sign-in form may also come from the origin the request was addressed to. */
  readonly publicUrlConfigured: boolean
  /** The audit log's retention: EVENT_RETENTION_DAYS when set, else DEFAULT_AUDIT_RETENTION_DAYS. */
  readonly auditRetentionDays: number
  /**
   * Not from the environment: a dumped data directory (PGlite's `dumpDataDir`) that an in-memory embedded database
   * starts from instead of an empty one. Tests pass a migrated one: a fresh PGlite costs seconds of CPU, a seeded one
   * a tenth of that.
   */
  readonly embeddedSeed?: Blob
}

export class AppConfig extends Context.Tag("greenline/AppConfig")<AppConfig, AppConfigShape>() {}

/** Checks between variables, once each is valid on its own. */
const crossChecks = (c: Values): ReadonlyArray<string> => [
  ...(Option.isSome(c.githubAppId) !== Option.isSome(c.githubAppPrivateKey)
    ? [
        `GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY go together: ${Option.isSome(c.githubAppId) ? "GITHUB_APP_PRIVATE_KEY" : "GITHUB_APP_ID"} is unset, so the GitHub App cannot sign in`
      ]
    : []),
  ...(Option.isSome(c.oidcIssuerUrl) && Option.isNone(c.oidcClientId)
    ? [
        "OIDC_ISSUER_URL needs OIDC_CLIENT_ID: people cannot sign in with a provider without Greenline's client id there"
      ]
    : [])
]

const values = Config.all(
  Object.fromEntries(Object.entries(settings).map(([key, s]) => [key, s.config])) as {
    readonly [K in keyof Values]: Config.Config<Values[K]>
  }
) as Config.Config<Values>

export const appConfig: Config.Config<AppConfigShape> = values.pipe(
  Config.mapOrFail((c) => {
    const problems = crossChecks(c)
    return problems.length === 0
      ? Either.right(c)
      : Either.left(problems.map((p) => ConfigError.InvalidData([], p)).reduce((a, b) => ConfigError.And(a, b)))
  }),
  Config.map(
    (c): Omit<AppConfigShape, "auditRetentionDays"> => ({
      ...c,
      gitRoot: Option.getOrElse(c.gitRoot, () => `${c.dataDir.replace(/\/+$/, "")}/git`),
      githubHost: c.githubHost.toLowerCase(),
      publicUrl: Option.getOrElse(c.publicUrl, () => `http://localhost:${c.port}`),
      publicUrlConfigured: Option.isSome(c.publicUrl)
    })
  ),
  // the audit log follows EVENT_RETENTION_DAYS only when it is set (else a year: docs/decisions.md, issue #30)
  Config.zipWith(
    Config.option(Config.string("EVENT_RETENTION_DAYS")),
    (c, retention): AppConfigShape => ({
      ...c,
      auditRetentionDays: Option.isSome(retention) ? c.eventRetentionDays : DEFAULT_AUDIT_RETENTION_DAYS
    })
  )
)

/** The settings each feature and adapter receives: its own tag, in its own folder (none of them reads AppConfig). */
export type FeatureEnvs = QueueEnv | FlakyEnv | EventsEnv | GitHubEnv | DatabaseEnv | TracingEnv | HttpEnv | AuditEnv

/**
 * Hands each feature and adapter its part of the configuration. This and `AppConfig` are the only way settings
 * reach the code outside the composition root (the dependency rule `config-is-the-roots`). A new variable that a
 * feature needs: a field in that feature's `*Env.ts`, and its value here.
 */
export const FeatureEnvsLive: Layer.Layer<FeatureEnvs, never, AppConfig> = Layer.effectContext(
  Effect.map(AppConfig, (c) =>
    Context.make(QueueEnv, {
      publicUrl: c.publicUrl,
      gitPollMs: c.gitPollMs,
      ciCommand: c.ciCommand,
      ciContext: c.ciContext
    }).pipe(
      Context.add(FlakyEnv, { publicUrl: c.publicUrl }),
      Context.add(EventsEnv, {
        webhookAllowPrivate: c.webhookAllowPrivate,
        webhookWorker: c.webhookWorker,
        eventRetentionDays: c.eventRetentionDays
      }),
      Context.add(GitHubEnv, {
        githubApiUrl: c.githubApiUrl,
        githubHost: c.githubHost,
        githubAppId: c.githubAppId,
        githubAppPrivateKey: c.githubAppPrivateKey,
        githubToken: c.githubToken,
        githubWebhookSecret: c.githubWebhookSecret,
        githubReconcileMs: c.githubReconcileMs
      }),
      Context.add(DatabaseEnv, {
        databaseUrl: c.databaseUrl,
        databasePoolMax: c.databasePoolMax,
        dataDir: c.dataDir,
        ...(c.embeddedSeed === undefined ? {} : { embeddedSeed: c.embeddedSeed })
      }),
      Context.add(TracingEnv, { otlpEndpoint: c.otlpEndpoint, otelServiceName: c.otelServiceName }),
      Context.add(HttpEnv, { eventStreamsPerOrg: c.eventStreamsPerOrg, eventStreamPollMs: c.eventStreamPollMs }),
      Context.add(AuditEnv, { auditRetentionDays: c.auditRetentionDays })
    )
  )
)

/** `config`, with each feature's own settings beside it. */
export const withFeatureEnvs = <E, R>(
  config: Layer.Layer<AppConfig, E, R>
): Layer.Layer<AppConfig | FeatureEnvs, E, R> => Layer.provideMerge(FeatureEnvsLive, config)

export const AppConfigLive: Layer.Layer<AppConfig | FeatureEnvs, ConfigError.ConfigError> = withFeatureEnvs(
  Layer.effect(
    AppConfig,
    Effect.gen(function* () {
      return yield* appConfig
    })
  )
)

/** The configuration from the environment, with `overrides` (tests and tools; the overrides are not checked). */
export const makeAppConfig = (
  overrides: Partial<AppConfigShape>
): Layer.Layer<AppConfig | FeatureEnvs, ConfigError.ConfigError> =>
  withFeatureEnvs(
    Layer.effect(
      AppConfig,
      Effect.map(appConfig, (c) => ({ ...c, ...overrides }))
    )
  )
