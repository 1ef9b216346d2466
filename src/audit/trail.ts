import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Exit, FiberRef } from "effect"
import { type AuditEvent, insertEvent } from "./auditRepo.ts"

/**
 * The audit record of the change a request is making, written in the change's own transaction where the change is
 * one: the router sets it (`pending`) around a change's handler, and the transaction helpers of the handlers
 * (`auditedTransaction`) write it before they commit, so a change and its record commit or roll back together. A
 * handler whose change is no single transaction here (a batched submission, an upload) never writes it: the router
 * does, once the handler succeeded.
 */
export interface PendingAudit {
  readonly event: AuditEvent
  /** set once a transaction wrote the record (and cleared again if that transaction then failed) */
  written: boolean
}

export const PendingAuditRef: FiberRef.FiberRef<PendingAudit | undefined> = FiberRef.unsafeMake<
  PendingAudit | undefined
>(undefined)

/** Runs `effect` with `pending` as the request's audit record. */
export const withPendingAudit = <A, E, R>(pending: PendingAudit, effect: Effect.Effect<A, E, R>) =>
  Effect.locally(effect, PendingAuditRef, pending)

/**
 * `sql.withTransaction(effect)`, writing the request's pending audit record (if any, and not written yet) inside the
 * transaction, after `effect` succeeded. The handlers' transactions go through this; it changes nothing for a
 * request without a record (reads, the runners' own work).
 */
export const auditedTransaction = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | import("@effect/sql/SqlError").SqlError, R | SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const pending = yield* FiberRef.get(PendingAuditRef)
    if (pending === undefined) return yield* sql.withTransaction(effect)
    let wroteHere = false
    return yield* sql
      .withTransaction(
        Effect.tap(effect, () =>
          pending.written
            ? Effect.void
            : Effect.zipRight(
                insertEvent(sql, pending.event),
                Effect.sync(() => {
                  pending.written = true
                  wroteHere = true
                })
              )
        )
      )
      .pipe(
        Effect.onExit((exit) =>
          Effect.sync(() => {
            // rolled back: the record went with the change, so it is pending again
            if (Exit.isFailure(exit) && wroteHere) pending.written = false
          })
        )
      )
  })
