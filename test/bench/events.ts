/**
 * bench:events — outgoing events.
 * 1. Events per second from the log to a local receiver: N events appended to the log (in the transactions of
 *    batches of 100), delivered by the worker to a receiver on loopback; against a baseline in the same run, the
 *    same bodies POSTed straight to the same receiver with the same concurrency (32).
 * 2. The queue's merged PRs/s (as bench:engine: one queue, concurrency 8, CI answering at once) without a listener,
 *    with one webhook endpoint registered that takes every event, and with one live stream open (its wake-ups: a
 *    NOTIFY per appending transaction with PostgreSQL).
 * 3. An 8 s outage (issue #34): a receiver answering 503 for 8 s while 20 pull requests' events keep coming (one each
 *    per second), then answering again; the time from its recovery until the whole backlog was delivered, and
 *    whether each pull request's events arrived in order (at most BENCH_OUTAGE_WAIT_S, default 120, after it).
 *   bun test/bench/events.ts   (BENCH_EVENTS=5000, BENCH_PRS=300, BENCH_DATABASE_URL default
 *   postgres://postgres@127.0.0.1:5432/test, BENCH_DB=both|postgres|pglite, BENCH_PART=both|log|queue|outage|all)
 */

import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Redacted } from "effect"
import { makeAppConfig } from "../../src/config.ts"
import { EventLog, type NewEvent } from "../../src/kernel/EventLog.ts"
import { type RunningServer, startServer } from "../../src/server.ts"
import { createTestRepo } from "../support/git.ts"
import { freshBenchDatabase, instantCi } from "./engineKit.ts"

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5000)
const PRS = Number(process.env.BENCH_PRS ?? 300)
const PG = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const KINDS = (process.env.BENCH_DB ?? "both") === "both" ? (["postgres", "pglite"] as const) : [process.env.BENCH_DB]
const TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"

/** A receiver that counts and resolves when `target` requests arrived. */
const receiver = () => {
  let count = 0
  let target = Number.POSITIVE_INFINITY
  let done: () => void = () => {}
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      await request.arrayBuffer()
      if (++count >= target) done()
      return new Response("ok")
    }
  })
  return {
    url: `http://127.0.0.1:${server.port}/hook`,
    count: () => count,
    until: (n: number) =>
      new Promise<void>((resolve) => {
        target = n
        done = resolve
        if (count >= n) resolve()
      }),
    stop: () => server.stop(true)
  }
}

