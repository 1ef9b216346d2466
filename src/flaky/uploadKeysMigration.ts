import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Idempotency keys of uploads (migration 0240): an upload sent with an `Idempotency-Key` (the CI client sends one,
 * the same in each attempt) claims it in its transaction; the same key again within a day answers the first upload's
 * summary and stores nothing (`digest`: of the upload's content, so a key reused for another upload is refused).
 */
const statements = (...list: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of list) yield* sql.unsafe(statement)
  })

export const flakyUploadKeys = statements(
  `create table flaky_upload_keys (
     org_id uuid not null references organizations(id) on delete cascade,
     key text not null,
     digest text not null,
     summary jsonb,
     created_at timestamptz not null default now(),
     primary key (org_id, key)
   )`,
  `create index flaky_upload_keys_age on flaky_upload_keys (org_id, created_at)`
)
