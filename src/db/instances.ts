import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Schedule } from "effect"
import { Database } from "../kernel/Database.ts"
import { APP_VERSION, instanceHost } from "./schema.ts"

/**
 * This server among the instances on a PostgreSQL database (`greenline_instances`, schema.ts): a row with its
 * version, renewed every 10 s and removed at a clean stop, so that a newer server never applies a migration that
 * is not safe while older instances run under running instances. Rows of instances gone for a day are removed. The
 * embedded database has one process (its lock), so it keeps no rows.
 */

const HEARTBEAT = "10 seconds"

export const InstanceRegistryLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const database = yield* Database
    if (database.kind !== "postgres") return
    const sql = yield* SqlClient.SqlClient
    const id = crypto.randomUUID()
    const beat = sql`insert into greenline_instances (id, app_version, host, pid)
                     values (${id}, ${APP_VERSION}, ${instanceHost()}, ${process.pid})
                     on conflict (id) do update set seen_at = now()`.pipe(Effect.ignore)
    yield* Effect.acquireRelease(beat, () => sql`delete from greenline_instances where id = ${id}`.pipe(Effect.ignore))
    yield* sql`delete from greenline_instances where seen_at < now() - interval '1 day'`.pipe(Effect.ignore)
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(beat, HEARTBEAT), Schedule.forever))
  })
)
