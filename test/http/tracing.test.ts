import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, FiberRef, Option, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { type RunningServer, startServer } from "../../src/server.ts"
import { pgliteSeed } from "../support/pgliteSeed.ts"
import { startTestServer, TEST_TOKEN, type TestServer, tempDir } from "../support/server.ts"

/**
 * Tracing: with OTEL_EXPORTER_OTLP_ENDPOINT the server exports spans over OTLP/HTTP (JSON) — here to a small
 * receiver on loopback that keeps what it is sent; without it the runtime's tracer is off.
 */

interface OtlpValue {
  readonly stringValue?: string
  readonly intValue?: number | string
}
interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }>
}
interface OtlpExport {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource?: { readonly attributes?: ReadonlyArray<{ readonly key: string; readonly value: OtlpValue }> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans?: ReadonlyArray<OtlpSpan> }>
  }>
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes?.find((a) => a.key === key)?.value
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue))
}

const SERVER_KIND = 2

describe("tracing", () => {
  const received: Array<{ path: string; type: string | null; body: OtlpExport }> = []
  let receiver: ReturnType<typeof Bun.serve>
  let server: RunningServer

  beforeAll(async () => {
    receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        const url = new URL(request.url)
        received.push({
          path: url.pathname,
          type: request.headers.get("content-type"),
          body: (await request.json()) as OtlpExport
        })
        return Response.json({})
      }
    })
    server = await startServer(
      makeAppConfig({
        port: 0,
        host: "127.0.0.1",
        dataDir: ":memory:",
        embeddedSeed: await pgliteSeed(),
        gitRoot: tempDir("greenline-git-"),
        databaseUrl: Option.none(),
        bootstrapToken: Option.some(Redacted.make(TEST_TOKEN)),
        bootstrapOrg: "acme-org",
        logLevel: "error",
        otlpEndpoint: Option.some(`http://127.0.0.1:${receiver.port}/`)
      })
    )
    const ok = await fetch(`${server.url}/v1/getMergeQueueMetrics`, { headers: { "x-api-token": TEST_TOKEN } })
    expect(ok.status).toBe(200)
    await ok.text()
    const missing = await fetch(`${server.url}/v1/nothingHere`, { method: "POST" })
    expect(missing.status).toBe(404)
    // stopping the server flushes the batch of spans
    await server.stop()
  })
  afterAll(() => {
    receiver.stop(true)
  })

  const spans = () =>
    received.flatMap((r) => r.body.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((s) => s.spans ?? [])))

  test("the spans reach the collector over OTLP/HTTP as JSON, as service greenline", () => {
    expect(received.length).toBeGreaterThan(0)
    for (const r of received) {
      expect(r.path).toBe("/v1/traces")
      expect(r.type).toStartWith("application/json")
    }
    const names = received.flatMap((r) =>
      r.body.resourceSpans.map(
        (rs) => rs.resource?.attributes?.find((a) => a.key === "service.name")?.value.stringValue
      )
    )
    expect(names).toContain("greenline")
  })

  test("a request has a server span with its route, method and status; its SQL spans nest under it", () => {
    const request = spans().find((s) => s.name === "GET /v1/getMergeQueueMetrics")
    expect(request).toBeDefined()
    if (request === undefined) return
    expect(request.kind).toBe(SERVER_KIND)
    expect(request.parentSpanId ?? "").toBe("")
    expect(attribute(request, "http.route")).toBe("/v1/getMergeQueueMetrics")
    expect(attribute(request, "http.request.method")).toBe("GET")
    expect(attribute(request, "http.response.status_code")).toBe(200)
    const children = spans().filter((s) => s.parentSpanId === request.spanId)
    expect(children.map((s) => s.name)).toContain("sql.execute")
    for (const child of children) expect(child.traceId).toBe(request.traceId)
    expect(children.some((s) => String(attribute(s, "db.query.text")).includes("from queues"))).toBe(true)
  })

  test("a request outside the API has a span named by its method, with its status and no route", () => {
    const missing = spans().find((s) => s.name === "POST" && attribute(s, "http.response.status_code") === 404)
    expect(missing).toBeDefined()
    if (missing === undefined) return
    expect(attribute(missing, "http.route")).toBeUndefined()
  })
})

describe("without OTEL_EXPORTER_OTLP_ENDPOINT", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ db: "pglite" })
  })
  afterAll(async () => {
    await server.close()
  })

  test("the runtime's tracer is off, so neither requests nor the SQL client make spans", async () => {
    expect(await server.run(FiberRef.get(FiberRef.currentTracerEnabled))).toBe(false)
    // a span asked for anyway is the no-op span, not recorded
    const span = await server.run(Effect.makeSpan("probe"))
    expect(span._tag).toBe("Span")
    expect(span.spanId).toBe("noop")
    const ok = await fetch(`${server.url}/v1/getMergeQueueMetrics`, { headers: { "x-api-token": server.token } })
    expect(ok.status).toBe(200)
  })
})
