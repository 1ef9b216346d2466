import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import openapiTS, { astToString } from "openapi-typescript"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

/**
 * A client generated from the served OpenAPI document (issue 38): `openapi-typescript` turns `GET /v1/openapi.json`
 * into TypeScript types, and every API call the README shows (`api <op> '<json>'`, and the admin API's table) is
 * compiled against them, so a call the README documents cannot be one the document's types refuse (issue 38 found
 * `"impactedTargets": "ALL"` typed as `"all" | "impacts_all"`).
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const README = fs.readFileSync(path.join(ROOT, "README.md"), "utf8")

/** One shell word at the start of `s`: quotes removed, `$NAME` expanded from `vars` (enough for the README). */
export const shellWord = (s: string, vars: Record<string, string>): string => {
  let out = ""
  let i = 0
  const variable = (at: number) => {
    const m = /^\$(\w+)/.exec(s.slice(at))
    if (m === null) return { text: "$", length: 1 }
    const value = vars[m[1] ?? ""]
    if (value === undefined) throw new Error(`the README uses $${m[1]}, which this test does not know`)
    return { text: value, length: m[0].length }
  }
  while (i < s.length && !/\s/.test(s[i] ?? "")) {
    const c = s[i]
    if (c === "'") {
      const end = s.indexOf("'", i + 1)
      out += s.slice(i + 1, end)
      i = end + 1
    } else if (c === '"') {
      i++
      while (i < s.length && s[i] !== '"') {
        if (s[i] === "\\" && /["\\$`]/.test(s[i + 1] ?? "")) {
          out += s[i + 1]
          i += 2
        } else if (s[i] === "$") {
          const v = variable(i)
          out += v.text
          i += v.length
        } else {
          out += s[i]
          i++
        }
      }
      i++
    } else if (c === "$") {
      const v = variable(i)
      out += v.text
      i += v.length
    } else {
      out += c
      i++
    }
  }
  return out
}

interface Call {
  readonly line: number
  readonly path: string
  readonly body: string
}

/** The README's `api <op> <body>` calls (the walkthrough's helper posts to `/v1/<op>`) and the admin API's table. */
export const readmeCalls = (readme: string): Call[] => {
  const q = /^Q='([^']*)'$/m.exec(readme)?.[1]
  if (q === undefined) throw new Error("the README defines no Q")
  const vars = { Q: q, pr: "1", one: "1", two: "2" }
  const calls: Call[] = []
  readme.split("\n").forEach((text, i) => {
    const api = /^\s*(?:until\s+)?api\s+([\w/-]+)\s+(.*)$/.exec(text)
    if (api !== null) calls.push({ line: i + 1, path: `/v1/${api[1]}`, body: shellWord(api[2] ?? "", vars) })
    const admin = /^\| `POST (\/v1\/admin\/\w+)` \| `(\{[^`]*\})` \|/.exec(text)
    if (admin !== null) calls.push({ line: i + 1, path: admin[1] ?? "", body: admin[2] ?? "" })
  })
  return calls
}

/** `tsc --noEmit --strict` of `file` in `dir` (with nothing but the file and what it imports). */
const compile = (dir: string, file: string) => {
  const config = path.join(dir, `tsconfig.${file}.json`)
  fs.writeFileSync(
    config,
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: "ES2022",
        module: "ESNext",
        moduleResolution: "Bundler",
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: []
      },
      files: [file]
    })
  )
  return Bun.spawnSync([process.execPath, path.join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", config], {
    cwd: dir,
    stdout: "pipe",
    stderr: "pipe"
  })
}

describe("a client generated from the served OpenAPI document", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ db: "pglite" })
  })
  afterAll(async () => {
    await server.close()
  })

  test("compiles every call the README shows", async () => {
    const document = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as Record<string, unknown>
    const types = astToString(await openapiTS(document as unknown as Parameters<typeof openapiTS>[0]))
    const calls = readmeCalls(README)
    expect(calls.length).toBeGreaterThan(20)
    expect(calls.some((c) => c.body.includes('"impactedTargets":"ALL"'))).toBe(true)

    const dir = tempDir("greenline-openapi-client-")
    fs.writeFileSync(path.join(dir, "api.ts"), types)
    const lines = calls.map((c, i) => {
      // each body is JSON as printed
      expect(() => JSON.parse(c.body), `README.md:${c.line}: ${c.body}`).not.toThrow()
      return `// README.md:${c.line}\nconst call${i}: Body<${JSON.stringify(c.path)}> = ${c.body}\n`
    })
    fs.writeFileSync(
      path.join(dir, "calls.ts"),
      `import type { paths } from "./api.ts"
type Body<P extends keyof paths> = paths[P] extends { post: { requestBody?: infer R } }
  ? NonNullable<R> extends { content: { "application/json": infer B } } ? B : never
  : never
${lines.join("")}
export const all = [${calls.map((_, i) => `call${i}`).join(", ")}]
`
    )
    const tsc = compile(dir, "calls.ts")
    const output = `${tsc.stdout.toString()}${tsc.stderr.toString()}`
    expect(output).toBe("")
    expect(tsc.exitCode).toBe(0)

    // and the check has teeth: a value outside the document's types does not compile
    fs.writeFileSync(
      path.join(dir, "wrong.ts"),
      `import type { paths } from "./api.ts"
type B = NonNullable<paths["/v1/setImpactedTargets"]["post"]["requestBody"]>["content"]["application/json"]
export const wrong: B["impactedTargets"] = "SOME"
`
    )
    const refused = compile(dir, "wrong.ts")
    expect(refused.exitCode).not.toBe(0)
    expect(refused.stdout.toString()).toContain('"SOME"')
  }, 120_000)
})

describe("the README's small things (issue 38)", () => {
  test("the endpoint table names each endpoint once", () => {
    const section = README.slice(README.indexOf("## The API"), README.indexOf("## How the queue behaves"))
    const rows = section.split("\n").filter((l) => /^\| `(GET|POST) /.test(l))
    const firsts = rows.map((r) => r.split("|")[1]?.trim())
    expect(new Set(firsts).size).toBe(firsts.length)
  })

  test("the CI examples use a Node.js that is maintained (22 or later)", () => {
    const versions = [
      ...[...README.matchAll(/node-version:\s*(\d+)/g)].map((m) => Number(m[1])),
      ...[...README.matchAll(/image:\s*node:(\d+)/g)].map((m) => Number(m[1]))
    ]
    expect(versions.length).toBeGreaterThanOrEqual(2)
    for (const v of versions) expect(v).toBeGreaterThanOrEqual(22)
  })
})
