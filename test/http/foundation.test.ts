import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { openApiDocument } from "../../src/http/Api.ts"
import { databases, startTestServer, type TestServer } from "../support/server.ts"

const repo = { host: "local", owner: "acme", name: "app" }
const key = { repo, targetBranch: "main" }

interface Envelope {
  readonly error: {
    readonly code: string
    readonly message: string
    readonly details?: ReadonlyArray<{ path: string; message: string }>
  }
}
const envelope = (body: unknown) => body as Envelope

for (const db of databases) {
  describe(`foundation over HTTP (${db})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startTestServer({ db })
    })
    afterAll(async () => {
      await server.close()
    })

    test("health, readiness, OpenAPI and docs need no token", async () => {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
      const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as { paths: Record<string, unknown> }
      const expected = [
        "/v1/submitPullRequest",
        "/v1/cancelPullRequest",
        "/v1/restartTestsOnPullRequest",
        "/v1/getSubmittedPullRequest",
        "/v1/setImpactedTargets",
        "/v1/getMergeQueueTestingDetails",
        "/v1/createQueue",
        "/v1/deleteQueue",
        "/v1/getQueue",
        "/v1/updateQueue",
        "/v1/getMergeQueueMetrics",
        "/v1/flaky-tests/list-failing-tests",
        "/v1/flaky-tests/list-quarantined-tests",
        "/v1/flaky-tests/get-test-details",
        "/v1/flaky-tests/list-unhealthy-tests",
        "/v1/flaky-tests/link-ticket-to-test-case",
        "/v1/flaky-tests/set-quarantine-override",
        "/v1/flaky-tests/get-settings",
        "/v1/flaky-tests/update-settings",
        "/v1/flaky-tests/upload",
        "/v1/reportStatus",
        "/v1/listQueues",
        "/v1/getQueueActivity",
        "/v1/getQueueHealth",
        "/v1/getPullRequestActivity",
        "/v1/flaky-tests/get-test-history",
        "/v1/flaky-tests/get-upload",
        "/v1/listApiTokens",
        "/v1/listAuditEvents",
        "/v1/listQueueFailures",
        "/v1/createApiToken",
        "/v1/revokeApiToken",
        "/v1/admin/createOrganization",
        "/v1/admin/createToken",
        "/v1/admin/listTokens",
        "/v1/admin/revokeToken",
        "/v1/admin/addRepository",
        "/v1/flaky-tests/export",
        "/v1/flaky-tests/export.csv",
        "/v1/flaky-tests/import",
        "/v1/createWebhookEndpoint",
        "/v1/listWebhookEndpoints",
        "/v1/updateWebhookEndpoint",
        "/v1/deleteWebhookEndpoint",
        "/v1/rotateWebhookSecret",
        "/v1/listWebhookDeliveries",
        "/v1/replayWebhookMessages",
        "/v1/createFreeze",
        "/v1/listFreezes",
        "/v1/updateFreeze",
        "/v1/deleteFreeze",
        "/v1/setMergeSchedule",
        "/v1/previewCancelPullRequest",
        "/v1/previewSubmitPullRequest",
        "/v1/previewRestartTests"
      ]
      expect(Object.keys(doc.paths).sort()).toEqual([...expected].sort())
      const docs = await fetch(`${server.url}/docs`)
      expect(docs.status).toBe(200)
      expect(await docs.text()).toContain('<redoc spec-url="/v1/openapi.json"')
    })

    test("without METRICS_TOKEN, GET /metrics needs no token (contract.md §5: guarded when set)", async () => {
      const metrics = await fetch(`${server.url}/metrics`)
      expect(metrics.status).toBe(200)
      expect(await metrics.text()).toContain("# TYPE greenline_http_requests_total counter")
    })

    test("authentication: missing, wrong, Bearer alias, revoked", async () => {
      const missing = await server.post("getQueue", key, { "x-api-token": "" })
      expect(missing.status).toBe(401)
      expect(envelope(missing.body).error.code).toBe("UNAUTHORIZED")
      const wrong = await server.post("getQueue", key, { "x-api-token": "not-a-real-token-at-all-1234" })
      expect(wrong.status).toBe(401)
      const bearer = await fetch(`${server.url}/v1/createQueue`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${server.token}` },
        body: JSON.stringify({ repo, targetBranch: "bearer" })
      })
      expect(bearer.status).toBe(200)
    })

    test("queues: create with defaults, conflict, get, delete is idempotent", async () => {
      const created = await server.post("createQueue", { ...key, targetBranch: "q1" })
      expect(created.status).toBe(200)
      expect(created.body).toMatchObject({
        state: "running",
        branch: "q1",
        mode: "single",
        concurrency: 1,
        bisectionConcurrency: 1,
        testingTimeoutMinutes: 300,
        pendingFailureDepth: 0,
        canOptimisticallyMerge: false,
        batch: false,
        batchingMaxWaitTimeMinutes: 5,
        batchingMinSize: 4,
        commentsEnabled: true,
        commandsEnabled: true,
        createPrsForTestingBranches: true,
        statusCheckEnabled: true,
        requiredStatuses: [],
        directMergeMode: "off",
        optimizationMode: "off",
        mergeMethod: "squash",
        extensionEnabled: true,
        enqueueingLabel: null,
        testBranchConstructionMode: "rename_temp_branch",
        notReadyTimeoutHours: 24
      })
      const again = await server.post("createQueue", { ...key, targetBranch: "q1" })
      expect(again.status).toBe(409)
      expect(envelope(again.body).error.code).toBe("QUEUE_ALREADY_EXISTS")
      const got = await server.post("getQueue", { ...key, targetBranch: "q1" })
      expect(got.status).toBe(200)
      expect(got.body).toMatchObject({ branch: "q1", enqueuedPullRequests: [] })
      expect((await server.post("deleteQueue", { ...key, targetBranch: "q1" })).status).toBe(200)
      expect((await server.post("deleteQueue", { ...key, targetBranch: "q1" })).status).toBe(200)
      const gone = await server.post("getQueue", { ...key, targetBranch: "q1" })
      expect(gone.status).toBe(404)
      expect(envelope(gone.body).error.code).toBe("QUEUE_NOT_FOUND")
    })

    test("updateQueue validation", async () => {
      await server.post("createQueue", { ...key, targetBranch: "v" })
      const k = { ...key, targetBranch: "v" }
      for (const bad of [0, 4294967296, 1.5, -1, "2"]) {
        const r = await server.post("updateQueue", { ...k, concurrency: bad })
        expect(r.status).toBe(400)
        expect(envelope(r.body).error.code).toBe("INVALID_REQUEST")
        expect(envelope(r.body).error.details?.[0]?.path).toBe("concurrency")
      }
      const max = await server.post("updateQueue", { ...k, concurrency: 4294967295, testingTimeoutMinutes: 1 })
      expect(max.status).toBe(200)
      expect(max.body).toMatchObject({ concurrency: 4294967295, testingTimeoutMinutes: 1 })
      const unknownEnum = await server.post("updateQueue", { ...k, mergeMethod: "octopus" })
      expect(unknownEnum.status).toBe(400)
      expect(envelope(unknownEnum.body).error.details?.[0]?.path).toBe("mergeMethod")
      const wrongType = await server.post("updateQueue", { ...k, batch: "yes" })
      expect(wrongType.status).toBe(400)
      const missingRepo = await server.post("updateQueue", { targetBranch: "v" })
      expect(missingRepo.status).toBe(400)
      expect(envelope(missingRepo.body).error.details).toContainEqual({ path: "repo", message: "is required" })
      const enums = await server.post("updateQueue", {
        ...k,
        mergeMethod: "MERGE_COMMIT",
        directMergeMode: "Always",
        optimizationMode: "BISECTION_SKIP_REDUNDANT_TESTS",
        state: "PAUSED",
        requiredStatuses: ["ci/test"],
        unknownField: 1
      })
      expect(enums.status).toBe(200)
      expect(enums.body).toMatchObject({
        mergeMethod: "merge_commit",
        directMergeMode: "always",
        optimizationMode: "bisection_skip_redundant_tests",
        state: "paused",
        requiredStatuses: ["ci/test"]
      })
      const emptyIgnored = await server.post("updateQueue", { ...k, requiredStatuses: [] })
      expect(emptyIgnored.body).toMatchObject({ requiredStatuses: ["ci/test"] })
      const deleted = await server.post("updateQueue", { ...k, deleteRequiredStatuses: true, state: "draining" })
      expect(deleted.body).toMatchObject({ requiredStatuses: [], state: "draining" })
      const badState = await server.post("updateQueue", { ...k, state: "switching_modes" })
      expect(badState.status).toBe(400)
      const prString = await server.post("getSubmittedPullRequest", { ...k, pr: { number: "12" } })
      expect(envelope(prString.body).error.code).toBe("PR_NOT_FOUND")
      const prBad = await server.post("getSubmittedPullRequest", { ...k, pr: { number: "1e3" } })
      expect(prBad.status).toBe(400)
    })

    test("malformed JSON, wrong content type, unknown route, 413", async () => {
      const malformed = await server.post("getQueue", "{not json")
      expect(malformed.status).toBe(400)
      expect(envelope(malformed.body).error.code).toBe("INVALID_REQUEST")
      const form = await server.post("getQueue", "a=b", { "content-type": "application/x-www-form-urlencoded" })
      expect(form.status).toBe(415)
      expect(envelope(form.body).error.code).toBe("UNSUPPORTED_MEDIA_TYPE")
      const unknown = await fetch(`${server.url}/v1/nope`, { method: "POST" })
      expect(unknown.status).toBe(404)
      expect(envelope(await unknown.json()).error.code).toBe("NOT_FOUND")
      const limit = 20 * 1024 * 1024
      const atLimit = `{"x":"${"a".repeat(limit - 8)}"}`
      expect(atLimit.length).toBe(limit)
      const ok = await server.post("getQueue", atLimit)
      expect(ok.status).toBe(400) // parsed: repo is missing
      const over = await server.post("getQueue", `${atLimit} `)
      expect(over.status).toBe(413)
      expect(envelope(over.body).error.code).toBe("PAYLOAD_TOO_LARGE")
      // without a Content-Length: a streamed body is counted as it arrives
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 21; i++) controller.enqueue(new Uint8Array(1024 * 1024).fill(32))
          controller.close()
        }
      })
      const chunked = await fetch(`${server.url}/v1/getQueue`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-token": server.token },
        body: stream
      })
      expect({ status: chunked.status, body: await chunked.text() }).toMatchObject({ status: 413 })
    })

    test("no internals leak on errors", async () => {
      const r = await server.post("getQueue", {
        repo: { host: "x'; drop table queues; --", owner: "a", name: "b" },
        targetBranch: "m"
      })
      expect(r.status).toBe(404)
      const text = JSON.stringify(r.body)
      expect(text).not.toMatch(/select|stack|\.ts:|SqlError/i)
    })

    test("every operation of the OpenAPI document is served; only the listed ones answer 501", async () => {
      const spec = openApiDocument()
      for (const [p, item] of Object.entries(spec.paths)) {
        for (const method of Object.keys(item as object)) {
          if (method !== "get" && method !== "post") continue
          const r = await fetch(`${server.url}${p}`, {
            method: method.toUpperCase(),
            headers: {
              "x-api-token": server.token,
              "content-type": p.endsWith("/upload") ? "multipart/form-data; boundary=x" : "application/json"
            },
            body: method === "post" ? (p.endsWith("/upload") ? "--x--\r\n" : "{}") : undefined
          })
          expect({ path: p, status: r.status }).toEqual({ path: p, status: r.status === 501 ? -1 : r.status })
          // whatever the queues earlier tests left (settings at the contract's bounds included), never a 500
          expect({ path: p, serverError: r.status >= 500 && r.status !== 501 }).toEqual({ path: p, serverError: false })
          expect(r.headers.get("content-type") ?? "").toMatch(/application\/json|text\/plain/)
        }
      }
    })
  })
}
