import { createHash } from "node:crypto"
import { Effect } from "effect"
import { InvalidPageToken } from "./errors.ts"
import type { PageOf, TestCaseRecord } from "./FlakyRepo.ts"
import type * as F from "./schemas.ts"

// ---- page tokens: base64url of {q: hash of the query, o: offset}

export const queryHash = (parts: ReadonlyArray<unknown>) =>
  createHash("sha256").update(JSON.stringify(parts)).digest("base64url").slice(0, 22)

const encodeToken = (q: string, o: number) => Buffer.from(JSON.stringify({ q, o }), "utf8").toString("base64url")

const invalidToken = () => new InvalidPageToken({ message: "the page_token was not issued for this query" })

export const decodePageToken = (token: string, q: string): Effect.Effect<number, InvalidPageToken> => {
  if (token === "") return Effect.succeed(0)
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(token)) return Effect.fail(invalidToken())
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown
    if (typeof parsed === "object" && parsed !== null) {
      const { q: tq, o } = parsed as { q?: unknown; o?: unknown }
      if (tq === q && typeof o === "number" && Number.isSafeInteger(o) && o >= 0) return Effect.succeed(o)
    }
  } catch {
    // garbage
  }
  return Effect.fail(invalidToken())
}

export const pageOf = (q: string, offset: number, size: number, total: number): F.Page => {
  const totalPages = Math.ceil(total / size)
  return {
    total_rows: total,
    total_pages: totalPages,
    next_page_token: offset + size < total ? encodeToken(q, offset + size) : "",
    prev_page_token: offset > 0 ? encodeToken(q, Math.max(0, offset - size)) : "",
    last_page_token: totalPages > 0 ? encodeToken(q, (totalPages - 1) * size) : "",
    page_index: Math.floor(offset / size)
  }
}

/** One page of a query: its token checked, its rows loaded and presented, the next tokens made. */
export const paged = <A>(
  q: ReadonlyArray<unknown>,
  pageQuery: F.PageQuery,
  load: (limit: number, offset: number) => Effect.Effect<PageOf<TestCaseRecord>, unknown>,
  present: (rows: ReadonlyArray<TestCaseRecord>) => Effect.Effect<ReadonlyArray<A>, unknown>
) =>
  Effect.gen(function* () {
    const hash = queryHash([...q, pageQuery.page_size])
    const offset = yield* decodePageToken(pageQuery.page_token, hash)
    const found = yield* load(pageQuery.page_size, offset)
    const items = yield* present(found.rows)
    return { items, page: pageOf(hash, offset, pageQuery.page_size, found.total) }
  })
