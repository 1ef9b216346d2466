/**
 * Operations declared by the contract whose implementation has not landed yet answer 501 NOT_IMPLEMENTED;
 * test/http/foundation.test.ts checks this list against the OpenAPI document, so it can only shrink knowingly.
 * Every operation is implemented now.
 */
export const notImplementedOps: ReadonlyArray<string> = []
