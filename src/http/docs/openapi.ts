import type * as OpenApi from "@effect/platform/OpenApi"
import type { OpName } from "../Api.ts"
import type { ErrorCode } from "../errors.ts"
import { PERMISSIONS } from "../roles.ts"
import { ADMIN_DOCS } from "./admin.ts"
import { DASHBOARD_DOCS } from "./dashboard.ts"
import { EVENTS_DOCS } from "./events.ts"
import type { OpDoc } from "./examples.ts"
import { FLAKY_DOCS } from "./flaky.ts"
import { FREEZE_DOCS } from "./freezes.ts"
import { QUEUE_DOCS } from "./queue.ts"

/**
 * The OpenAPI document as users read it: the document `OpenApi.fromApi` generates from the schemas, completed with
 * what schemas cannot say: a summary, a description and request/answer examples for every operation (the examples
 * are the contract's: shared/spec/contract.md), the query parameters of getMergeQueueMetrics, the server from
 * PUBLIC_URL, and the error envelope as a component, in place of Effect's internal decode error (the router never
 * answers with it). Unknown request fields are ignored (and named in `Greenline-Ignored-Fields`), so no schema says
 * `additionalProperties: false`.
 */
/** Every operation's documentation, by API area (`docs/*.ts`): an operation without it does not compile. */
export const OP_DOCS: Record<OpName, OpDoc> = {
  ...QUEUE_DOCS,
  ...FLAKY_DOCS,
  ...ADMIN_DOCS,
  ...DASHBOARD_DOCS,
  ...EVENTS_DOCS,
  ...FREEZE_DOCS
}

export const ERROR_CODES: ReadonlyArray<ErrorCode> = [
  "INVALID_REQUEST",
  "TIME_RANGE_INVALID",
  "INVALID_PAGE_TOKEN",
  "INVALID_JUNIT",
  "UNAUTHORIZED",
  "PERMISSION_DENIED",
  "NOT_FOUND",
  "QUEUE_NOT_FOUND",
  "PR_NOT_FOUND",
  "TEST_RUN_NOT_FOUND",
  "TEST_CASE_NOT_FOUND",
  "QUEUE_ALREADY_EXISTS",
  "QUEUE_NOT_EMPTY",
  "PR_NOT_ACTIVE",
  "PR_TESTS_NOT_RESTARTABLE",
  "PR_ALREADY_MERGED",
  "PAYLOAD_TOO_LARGE",
  "UNSUPPORTED_MEDIA_TYPE",
  "RATE_LIMITED",
  "NOT_IMPLEMENTED",
  "INTERNAL",
  "SERVICE_UNAVAILABLE"
]

const errorEnvelope = {
  type: "object",
  description:
    "Every error answer (contract.md §1): a stable code, a message for people, and for INVALID_REQUEST one detail per field (`path` dotted, e.g. `pr.number`).",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", enum: ERROR_CODES },
        message: { type: "string" },
        details: {
          type: "array",
          items: {
            type: "object",
            required: ["path", "message"],
            properties: { path: { type: "string" }, message: { type: "string" } }
          }
        }
      }
    }
  },
  example: {
    error: {
      code: "INVALID_REQUEST",
      message: "invalid request: concurrency Expected an integer, actual 1.5",
      details: [{ path: "concurrency", message: "Expected an integer, actual 1.5" }]
    }
  }
}

const ERROR_DESCRIPTIONS: Record<string, string> = {
  "400": "Invalid request (INVALID_REQUEST, with a detail per field; or a feature's own code)",
  "401": "No valid API token (UNAUTHORIZED)",
  "403": "The token's or person's role does not allow this (PERMISSION_DENIED); nothing changed",
  "404": "Not found, or another organization's (QUEUE_NOT_FOUND, PR_NOT_FOUND, ...)",
  "409":
    "Conflicts with the current state (QUEUE_ALREADY_EXISTS, QUEUE_NOT_EMPTY, PR_NOT_ACTIVE, PR_ALREADY_MERGED, ...)",
  "413": "The body is over 20 MiB (PAYLOAD_TOO_LARGE)",
  "415": "The body is not JSON (UNSUPPORTED_MEDIA_TYPE)",
  "429": "Over the token's rate limit (RATE_LIMITED, with Retry-After)",
  "500": "The server failed (INTERNAL)",
  "503":
    "The database cannot be reached right now (SERVICE_UNAVAILABLE, with Retry-After): try again after that many seconds"
}

