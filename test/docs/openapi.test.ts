import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

/**
 * The API reference teaches (issue 19): every operation has a summary, a description and examples; enums are
 * enums; getMergeQueueMetrics declares its query parameters; `servers` is PUBLIC_URL; Effect's internal decode error
 * is not in the document; unknown request fields are ignored, said so (no `additionalProperties: false`), and named
 * in the `Greenline-Ignored-Fields` header. `@redocly/cli lint` runs on the same document in .ci/run.
 */

type Json = Record<string, unknown>

for (const db of databases) {
  describe(`OpenAPI document (${db})`, () => {
    let server: TestServer
    let doc: Json & { paths: Record<string, Record<string, Json>>; components: { schemas: Record<string, Json> } }
    beforeAll(async () => {
      server = await startTestServer({ db, config: { publicUrl: "https://greenline.example.com" } })
      doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as typeof doc
    })
    afterAll(async () => {
      await server?.close()
    })

    test("every operation has a summary, a description and examples", () => {
      let operations = 0
      for (const [path, item] of Object.entries(doc.paths)) {
        for (const [method, op] of Object.entries(item)) {
          operations++
          const where = `${method.toUpperCase()} ${path}`
          expect(`${where}: ${typeof op.summary}`).toBe(`${where}: string`)
          expect(`${where}: ${typeof op.description}`).toBe(`${where}: string`)
          const request = (op.requestBody as { content?: Record<string, { example?: unknown }> } | undefined)?.content
          if (request?.["application/json"] !== undefined) {
            expect(`${where}: ${request["application/json"].example !== undefined}`).toBe(`${where}: true`)
          }
          const ok = (op.responses as Record<string, { content?: Record<string, { example?: unknown }> }>)["200"]
          const media = Object.values(ok?.content ?? {})[0]
          if (!["getMergeQueueTestingDetails", "listQuarantinedTests"].includes(String(op.operationId))) {
            expect(`${where}: ${media?.example !== undefined}`).toBe(`${where}: true`)
          }
        }
      }
      expect(operations).toBeGreaterThanOrEqual(26)
    })

    test("servers, query parameters, enums, the error envelope, no internal decode error", () => {
      expect(doc.servers).toEqual([{ url: "https://greenline.example.com", description: "this server (PUBLIC_URL)" }])
      const metrics = doc.paths["/v1/getMergeQueueMetrics"]?.get as {
        parameters: ReadonlyArray<{ name: string; in: string }>
      }
      expect(metrics.parameters.map((p) => `${p.in}:${p.name}`)).toEqual(["query:repo", "query:repoHost"])
      const text = JSON.stringify(doc)
      expect(text).not.toContain("HttpApiDecodeError")
      expect(text).not.toContain('"additionalProperties":false')
      const override = doc.components.schemas.SetQuarantineOverrideRequest as { properties: Record<string, Json> }
      expect(override.properties.override?.enum).toEqual(["always_quarantine", "never_quarantine", "unspecified"])
      const envelope = doc.components.schemas.ErrorEnvelope as { properties: { error: { properties: { code: Json } } } }
      expect(envelope.properties.error.properties.code.enum).toContain("QUEUE_NOT_FOUND")
      const create = doc.paths["/v1/createQueue"]?.post as { responses: Record<string, Json> }
      expect(JSON.stringify(create.responses["400"])).toContain("#/components/schemas/ErrorEnvelope")
    })

    test("/docs renders the document with Redoc, served by this server", async () => {
      const page = await (await fetch(`${server.url}/docs`)).text()
      expect(page).toContain('<redoc spec-url="/v1/openapi.json"')
      expect(page).not.toMatch(/src="https?:/)
      const bundle = await fetch(`${server.url}/docs/redoc.standalone.js`)
      expect(bundle.status).toBe(200)
      expect((await bundle.text()).length).toBeGreaterThan(100_000)
    })

    test("unknown request fields are ignored and named in Greenline-Ignored-Fields", async () => {
      const repo = { host: "local", owner: "acme", name: `ignored-${db}` }
      const created = await fetch(`${server.url}/v1/createQueue`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-token": server.token },
        body: JSON.stringify({ repo, targetBranch: "main" })
      })
      expect(created.status).toBe(200)
      expect(created.headers.get("greenline-ignored-fields")).toBeNull()
      const typo = await fetch(`${server.url}/v1/updateQueue`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-token": server.token },
        body: JSON.stringify({ repo: { ...repo, extra: 1 }, targetBranch: "main", concurency: 3 })
      })
      expect(typo.status).toBe(200)
      expect(typo.headers.get("greenline-ignored-fields")).toBe("concurency, repo.extra")
      expect(((await typo.json()) as { concurrency: number }).concurrency).toBe(1)
    })
  })
}
