import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Layer } from "effect"
import { AuditEnv } from "./AuditEnv.ts"
import { type AuditEvent, insertEvent, listEvents, pruneEvents } from "./auditRepo.ts"
import type { AuditError } from "./errors.ts"
import type { ListAuditEventsRequest, ListAuditEventsResponse } from "./schemas.ts"

export type { AuditEvent } from "./auditRepo.ts"

/**
 * The audit log (issue #30): who changed what, when and from where, through the API or the dashboard, and who was
 * refused. Appended by the HTTP edge (the router, and the handlers' transactions: trail.ts), read by
 * `listAuditEvents`, and pruned after `auditRetentionDays` (EVENT_RETENTION_DAYS when it is set, else a year:
 * docs/decisions.md).
 */
export interface AuditLogShape {
  /** Appends one event in a statement of its own (not in a change's transaction: see trail.ts for that). */
  readonly append: (event: AuditEvent) => Effect.Effect<void, SqlError>
  readonly list: (
    orgId: string,
    req: ListAuditEventsRequest
  ) => Effect.Effect<typeof ListAuditEventsResponse.Type, SqlError | AuditError>
  /** Deletes the events older than `days` (default: the configured retention); returns how many. */
  readonly prune: (days?: number) => Effect.Effect<number, SqlError>
}

export class AuditLog extends Context.Tag("greenline/AuditLog")<AuditLog, AuditLogShape>() {}

export const AuditLogLive = Layer.scoped(
  AuditLog,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AuditEnv
    const prune = (days = config.auditRetentionDays) =>
      Effect.gen(function* () {
        let total = 0
        for (;;) {
          const n = yield* pruneEvents(sql, days)
          total += n
          if (n === 0) return total
        }
      })
    // retention, on every instance (a delete that finds nothing costs an index lookup)
    yield* Effect.forkScoped(
      Effect.forever(
        prune().pipe(
          Effect.catchAllCause((cause) => Effect.logError("audit log retention failed", cause)),
          Effect.zipRight(Effect.sleep(Duration.minutes(10)))
        )
      )
    )
    return {
      append: (event) => Effect.asVoid(insertEvent(sql, event)),
      list: (orgId, req) => listEvents(sql, orgId, req),
      prune
    }
  })
)
