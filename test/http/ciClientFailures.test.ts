/**
 * The CI client against servers that fail (issue #38): one that hangs, one that refuses, one that answers 503, one
 * with a certificate nobody signed, and one whose answer is lost. The built single file is run with plain `node`, as
 * a CI job runs it; every wait is a short timeout passed as a flag (`--timeout`, `--connect-timeout`,
 * `--retry-delay`), and nothing asserts how long anything took: only what the client did (exit code, message, the
 * requests the servers saw).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import * as path from "node:path"
import { buildClient } from "../../src/client/build.ts"
import { describeFailure } from "../../src/client/http.ts"
import { freePort } from "../support/ownPostgres.ts"
import { startTestServer, type TestServer, tempDir } from "../support/server.ts"

const node = Bun.which("node")
if (node === null) throw new Error("node is needed on PATH for the CI client test")

const JUNIT = `<?xml version="1.0"?><testsuite name="s"><testcase classname="c" name="adds"/></testsuite>`
/** Short waits for every run: a few hundredths of a second between attempts, a fraction of a second per answer. */
const FAST = ["--retry-delay", "0.01"]

let job: string
let client: string
let server: TestServer
const closers: Array<() => void> = []

beforeAll(async () => {
  job = tempDir("greenline-client-failures-")
  client = path.join(job, "greenline.mjs")
  fs.writeFileSync(client, await buildClient())
  fs.mkdirSync(path.join(job, "reports"))
  fs.writeFileSync(path.join(job, "reports", "TEST-a.xml"), JUNIT)
  server = await startTestServer({ db: "pglite" })
}, 120_000)

afterAll(async () => {
  for (const close of closers) close()
  await server?.close()
})

const run = async (args: ReadonlyArray<string>, url: string, env: Record<string, string> = {}) => {
  const r = Bun.spawn([node, client, ...args], {
    cwd: job,
    env: {
      PATH: path.dirname(node),
      HOME: job,
      GREENLINE_URL: url,
      GREENLINE_TOKEN: server.token,
      GREENLINE_ORG: "acme-org",
      GREENLINE_REPO: "local/acme/failures",
      GITHUB_SHA: "0123456789abcdef0123456789abcdef01234567",
      GITHUB_REF_NAME: "feature",
      ...env
    },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [out, err, code] = await Promise.all([new Response(r.stdout).text(), new Response(r.stderr).text(), r.exited])
  return { code, out, err }
}

/** A TCP server that accepts connections and never says anything; counts the connections. */
const silentServer = async () => {
  const sockets: Array<net.Socket> = []
  const srv = net.createServer((socket) => {
    sockets.push(socket)
    socket.on("error", () => undefined)
  })
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve))
  closers.push(() => {
    for (const s of sockets) s.destroy()
    srv.close()
  })
  return { port: (srv.address() as net.AddressInfo).port, connections: () => sockets.length }
}

