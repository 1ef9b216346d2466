import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as Schema from "effect/Schema"
import { ErrorEnvelope } from "./errors.ts"

/**
 * One operation of the API: its name, method and path, and the schemas of its request and answer. The same object
 * declares the `HttpApiEndpoint` (for the OpenAPI document) and types the handler the router serves it with.
 */
export interface Op<Name extends string, P, PI, S, SI> {
  readonly name: Name
  readonly method: "POST" | "GET"
  readonly path: `/${string}`
  readonly payload: Schema.Schema<P, PI>
  readonly success: Schema.Schema<S, SI>
  /** Where the payload comes from: the JSON body, the query string, or (upload) a raw multipart body. */
  readonly source: "json" | "query" | "raw"
  /** The answer's content type when it is not JSON. */
  readonly contentType?: string
}

/** Declares the two-level API token security for the OpenAPI document (`x-api-token`, or a Bearer token). */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("greenline/Authentication", {
  security: {
    apiToken: HttpApiSecurity.apiKey({ in: "header", key: "x-api-token" }),
    bearer: HttpApiSecurity.bearer
  }
}) {}

const errorStatuses = [400, 401, 404, 409, 413, 415, 429, 500, 503] as const
const errorSchemas = errorStatuses.map(
  (status) => [status, ErrorEnvelope.annotations({ identifier: `Error${status}` })] as const
)

const withErrors = <E extends HttpApiEndpoint.HttpApiEndpoint.Any>(endpoint: E): E => {
  let out = endpoint as unknown as HttpApiEndpoint.HttpApiEndpoint.AnyWithProps
  for (const [status, schema] of errorSchemas) out = out.addError(schema, { status })
  return out as unknown as E
}

export const post = <const Name extends string, P, PI, S, SI>(
  name: Name,
  path: `/${string}`,
  payload: Schema.Schema<P, PI>,
  success: Schema.Schema<S, SI>
): Op<Name, P, PI, S, SI> => ({ name, method: "POST", path, payload, success, source: "json" })

export const endpointOf = <Name extends string, P, PI, S, SI>(op: Op<Name, P, PI, S, SI>) => {
  const base =
    op.method === "GET"
      ? HttpApiEndpoint.get(op.name, op.path).setUrlParams(op.payload as unknown as Schema.Struct<{}>)
      : HttpApiEndpoint.post(op.name, op.path).setPayload(
          (op.source === "raw"
            ? HttpApiSchema.Multipart(op.payload as unknown as Schema.Struct<{}>)
            : op.payload) as unknown as Schema.Struct<{}>
        )
  return withErrors(base.addSuccess(op.success as unknown as Schema.Struct<{}>))
}

/** A JSON body `{}`. */
export const EmptyObject = Schema.Struct({}).annotations({ identifier: "Empty" })
