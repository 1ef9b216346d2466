import { Context } from "effect"

/** What the audit log takes from the server's settings (provided by the composition root). */
export interface AuditEnvShape {
  /** Days the audit log keeps its events: EVENT_RETENTION_DAYS when it is set, else a year (docs/decisions.md). */
  readonly auditRetentionDays: number
}

export class AuditEnv extends Context.Tag("greenline/AuditEnv")<AuditEnv, AuditEnvShape>() {}
