import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option } from "effect"
import type { Repository } from "../tenancy/Tenancy.ts"
import { defaultQueueConfig, type StoredQueueConfig } from "./schemas.ts"

/** Storage of queues and their configuration. */

export interface QueueRow {
  readonly id: string
  readonly repo: Repository
  readonly branch: string
  readonly config: StoredQueueConfig
}

export const ACTIVE_STATES = ["not_ready", "pending", "testing", "tests_passed", "pending_failure"] as const

export interface QueueRepoShape {
  readonly find: (repo: Repository, branch: string) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  /** The queue of `host/owner/name`@`branch` if its repository belongs to `orgId` (one query). */
  readonly findOwned: (
    orgId: string,
    repo: { readonly host: string; readonly owner: string; readonly name: string },
    branch: string
  ) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  readonly findById: (id: string) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  readonly create: (
    repo: Repository,
    branch: string,
    config: StoredQueueConfig
  ) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  readonly saveConfig: (id: string, config: StoredQueueConfig) => Effect.Effect<void, SqlError>
  readonly remove: (id: string) => Effect.Effect<void, SqlError>
  readonly activeCount: (id: string) => Effect.Effect<number, SqlError>
  readonly listIds: Effect.Effect<ReadonlyArray<string>, SqlError>
}

export class QueueRepo extends Context.Tag("greenline/QueueRepo")<QueueRepo, QueueRepoShape>() {}

interface Row {
  readonly id: string
  readonly branch: string
  readonly config: StoredQueueConfig | string
  readonly repo_id: string
  readonly org_id: string
  readonly host: string
  readonly owner: string
  readonly name: string
}

const parseConfig = (branch: string, raw: StoredQueueConfig | string): StoredQueueConfig => ({
  ...defaultQueueConfig(branch),
  ...(typeof raw === "string" ? (JSON.parse(raw) as StoredQueueConfig) : raw),
  branch
})

const toQueue = (row: Row): QueueRow => ({
  id: row.id,
  branch: row.branch,
  config: parseConfig(row.branch, row.config),
  repo: { id: row.repo_id, orgId: row.org_id, host: row.host, owner: row.owner, name: row.name }
})

export const QueueRepoLive = Layer.effect(
  QueueRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const select = sql`select q.id, q.branch, q.config, r.id as repo_id, r.org_id, r.host, r.owner, r.name
                       from queues q join repositories r on r.id = q.repo_id`
    const first = (rows: ReadonlyArray<Row>) => Option.map(Option.fromNullable(rows[0]), toQueue)
    const find = (repo: Repository, branch: string) =>
      Effect.map(sql<Row>`${select} where q.repo_id = ${repo.id} and q.branch = ${branch}`, first)
    return {
      find,
      findOwned: (orgId, repo, branch) =>
        Effect.map(
          sql<Row>`${select} where r.host = ${repo.host} and r.owner = ${repo.owner} and r.name = ${repo.name}
                   and r.org_id = ${orgId} and q.branch = ${branch}`,
          first
        ),
      findById: (id) => Effect.map(sql<Row>`${select} where q.id = ${id}`, first),
      create: (repo, branch, config) =>
        Effect.gen(function* () {
          const rows = yield* sql<{ id: string }>`
            insert into queues (id, repo_id, branch, config)
            values (${crypto.randomUUID()}, ${repo.id}, ${branch}, ${JSON.stringify(config)}::jsonb)
            on conflict (repo_id, branch) do nothing returning id`
          if (rows.length === 0) return Option.none()
          return yield* find(repo, branch)
        }),
      saveConfig: (id, config) =>
        sql`update queues set config = ${JSON.stringify(config)}::jsonb, updated_at = now() where id = ${id}`.pipe(
          Effect.asVoid
        ),
      remove: (id) => sql`delete from queues where id = ${id}`.pipe(Effect.asVoid),
      activeCount: (id) =>
        Effect.map(
          sql<{ n: number }>`select count(*)::int as n from entries
                             where queue_id = ${id} and state in ${sql.in(ACTIVE_STATES)}`,
          (rows) => rows[0]?.n ?? 0
        ),
      listIds: Effect.map(sql<{ id: string }>`select id from queues order by created_at`, (rows) =>
        rows.map((r) => r.id)
      )
    }
  })
)
