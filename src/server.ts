import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, Fiber, Layer, Logger, LogLevel, ManagedRuntime, Option, Redacted } from "effect"
import { AuditLog, AuditLogLive } from "./audit/AuditLog.ts"
import { clientBundle } from "./client/build.ts"
import { AppConfig, MIN_BOOTSTRAP_TOKEN_LENGTH, withFeatureEnvs } from "./config.ts"
import { DatabaseLive } from "./db/Database.ts"
import { InstanceRegistryLive } from "./db/instances.ts"
import { Delivery, DeliveryLive } from "./events/Delivery.ts"
import { EventLogLive } from "./events/EventLogLive.ts"
import { StreamWakeupsLive } from "./events/StreamWakeups.ts"
import { WebhooksLive } from "./events/Webhooks.ts"
import { FlakyLive } from "./flaky/Flaky.ts"
import { TestHistoryLive } from "./flaky/history.ts"
import { FlakyTestVerdictsLive } from "./flaky/testVerdicts.ts"
import { CommandCiLayer } from "./git-local/CommandCi.ts"
import { GitHubFeedbackLive } from "./github/feedback.ts"
import { GitHubClientLive } from "./github/GitHubClient.ts"
import { InstallationClaimGuardLive } from "./github/installations.ts"
import { GitHubReconcileLive } from "./github/reconcile.ts"
import { makeWebhookEndpoint, WEBHOOK_PATH } from "./github/webhooks.ts"
import { openApiDocument } from "./http/Api.ts"
import { refineDocument } from "./http/docs/openapi.ts"
import { REDOC_PATH, redocBundle, renderDocs } from "./http/docs.ts"
import { ApiError, errorResponse } from "./http/errors.ts"
import { makeProxyView, notePeer } from "./http/proxy.ts"
import { PERMISSIONS } from "./http/roles.ts"
import { makeApp, RateLimiter, servesEveryOp } from "./http/router.ts"
import { adminRoutes } from "./http/routes/admin.ts"
import { makeEventStream, STREAM_PATH } from "./http/routes/eventStream.ts"
import { eventRoutes } from "./http/routes/events.ts"
import { flakyRoutes } from "./http/routes/flaky.ts"
import { freezeRoutes } from "./http/routes/freezes.ts"
import { metricsRoutes } from "./http/routes/metrics.ts"
import { queueRoutes } from "./http/routes/queue.ts"
import { triageRoutes } from "./http/routes/triage.ts"
import { webRoutes } from "./http/routes/web.ts"
import { makeRequestTracer } from "./http/tracing.ts"
import { BunRuntimeLive } from "./kernel/bunRuntime.ts"
import { Database } from "./kernel/Database.ts"
import { VERSION } from "./kernel/version.ts"
import { registerEventMetrics } from "./metrics/eventMetrics.ts"
import { DbPoolMetricsLive, Metrics, MetricsLive, RunnerMetricsLive } from "./metrics/Metrics.ts"
import { Gauge } from "./metrics/registry.ts"
import { TracingLive } from "./metrics/Tracing.ts"
import { ProvidersLayer } from "./providers.ts"
import { QueueActivityLive } from "./queue/activity.ts"
import { Engine, EngineRunner } from "./queue/Engine.ts"
import { EngineLive } from "./queue/engine/EngineLive.ts"
import { QueueRepoLive } from "./queue/QueueRepo.ts"
import { RunnerHealth, RunnerHealthLive, type RunnerShare } from "./queue/runner/health.ts"
import { RunnerProbe, type RunnerProbeShape } from "./queue/runner/probe.ts"
import { StatusesLive } from "./queue/Statuses.ts"
import { explainListenError } from "./startup.ts"
import { orgsOfRules } from "./tenancy/roleRules.ts"
import { Sessions, SessionsLive } from "./tenancy/Sessions.ts"
import { Tenancy, TenancyLive } from "./tenancy/Tenancy.ts"
import { TriageLive } from "./triage/Triage.ts"
import { makeOidc } from "./web/oidc.ts"
import { DOCS_CSP, makeDashboard, securityHeaders } from "./web/pages.ts"

