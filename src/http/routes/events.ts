import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { isEventsError } from "../../events/errors.ts"
import { Webhooks, type WebhooksShape } from "../../events/Webhooks.ts"
import type { Role } from "../../tenancy/principal.ts"
import { ops } from "../Api.ts"
import { fromDomainError } from "../errors.ts"
import { CurrentOrg, handle } from "../router.ts"

/** Handlers of the webhook endpoints API (extension): thin, each one transaction, the work is in `Webhooks`. */

/**
 * The role each webhook operation needs (contract.md §1, roles `read` < `write` < `maintain` < `admin`): the
 * dashboard's delivery page and these operations are for maintainers (issue #34). For the per-operation role table
 * (issue #30) to take when it lands; until then every token of the organization may call them.
 */
export const WEBHOOK_OPERATION_ROLES = {
  createWebhookEndpoint: "maintain",
  listWebhookEndpoints: "maintain",
  updateWebhookEndpoint: "maintain",
  deleteWebhookEndpoint: "maintain",
  rotateWebhookSecret: "maintain",
  listWebhookDeliveries: "maintain",
  replayWebhookMessages: "maintain"
} as const satisfies Record<string, Role>

const write = <A>(f: (webhooks: WebhooksShape, org: typeof CurrentOrg.Service) => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const webhooks = yield* Webhooks
    const org = yield* CurrentOrg
    return yield* sql.withTransaction(f(webhooks, org))
  }).pipe(Effect.catchAll((e) => (isEventsError(e) ? Effect.fail(fromDomainError(e)) : Effect.die(e))))

export const eventRoutes = [
  handle(ops.createWebhookEndpoint, (req) => write((w, org) => w.create(org, req))),
  handle(ops.listWebhookEndpoints, () => write((w, org) => Effect.map(w.list(org), (endpoints) => ({ endpoints })))),
  handle(ops.updateWebhookEndpoint, (req) => write((w, org) => w.update(org, req))),
  handle(ops.deleteWebhookEndpoint, (req) => write((w, org) => Effect.as(w.remove(org, req.id), {}))),
  handle(ops.rotateWebhookSecret, (req) => write((w, org) => w.rotate(org, req.id))),
  handle(ops.listWebhookDeliveries, (req) => write((w, org) => w.deliveries(org, req))),
  handle(ops.replayWebhookMessages, (req) => write((w, org) => w.replay(org, req)))
]
