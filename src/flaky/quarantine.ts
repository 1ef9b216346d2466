import { Effect, Schema } from "effect"
import { describeParseError } from "../kernel/errors.ts"
import type { RepoRef } from "../queue/schemas.ts"
import type { Organization } from "../tenancy/Tenancy.ts"
import { type FlakyCommon, orDie, testNotFound } from "./common.ts"
import { CsvError, parseCsv, toCsv } from "./csv.ts"
import { InvalidQuarantineInput } from "./errors.ts"
import type { QuarantineSettingChanged } from "./events.ts"
import type { QuarantineOverride } from "./FlakyRepo.ts"
import type { FlakyShape } from "./FlakyShape.ts"
import type * as F from "./schemas.ts"
import { QuarantineImportEntry } from "./schemas.ts"
import type { IdHasher } from "./testCaseIdsBinary.ts"

/** The export's CSV columns (the JSON entry's fields, in this order). */
export const CSV_COLUMNS = [
  "test_case_id",
  "name",
  "classname",
  "file",
  "parent",
  "variant",
  "quarantine_setting",
  "quarantined",
  "status",
  "owner",
  "reason",
  "ticket_url",
  "expires_at",
  "set_at"
] as const satisfies ReadonlyArray<keyof F.QuarantineEntry>

const csvValue = (v: string | boolean | null): string => (v === null ? "" : String(v))

/** Quarantine: overrides (one, or an import), the settings, the export as JSON or CSV. */
export const makeQuarantine = (
  common: FlakyCommon,
  /** the test case ids' hashing (testCaseIdsBinary.ts), for imported entries without an id */
  ids: IdHasher
): Pick<
  FlakyShape,
  | "setQuarantineOverride"
  | "getSettings"
  | "updateSettings"
  | "exportQuarantine"
  | "exportQuarantineCsv"
  | "importQuarantine"