/** Every service of the running application, over the configured database. */
export const AppLayer = <E>(config: Layer.Layer<AppConfig, E>, probe?: RunnerProbeShape) => {
  // the Git host of each repository by its host: GitHub (when configured) or the local bare repositories
  const git = Layer.unwrapEffect(
    Effect.map(AppConfig, (c) => Layer.merge(ProvidersLayer, CommandCiLayer(c.gitRoot)))
  ).pipe(Layer.provideMerge(GitHubClientLive))
  // Effect's own logs (runners, lease loop) as structured JSON lines (or pretty), at LOG_LEVEL
  const logging = Layer.unwrapEffect(
    Effect.map(AppConfig, (c) =>
      Layer.merge(
        c.logFormat === "json" ? Logger.json : Logger.pretty,
        Logger.minimumLogLevel(
          LogLevel.allLevels.find((l) => l.label.toLowerCase() === c.logLevel.toLowerCase()) ?? LogLevel.Info
        )
      )
    )
  )
  // tracing first, so every later layer and fiber sees the tracer (or tracing switched off)
  // the runtime's own APIs (kernel/RuntimeHost.ts): Bun's
  const base = Layer.mergeAll(DatabaseLive, git, MetricsLive, logging, BunRuntimeLive).pipe(
    Layer.provideMerge(TracingLive),
    Layer.provideMerge(withFeatureEnvs(config))
  )
  // GitHub: the PR comment and status the runners write, and which repositories may be claimed (the App's)
  const github = Layer.mergeAll(GitHubFeedbackLive, InstallationClaimGuardLive)
  const services = Layer.mergeAll(
    TenancyLive,
    QueueRepoLive,
    StatusesLive,
    DbPoolMetricsLive,
    RunnerHealthLive,
    RunnerMetricsLive,
    // this server in greenline_instances (PostgreSQL): what a newer server checks before a breaking migration
    InstanceRegistryLive
  ).pipe(Layer.provideMerge(github), Layer.provideMerge(base))
  // a test's probe of the runners (RunnerProbe), when given
  const probed = probe === undefined ? services : Layer.provideMerge(Layer.succeed(RunnerProbe, probe), services)
  // outgoing events: the log the features append to, the webhook endpoints API and the delivery worker
  const events = Layer.mergeAll(WebhooksLive, DeliveryLive, StreamWakeupsLive).pipe(
    Layer.provideMerge(EventLogLive),
    Layer.provideMerge(probed)
  )
  // the flaky-test results answer the queue's runners why a test run failed (#20, TestVerdicts)
  const flaky = Layer.provideMerge(FlakyTestVerdictsLive, FlakyLive)
  // the dashboard's read models and sessions
  const dashboard = Layer.mergeAll(QueueActivityLive, TestHistoryLive, SessionsLive, AuditLogLive).pipe(
    // failure triage (#33) joins the queue's records with the flaky-test results
    Layer.merge(Layer.provide(TriageLive, flaky))
  )
  const features = Layer.mergeAll(EngineLive, dashboard).pipe(Layer.provideMerge(flaky), Layer.provideMerge(events))
  // reconciliation hands what GitHub shows to the engine
  return GitHubReconcileLive.pipe(Layer.provideMerge(features))
}

/**
 * Every operation of `Api.ts` with its handler. The compiler checks that none is missing (`servesEveryOp`) and that
 * every handler's requirements are among the application's services (`makeApp` over the application's runtime);
 * `makeApp` refuses two handlers for one operation at start-up. The role each one needs is in http/roles.ts
 * (`PERMISSIONS`), checked by the compiler the same way.
 */
const routes = servesEveryOp([
  ...queueRoutes,
  ...freezeRoutes,
  ...metricsRoutes,
  ...flakyRoutes,
  ...adminRoutes,
  ...eventRoutes,
  ...webRoutes,
  ...triageRoutes
])

export type AppServices = Layer.Layer.Success<ReturnType<typeof AppLayer>>

