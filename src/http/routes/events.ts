import { Effect } from "effect"
import { auditedTransaction } from "../../audit/trail.ts"
import { isEventsError } from "../../events/errors.ts"
import { Webhooks, type WebhooksShape } from "../../events/Webhooks.ts"
import { ops } from "../Api.ts"
import { fromDomainError } from "../errors.ts"
import { CurrentOrg, handle } from "../router.ts"

/** Handlers of the webhook endpoints API (extension): thin, each one transaction, the work is in `Webhooks`. */

const write = <A>(f: (webhooks: WebhooksShape, org: typeof CurrentOrg.Service) => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    const org = yield* CurrentOrg
    // the change and its audit record in one transaction (audit/trail.ts)
    return yield* auditedTransaction(f(webhooks, org))
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
