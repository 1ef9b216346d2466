import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Context, Effect, Layer, Option } from "effect"
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
  /**
   * `findOwned`, remembered for a few seconds (a queue's id and repository never change; its configuration may, so
   * a caller uses only those). `forget` drops what is remembered of a queue that turned out to be gone.
   */
  readonly findOwnedCached: (
    orgId: string,
    repo: { readonly host: string; readonly owner: string; readonly name: string },
    branch: string
  ) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  readonly forget: (queueId: string) => void
  readonly create: (
    repo: Repository,
    branch: string,
    config: StoredQueueConfig
  ) => Effect.Effect<Option.Option<QueueRow>, SqlError>
  readonly saveConfig: (id: string, config: StoredQueueConfig) => Effect.Effect<void, SqlError>
  readonly remove: (id: string) => Effect.Effect<void, SqlError>
  /**
   * Deletes the queue when it holds no active entry; else the number of active entries (0: deleted, or gone
   * already). Locks the runner's row first, then the queue's, the order the runner's rounds take them in, so a
   * delete waits for a round (or a write) in flight instead of deadlocking with it. Inside a transaction.
   */
  readonly removeIfEmpty: (id: string) => Effect.Effect<number, SqlError>
  /** Holds the queue for the transaction (a delete waits); false when it is gone. For writes that change it. */
  readonly hold: (id: string) => Effect.Effect<boolean, SqlError>
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

/**
 * The columns of an owned queue's row under `q_` names, for statements that read a queue together with something
 * else (one round trip for a read endpoint): `from queues q join repositories r on r.id = q.repo_id`.
 */
export const QUEUE_COLUMNS = `q.id as q_id, q.branch as q_branch, q.config as q_config, r.id as q_repo_id,
  r.org_id as q_org_id, r.host as q_host, r.owner as q_owner, r.name as q_name`

export interface QueueColumns {
  readonly q_id: string
  readonly q_branch: string
  readonly q_config: StoredQueueConfig | string
  readonly q_repo_id: string
  readonly q_org_id: string
  readonly q_host: string
  readonly q_owner: string
  readonly q_name: string
}

export const queueOfColumns = (row: QueueColumns): QueueRow =>
  toQueue({
    id: row.q_id,
    branch: row.q_branch,
    config: row.q_config,
    repo_id: row.q_repo_id,
    org_id: row.q_org_id,
    host: row.q_host,
    owner: row.q_owner,
    name: row.q_name
  })

/** How long `findOwnedCached` remembers a queue. */
const OWNED_CACHE_MS = 5_000

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
    const findOwned: QueueRepoShape["findOwned"] = (orgId, repo, branch) =>
      Effect.map(
        sql<Row>`${select} where r.host = ${repo.host} and r.owner = ${repo.owner} and r.name = ${repo.name}
                 and r.org_id = ${orgId} and q.branch = ${branch}`,
        first
      )
    const owned = new Map<string, { readonly queue: QueueRow; readonly until: number }>()
    const forget = (queueId: string) => {
      for (const [key, hit] of owned) if (hit.queue.id === queueId) owned.delete(key)
    }
    return {
      find,
      findOwned,
      findOwnedCached: (orgId, repo, branch) =>
        Effect.gen(function* () {
          const key = JSON.stringify([orgId, repo.host, repo.owner, repo.name, branch])
          const now = yield* Clock.currentTimeMillis
          const hit = owned.get(key)
          if (hit !== undefined && hit.until > now) return Option.some(hit.queue)
          const found = yield* findOwned(orgId, repo, branch)
          if (owned.size > 10_000) owned.clear()
          if (Option.isSome(found)) owned.set(key, { queue: found.value, until: now + OWNED_CACHE_MS })
          else owned.delete(key)
          return found
        }),
      forget,
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
      remove: (id) =>
        sql`delete from queues where id = ${id}`.pipe(Effect.asVoid, Effect.ensuring(Effect.sync(() => forget(id)))),
      removeIfEmpty: (id) =>
        Effect.gen(function* () {
          yield* sql`select queue_id from queue_runtime where queue_id = ${id} for update`
          const held = yield* sql`select id from queues where id = ${id} for update`
          if (held.length === 0) return 0
          const rows = yield* sql<{ n: number }>`select count(*)::int as n from entries
                             where queue_id = ${id} and state in ${sql.in(ACTIVE_STATES)}`
          const active = rows[0]?.n ?? 0
          if (active > 0) return active
          yield* sql`delete from queues where id = ${id}`
          forget(id)
          return 0
        }),
      hold: (id) => Effect.map(sql`select id from queues where id = ${id} for key share`, (rows) => rows.length > 0),
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