> => {
  const { sql, repo, events, now, requireRepo, changeOf, lapseExpired, settingsOut } = common

  const quarantineInput = (message: string, details: ReadonlyArray<{ path: string; message: string }>) =>
    Effect.fail(new InvalidQuarantineInput({ message, details }))

  /** `host/owner/name`, or `owner/name` on github.com */
  const parseRepoParam = (text: string): Effect.Effect<RepoRef, InvalidQuarantineInput> => {
    const parts = text.split("/")
    if (parts.length === 2 && parts.every((p) => p !== ""))
      return Effect.succeed({ host: "github.com", owner: parts[0] as string, name: parts[1] as string })
    if (parts.length === 3 && parts.every((p) => p !== ""))
      return Effect.succeed({ host: parts[0] as string, owner: parts[1] as string, name: parts[2] as string })
    return quarantineInput("repo must be host/owner/name or owner/name", [
      { path: "repo", message: "must be host/owner/name or owner/name" }
    ])
  }

  const exportState = (org: Organization, req: typeof F.QuarantineExportQuery.Type) =>
    Effect.gen(function* () {
      const ref = yield* parseRepoParam(req.repo)
      const r = yield* requireRepo(org, req.org_url_slug, ref)
      const at = yield* now
      yield* sql.withTransaction(lapseExpired(org, r, at))
      const [settings, rows] = yield* Effect.all([repo.settings(r.id), repo.quarantineState(r.id)])
      const tests = rows.map(
        (t): F.QuarantineEntry => ({
          test_case_id: t.id,
          name: t.name,
          classname: t.classname,
          file: t.file,
          parent: t.parent,
          variant: t.variant,
          quarantine_setting: t.override === "unspecified" ? "auto_quarantine" : t.override,
          quarantined: t.quarantined,
          status: t.status,
          owner: t.overrideOwner,
          reason: t.overrideReason,
          ticket_url: t.overrideTicketUrl,
          expires_at: t.overrideExpiresAt?.toISOString() ?? null,
          set_at: t.overrideSetAt?.toISOString() ?? null
        })
      )
      return { repo: ref, exported_at: at.toISOString(), settings: settingsOut(settings), tests }
    })

  /** An override's details, checked: the expiry must be in the future. */
  const overrideDetails = (
    e: {
      readonly owner?: string | null | undefined
      readonly reason?: string | null | undefined
      readonly ticket_url?: string | null | undefined
      readonly expires_at?: string | null | undefined
    },
    at: Date,
    path: string
  ) =>
    Effect.gen(function* () {
      const expiresAt = e.expires_at === undefined || e.expires_at === null ? null : new Date(e.expires_at)
      if (expiresAt !== null && expiresAt.getTime() <= at.getTime()) {
        return yield* quarantineInput("expires_at must be in the future", [
          { path: `${path}expires_at`, message: "must be in the future" }
        ])
      }
      return {
        owner: e.owner ?? null,
        reason: e.reason === undefined || e.reason === null || e.reason === "" ? null : e.reason,
        ticketUrl: e.ticket_url === undefined || e.ticket_url === null || e.ticket_url === "" ? null : e.ticket_url,
        expiresAt
      }
    })

  const decodeEntry = Schema.decodeUnknown(QuarantineImportEntry, { errors: "all", onExcessProperty: "ignore" })

  /** The import's entries: its JSON `tests`, or its CSV rows decoded with the same schema (empty cells = absent). */
  const importEntries = (req: typeof F.QuarantineImportRequest.Type) =>
    Effect.gen(function* () {
      if ((req.tests === undefined) === (req.csv === undefined)) {
        return yield* quarantineInput("give either tests (JSON) or csv (the export's CSV text)", [
          { path: req.tests === undefined ? "tests" : "csv", message: "exactly one of tests and csv" }
        ])
      }
      if (req.tests !== undefined) return req.tests
      let rows: string[][]
      try {
        rows = parseCsv(req.csv ?? "")
      } catch (e) {
        if (e instanceof CsvError) return yield* quarantineInput(e.message, [{ path: "csv", message: e.message }])
        throw e
      }
      const [header, ...body] = rows
      if (header === undefined) return []
      const out: QuarantineImportEntry[] = []
      for (const [i, row] of body.entries()) {
        const object: Record<string, string> = {}
        header.forEach((name, k) => {
          const v = row[k]
          if (v !== undefined && v !== "") object[name.trim()] = v
        })
        const decoded = yield* decodeEntry(object).pipe(
          Effect.mapError((e) => {
            const base = describeParseError(e)
            return new InvalidQuarantineInput({
              message: `csv row ${i + 2}: ${base.message}`,
              details: base.details.map((d) => ({ path: `csv[${i + 1}].${d.path}`, message: d.message }))
            })
          })
        )
        out.push(decoded)
      }
      return out
    })

  return {
    setQuarantineOverride: (org, req) =>
      orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo)
            const at = yield* now
            const override = req.override.toLowerCase() as QuarantineOverride
            const details = yield* overrideDetails(req, at, "")
            const id = req.test_case_id.toLowerCase()
            const before = yield* repo.findTestCase(r.id, id)
            if (before === undefined) return yield* testNotFound(req.test_case_id)
            yield* repo.setOverride(r.id, id, override, details, at)
            yield* repo.refreshQuarantine(r.id, [id], at)
            if (before.override !== override || override !== "unspecified") {
              yield* events.quarantiningSettingChanged([
                changeOf(org, r, { id, name: before.name, override: before.override, ...details }, override, "set", at)
              ])
            }
            return {}
          })
        )
      ),

    getSettings: (org, req) =>
      orDie(
        Effect.gen(function* () {
          const r = yield* requireRepo(org, req.org_url_slug, req.repo)
          return settingsOut(yield* repo.settings(r.id))
        })
      ),

    updateSettings: (org, req) =>
      orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo, true)
            const s = yield* repo.updateSettings(r.id, {
              quarantiningEnabled: req.quarantining_enabled,
              autoQuarantine: req.auto_quarantine,
              autoReleaseCleanRuns: req.auto_release_clean_runs
            })
            yield* repo.refreshQuarantine(r.id, null, yield* now)
            return settingsOut(s)
          })
        )
      ),

    exportQuarantine: (org, req) => orDie(exportState(org, req)),

    exportQuarantineCsv: (org, req) =>
      orDie(
        Effect.map(exportState(org, req), (e) =>
          toCsv(
            CSV_COLUMNS,
            e.tests.map((t) => CSV_COLUMNS.map((c) => csvValue(t[c])))
          )
        )
      ),

    importQuarantine: (org, req) =>
      orDie(
        sql.withTransaction(
          Effect.gen(function* () {
            const r = yield* requireRepo(org, req.org_url_slug, req.repo, true)
            const at = yield* now
            const entries = yield* importEntries(req)
            let created = 0
            let cleared = 0
            const changes: QuarantineSettingChanged[] = []
            for (const [index, e] of entries.entries()) {
              const path = req.tests !== undefined ? `tests[${index}]` : `csv[${index + 1}]`
              const details = yield* overrideDetails(e, at, `${path}.`)
              const ref = { host: r.host, owner: r.owner, name: r.name }
              const variant = e.variant ?? ""
              const id =
                e.test_case_id?.toLowerCase() ??
                ids.fastTestCaseId({
                  orgUrlSlug: org.slug,
                  repo: ref,
                  file: e.file ?? "",
                  classname: e.classname ?? "",
                  parent: e.parent ?? "",
                  name: e.name ?? "",
                  variant
                })
              let before = yield* repo.findTestCase(r.id, id)
              if (before === undefined) {
                if (e.name === undefined) {
                  return yield* quarantineInput("no test case has this id; give its name to create it", [
                    { path: `${path}.test_case_id`, message: "no test case has this id; give its name to create it" }
                  ])
                }
                yield* repo.insertTestCases(
                  r.id,
                  variant,
                  {
                    ids: [id],
                    names: [e.name],
                    classnames: [e.classname ?? ""],
                    files: [e.file ?? ""],
                    parents: [e.parent ?? ""],
                    lastFailureAt: [null]
                  },
                  at
                )
                created++
                before = yield* repo.findTestCase(r.id, id)
              }
              const setting = e.quarantine_setting.toLowerCase()
              const override: QuarantineOverride =
                setting === "always_quarantine" || setting === "never_quarantine" ? setting : "unspecified"
              if (override === "unspecified") cleared++
              yield* repo.setOverride(r.id, id, override, details, at)
              if (before !== undefined && (before.override !== override || override !== "unspecified"))
                changes.push(
                  changeOf(
                    org,
                    r,
                    { id, name: before.name, override: before.override, ...details },
                    override,
                    "imported",
                    at
                  )
                )
            }
            yield* repo.refreshQuarantine(r.id, null, at)
            yield* events.quarantiningSettingChanged(changes)
            return { imported: entries.length, created, cleared }
          })
        )
      )
  }
}
