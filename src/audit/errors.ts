import { Data } from "effect"

/** A `page_token` that `listAuditEvents` did not issue for this query (400 INVALID_PAGE_TOKEN). */
export class AuditPageTokenInvalid extends Data.TaggedError("AuditPageTokenInvalid")<{ readonly message: string }> {}

export type AuditError = AuditPageTokenInvalid

export const isAuditError = (e: unknown): e is AuditError => e instanceof AuditPageTokenInvalid
