import { Either, ParseResult, Schema } from "effect"

/**
 * Unknown request fields are ignored, as the hosted Trunk API does (clients written for it send fields of their
 * own), but not silently: the answer names them in the `Greenline-Ignored-Fields` header (`concurency`,
 * `pr.numbr`), so a typo shows. Found by decoding the body a second time with excess properties as errors; bodies
 * over 64 KiB (impacted-target lists) are not checked, to keep their cost single.
 */
export const IGNORED_FIELDS_HEADER = "greenline-ignored-fields"
export const IGNORED_FIELDS_MAX_BYTES = 64 * 1024

const strictDecoders = new WeakMap<object, (input: unknown) => Either.Either<unknown, ParseResult.ParseError>>()

export const ignoredFields = (schema: Schema.Schema<unknown, unknown>, input: unknown): ReadonlyArray<string> => {
  let decode = strictDecoders.get(schema)
  if (decode === undefined) {
    decode = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })
    strictDecoders.set(schema, decode)
  }
  const result = decode(input)
  if (Either.isRight(result)) return []
  return ParseResult.ArrayFormatter.formatErrorSync(result.left)
    .filter((issue) => issue._tag === "Unexpected")
    .map((issue) => issue.path.map(String).join("."))
}