/** The `Retry-After` header of the answers that have one (429, 503). */
const retryAfterHeader = {
  "Retry-After": {
    description: "Seconds to wait before trying again",
    schema: { type: "integer", minimum: 1 }
  }
}

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** Drops `additionalProperties: false` everywhere (unknown fields are ignored, not refused). */
const openObjects = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(openObjects)
  if (!isObject(value)) return value
  const out: Json = {}
  for (const [k, v] of Object.entries(value)) {
    if (k === "additionalProperties" && v === false) continue
    out[k] = openObjects(v)
  }
  return out
}

/** The document for readers: see the module's comment. `publicUrl` is the server's address (PUBLIC_URL). */
export const refineDocument = (generated: OpenApi.OpenAPISpec, publicUrl: string): OpenApi.OpenAPISpec => {
  const doc = openObjects(structuredClone(generated)) as Json & {
    paths: Record<string, Record<string, Json>>
    components: Json & { schemas: Record<string, unknown> }
  }
  doc.servers = [{ url: publicUrl, description: "this server (PUBLIC_URL)" }]
  const schemas = doc.components.schemas
  delete schemas.HttpApiDecodeError
  delete schemas.Issue
  delete schemas.PropertyKey
  delete schemas.MetricsQuery
  schemas.ErrorEnvelope = errorEnvelope
  for (const item of Object.values(doc.paths)) {
    for (const op of Object.values(item)) {
      if (!isObject(op) || !isObject(op.responses)) continue
      const name = String(op.operationId ?? "").replace(/^[^.]*\./, "")
      const about: OpDoc | undefined = name in OP_DOCS ? OP_DOCS[name as OpName] : undefined
      if (about !== undefined) {
        op.summary = about.summary
        op.description = about.description
      }
      op.operationId = name
      // the role it needs (http/roles.ts), said in the description and as an extension; a 403 wherever one can come
      const permission = name in PERMISSIONS ? PERMISSIONS[name as OpName] : undefined
      if (permission !== undefined) {
        op["x-required-role"] = permission.role
        if (typeof op.description === "string" && !op.description.includes(`Role \`${permission.role}\``)) {
          op.description = `Role \`${permission.role}\` or above. ${op.description}`
        }
        if (permission.role !== "read") (op.responses as Json)["403"] = {}
      }
      const body = isObject(op.requestBody) && isObject(op.requestBody.content) ? op.requestBody.content : undefined
      const json = body !== undefined && isObject(body["application/json"]) ? body["application/json"] : undefined
      if (json !== undefined && about?.request !== undefined) json.example = about.request
      for (const [status, response] of Object.entries(op.responses as Json)) {
        if (!isObject(response)) continue
        if (status === "200") {
          const content = isObject(response.content) ? response.content : {}
          const media = Object.values(content)[0]
          if (isObject(media) && about?.response !== undefined) media.example = about.response
          response.description = about?.summary ?? "OK"
          continue
        }
        ;(op.responses as Json)[status] = {
          description: ERROR_DESCRIPTIONS[status] ?? "Error",
          ...(status === "429" || status === "503" ? { headers: retryAfterHeader } : {}),
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorEnvelope" } } }
        }
      }
      if (name === "getMergeQueueMetrics") {
        op.parameters = [
          {
            name: "repo",
            in: "query",
            required: false,
            description: "Only this repository's queues: `owner/name` (default: every queue of the organization)",
            schema: { type: "string", example: "acme/web" }
          },
          {
            name: "repoHost",
            in: "query",
            required: false,
            description: "The repository's host, with `repo` (default `github.com`)",
            schema: { type: "string", example: "github.com" }
          }
        ]
      }
    }
  }
  return doc as unknown as OpenApi.OpenAPISpec
}