const start = async (kind: string, gitRoot: string, name: string) => {
  const db = kind === "postgres" ? await freshBenchDatabase(PG, `gl_bench_events_${name}_${process.pid}`) : undefined
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-events-"))
  const server = await startServer(
    makeAppConfig({
      port: 0,
      host: "127.0.0.1",
      dataDir: kind === "pglite" ? ":memory:" : dataDir,
      gitRoot,
      databaseUrl: db ? Option.some(Redacted.make(db.url)) : Option.none(),
      bootstrapToken: Option.some(Redacted.make(TOKEN)),
      rateLimitPerSecond: 1_000_000,
      gitPollMs: 1000,
      logLevel: "error",
      webhookAllowPrivate: true
    })
  )
  const post = (op: string, body: unknown) =>
    fetch(`${server.url}/v1/${op}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-token": TOKEN },
      body: JSON.stringify(body)
    }).then((r) => r.json())
  return {
    server,
    post,
    close: async () => {
      await server.stop()
      await db?.drop()
      fs.rmSync(dataDir, { recursive: true, force: true })
    }
  }
}

const orgIdOf = (server: RunningServer) =>
  server.run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(sql<{ id: string }>`select id from organizations limit 1`, (rows) => rows[0]?.id ?? "")
    )
  )

const deliveryRate = async (kind: string) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-events-git-"))
  const app = await start(kind, root, "log")
  const r = receiver()
  try {
    await app.post("createWebhookEndpoint", { url: r.url })
    const orgId = await orgIdOf(app.server)
    const body = (i: number) => ({ queue: { concurrency: i }, note: "x".repeat(200) })
    const events = (from: number, n: number): ReadonlyArray<NewEvent> =>
      Array.from({ length: n }, (_, k) => ({
        orgId,
        type: "queue.updated" as const,
        at: Date.now(),
        data: body(from + k),
        repoId: null,
        branch: null,
        orderingKey: `bench:${(from + k) % 100}`
      }))
    const started = performance.now()
    const arrived = r.until(EVENTS)
    for (let i = 0; i < EVENTS; i += 100) {
      await app.server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql.withTransaction(Effect.flatMap(EventLog, (log) => log.append(events(i, Math.min(100, EVENTS - i)))))
        )
      )
    }
    const appended = performance.now()
    await arrived
    const delivered = performance.now()
    // baseline: the same number of similar bodies POSTed straight to the receiver, 32 at a time
    const b = receiver()
    const text = JSON.stringify({ type: "queue.updated", timestamp: new Date().toISOString(), data: body(1) })
    const baseStarted = performance.now()
    let next = 0
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < EVENTS) {
          next++
          await fetch(b.url, { method: "POST", headers: { "content-type": "application/json" }, body: text }).then(
            (x) => x.arrayBuffer()
          )
        }
      })
    )
    const baseSeconds = (performance.now() - baseStarted) / 1000
    await b.stop()
    return {
      kind,
      appendPerSecond: EVENTS / ((appended - started) / 1000),
      deliveredPerSecond: EVENTS / ((delivered - started) / 1000),
      baselinePerSecond: EVENTS / baseSeconds
    }
  } finally {
    await r.stop()
    await app.close()
    fs.rmSync(root, { recursive: true, force: true })
  }
}

/** Opens a live event stream and counts the events it gets, until `stop`. */
const openStream = (url: string) => {
  const controller = new AbortController()
  let events = 0
  const reading = (async () => {
    const response = await fetch(`${url}/v1/events/stream`, {
      headers: { "x-api-token": TOKEN },
      signal: controller.signal
    })
    const reader = response.body?.getReader()
    const decoder = new TextDecoder()
    for (;;) {
      const chunk = await reader?.read()
      if (chunk === undefined || chunk.done) return
      events += (decoder.decode(chunk.value).match(/^data: /gm) ?? []).length
    }
  })().catch(() => undefined)
  return {
    count: () => events,
    stop: async () => {
      controller.abort()
      await reading
    }
  }
}

type Listener = "none" | "endpoint" | "stream"

const mergeRate = async (kind: string, listener: Listener) => {
  const withEndpoint = listener === "endpoint"
  const repo = createTestRepo({ repo: { host: "local", owner: "bench", name: `events-${kind}-${listener}` } })
  const base = repo.branchSha("main") as string
  const lines: Array<string> = []
  for (let n = 1; n <= PRS; n++) {
    const sha = repo.commit(base, { files: { [`f/${n}.txt`]: `${n}\n` }, message: `PR ${n}` })
    lines.push(`create refs/pull/${n}/head ${sha}`)
  }
  Bun.spawnSync(["git", "--git-dir", repo.gitDir, "update-ref", "--stdin"], {
    stdin: new TextEncoder().encode(`${lines.join("\n")}\n`)
  })
  const app = await start(kind, repo.root, listener)
  const r = receiver()
  const stream = listener === "stream" ? openStream(app.server.url) : undefined
  try {
    if (withEndpoint) await app.post("createWebhookEndpoint", { url: r.url })
    const key = { repo: repo.repo, targetBranch: "main" }
    await app.post("createQueue", { ...key, concurrency: 8 })
    await app.post("updateQueue", { ...key, requiredStatuses: ["ci"] })
    const stopCi = instantCi(app.server)
    const started = performance.now()
    for (let n = 1; n <= PRS; n++) await app.post("submitPullRequest", { ...key, pr: { number: n } })
    for (;;) {
      const last = (await app.post("getSubmittedPullRequest", { ...key, pr: { number: PRS } })) as { state?: string }
      if (last.state === "merged") break
      if (last.state === "failed" || last.state === "cancelled") throw new Error(`#${PRS} ${last.state}`)
      await Bun.sleep(100)
    }
    const seconds = (performance.now() - started) / 1000
    await stopCi()
    return { kind, listener, merged: PRS, seconds, received: stream?.count() ?? r.count() }
  } finally {
    await stream?.stop()
    await r.stop()
    await app.close()
    repo.cleanup()
  }
}

const OUTAGE_MS = 8_000
const OUTAGE_KEYS = 20
const OUTAGE_WAIT_S = Number(process.env.BENCH_OUTAGE_WAIT_S ?? 120)

