import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import YAML from "yaml"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

/**
 * The monitoring kit and the container files (issue 19): the alert rules pass `promtool check rules` and their unit
 * tests, the dashboard's queries are valid PromQL over metrics the server exposes, the memory gauges and route
 * labels are consistent. The container files are checked in container.test.ts.
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const DOCKER = path.join(ROOT, "docker")
const promtool = process.env.PROMTOOL ?? Bun.which("promtool")
const withPromtool = test.if(promtool !== null || process.env.CI === "true")

/** Metric families that other parts of the server register (queue runners' errors, outgoing webhooks). */
const FROM_OTHER_FEATURES = [
  "greenline_queue_runner_error",
  "greenline_queue_runner_failures",
  "greenline_webhook_oldest_undelivered_seconds",
  "greenline_webhook_retry_queue_depth",
  "greenline_webhook_deliveries_total"
]

const dashboard = JSON.parse(fs.readFileSync(path.join(DOCKER, "grafana", "greenline.json"), "utf8")) as {
  panels: ReadonlyArray<{ title: string; targets?: ReadonlyArray<{ expr: string }> }>
}
const dashboardExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))
const rules = YAML.parse(fs.readFileSync(path.join(DOCKER, "prometheus", "rules.yml"), "utf8")) as {
  groups: ReadonlyArray<{ rules: ReadonlyArray<{ alert: string; expr: string; for?: string }> }>
}
const ruleExprs = rules.groups.flatMap((g) => g.rules.map((r) => r.expr))

/** The metric names a PromQL expression reads (identifiers followed by `{`, or by a space/`)` for bare names). */
const metricNames = (expr: string) =>
  [...expr.matchAll(/\b((?:mq|greenline)_[a-z0-9_]+|up)\b/g)].map((m) =>
    (m[1] ?? "").replace(/_(bucket|sum|count)$/, "")
  )

const promtoolRun = (args: ReadonlyArray<string>, cwd: string) => {
  const r = Bun.spawnSync([promtool ?? "promtool", ...args], { cwd, stdout: "pipe", stderr: "pipe" })
  return { code: r.exitCode, out: `${r.stdout.toString()}${r.stderr.toString()}` }
}

describe("alert rules", () => {
  withPromtool("pass promtool check rules and their unit tests", () => {
    expect(promtool).not.toBeNull()
    const check = promtoolRun(["check", "rules", "rules.yml"], path.join(DOCKER, "prometheus"))
    expect(check.out).toContain("SUCCESS")
    expect(check.code).toBe(0)
    const unit = promtoolRun(["test", "rules", "rules.test.yml"], path.join(DOCKER, "prometheus"))
    expect(unit.out).toContain("SUCCESS")
    expect(unit.code).toBe(0)
  })

  test("every alert waits for its condition to last, and the rules cover what issue 19 asks", () => {
    const alerts = rules.groups.flatMap((g) => g.rules)
    for (const rule of alerts) expect(rule.for).toMatch(/^\d+m$/)
    const all = ruleExprs.join("\n")
    for (const name of [
      "mq_head_entry_age_seconds",
      "mq_testing_slots_capacity",
      "greenline_queue_runner_failures",
      "greenline_webhook_oldest_undelivered_seconds",
      "mq_pr_conclusions_1h_total"
    ]) {
      expect(all).toContain(name)
    }
    // the one-hour snapshots are gauges: never rate() or increase() over them
    expect(all).not.toMatch(/(rate|increase)\(mq_[a-z_]*_1h/)
  })

  withPromtool("the dashboard's queries are valid PromQL", () => {
    const dir = tempDir("greenline-dashboard-")
    const asRules = {
      groups: [
        {
          name: "dashboard",
          rules: dashboardExprs.map((expr, i) => ({
            record: `dashboard:query_${i}`,
            expr: expr.replace(/\$__rate_interval/g, "5m").replace(/\$[a-z]+/g, ".*")
          }))
        }
      ]
    }
    fs.writeFileSync(path.join(dir, "dashboard-rules.yml"), YAML.stringify(asRules))
    const check = promtoolRun(["check", "rules", "dashboard-rules.yml"], dir)
    fs.rmSync(dir, { recursive: true, force: true })
    expect(check.out).toContain("SUCCESS")
    expect(check.code).toBe(0)
  })
})

describe("metrics the kit reads", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ db: "pglite" })
  })
  afterAll(async () => {
    await server?.close()
  })

  test("exist, with consistent memory gauges and /v1 route labels", async () => {
    const repo = { host: "local", owner: "acme", name: "kit" }
    expect((await server.post("createQueue", { repo, targetBranch: "main", concurrency: 3 })).status).toBe(200)
    expect((await fetch(`${server.url}/v1/openapi.json`)).status).toBe(200)
    const queues = await (
      await fetch(`${server.url}/v1/getMergeQueueMetrics?repo=acme/kit&repoHost=local`, {
        headers: { "x-api-token": server.token }
      })
    ).text()
    expect(queues).toContain('mq_testing_slots_capacity{repo="acme/kit",branch="main",queue_type="main"} 3')
    expect(queues).toContain('mq_head_entry_age_seconds{repo="acme/kit",branch="main",queue_type="main"} 0')
    const own = await (await fetch(`${server.url}/metrics`)).text()
    const exposed = new Set(
      [...`${queues}\n${own}`.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1] ?? "").concat(["up"], FROM_OTHER_FEATURES)
    )
    const missing = [...new Set([...dashboardExprs, ...ruleExprs].flatMap(metricNames))].filter((n) => !exposed.has(n))
    expect(missing).toEqual([])

    const memory = (kind: string) =>
      Number(new RegExp(`^greenline_process_memory_bytes\\{kind="${kind}"\\} (\\S+)$`, "m").exec(own)?.[1])
    expect(memory("heap_used")).toBeGreaterThan(0)
    expect(memory("heap_used")).toBeLessThanOrEqual(memory("heap_total"))

    const routes = [...own.matchAll(/^greenline_http_requests_total\{route="([^"]+)"/gm)].map((m) => m[1] ?? "")
    expect(routes).toContain("/v1/createQueue")
    expect(routes).toContain("/v1/openapi.json")
    expect(routes).toContain("/v1/getMergeQueueMetrics")
    for (const route of routes) expect(route === "other" || route.startsWith("/")).toBe(true)
    expect(routes).not.toContain("/createQueue")
  })
})
