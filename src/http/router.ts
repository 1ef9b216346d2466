import { Cause, Context, Effect, Either, Exit, Option, type ParseResult, Runtime, Schema, type SchemaAST } from "effect"
import type { AuditEvent } from "../audit/auditRepo.ts"
import { auditTarget } from "../audit/target.ts"
import { type PendingAudit, withPendingAudit } from "../audit/trail.ts"
import { isDatabaseUnavailable } from "../kernel/Database.ts"
import { describeCause } from "../kernel/errors.ts"
import { type Principal, roleAllows } from "../tenancy/principal.ts"
import type { Authenticated, Organization } from "../tenancy/Tenancy.ts"
import type { OpName } from "./Api.ts"
import {
  ApiError,
  type DomainError,
  errorResponse,
  fromParseError,
  internal,
  invalidRequest,
  permissionDenied,
  serviceUnavailable,
  toApiError,
  unauthorized
} from "./errors.ts"
import { IGNORED_FIELDS_HEADER, IGNORED_FIELDS_MAX_BYTES, unexpectedPaths } from "./ignoredFields.ts"
import { checkInput } from "./input.ts"
import type { Op } from "./operation.ts"
import type { Permission, Permissions } from "./roles.ts"
import type { RequestSpan, RequestTracer } from "./tracing.ts"

/** The organization of the API token (or session) that made the current request. */
export class CurrentOrg extends Context.Tag("greenline/CurrentOrg")<CurrentOrg, Organization>() {}

