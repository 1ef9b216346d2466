import { Data, type ParseResult, Schema } from "effect"
import type { AuditError } from "../audit/errors.ts"
import type { EventsError } from "../events/errors.ts"
import type { FlakyError } from "../flaky/errors.ts"
import { describeParseError, type ErrorDetail } from "../kernel/errors.ts"
import type { QueueError } from "../queue/errors.ts"
import type { Role } from "../tenancy/principal.ts"
import type { PermissionDenied } from "../tenancy/Tenancy.ts"

/** The stable error codes of contract.md §1. */
export type ErrorCode =
  | "INVALID_REQUEST"
  | "TIME_RANGE_INVALID"
  | "INVALID_PAGE_TOKEN"
  | "INVALID_JUNIT"
  | "UNAUTHORIZED"
  | "PERMISSION_DENIED"
  | "NOT_FOUND"
  | "QUEUE_NOT_FOUND"
  | "PR_NOT_FOUND"
  | "TEST_RUN_NOT_FOUND"
  | "TEST_CASE_NOT_FOUND"
  | "QUEUE_ALREADY_EXISTS"
  | "QUEUE_NOT_EMPTY"
  | "PR_NOT_ACTIVE"
  | "PR_TESTS_NOT_RESTARTABLE"
  | "PR_ALREADY_MERGED"
  | "PAYLOAD_TOO_LARGE"
  | "UNSUPPORTED_MEDIA_TYPE"
  | "RATE_LIMITED"
  | "NOT_IMPLEMENTED"
  | "INTERNAL"
  | "METHOD_NOT_ALLOWED"
  | "HEADERS_TOO_LARGE"
  | "SERVICE_UNAVAILABLE"

export type { ErrorDetail }

/** Every failure a handler can answer with; the router turns it into the JSON envelope. */
export class ApiError extends Data.TaggedError("ApiError")<{
  readonly status: number
  readonly code: ErrorCode
  readonly message: string
  readonly details?: ReadonlyArray<ErrorDetail> | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}> {}

export const invalidRequest = (message: string, details?: ReadonlyArray<ErrorDetail>) =>
  new ApiError({ status: 400, code: "INVALID_REQUEST", message, details })
export const notFound = (code: ErrorCode, message: string) => new ApiError({ status: 404, code, message })
export const conflict = (code: ErrorCode, message: string) => new ApiError({ status: 409, code, message })
export const unauthorized = (message = "a valid API token is required (x-api-token or Authorization: Bearer)") =>
  new ApiError({ status: 401, code: "UNAUTHORIZED", message })
/** The caller's role is below what the operation needs (contract.md §1): nothing ran. */
export const permissionDenied = (operation: string, needed: Role, held: Role) =>
  new ApiError({
    status: 403,
    code: "PERMISSION_DENIED",
    message: `${operation} needs the role ${needed} or above; this token or person has ${held}`
  })
export const internal = () =>
  new ApiError({ status: 500, code: "INTERNAL", message: "the server could not complete the request" })
/** Seconds a client is told to wait (Retry-After) while the database cannot be reached. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5

/**
 * The database cannot be reached (stopped, restarting, unreachable, out of connections): 503 with Retry-After. The
 * request's transaction did not commit (or, when the connection was lost at its very commit, may have: requests
 * that are safe to repeat are repeated as they are).
 */
export const serviceUnavailable = () =>
  new ApiError({
    status: 503,
    code: "SERVICE_UNAVAILABLE",
    message: "the database cannot be reached right now: try again shortly",
    headers: { "retry-after": String(UNAVAILABLE_RETRY_AFTER_SECONDS) }
  })

/** The error envelope as a schema, for the OpenAPI document. */
export const ErrorEnvelope = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    details: Schema.optional(Schema.Array(Schema.Struct({ path: Schema.String, message: Schema.String })))
  })
}).annotations({ identifier: "ErrorEnvelope", description: "Every error answer (contract.md §1)" })

/** An error body never echoes more than a few hundred bytes of what a client sent. */
const MAX_MESSAGE_CHARS = 300
const MAX_DETAILS = 20
const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s)

export const envelope = (error: ApiError) => ({
  error: {
    code: error.code,
    message: clip(error.message, MAX_MESSAGE_CHARS),
    ...(error.details && error.details.length > 0
      ? {
          details: error.details
            .slice(0, MAX_DETAILS)
            .map((d) => ({ path: clip(d.path, MAX_MESSAGE_CHARS), message: clip(d.message, MAX_MESSAGE_CHARS) }))
        }
      : {})
  }
})

const jsonHeaders = { "content-type": "application/json" }

export const errorResponse = (error: ApiError): Response =>
  new Response(JSON.stringify(envelope(error)), {
    status: error.status,
    headers: { ...jsonHeaders, ...error.headers }
  })

/** Schema decode failures become INVALID_REQUEST with one detail per issue, paths dotted (`pr.number`). */
export const fromParseError = (error: ParseResult.ParseError): ApiError => {
  const { message, details } = describeParseError(error)
  return invalidRequest(message, details)
}

/** Every feature's domain errors: the HTTP edge is the one place that knows their status codes and contract codes. */
export type DomainError = FlakyError | QueueError | EventsError | AuditError | PermissionDenied

const domainStatus: { readonly [Tag in DomainError["_tag"]]: readonly [status: number, code: ErrorCode] } = {
  RepositoryNotFound: [404, "NOT_FOUND"],
  TestCaseNotFound: [404, "TEST_CASE_NOT_FOUND"],
  InvalidJunit: [400, "INVALID_JUNIT"],
  InvalidUpload: [400, "INVALID_REQUEST"],
  InvalidPageToken: [400, "INVALID_PAGE_TOKEN"],
  TimeRangeInvalid: [400, "TIME_RANGE_INVALID"],
  QueueNotFound: [404, "QUEUE_NOT_FOUND"],
  PullRequestNotFound: [404, "PR_NOT_FOUND"],
  PrNotActive: [409, "PR_NOT_ACTIVE"],
  PrTestsNotRestartable: [409, "PR_TESTS_NOT_RESTARTABLE"],
  PrAlreadyMerged: [409, "PR_ALREADY_MERGED"],
  TestRunNotFound: [404, "TEST_RUN_NOT_FOUND"],
  FreezeNotFound: [404, "NOT_FOUND"],
  InvalidFreeze: [400, "INVALID_REQUEST"],
  InvalidQuarantineInput: [400, "INVALID_REQUEST"],
  EventsNotFound: [404, "NOT_FOUND"],
  InvalidEventsRequest: [400, "INVALID_REQUEST"],
  AuditPageTokenInvalid: [400, "INVALID_PAGE_TOKEN"],
  PermissionDenied: [403, "PERMISSION_DENIED"],
  InvalidEventsPageToken: [400, "INVALID_PAGE_TOKEN"]
}

export const fromDomainError = (error: DomainError): ApiError => {
  const [status, code] = domainStatus[error._tag]
  return new ApiError({ status, code, message: error.message, details: "details" in error ? error.details : undefined })
}

/** A handler's failure as the contract's error. */
export const toApiError = (error: ApiError | DomainError): ApiError =>
  error instanceof ApiError ? error : fromDomainError(error)
