/** `POST /webhooks/github`: GitHub's events into the engine, verified and idempotent (docs/architecture.md). */
import { createHmac, timingSafeEqual } from "node:crypto"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect, Exit, Fiber, Option, Redacted, Runtime } from "effect"
import { ApiError, errorResponse, internal, invalidRequest, serviceUnavailable, unauthorized } from "../http/errors.ts"
import { isUnavailable, readBody } from "../http/router.ts"
import { Engine } from "../queue/Engine.ts"
import type { GitHubError } from "./GitHubClient.ts"
import { GitHubEnv } from "./GitHubEnv.ts"
import { onIssueComment } from "./webhookComments.ts"
import { onInstallation, onInstallationRepositories } from "./webhookInstallations.ts"
import { nothing, type Outcome, PayloadInvalid, type Plan, type Services } from "./webhookPlan.ts"
import { onCheckRun, onCheckSuite, onPullRequest, onPush, onStatus } from "./webhookPullRequests.ts"

export const WEBHOOK_PATH = "/webhooks/github"
/** GitHub caps webhook payloads at 25 MB. */
export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024
/** Delivery ids are kept this long (GitHub lets a delivery be redelivered for a few days). */
const DELIVERY_RETENTION_DAYS = 30

// ------------------------------------------------------------------------------------------------ signature

/** True when `header` is `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret` (constant-time comparison). */
export const verifySignature = (secret: string, body: Uint8Array, header: string | null): boolean => {
  if (header === null || secret === "") return false
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header.trim())
  if (match?.[1] === undefined) return false
  const expected = createHmac("sha256", secret).update(body).digest()
  const given = Buffer.from(match[1], "hex")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/** The header GitHub would send for `body` (tests, tools). */
export const signBody = (secret: string, body: string | Uint8Array): string =>
  `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`

const handlers: Record<
  string,
  (payload: unknown) => Effect.Effect<Plan, PayloadInvalid | GitHubError | SqlError, Services>
> = {
  pull_request: onPullRequest,
  push: onPush,
  status: onStatus,
  check_run: onCheckRun,
  check_suite: onCheckSuite,
  issue_comment: onIssueComment,
  installation: onInstallation,
  installation_repositories: onInstallationRepositories
}

/** Processes one verified delivery: its effects and its id in one transaction. */
export const processDelivery = (delivery: string, event: string, payload: unknown) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const seen = yield* sql<{ id: string }>`select id from github_deliveries where id = ${delivery}`
    if (seen.length > 0) return { result: "duplicate delivery: ignored", after: Effect.void, wake: [] } as Outcome
    const handler = handlers[event]
    const plan: Plan = handler === undefined ? nothing(`${event}: not handled`) : yield* handler(payload)
    const outcome = yield* sql.withTransaction(
      Effect.gen(function* () {
        const inserted = yield* sql<{ id: string }>`
          insert into github_deliveries (id, event) values (${delivery}, ${event}) on conflict (id) do nothing returning id`
        if (inserted.length === 0) return Option.none<Outcome>()
        return Option.some(yield* plan)
      })
    )
    if (Option.isNone(outcome))
      return { result: "duplicate delivery: ignored", after: Effect.void, wake: [] } as Outcome
    const engine = yield* Engine
    for (const queueId of outcome.value.wake) yield* engine.wake(queueId)
    return outcome.value
  })

const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,100}$/

/**
 * The endpoint, over the application's services (server.ts routes `WEBHOOK_PATH` here), and `close`, which stops the
 * follow-ups still running in the background (the server calls it before closing the database).
 */
export const makeWebhookEndpoint = Effect.gen(function* () {
  const runtime = yield* Effect.runtime<Services>()
  const config = yield* GitHubEnv
  const runExit = Runtime.runPromiseExit(runtime)
  const fork = Runtime.runFork(runtime)
  const background = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
  const runFork = (effect: Effect.Effect<unknown, never, Services>) => {
    const fiber = fork(effect)
    background.add(fiber)
    fiber.addObserver(() => background.delete(fiber))
  }
  const close: Effect.Effect<void> = Effect.suspend(() => Fiber.interruptAll([...background]))
  const secret = Option.map(config.githubWebhookSecret, Redacted.value)
  let handled = 0

  const handle = async (request: Request): Promise<Response> => {
    if (request.method !== "POST") {
      return errorResponse(
        new ApiError({ status: 405, code: "NOT_FOUND", message: `${request.method} is not allowed on ${WEBHOOK_PATH}` })
      )
    }
    const body = await readBody(request, MAX_WEBHOOK_BYTES)
    if (body === "too-large") {
      return errorResponse(
        new ApiError({
          status: 413,
          code: "PAYLOAD_TOO_LARGE",
          message: `a webhook payload is at most ${MAX_WEBHOOK_BYTES} bytes`,
          headers: { connection: "close" }
        })
      )
    }
    if (Option.isNone(secret))
      return errorResponse(unauthorized("webhooks are not accepted: GITHUB_WEBHOOK_SECRET is not set"))
    if (!verifySignature(secret.value, body, request.headers.get("x-hub-signature-256"))) {
      return errorResponse(unauthorized("the X-Hub-Signature-256 signature is missing or wrong"))
    }
    const event = request.headers.get("x-github-event") ?? ""
    const delivery = request.headers.get("x-github-delivery") ?? ""
    if (event === "" || !DELIVERY_ID.test(delivery)) {
      return errorResponse(invalidRequest("X-GitHub-Event and X-GitHub-Delivery are required"))
    }
    let payload: unknown
    try {
      const text = new TextDecoder().decode(body)
      const form = (request.headers.get("content-type") ?? "")
        .toLowerCase()
        .startsWith("application/x-www-form-urlencoded")
      payload = JSON.parse(form ? (new URLSearchParams(text).get("payload") ?? "") : text)
    } catch {
      return errorResponse(invalidRequest("the payload is not valid JSON"))
    }
    if (event === "ping") return Response.json({ delivery, event, result: "pong" })

    const exit = await runExit(processDelivery(delivery, event, payload))
    if (Exit.isSuccess(exit)) {
      runFork(
        exit.value.after.pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`webhook ${event} ${delivery}: follow-up failed`, cause))
        )
      )
      if (++handled % 500 === 0) {
        runFork(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql`delete from github_deliveries where received_at < now() - make_interval(days => ${DELIVERY_RETENTION_DAYS})`
          ).pipe(Effect.ignore)
        )
      }
      return Response.json({ delivery, event, result: exit.value.result })
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && failure.value instanceof PayloadInvalid) {
      return errorResponse(invalidRequest(failure.value.message))
    }
    // the database out of reach: 503 (GitHub's redelivery, or the reconciliation, brings it again)
    if (isUnavailable(exit.cause)) return errorResponse(serviceUnavailable())
    await runExit(Effect.logError(`webhook ${event} ${delivery} failed`, exit.cause))
    return errorResponse(internal())
  }
  return { handle, close }
})