/** Who made the current request (a token, or a person signed in to the dashboard), and the role they hold. */
export class CurrentPrincipal extends Context.Tag("greenline/CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/**
 * The client's address as the router sees it: the connection's peer. The one place it is decided, so that a proxy's
 * `X-Forwarded-For` can be made to count here (TRUST_PROXY) for the audit log and whatever else reads it.
 */
export const clientAddress = (_request: Request, peer: string | undefined): string | undefined => peer

/** The raw request, for the few handlers that read it themselves (the multipart upload). */
export interface RawRequest {
  readonly request: Request
  readonly body: Uint8Array
  /** Check the answer against the operation's schema even when encoding it changes nothing (AppOptions). */
  readonly checkAnswer: boolean
  /** When set, the paths of the payload's fields the operation does not know are added to it (ignoredFields.ts). */
  readonly ignored?: Array<string> | undefined
}

/** Whether encoding a value of `ast` changes it (a transformation or a declared type somewhere inside). */
const transforms = (ast: SchemaAST.AST, seen = new Set<SchemaAST.AST>()): boolean => {
  if (seen.has(ast)) return false
  seen.add(ast)
  switch (ast._tag) {
    case "Transformation":
    case "Declaration":
      return true
    case "Refinement":
      return transforms(ast.from, seen)
    case "Suspend":
      return transforms(ast.f(), seen)
    case "Union":
      return ast.types.some((t) => transforms(t, seen))
    case "TupleType":
      return [...ast.elements, ...ast.rest].some((e) => transforms(e.type, seen))
    case "TypeLiteral":
      return (
        ast.propertySignatures.some((p) => transforms(p.type, seen)) ||
        ast.indexSignatures.some((i) => transforms(i.type, seen))
      )
    default:
      return false
  }
}

export const MAX_BODY_BYTES = 20 * 1024 * 1024
/**
 * The request line and headers together: Bun's own default. The server is started with a larger runtime limit
 * (`--max-http-header-size`), so that up to that limit the refusal is ours, in the envelope, not Bun's empty 431.
 */
export const MAX_HEADER_BYTES = 16 * 1024

const headerBytes = (request: Request) => {
  let total = request.method.length + request.url.length + 12
  for (const [name, value] of request.headers) total += name.length + value.length + 4
  return total
}

/** What the router needs of an operation: where it is served and where its payload comes from. */
export type OpRoute<Name extends string> = Pick<
  Op<Name, unknown, unknown, unknown, unknown>,
  "name" | "method" | "path" | "source" | "contentType"
>

/** An operation with its handler; `R` is what the handler needs from the application's services. */
export interface Route<R, Name extends string = string> {
  readonly op: OpRoute<Name>
  readonly run: (
    payload: unknown,
    raw: RawRequest
  ) => Effect.Effect<unknown, ApiError, R | CurrentOrg | CurrentPrincipal>
}

/** Serves `op` with `handler`; the payload is decoded by the op's schema before the handler sees it. */
export const handle = <Name extends string, P, PI, S, SI, R>(
  op: Op<Name, P, PI, S, SI>,
  handler: (payload: P) => Effect.Effect<S, ApiError | DomainError, R | CurrentOrg | CurrentPrincipal>
): Route<R, Name> => {
  const decode = Schema.decodeUnknown(op.payload, { errors: "all", onExcessProperty: "ignore" })
  const decodeStrict = Schema.decodeUnknownEither(op.payload, { errors: "all", onExcessProperty: "error" })
  /** A payload without unknown fields is decoded once; otherwise they are noted and it is decoded leniently. */
  const decodeNoting = (input: unknown, ignored: Array<string> | undefined) => {
    if (ignored === undefined) return decode(input)
    const strict = decodeStrict(input)
    if (Either.isRight(strict)) return Effect.succeed(strict.right)
    ignored.push(...unexpectedPaths(strict.left))
    return decode(input)
  }
  const encode = Schema.encode(op.success)
  // most answers are plain JSON whose type the compiler checked: encoding them only re-validates (a fifth of a
  // read's CPU), which the tests do
  const mustEncode = transforms(op.success.ast)
  return {
    op,
    run: (input, raw) =>
      decodeNoting(input, raw.ignored).pipe(
        Effect.mapError(fromParseError),
        Effect.flatMap((payload) => Effect.mapError(handler(payload), toApiError)),
        Effect.flatMap((answer) =>
          mustEncode || raw.checkAnswer
            ? Effect.mapError(
                encode(answer),
                (e: ParseResult.ParseError) =>
                  new ApiError({
                    status: 500,
                    code: "INTERNAL",
                    message: "the answer did not match its schema",
                    details: [{ path: "", message: e.message }]
                  })
              )
            : Effect.succeed<unknown>(answer)
        )
      )
  }
}

export interface Authenticator {
  /** The organization and principal of an active token; the same object for a token seen a moment ago. */
  readonly authenticate: (token: string) => Promise<Option.Option<Authenticated>>
}

/** Where the router writes the audit log (AuditLog.append over the application's services). */
export interface AuditSink<R> {
  readonly append: (event: AuditEvent) => Effect.Effect<void, unknown, R>
}

export interface RequestObserver {
  readonly observe: (route: string, status: number, seconds: number) => void
}

/** Per-token token bucket: `perSecond` requests a second, bursts up to the same number. */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>()
  constructor(
    private readonly perSecond: number,
    private readonly now: () => number
  ) {}
  /** Seconds to wait, or 0 when the request may go ahead. */
  take(key: string): number {
    const now = this.now()
    const bucket = this.buckets.get(key) ?? { tokens: this.perSecond, at: now }
    bucket.tokens = Math.min(this.perSecond, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond)
    bucket.at = now
    if (this.buckets.size > 10_000) this.buckets.clear()
    this.buckets.set(key, bucket)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return 0
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond))
  }
}

/**
 * Whether a failure (a cause, a rejected promise's FiberFailure, or a plain error) is the database's being out of
 * reach: answered 503 SERVICE_UNAVAILABLE with Retry-After rather than 500.
 */
export const isUnavailable = (failure: unknown): boolean => {
  if (Runtime.isFiberFailure(failure)) return isUnavailable(failure[Runtime.FiberFailureCauseId])
  if (Cause.isCause(failure)) return [...Cause.failures(failure), ...Cause.defects(failure)].some(isDatabaseUnavailable)
  return isDatabaseUnavailable(failure)
}

const tokenOf = (request: Request): string | undefined => {
  const header = request.headers.get("x-api-token")
  if (header !== null && header !== "") return header.trim()
  const authorization = request.headers.get("authorization")
  if (authorization === null) return undefined
  const match = /^Bearer\s+(.+)$/i.exec(authorization.trim())
  return match?.[1]?.trim()
}

