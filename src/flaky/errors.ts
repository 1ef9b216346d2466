import { Schema } from "effect"
import { ErrorDetail } from "../kernel/errors.ts"

/** The flaky-test service's failures; the HTTP edge (`http/errors.ts`) gives each its status and code. */

export class RepositoryNotFound extends Schema.TaggedError<RepositoryNotFound>()("RepositoryNotFound", {
  message: Schema.String
}) {}

export class TestCaseNotFound extends Schema.TaggedError<TestCaseNotFound>()("TestCaseNotFound", {
  message: Schema.String
}) {}

/** A JUnit part that cannot be read, with the part and line. */
export class InvalidJunit extends Schema.TaggedError<InvalidJunit>()("InvalidJunit", {
  message: Schema.String,
  details: Schema.Array(ErrorDetail)
}) {}

/** The upload's metadata or form is not what the contract asks for. */
export class InvalidUpload extends Schema.TaggedError<InvalidUpload>()("InvalidUpload", {
  message: Schema.String,
  details: Schema.optional(Schema.Array(ErrorDetail))
}) {}

export class InvalidPageToken extends Schema.TaggedError<InvalidPageToken>()("InvalidPageToken", {
  message: Schema.String
}) {}

export class TimeRangeInvalid extends Schema.TaggedError<TimeRangeInvalid>()("TimeRangeInvalid", {
  message: Schema.String
}) {}

/** A quarantine override, export query or import that is not what the extension asks for (semantics §8 revised). */
export class InvalidQuarantineInput extends Schema.TaggedError<InvalidQuarantineInput>()("InvalidQuarantineInput", {
  message: Schema.String,
  details: Schema.optional(Schema.Array(ErrorDetail))
}) {}

export const FlakyError = Schema.Union(
  RepositoryNotFound,
  TestCaseNotFound,
  InvalidJunit,
  InvalidUpload,
  InvalidPageToken,
  TimeRangeInvalid,
  InvalidQuarantineInput
)
export type FlakyError = typeof FlakyError.Type

export const isFlakyError: (e: unknown) => e is FlakyError = Schema.is(FlakyError)