/** The backlog of an 8 s outage: from the receiver's recovery until every message was delivered (s), and its order. */
const outage = async (kind: string) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "gl-bench-events-git-"))
  const app = await start(kind, root, "outage")
  let up = false
  const delivered: Array<{ key: number; n: number; at: number }> = []
  const seen = new Set<string>()
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const body = JSON.parse(await request.text()) as { data: { key: number; n: number } }
      if (!up) return new Response("down", { status: 503 })
      const id = request.headers.get("webhook-id") ?? ""
      if (!seen.has(id)) {
        seen.add(id)
        delivered.push({ key: body.data.key, n: body.data.n, at: performance.now() })
      }
      return new Response("ok")
    }
  })
  try {
    await app.post("createWebhookEndpoint", { url: `http://127.0.0.1:${server.port}/hook` })
    const orgId = await orgIdOf(app.server)
    let n = 0
    const append = () =>
      app.server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql.withTransaction(
            Effect.flatMap(EventLog, (log) =>
              log.append(
                Array.from({ length: OUTAGE_KEYS }, (_, key) => ({
                  orgId,
                  type: "queue.updated" as const,
                  at: Date.now(),
                  data: { key, n: ++n },
                  repoId: null,
                  branch: null,
                  orderingKey: `outage:${key}`
                }))
              )
            )
          )
        )
      )
    for (let second = 0; second < OUTAGE_MS / 1000; second++) {
      await append()
      await Bun.sleep(1000)
    }
    const total = n
    up = true
    const recovered = performance.now()
    const deadline = recovered + OUTAGE_WAIT_S * 1000
    while (delivered.length < total && performance.now() < deadline) await Bun.sleep(50)
    const inOrder = Array.from({ length: OUTAGE_KEYS }, (_, key) => delivered.filter((d) => d.key === key)).every(
      (list) => list.every((d, i) => i === 0 || (list[i - 1] as { n: number }).n < d.n)
    )
    const last = delivered.length === 0 ? recovered : Math.max(...delivered.map((d) => d.at))
    return {
      kind,
      total,
      delivered: delivered.length,
      seconds: delivered.length < total ? Number.POSITIVE_INFINITY : (last - recovered) / 1000,
      inOrder
    }
  } finally {
    server.stop(true)
    await app.close()
    fs.rmSync(root, { recursive: true, force: true })
  }
}

const PART = process.env.BENCH_PART ?? "both"
const outages: Array<Awaited<ReturnType<typeof outage>>> = []
if (PART === "outage" || PART === "all") for (const kind of KINDS) outages.push(await outage(kind as string))
const deliveries: Array<Awaited<ReturnType<typeof deliveryRate>>> = []
if (PART === "both" || PART === "log" || PART === "all") {
  for (const kind of KINDS) deliveries.push(await deliveryRate(kind as string))
}
const merges: Array<Awaited<ReturnType<typeof mergeRate>>> = []
for (const kind of PART === "both" || PART === "queue" || PART === "all" ? KINDS : []) {
  merges.push(await mergeRate(kind as string, "none"))
  merges.push(await mergeRate(kind as string, "endpoint"))
  merges.push(await mergeRate(kind as string, "stream"))
}

const lines = [
  `bench:events — ${os.cpus().length} cores`,
  ...(outages.length === 0
    ? []
    : [
        "",
        `An 8 s outage: ${OUTAGE_KEYS} ordering keys, one event each per second while the receiver answers 503`,
        "",
        "| database | messages | delivered | backlog delivered after the recovery | in order per key |",
        "|---|---:|---:|---:|---|",
        ...outages.map(
          (o) =>
            `| ${o.kind} | ${o.total} | ${o.delivered} | ${Number.isFinite(o.seconds) ? `${o.seconds.toFixed(2)} s` : `not within ${OUTAGE_WAIT_S} s`} | ${o.inOrder ? "yes" : "no"} |`
        )
      ]),
  ...(deliveries.length === 0
    ? []
    : [
        "",
        `Log to receiver: ${EVENTS} events appended in transactions of 100, one endpoint, 100 ordering keys`,
        "",
        "| database | appended/s | delivered events/s | baseline: plain POSTs/s (32 at once) | delivered / baseline |",
        "|---|---:|---:|---:|---:|",
        ...deliveries.map(
          (d) =>
            `| ${d.kind} | ${d.appendPerSecond.toFixed(0)} | ${d.deliveredPerSecond.toFixed(0)} | ${d.baselinePerSecond.toFixed(0)} | ${(d.deliveredPerSecond / d.baselinePerSecond).toFixed(2)} |`
        )
      ]),
  ...(merges.length === 0
    ? []
    : [
        "",
        `Queue throughput: ${PRS} PRs, one queue, concurrency 8, CI answering at once`,
        "",
        "| database | listening | seconds | merged PRs/s | messages received | with / without |",
        "|---|---|---:|---:|---:|---:|",
        ...merges.map((m) => {
          const without = merges.find((x) => x.kind === m.kind && x.listener === "none")
          const ratio = without === undefined ? Number.NaN : without.seconds / m.seconds
          const what = { none: "nothing", endpoint: "one webhook endpoint", stream: "one live stream" }[m.listener]
          return `| ${m.kind} | ${what} | ${m.seconds.toFixed(1)} | ${(m.merged / m.seconds).toFixed(1)} | ${m.received} | ${ratio.toFixed(2)} |`
        })
      ])
]
process.stdout.write(`${lines.join("\n")}\n`)
