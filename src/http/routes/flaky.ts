import type * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import { auditedTransaction } from "../../audit/trail.ts"
import type { FlakyError } from "../../flaky/errors.ts"
import { Flaky, type UploadPart } from "../../flaky/Flaky.ts"
import type { UploadSummary } from "../../flaky/schemas.ts"
import { ops } from "../Api.ts"
import { ApiError, fromDomainError, invalidRequest } from "../errors.ts"
import { CurrentOrg, handle, type Route } from "../router.ts"

/** Handlers of the flaky-test endpoints (contract.md §3): thin, the work is in `Flaky`. */

const withOrg = <A, E, R>(f: (flaky: typeof Flaky.Service, org: typeof CurrentOrg.Service) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.all([Flaky, CurrentOrg]), ([flaky, org]) => f(flaky, org))

/**
 * A settings, override or ticket change: the service's own transaction nests in one that also holds the request's
 * audit record (audit/trail.ts). A database failure is a defect, as in the service.
 */
const change = <A>(
  f: (flaky: typeof Flaky.Service, org: typeof CurrentOrg.Service) => Effect.Effect<A, FlakyError>
): Effect.Effect<A, FlakyError, Flaky | CurrentOrg | SqlClient.SqlClient> =>
  Effect.catchTag(auditedTransaction(withOrg(f)), "SqlError", (e) => Effect.die(e))

/** Reads the multipart body: the `metadata` part (JSON text or a file) and every `junit` part. */
export const readUploadForm = (request: Request, body: Uint8Array) =>
  Effect.gen(function* () {
    const form = yield* Effect.tryPromise({
      try: () =>
        new Response(body, { headers: { "content-type": request.headers.get("content-type") ?? "" } }).formData(),
      catch: () => invalidRequest("the body is not a readable multipart/form-data document")
    })
    const metadata = form.get("metadata")
    if (metadata === null)
      return yield* invalidRequest("the upload has no metadata part", [{ path: "metadata", message: "is required" }])
    const metadataText =
      typeof metadata === "string" ? metadata : yield* Effect.promise(() => (metadata as Blob).text())
    const parts: UploadPart[] = []
    let n = 0
    for (const entry of form.getAll("junit")) {
      n++
      if (typeof entry === "string") {
        parts.push({ filename: `junit-${n}`, bytes: new TextEncoder().encode(entry) })
      } else {
        const file = entry as File
        const bytes = new Uint8Array(yield* Effect.promise(() => file.arrayBuffer()))
        parts.push({ filename: file.name !== "" ? file.name : `junit-${n}`, bytes })
      }
    }
    if (parts.length === 0) {
      return yield* invalidRequest("the upload has no junit part", [{ path: "junit", message: "is required" }])
    }
    return { metadataText, parts }
  })

/**
 * The upload route. Its payload is the raw multipart body (the request's, handed to `run`), so it is served without the
 * schema decode of `handle` (the op's `UploadForm` schema only documents the form).
 */
const encodeSummary = Schema.encode(ops.uploadTestResults.success)

/** The upload's `Idempotency-Key` (1 to 200 visible ASCII characters), if it has one. */
const idempotencyKeyOf = (request: Request) =>
  Effect.gen(function* () {
    const key = request.headers.get("idempotency-key")
    if (key === null) return undefined
    if (!/^[\x21-\x7e]{1,200}$/.test(key)) {
      return yield* invalidRequest("the Idempotency-Key header must be 1 to 200 visible ASCII characters", [
        { path: "Idempotency-Key", message: "must be 1 to 200 visible ASCII characters" }
      ])
    }
    return key
  })

const uploadRoute: Route<Flaky, "uploadTestResults"> = {
  op: ops.uploadTestResults,
  run: (_, { request, body }) =>
    Effect.gen(function* () {
      const key = yield* idempotencyKeyOf(request)
      const { metadataText, parts } = yield* readUploadForm(request, body)
      const summary: UploadSummary = yield* withOrg((flaky, org) => flaky.upload(org, metadataText, parts, key)).pipe(
        Effect.mapError(fromDomainError)
      )
      return yield* Effect.mapError(
        encodeSummary(summary),
        () => new ApiError({ status: 500, code: "INTERNAL", message: "the answer did not match its schema" })
      )
    })
}

export const flakyRoutes = [
  handle(ops.listFailingTests, (req) => withOrg((flaky, org) => flaky.listFailingTests(org, req))),
  handle(ops.listQuarantinedTests, (req) => withOrg((flaky, org) => flaky.listQuarantinedTests(org, req))),
  handle(ops.getTestDetails, (req) => withOrg((flaky, org) => flaky.getTestDetails(org, req))),
  handle(ops.listUnhealthyTests, (req) => withOrg((flaky, org) => flaky.listUnhealthyTests(org, req))),
  handle(ops.linkTicketToTestCase, (req) => change((flaky, org) => flaky.linkTicket(org, req))),
  handle(ops.setQuarantineOverride, (req) => change((flaky, org) => flaky.setQuarantineOverride(org, req))),
  handle(ops.getFlakySettings, (req) => withOrg((flaky, org) => flaky.getSettings(org, req))),
  handle(ops.updateFlakySettings, (req) => change((flaky, org) => flaky.updateSettings(org, req))),
  uploadRoute,
  handle(ops.exportQuarantine, (req) => withOrg((flaky, org) => flaky.exportQuarantine(org, req))),
  handle(ops.exportQuarantineCsv, (req) => withOrg((flaky, org) => flaky.exportQuarantineCsv(org, req))),
  handle(ops.importQuarantine, (req) => change((flaky, org) => flaky.importQuarantine(org, req)))
] as const