export interface RunningServer {
  readonly url: string
  readonly port: number
  /** Runs an effect with the server's services (tests and tools: e.g. create an organization). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, AppServices>) => Promise<A>
  /** Stops accepting, lets requests in flight finish, stops the runners and closes the database. */
  readonly stop: () => Promise<void>
}

/** How long one step of a stop may take before it is logged as hung and given up. */
const STOP_STEP_MS = 20_000

const within = async (ms: number, step: string, work: Promise<unknown>): Promise<void> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const gaveUp = new Promise<"hung">((resolve) => {
    timer = setTimeout(() => resolve("hung"), ms)
  })
  try {
    if ((await Promise.race([work, gaveUp])) === "hung") {
      writeLog("ERROR", "stop: a step did not finish; giving it up", { step, waitedMs: ms })
    }
  } finally {
    clearTimeout(timer)
  }
}

const writeLog = (level: "INFO" | "WARN" | "ERROR", message: string, extra: Record<string, unknown> = {}) => {
  const line = `${JSON.stringify({ level, time: new Date().toISOString(), message, ...extra })}\n`
  if (level === "ERROR") process.stderr.write(line)
  else process.stdout.write(line)
}

const unauthorizedMetrics = () =>
  Response.json(
    {
      error: {
        code: "UNAUTHORIZED",
        message: "GET /metrics needs the METRICS_TOKEN (Authorization: Bearer or x-api-token)"
      }
    },
    { status: 401 }
  )

/**
 * Every answer carries the security headers (the dashboard's, docs/security.md): those a handler set stay (the
 * reference at /docs has a policy of its own), the rest are added. With PUBLIC_URL on https, browsers are also told
 * to use only https from then on (HSTS).
 */
const securityHeadersFor = (publicUrl: string): ReadonlyArray<readonly [string, string]> => [
  ...Object.entries(securityHeaders),
  ...(publicUrl.startsWith("https:") ? [["strict-transport-security", "max-age=31536000"] as const] : [])
]
const withSecurityHeaders = (response: Response, headers: ReadonlyArray<readonly [string, string]>): Response => {
  const missing = headers.filter(([name]) => !response.headers.has(name))
  if (missing.length === 0) return response
  try {
    for (const [name, value] of missing) response.headers.set(name, value)
    return response
  } catch {
    // immutable headers (a Response.redirect, a fetched answer): the same answer with its headers copied
    const copied = new Headers(response.headers)
    for (const [name, value] of missing) copied.set(name, value)
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers: copied })
  }
}

/** Where the single-file CI client is served. */
export const CLIENT_PATH = "/cli/greenline.mjs"

/**
 * BOOTSTRAP_TOKEN, when set, becomes the bootstrap organization's admin token (replacing the previous one); without
 * it, a database with no organization and no token gets the default organization and one admin token, printed once.
 */
const firstRunOrBootstrap = async (
  config: Context.Tag.Service<AppConfig>,
  run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>,
  tenancy: Context.Tag.Service<Tenancy>
) => {
  if (Option.isSome(config.bootstrapToken)) {
    const token = Redacted.value(config.bootstrapToken.value).trim()
    if (token.length < MIN_BOOTSTRAP_TOKEN_LENGTH) {
      throw new Error(
        `BOOTSTRAP_TOKEN is ${token.length} characters long; it must have at least ${MIN_BOOTSTRAP_TOKEN_LENGTH} (e.g. openssl rand -hex 32)`
      )
    }
    const { revokedFirstRun } = await run(tenancy.ensureBootstrap(config.bootstrapOrg, token))
    for (const id of revokedFirstRun) {
      writeLog("INFO", "BOOTSTRAP_TOKEN is set: the first-run admin token is revoked (BOOTSTRAP_TOKEN replaces it)", {
        revokedToken: id
      })
    }
    return
  }
  const created = await run(tenancy.firstRun(config.bootstrapOrg))
  if (Option.isSome(created)) {
    const { org, token } = created.value
    // the token once, in its own field; a BOOTSTRAP_TOKEN set later revokes it
    writeLog(
      "INFO",
      `FIRST RUN: created organization '${org.slug}' and an admin token (the field "token"), shown only this once; setting BOOTSTRAP_TOKEN later revokes it`,
      { firstRun: true, org: org.slug, token, dashboard: `${config.publicUrl}/login` }
    )
  }
}

