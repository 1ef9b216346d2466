import { ParseResult } from "effect"

/**
 * Unknown request fields are ignored, as the hosted Trunk API does (clients written for it send fields of their
 * own), but not silently: the answer names them in the `Greenline-Ignored-Fields` header (`concurency`,
 * `pr.numbr`), so a typo shows. The router decodes a body with excess properties as errors first, and only when
 * that fails decodes it again leniently (one decode for a body without unknown fields); bodies over 64 KiB
 * (impacted-target lists) are decoded leniently at once.
 */
export const IGNORED_FIELDS_HEADER = "greenline-ignored-fields"
export const IGNORED_FIELDS_MAX_BYTES = 64 * 1024

/** The paths of the fields a strict decode found and the schema does not know (`pr.numbr`). */
export const unexpectedPaths = (error: ParseResult.ParseError): ReadonlyArray<string> =>
  ParseResult.ArrayFormatter.formatErrorSync(error)
    .filter((issue) => issue._tag === "Unexpected")
    .map((issue) => issue.path.map(String).join("."))