/** Reads at most `limit` bytes of the body, counting what arrives (a missing or false Content-Length changes nothing). */
export const readBody = async (request: Request, limit: number): Promise<Uint8Array | "too-large"> => {
  const declared = Number(request.headers.get("content-length") ?? Number.NaN)
  if (Number.isFinite(declared) && declared > limit) return "too-large"
  if (request.body === null) return new Uint8Array(0)
  // With a declared length within the limit, the runtime reads exactly that much (its fast path); otherwise the
  // body is counted as it streams in.
  if (Number.isFinite(declared) && declared >= 0) return new Uint8Array(await request.arrayBuffer())
  const reader = request.body.getReader()
  const chunks: Array<Uint8Array> = []
  let total = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    total += value.byteLength
    if (total > limit) {
      // drop the rest (up to a bound), so the connection stays usable for the client's next request
      while (total <= 4 * limit) {
        const next = await reader.read().catch(() => ({ done: true, value: undefined }))
        if (next.done || next.value === undefined) return "too-large"
        total += next.value.byteLength
      }
      await reader.cancel().catch(() => undefined)
      return "too-large"
    }
    chunks.push(value)
  }
  if (chunks.length === 1 && chunks[0] !== undefined) return chunks[0]
  const out = new Uint8Array(total)
  let offset = 0
  for (const chunk of chunks) {
    out.set(chunk, offset)
    offset += chunk.byteLength
  }
  return out
}

// The rest of the body is not read, so the connection cannot be reused.
const tooLarge = () =>
  new ApiError({
    status: 413,
    code: "PAYLOAD_TOO_LARGE",
    message: `the request body is larger than ${MAX_BODY_BYTES} bytes (20 MiB)`,
    headers: { connection: "close" }
  })

/**
 * Reads and drops a refused body, so the connection stays in step for the client's next request; a body far over
 * the limit is cancelled instead (the connection is closed).
 */
const discardBody = async (request: Request, declared: number) => {
  if (request.body === null) return
  if (declared > 4 * MAX_BODY_BYTES) {
    await request.body.cancel().catch(() => undefined)
    return
  }
  const reader = request.body.getReader()
  for (;;) {
    const { done } = await reader.read().catch(() => ({ done: true }))
    if (done) return
  }
}

const isJsonType = (contentType: string | null) => {
  if (contentType === null || contentType.trim() === "") return true
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? ""
  return type === "application/json" || type.endsWith("+json")
}

const isMultipart = (contentType: string | null) => contentType?.toLowerCase().startsWith("multipart/form-data")

/**
 * A multipart content type with a boundary RFC 2046 allows (1 to 70 of its characters, quoted or not). The runtime's
 * form parser is not handed anything else: an unterminated quoted boundary (`boundary="`) crashes Bun 1.3.9.
 */
const hasValidBoundary = (contentType: string) => {
  const m = /;\s*boundary=(?:"([^"]*)"|([^\s;"]*))\s*(?:;|$)/i.exec(contentType)
  const boundary = m?.[1] ?? m?.[2]
  return boundary !== undefined && /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/.test(boundary)
}

const decoder = new TextDecoder("utf-8", { fatal: false })

export interface AppOptions<R> {
  readonly routes: ReadonlyArray<Route<R>>
  readonly runtime: Runtime.Runtime<R>
  readonly authenticator: Authenticator
  readonly rateLimiter: RateLimiter
  readonly observer: RequestObserver
  /** Set only when tracing is on; without it no span is made for a request. */
  readonly tracer?: RequestTracer | undefined
  readonly logError: (message: string, cause: unknown) => void
  /** A warning (the database out of reach: logged once every few seconds, not once per request) */
  readonly logWarning?: ((message: string) => void) | undefined
  /**
   * A dashboard session (cookie) for a request without an API token: its organization, a rate-limit key, who it is
   * (a token's session or a person's, with the role it holds), and whether the request carries the session's
   * anti-CSRF token (required for anything but GET).
   */
  readonly session?:
    | ((request: Request) => Promise<
        | {
            readonly org: Organization
            readonly principal: Principal
            readonly key: string
            readonly csrfOk: boolean
          }
        | undefined
      >)
    | undefined
  /** The role each operation needs, and whether it changes anything (roles.ts: PERMISSIONS). */
  readonly permissions: Permissions
  /** Where changes and refusals are recorded; without it (some unit tests), nothing is. */
  readonly audit?: AuditSink<R> | undefined
  /** The client's address (default: `clientAddress`, the connection's peer). */
  readonly clientAddress?: ((request: Request, peer: string | undefined) => string | undefined) | undefined
  /** Check every answer against its schema (CHECK_ANSWERS); answers whose schema transforms are always encoded. */
  readonly checkAnswers?: boolean | undefined
  /** Routes outside the API (health, docs, metrics, CI output); return undefined when the path is not theirs. */
  readonly extra: (request: Request, url: URL) => Promise<Response | undefined> | Response | undefined
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } })

/**
 * The HTTP front: route lookup, the token, the rate limit, the body (size, type, JSON), then the op's handler,
 * answering every failure with the contract's envelope. One map lookup per request, no per-request layer building.
 */
export const makeApp = <R>(options: AppOptions<R>) => {
  const table = new Map<string, { readonly route: Route<R>; readonly permission: Permission }>()
  for (const route of options.routes) {
    const key = `${route.op.method} /v1${route.op.path}`
    if (table.has(key)) throw new Error(`two handlers for ${key}`)
    const permission = (options.permissions as Readonly<Record<string, Permission | undefined>>)[route.op.name]
    // the compiler checks the table (roles.ts); this catches a route whose op is not in it
    if (permission === undefined) throw new Error(`no role for the operation ${route.op.name} (http/roles.ts)`)
    table.set(key, { route, permission })
  }
  const addressOf = options.clientAddress ?? clientAddress
  // the methods each API path answers, for 405's Allow
  const methods = new Map<string, Array<string>>()
  for (const route of options.routes) {
    const path = `/v1${route.op.path}`
    methods.set(path, [...(methods.get(path) ?? []), route.op.method])
  }
  // one runtime per authenticated token, with CurrentOrg and CurrentPrincipal in its context: a request provides
  // nothing (providing a service copies the whole context), it runs on its token's runtime (a new object, after the
  // token cache renewed it, gets a new one; the old one is collected with it)
  const runtimes = new WeakMap<
    Authenticated,
    (
      effect: Effect.Effect<unknown, ApiError, R | CurrentOrg | CurrentPrincipal>
    ) => Promise<Exit.Exit<unknown, ApiError>>
  >()
  const runnerOf = (who: Authenticated) => {
    let run = runtimes.get(who)
    if (run === undefined) {
      const base = options.runtime
      run = Runtime.runPromiseExit(
        Runtime.make({
          context: Context.add(Context.add(base.context, CurrentOrg, who.org), CurrentPrincipal, who.principal),
          fiberRefs: base.fiberRefs,
          runtimeFlags: base.runtimeFlags
        })
      )
      runtimes.set(who, run)
    }
    return run
  }

  /** Records a refused call (its 403 is answered whatever becomes of the record). */
  const recordRefusal = async (who: Authenticated, event: AuditEvent) => {
    if (options.audit === undefined) return
    const exit = await runnerOf(who)(Effect.mapError(options.audit.append(event), () => internal()))
    if (Exit.isFailure(exit)) options.logError("recording a refusal in the audit log failed", describeCause(exit.cause))
  }

  /** The payload of a refused call, read only to name its target in the audit log (a body it cannot read: none). */
  const refusedPayload = async (request: Request, url: URL, route: Route<R>): Promise<unknown> => {
    if (route.op.source === "query") return Object.fromEntries(url.searchParams)
    if (route.op.source === "raw" || !isJsonType(request.headers.get("content-type"))) {
      await discardBody(request, Number(request.headers.get("content-length") ?? Number.NaN))
      return undefined
    }
    try {
      const read = await readBody(request, MAX_BODY_BYTES)
      return read === "too-large" ? undefined : JSON.parse(decoder.decode(read))
    } catch {
      return undefined
    }
  }

  const fail = (error: ApiError) => errorResponse(error)

  // while the database is out of reach every request fails alike: one warning every 10 s, not a line per request
  let unavailableSince = 0
  let unavailableCount = 0
  const unavailable = () => {
    unavailableCount++
    const now = Date.now()
    if (now - unavailableSince >= 10_000) {
      const warn = options.logWarning ?? ((m: string) => options.logError(m, ""))
      warn(`the database cannot be reached: ${unavailableCount} request(s) answered 503 SERVICE_UNAVAILABLE`)
      unavailableSince = now
      unavailableCount = 0
    }
    return fail(serviceUnavailable())
  }

  const serveRoute = async (
    request: Request,
    url: URL,
    route: Route<R>,
    permission: Permission,
    peer: string | undefined,
    span: RequestSpan | undefined
  ): Promise<Response> => {
    const declared = Number(request.headers.get("content-length") ?? Number.NaN)
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
      await discardBody(request, declared)
      return fail(tooLarge())
    }

    let token = tokenOf(request)
    let found: Option.Option<Authenticated>
    if (token === undefined) {
      const session = options.session === undefined ? undefined : await options.session(request)
      if (session === undefined) return fail(unauthorized())
      if (request.method !== "GET" && !session.csrfOk) {
        return fail(
          new ApiError({ status: 403, code: "UNAUTHORIZED", message: "the session's x-csrf-token is missing or wrong" })
        )
      }
      found = Option.some({ org: session.org, principal: session.principal })
      token = session.key
    } else {
      found = await options.authenticator.authenticate(token)
    }
    if (Option.isNone(found)) return fail(unauthorized("the API token is unknown or revoked"))
    const who = found.value
    const wait = options.rateLimiter.take(token)
    if (wait > 0) {
      return fail(
        new ApiError({
          status: 429,
          code: "RATE_LIMITED",
          message: "too many requests for this token",
          headers: { "retry-after": String(wait) }
        })
      )
    }

    // the role, before the body is looked at or anything runs (roles.ts)
    const eventOf = (payload: unknown, outcome: AuditEvent["outcome"]): AuditEvent => ({
      orgId: who.org.id,
      actor: who.principal.actor,
      role: who.principal.role,
      action: route.op.name,
      target: auditTarget(payload),
      outcome,
      sourceIp: addressOf(request, peer)
    })
    if (!roleAllows(who.principal.role, permission.role)) {
      await recordRefusal(who, eventOf(await refusedPayload(request, url, route), "refused"))
      return fail(permissionDenied(route.op.name, permission.role, who.principal.role))
    }

    let payload: unknown
    let body: Uint8Array = new Uint8Array(0)
    if (route.op.source === "query") {
      payload = Object.fromEntries(url.searchParams)
    } else {
      const contentType = request.headers.get("content-type")
      if (route.op.source === "raw" ? !isMultipart(contentType) : !isJsonType(contentType)) {
        return fail(
          new ApiError({
            status: 415,
            code: "UNSUPPORTED_MEDIA_TYPE",
            message:
              route.op.source === "raw"
                ? "the body must be multipart/form-data"
                : `the body must be application/json, not ${contentType}`
          })
        )
      }
      if (route.op.source === "raw" && !hasValidBoundary(contentType ?? "")) {
        return fail(invalidRequest("the multipart/form-data boundary is missing or malformed (RFC 2046)"))
      }
      let read: Uint8Array | "too-large"
      try {
        read = await readBody(request, MAX_BODY_BYTES)
      } catch {
        // the client closed the connection before its body ended: nobody reads this answer, and it is no error
        // of the server's
        return fail(invalidRequest("the request body ended before it was complete"))
      }
      if (read === "too-large") return fail(tooLarge())
      body = read
      if (route.op.source === "json") {
        const text = decoder.decode(body)
        try {
          payload = text.trim() === "" ? {} : JSON.parse(text)
        } catch {
          return fail(invalidRequest("the body is not valid JSON"))
        }
        if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
          return fail(invalidRequest("the body must be a JSON object"))
        }
      }
    }
    if (route.op.source !== "raw") {
      const problem = checkInput(payload)
      if (problem !== undefined) {
        return fail(
          invalidRequest(`invalid request: ${problem.path === "" ? "" : `${problem.path} `}${problem.message}`, [
            problem
          ])
        )
      }
    }

    const ignored = route.op.source === "json" && body.byteLength <= IGNORED_FIELDS_MAX_BYTES ? [] : undefined
    const run = route.run(payload, { request, body, checkAnswer: options.checkAnswers === true, ignored })
    // a change is recorded: in its handler's transaction where it has one (audit/trail.ts), else once it succeeded
    const audit = options.audit
    const pending: PendingAudit | undefined =
      audit === undefined || !permission.changes ? undefined : { event: eventOf(payload, "allowed"), written: false }
    const effect =
      audit === undefined || pending === undefined
        ? run
        : withPendingAudit(
            pending,
            Effect.tap(run, () =>
              pending.written
                ? Effect.void
                : audit
                    .append(pending.event)
                    .pipe(
                      Effect.catchAllCause((cause) =>
                        Effect.sync(() =>
                          options.logError(`recording ${route.op.name} in the audit log failed`, describeCause(cause))
                        )
                      )
                    )
            )
          )
    const exit = await runnerOf(who)(span === undefined ? effect : span.wrap(effect))
    if (Exit.isSuccess(exit)) {
      const value = exit.value
      if (route.op.contentType !== undefined) {
        return new Response(String(value), { status: 200, headers: { "content-type": route.op.contentType } })
      }
      if (ignored !== undefined && ignored.length > 0) {
        return new Response(JSON.stringify(value), {
          status: 200,
          headers: { "content-type": "application/json", [IGNORED_FIELDS_HEADER]: ignored.join(", ") }
        })
      }
      return json(value)
    }
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) {
      if (failure.value.status >= 500) options.logError(`${route.op.name} failed`, failure.value)
      // refused by a domain rule (a token above the caller's role, another's token): recorded like the router's
      if (failure.value.code === "PERMISSION_DENIED") await recordRefusal(who, eventOf(payload, "refused"))
      return fail(failure.value)
    }
    if (Cause.isInterruptedOnly(exit.cause)) {
      return fail(new ApiError({ status: 503, code: "INTERNAL", message: "the server is shutting down" }))
    }
    if (isUnavailable(exit.cause)) return unavailable()
    options.logError(`${route.op.name} failed unexpectedly`, describeCause(exit.cause))
    return fail(internal())
  }

  /** Answers `request`; `peer` is the connection's remote address (Bun's `server.requestIP`). */
  return async (request: Request, peer?: string): Promise<Response> => {
    const started = performance.now()
    const url = new URL(request.url)
    const served = table.get(`${request.method} ${url.pathname}`)
    const route = served?.route
    // every route labelled by its full path, as the requests name it (/v1/getQueue, /v1/openapi.json, /metrics)
    let label = route ? `/v1${route.op.path}` : "other"
    const span = options.tracer?.start(request.method, route ? url.pathname : undefined)
    let response: Response
    try {
      if (headerBytes(request) > MAX_HEADER_BYTES) {
        response = fail(
          new ApiError({
            status: 431,
            code: "HEADERS_TOO_LARGE",
            message: `the request line and headers are larger than ${MAX_HEADER_BYTES} bytes`,
            headers: { connection: "close" }
          })
        )
      } else if (served !== undefined) {
        response = await serveRoute(request, url, served.route, served.permission, peer, span)
      } else {
        const extra = await options.extra(request, url)
        if (extra !== undefined) {
          label = url.pathname.startsWith("/ci/") ? "/ci/output" : url.pathname
          response = extra
        } else if (methods.has(url.pathname)) {
          const allow = (methods.get(url.pathname) ?? []).join(", ")
          response = fail(
            new ApiError({
              status: 405,
              code: "METHOD_NOT_ALLOWED",
              message: `${request.method} is not allowed on ${url.pathname} (allowed: ${allow})`,
              headers: { allow }
            })
          )
        } else {
          response = fail(
            new ApiError({ status: 404, code: "NOT_FOUND", message: `no route ${request.method} ${url.pathname}` })
          )
        }
      }
    } catch (cause) {
      // the token's lookup, a dashboard session, a page outside the API: the database may be out of reach there too
      if (isUnavailable(cause)) response = unavailable()
      else {
        options.logError("request failed", cause)
        response = fail(internal())
      }
    }
    options.observer.observe(label, response.status, (performance.now() - started) / 1000)
    span?.end(route ? url.pathname : label === "other" ? undefined : label, response.status)
    return response
  }
}

/**
 * The route table, checked by the compiler: a type error names every operation of the API without a handler
 * (`missing`).
 */
export const servesEveryOp = <const T extends ReadonlyArray<Route<never, OpName> | Route<unknown, OpName>>>(
  routes: T &
    ([Exclude<OpName, T[number]["op"]["name"]>] extends [never]
      ? unknown
      : { readonly missing: Exclude<OpName, T[number]["op"]["name"]> })
): T => routes
