import { describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import type { OpName } from "../../src/http/Api.ts"
import { PERMISSIONS } from "../../src/http/roles.ts"
import { ROLES } from "../../src/tenancy/principal.ts"

/**
 * docs/security.md says what each role may do (issue #30): its table lists every operation under the role the
 * server's table (src/http/roles.ts) gives it, and the README links it.
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), "utf8")

describe("docs/security.md", () => {
  test("the roles table lists every operation under its role", () => {
    const doc = read("docs/security.md")
    for (const role of ROLES) {
      const row = doc.split("\n").find((line) => line.startsWith(`| \`${role}\` |`))
      expect(row).toBeDefined()
      const listed = [...(row?.split("|")[3] ?? "").matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]).sort()
      const expected = (Object.keys(PERMISSIONS) as Array<OpName>).filter((n) => PERMISSIONS[n].role === role).sort()
      expect(`${role}: ${listed.join(", ")}`).toBe(`${role}: ${expected.join(", ")}`)
    }
  })

  test("the sections are written and the README links the document", () => {
    const doc = read("docs/security.md")
    for (const section of ["Threat model", "Roles", "The audit log", "rotating tokens", "Reporting a vulnerability"]) {
      const start = doc.indexOf(section)
      expect(start).toBeGreaterThan(0)
      const next = doc.indexOf("\n## ", start)
      expect(doc.slice(start, next < 0 ? undefined : next).length).toBeGreaterThan(400)
    }
    expect(read("README.md")).toContain("(docs/security.md)")
  })
})