/** An HTTP server answering each request with `answer(n, ...)` (n counts from 1). */
const httpServer = async (
  answer: (n: number, req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => Promise<void> | void
) => {
  let n = 0
  const srv = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      n++
      void Promise.resolve(answer(n, req, Buffer.concat(chunks), res)).then(undefined, () => res.destroy())
    })
  })
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve))
  closers.push(() => srv.close())
  return { url: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`, requests: () => n }
}

const unavailable = (res: http.ServerResponse) => {
  res.writeHead(503, { "content-type": "application/json", "retry-after": "0" })
  res.end(JSON.stringify({ error: { code: "SERVICE_UNAVAILABLE", message: "the database cannot be reached" } }))
}

describe("the CI client against servers that fail", () => {
  test("a server that accepts and never answers: the request times out, idempotent commands are tried again", async () => {
    const silent = await silentServer()
    const url = `http://127.0.0.1:${silent.port}`
    const status = await run(["queue", "status", "--timeout", "0.3", "--retries", "2", ...FAST], url)
    expect(status.code).toBe(3)
    expect(status.err).toContain(`no answer from 127.0.0.1:${silent.port} within 0.3 s (request timeout)`)
    expect(status.err).toContain("(after 3 attempts)")
    expect(silent.connections()).toBeGreaterThanOrEqual(3)
    // a cancel that may have arrived is not sent again: the second one would answer 409
    const cancel = await run(["cancel", "--pr", "3", "--timeout", "0.3", "--retries", "2", ...FAST], url)
    expect(cancel.code).toBe(3)
    expect(cancel.err).toContain("request timeout")
    expect(cancel.err).not.toContain("trying again")
    // and the test command's own exit code stands (fail safe), with a warning that names the cause
    const tested = await run(
      [
        "test",
        "--junit",
        "reports/*.xml",
        "--timeout",
        "0.3",
        "--retries",
        "0",
        "--",
        "sh",
        "-c",
        "touch reports/TEST-a.xml; exit 5"
      ],
      url
    )
    expect(tested.code).toBe(5)
    expect(tested.err).toContain("request timeout")
    expect(tested.err).toContain("the test command's exit code (5) stands")
  })

  test("a TLS server that never finishes its handshake: the connect timeout", async () => {
    const silent = await silentServer()
    const r = await run(
      ["queue", "status", "--connect-timeout", "0.3", "--retries", "1", ...FAST],
      `https://127.0.0.1:${silent.port}`
    )
    expect(r.code).toBe(3)
    expect(r.err).toContain(`no connection to 127.0.0.1:${silent.port} within 0.3 s (connect timeout, TLS included)`)
  })

  test("a port nobody listens on: refused, tried again (nothing was sent), then exit 3", async () => {
    const port = await freePort()
    for (const command of [
      ["queue", "status"],
      ["cancel", "--pr", "3"],
      ["upload", "reports/*.xml"]
    ]) {
      const r = await run([...command, "--retries", "2", ...FAST], `http://127.0.0.1:${port}`)
      expect({ command, code: r.code }).toEqual({ command, code: 3 })
      expect(r.err).toContain(`the connection to 127.0.0.1:${port} was refused`)
      expect(r.err).toContain("(after 3 attempts)")
    }
  })

  test("a server that answers 503: tried again, then exit 4 with the envelope's code and message; one 503 is ridden out", async () => {
    const down = await httpServer((_n, _req, _body, res) => unavailable(res))
    const r = await run(["queue", "status", "--retries", "2", ...FAST], down.url)
    expect(r.code).toBe(4)
    expect(r.err).toContain(
      "the server answered 503 SERVICE_UNAVAILABLE: the database cannot be reached (after 3 attempts)"
    )
    expect(down.requests()).toBe(3)
    // a cancel that met a 503 is not sent again (a 5xx may have done something)
    const cancel = await run(["cancel", "--pr", "3", "--retries", "2", ...FAST], down.url)
    expect(cancel.code).toBe(4)
    expect(down.requests()).toBe(4)
    // once it is back, the next attempt is answered
    const flaky = await httpServer((n, _req, _body, res) => {
      if (n === 1) return unavailable(res)
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ state: "running", mode: "single", concurrency: 1, enqueuedPullRequests: [] }))
    })
    const ok = await run(["queue", "status", ...FAST], flaky.url)
    expect(ok.code).toBe(0)
    expect(ok.err).toContain("trying again")
    expect(ok.out).toContain("running, single mode, concurrency 1, 0 pull requests")
    expect(flaky.requests()).toBe(2)
  })

  test("a certificate nobody signed: a TLS error that says so, not tried again", async () => {
    const dir = tempDir("greenline-tls-")
    const key = path.join(dir, "key.pem")
    const cert = path.join(dir, "cert.pem")
    const made = Bun.spawnSync(
      ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"].concat([
        "-keyout",
        key,
        "-out",
        cert,
        "-subj",
        "/CN=localhost",
        "-days",
        "1"
      ]),
      { stdout: "ignore", stderr: "pipe" }
    )
    expect(made.exitCode).toBe(0)
    let handshakes = 0
    const srv = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (_, res) =>
      res.end("{}")
    )
    srv.on("tlsClientError", () => handshakes++)
    await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve))
    closers.push(() => srv.close())
    const port = (srv.address() as net.AddressInfo).port
    const r = await run(["queue", "status", "--retries", "2", ...FAST], `https://127.0.0.1:${port}`)
    expect(r.code).toBe(3)
    expect(r.err).toContain(`the TLS connection to 127.0.0.1:${port} failed`)
    expect(r.err).toMatch(/self[- ]signed/i)
    expect(r.err).not.toContain("trying again")
  })

  test("an upload whose answer is lost is sent again with the same idempotency key, and stored once", async () => {
    // a proxy in front of the real server: it forwards every upload, and drops the first answer on the floor
    const keys: Array<string> = []
    const summaries: Array<{ upload_id: string }> = []
    const proxy = await httpServer(async (n, req, body, res) => {
      keys.push(String(req.headers["idempotency-key"]))
      const answer = await fetch(`${server.url}${req.url}`, {
        method: req.method ?? "POST",
        headers: Object.fromEntries(
          Object.entries(req.headers).flatMap(([k, v]) =>
            typeof v === "string" && k !== "host" && k !== "content-length" ? [[k, v]] : []
          )
        ),
        body
      })
      const text = await answer.text()
      if (answer.status === 200) summaries.push(JSON.parse(text) as { upload_id: string })
      if (n === 1) return void res.socket?.destroy()
      res.writeHead(answer.status, { "content-type": "application/json" })
      res.end(text)
    })
    const r = await run(["upload", "reports/*.xml", "--retries", "2", ...FAST], proxy.url)
    expect(r.err).toContain("trying again")
    expect(r.code).toBe(0)
    expect(r.out).toContain("1 tests, 1 passed")
    expect(keys.length).toBe(2)
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/)
    expect(keys[1]).toBe(keys[0]!)
    // the server answered the second with the first one's summary: one upload stored
    expect(summaries.length).toBe(2)
    expect(summaries[1]!.upload_id).toBe(summaries[0]!.upload_id)
  })

  test("the server honours an upload's Idempotency-Key: the same upload once, another upload under it refused", async () => {
    const upload = async (key: string | undefined, name: string) => {
      const form = new FormData()
      form.append(
        "metadata",
        JSON.stringify({
          repo: { host: "local", owner: "acme", name: "keys" },
          org_url_slug: "acme-org",
          sha: "a".repeat(40),
          branch: "main"
        })
      )
      form.append("junit", new File([JUNIT.replace("adds", name)], "r.xml"))
      const response = await fetch(`${server.url}/v1/flaky-tests/upload`, {
        method: "POST",
        headers: { "x-api-token": server.token, ...(key === undefined ? {} : { "idempotency-key": key }) },
        body: form
      })
      return {
        status: response.status,
        body: (await response.json()) as { upload_id?: string; error?: { code: string } }
      }
    }
    const first = await upload("job-42-attempt", "adds")
    const again = await upload("job-42-attempt", "adds")
    expect([first.status, again.status]).toEqual([200, 200])
    expect(again.body.upload_id).toBe(first.body.upload_id!)
    const other = await upload("job-42-attempt", "subtracts")
    expect([other.status, other.body.error?.code]).toEqual([400, "INVALID_REQUEST"])
    const bad = await upload("not a key", "adds")
    expect([bad.status, bad.body.error?.code]).toEqual([400, "INVALID_REQUEST"])
    // without a key every upload is stored
    const plain1 = await upload(undefined, "adds")
    const plain2 = await upload(undefined, "adds")
    expect(plain1.body.upload_id).not.toBe(plain2.body.upload_id!)
  })

  test("failures are named by their cause: DNS, refused, TLS, timeout", () => {
    const where = "ci.example.invalid:443"
    expect(describeFailure({ code: "ENOTFOUND", message: "getaddrinfo ENOTFOUND" }, where, "connect")).toEqual({
      kind: "dns",
      message: "cannot resolve the server's name (ci.example.invalid:443): DNS says ENOTFOUND"
    })
    expect(describeFailure({ code: "EAI_AGAIN" }, where, "connect").kind).toBe("dns")
    expect(describeFailure({ code: "ECONNREFUSED" }, where, "connect").kind).toBe("refused")
    expect(
      describeFailure({ code: "DEPTH_ZERO_SELF_SIGNED_CERT", message: "self-signed certificate" }, where, "connect")
        .kind
    ).toBe("tls")
    expect(
      describeFailure({ code: "ERR_TLS_CERT_ALTNAME_INVALID", message: "Hostname/IP does not match" }, where, "connect")
        .kind
    ).toBe("tls")
    expect(describeFailure({ code: "ETIMEDOUT" }, where, "connect").kind).toBe("connect-timeout")
    expect(describeFailure({ code: "ETIMEDOUT" }, where, "request").kind).toBe("timeout")
    expect(describeFailure({ code: "ECONNRESET" }, where, "request").kind).toBe("reset")
    // fetch's wrapper: the cause carries the code
    expect(describeFailure({ message: "fetch failed", cause: { code: "ECONNREFUSED" } }, where, "request").kind).toBe(
      "refused"
    )
  })
})
