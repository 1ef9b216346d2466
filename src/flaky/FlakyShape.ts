import type { Effect } from "effect"
import type { Organization } from "../tenancy/Tenancy.ts"
import type { FlakyError } from "./errors.ts"
import type * as F from "./schemas.ts"

/** The flaky-test service's interface (its implementation: `Flaky.ts` and the parts it composes). */

export interface UploadPart {
  /** the part's file name (or "junit" when it has none), for error messages */
  readonly filename: string
  readonly bytes: Uint8Array
}

export interface FlakyShape {
  /**
   * `idempotencyKey`: the upload's key (the `Idempotency-Key` header); the same key again within a day answers the
   * first upload's summary and stores nothing (another upload under the same key is refused).
   */
  readonly upload: (
    org: Organization,
    metadata: string,
    parts: ReadonlyArray<UploadPart>,
    idempotencyKey?: string
  ) => Effect.Effect<F.UploadSummary, FlakyError>
  readonly listFailingTests: (
    org: Organization,
    req: typeof F.ListFailingTestsRequest.Type
  ) => Effect.Effect<typeof F.ListFailingTestsResponse.Type, FlakyError>
  readonly listQuarantinedTests: (
    org: Organization,
    req: typeof F.ListQuarantinedRequest.Type
  ) => Effect.Effect<typeof F.ListQuarantinedResponse.Type, FlakyError>
  readonly getTestDetails: (
    org: Organization,
    req: typeof F.GetTestDetailsRequest.Type
  ) => Effect.Effect<typeof F.GetTestDetailsResponse.Type, FlakyError>
  readonly listUnhealthyTests: (
    org: Organization,
    req: typeof F.ListUnhealthyRequest.Type
  ) => Effect.Effect<typeof F.ListUnhealthyResponse.Type, FlakyError>
  readonly linkTicket: (org: Organization, req: typeof F.LinkTicketRequest.Type) => Effect.Effect<{}, FlakyError>
  readonly setQuarantineOverride: (
    org: Organization,
    req: typeof F.SetQuarantineOverrideRequest.Type
  ) => Effect.Effect<{}, FlakyError>
  readonly getSettings: (
    org: Organization,
    req: typeof F.SettingsRequest.Type
  ) => Effect.Effect<typeof F.Settings.Type, FlakyError>
  readonly updateSettings: (
    org: Organization,
    req: typeof F.UpdateSettingsRequest.Type
  ) => Effect.Effect<typeof F.Settings.Type, FlakyError>
  /** Extension: the repository's quarantine state (overrides with owner, reason, ticket, expiry; quarantined tests). */
  readonly exportQuarantine: (
    org: Organization,
    req: typeof F.QuarantineExportQuery.Type
  ) => Effect.Effect<typeof F.QuarantineExport.Type, FlakyError>
  /** The same as CSV text (header row first). */
  readonly exportQuarantineCsv: (
    org: Organization,
    req: typeof F.QuarantineExportQuery.Type
  ) => Effect.Effect<string, FlakyError>
  /** Extension: sets the overrides of an export (JSON `tests` or `csv`), one transaction; creates unknown tests. */
  readonly importQuarantine: (
    org: Organization,
    req: typeof F.QuarantineImportRequest.Type
  ) => Effect.Effect<typeof F.QuarantineImportResponse.Type, FlakyError>
  /** Deletes results older than the retention (default 30 days); returns how many. */
  readonly prune: (retentionDays?: number) => Effect.Effect<number>
}