/** Starts the HTTP server and the queue runners on a layer of configuration. */
export const startServer = async <E>(
  configLayer: Layer.Layer<AppConfig, E>,
  probe?: RunnerProbeShape
): Promise<RunningServer> => {
  const started = performance.now()
  const runtime = ManagedRuntime.make(AppLayer(configLayer, probe))
  const rt = await runtime.runtime()
  const ctx = rt.context
  const config = Context.get(ctx, AppConfig)
  const metrics = Context.get(ctx, Metrics)
  const tenancy = Context.get(ctx, Tenancy)
  const engine = Context.get(ctx, Engine)
  const sql = Context.get(ctx, SqlClient.SqlClient)
  const health = Context.get(ctx, RunnerHealth)
  metrics.registry.register(
    new Gauge(
      "greenline_queue_runner_failures",
      "Failures in a row of a queue runner that has not completed a round since (0 series when all are healthy)",
      () => health.failing().map((e) => [{ queue_id: e.queueId }, e.failures] as const)
    )
  )
  // #37: instances share the queues; each shows its own share (a dashboard sums them over instances)
  const shareGauge = (name: string, help: string, read: (s: RunnerShare) => number) =>
    metrics.registry.register(
      new Gauge(name, help, () => {
        const share = health.share()
        return share === undefined ? [] : [[{ instance: share.owner }, read(share)] as const]
      })
    )
  shareGauge("greenline_queues_owned", "Queues whose runner lease this instance holds", (s) => s.owned)
  shareGauge("greenline_queues_fair_share", "This instance's fair share: ceil(queues / live instances)", (s) => s.fair)
  shareGauge("greenline_instances_live", "Live instances sharing the queues, as this one last counted", (s) => s.live)
  const logError = (message: string, cause: unknown) =>
    writeLog("ERROR", message, { cause: cause instanceof Error ? (cause.stack ?? cause.message) : String(cause) })

  await firstRunOrBootstrap(config, (effect) => runtime.runPromise(effect), tenancy).catch(async (error: unknown) => {
    await runtime.dispose()
    throw error
  })

  const webhook = await runtime.runPromise(makeWebhookEndpoint)
  const eventStream = await runtime.runPromise(makeEventStream)
  registerEventMetrics(metrics.registry, Context.get(ctx, Delivery).stats, eventStream.subscribers)
  const document = refineDocument(openApiDocument(), config.publicUrl)
  const docsHtml = renderDocs(document)
  const openApiJson = JSON.stringify(document)
  const metricsToken = Option.map(config.metricsToken, Redacted.value)

  const proxy = makeProxyView(config.trustProxy)
  // sign-in attempts per client address (a tenth of the per-token rate, at least 10 a second)
  const signInLimiter = new RateLimiter(Math.max(10, Math.floor(config.rateLimitPerSecond / 10)), () => Date.now())
  const dashboard = makeDashboard({
    run: (effect) => runtime.runPromise(effect),
    sessions: Context.get(ctx, Sessions),
    tenancy,
    publicUrl: config.publicUrl,
    publicUrlConfigured: config.publicUrlConfigured,
    proxy,
    limit: (key) => signInLimiter.take(key),
    oidc:
      Option.isSome(config.oidcIssuerUrl) && Option.isSome(config.oidcClientId)
        ? {
            client: makeOidc({
              issuerUrl: config.oidcIssuerUrl.value,
              clientId: config.oidcClientId.value,
              clientSecret: Option.getOrUndefined(Option.map(config.oidcClientSecret, Redacted.value)),
              scopes: config.oidcScopes,
              roleClaim: config.oidcRoleClaim,
              roleRules: config.oidcRoleRules,
              redirectUri: `${config.publicUrl}/login/oidc/callback`
            }),
            providerName: config.oidcProviderName,
            orgs: orgsOfRules(config.oidcRoleRules),
            refreshMs: config.oidcRefreshSeconds * 1000
          }
        : undefined,
    logError
  })

  // who may open the live stream: an API token, or the dashboard's session (a GET: no CSRF token needed)
  const streamOrg = async (request: Request) => {
    const token =
      request.headers.get("x-api-token")?.trim() ??
      /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization") ?? "")?.[1]?.trim()
    if (token === undefined || token === "") {
      const session = await dashboard.apiSession(request)
      return session === undefined ? Option.none() : Option.some(session.org)
    }
    return Option.map(await runtime.runPromise(tenancy.authenticate(token)), (found) => found.org)
  }

  const extra = async (request: Request, url: URL): Promise<Response | undefined> => {
    if (url.pathname === WEBHOOK_PATH) return webhook.handle(request)
    if (url.pathname === STREAM_PATH && request.method === "GET") {
      const org = await streamOrg(request)
      if (Option.isNone(org)) {
        return errorResponse(
          new ApiError({
            status: 401,
            code: "UNAUTHORIZED",
            message: "a valid API token is required (x-api-token or Authorization: Bearer)"
          })
        )
      }
      return eventStream.handle(request, url, org.value)
    }
    const page = await dashboard.handle(request, url)
    if (page !== undefined) return page
    if (request.method !== "GET" && request.method !== "HEAD") return undefined
    switch (url.pathname) {
      case "/healthz":
        return Response.json({ status: "ok", version: VERSION })
      case "/readyz": {
        const ok = await runtime
          .runPromise(
            Effect.as(sql`select 1 from greenline_migrations limit 1`, true).pipe(Effect.orElseSucceed(() => false))
          )
          .catch(() => false)
        // a queue whose runner keeps failing does not make the instance unready, but it shows here
        const failing = health.failing().map((e) => ({
          queueId: e.queueId,
          message: e.message,
          since: new Date(e.since).toISOString(),
          failures: e.failures
        }))
        // #37: whether this instance has its share of the queues (it does not make the instance unready either)
        const share = health.share()
        const owned =
          share === undefined
            ? null
            : {
                instance: share.owner,
                owned: share.owned,
                fair: share.fair,
                most: share.most,
                live: share.live,
                queues: share.queues,
                // at least what the others' fair shares leave, at most the fair share and the slack
                hasShare:
                  share.owned >= Math.max(0, share.queues - (share.live - 1) * share.fair) && share.owned <= share.most
              }
        return Response.json(
          { status: ok ? "ready" : "unavailable", runners: { failing, share: owned } },
          { status: ok ? 200 : 503 }
        )
      }
      case "/v1/openapi.json":
        return new Response(openApiJson, { headers: { "content-type": "application/json" } })
      case "/docs":
        return new Response(docsHtml, {
          headers: { "content-type": "text/html; charset=utf-8", "content-security-policy": DOCS_CSP }
        })
      case REDOC_PATH:
        return new Response(redocBundle(), {
          headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=86400" }
        })
      case CLIENT_PATH:
        return new Response(await clientBundle(), {
          headers: {
            "content-type": "text/javascript; charset=utf-8",
            "content-disposition": 'attachment; filename="greenline.mjs"'
          }
        })
      case "/metrics": {
        const given =
          request.headers.get("x-api-token") ?? /^Bearer\s+(.+)$/i.exec(request.headers.get("authorization") ?? "")?.[1]
        // guarded by METRICS_TOKEN when it is set (contract.md §5); without it, open like any Prometheus target
        if (Option.isSome(metricsToken) && given?.trim() !== metricsToken.value) return unauthorizedMetrics()
        return new Response(metrics.registry.render(), {
          headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" }
        })
      }
    }
    const ci = /^\/ci\/output\/([0-9a-f-]{36})$/i.exec(url.pathname)
    if (ci?.[1] !== undefined) {
      const output = await runtime.runPromise(engine.ciOutput(ci[1]))
      if (Option.isNone(output)) return undefined
      const status = output.value.exitCode === null ? "running" : `exit code ${output.value.exitCode}`
      return new Response(`${output.value.output}\n[${status}]\n`, {
        headers: { "content-type": "text/plain; charset=utf-8" }
      })
    }
    // a browser's unknown path: a page, not the API's JSON (#33)
    return dashboard.notFound(request, url)
  }

  const app = makeApp({
    routes,
    runtime: rt,
    authenticator: {
      authenticate: (token) => {
        const found = tenancy.remembered(token, Date.now())
        return found !== undefined
          ? Promise.resolve(Option.some(found))
          : runtime.runPromise(tenancy.authenticate(token))
      }
    },
    session: dashboard.apiSession,
    permissions: PERMISSIONS,
    clientAddress: (request) => proxy.clientAddress(request),
    audit: { append: (event) => Effect.flatMap(AuditLog, (log) => log.append(event)) },
    rateLimiter: new RateLimiter(config.rateLimitPerSecond, () => Date.now()),
    observer: { observe: metrics.observeRequest },
    tracer: Option.isSome(config.otlpEndpoint) ? makeRequestTracer(rt) : undefined,
    logError,
    logWarning: (message) => writeLog("WARN", message),
    checkAnswers: config.checkAnswers,
    extra
  })

  const everyAnswer = securityHeadersFor(config.publicUrl)
  // requests being answered: stopping waits for them before the database closes under them
  let inFlight = 0
  let stopping: Promise<void> | undefined
  const serve = async (options: Parameters<typeof Bun.serve>[0]) => {
    try {
      return Bun.serve(options)
    } catch (error) {
      await runtime.dispose()
      // Bun's own message ("Is port 8080 in use?") for any failure to listen: name the setting instead
      throw explainListenError(config, error)
    }
  }
  const server = await serve({
    port: config.port,
    hostname: config.host,
    maxRequestBodySize: 1024 * 1024 * 1024,
    idleTimeout: 120,
    fetch: async (request, bun) => {
      // a request on a connection kept open after the stop began (keep-alive) is not served any more
      if (stopping !== undefined) {
        return errorResponse(
          new ApiError({
            status: 503,
            code: "INTERNAL",
            message: "the server is shutting down",
            headers: { connection: "close" }
          })
        )
      }
      inFlight++
      try {
        const peer = bun.requestIP(request)?.address
        notePeer(request, peer)
        return withSecurityHeaders(await app(request, peer), everyAnswer)
      } finally {
        inFlight--
      }
    },
    error: (error) => {
      logError("unhandled server error", error)
      return withSecurityHeaders(
        Response.json(
          { error: { code: "INTERNAL", message: "the server could not complete the request" } },
          { status: 500 }
        ),
        everyAnswer
      )
    }
  })

  await runtime.runPromise(Effect.flatMap(EngineRunner, (r) => r.start))
  const revocations = runtime.runFork(tenancy.followRevocations)
  const port = server.port ?? config.port
  writeLog("INFO", "greenline listening", {
    port,
    version: VERSION,
    database: Context.get(ctx, Database).kind,
    startupMs: Math.round(performance.now() - started)
  })

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    run: (effect) => runtime.runPromise(effect),
    stop: () => {
      stopping ??= (async () => {
        // live streams never finish by themselves: end them, or the graceful stop waits for their clients
        eventStream.closeAll()
        await server.stop(false)
        for (let waited = 0; inFlight > 0 && waited < 5_000; waited += 10) await Bun.sleep(10)
        // a stop that hangs (a step waiting on what never comes) is reported and given up, never waited for forever
        await within(STOP_STEP_MS, "stopping the revocation follower", runtime.runPromise(Fiber.interrupt(revocations)))
        // webhook follow-ups (reactions, replies) must not outlive the database
        await within(STOP_STEP_MS, "closing the webhook worker", runtime.runPromise(webhook.close))
        await within(STOP_STEP_MS, "stopping the runners and closing the database", runtime.dispose())
      })()
      return stopping
    }
  }
}
