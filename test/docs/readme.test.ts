import { afterAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { databases, freshPostgres, tempDir } from "../support/server.ts"

/**
 * The README is executable (issues 19 and 38): its walkthrough block, exactly as printed, runs in a temporary
 * directory against a fresh server, and both pull requests merge; then it runs again in the same directory (the same
 * data, the same repository), and two more pull requests merge, with no conflict and no wait. `npm start` there is
 * the package's start script run from this checkout (the temporary directory has no package.json), on a free port.
 */

const ROOT = path.join(import.meta.dir, "..", "..")

export const walkthroughBlock = (readme: string): string => {
  const section = readme.indexOf("## Walkthrough")
  const start = readme.indexOf("```sh\n", section)
  const end = readme.indexOf("\n```\n", start)
  if (section < 0 || start < 0 || end < 0) throw new Error("README.md has no walkthrough block")
  return readme.slice(start + "```sh\n".length, end + 1)
}

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

for (const db of databases) {
  describe(`README walkthrough (${db})`, () => {
    const cleanups: Array<() => Promise<void> | void> = []
    afterAll(async () => {
      for (const c of cleanups.reverse()) await c()
    })

    test("runs as printed and merges both pull requests, and runs again in the same checkout", async () => {
      const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
        scripts: Record<string, string>
      }
      const start = pkg.scripts.start ?? ""
      expect(start).toBe(
        'bun=$(node scripts/bun.mjs --path) && GREENLINE_PARENT_PID=$PPID exec "$bun" --max-http-header-size=65536 src/main.ts'
      )
      const script = walkthroughBlock(fs.readFileSync(path.join(ROOT, "README.md"), "utf8"))
      expect(script).toContain("/readyz")
      // the helper shows an error's body (curl -f would hide it)
      expect(script).toMatch(/^api\(\) \{ curl -sS --fail-with-body /m)
      expect(script).toContain("wait $SERVER")

      const dir = tempDir("greenline-readme-")
      const bin = tempDir("greenline-readme-bin-")
      cleanups.push(() => {
        fs.rmSync(dir, { recursive: true, force: true })
        fs.rmSync(bin, { recursive: true, force: true })
      })
      // `npm start`: the start script as npm runs it, with this checkout's paths (the directory has no package.json)
      const here = start.replaceAll("scripts/", `${ROOT}/scripts/`).replaceAll("src/", `${ROOT}/src/`)
      fs.writeFileSync(
        path.join(bin, "npm"),
        `#!/bin/sh\n[ "$1" = start ] || { echo "npm $*: only start is provided here" >&2; exit 1; }\n${here}\n`,
        { mode: 0o755 }
      )
      const env: Record<string, string> = {
        ...(process.env as Record<string, string>),
        PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}`,
        PORT: String(freePort()),
        LOG_LEVEL: "error",
        BOOTSTRAP_TOKEN: "",
        DATABASE_URL: ""
      }
      if (db === "postgres") {
        const pg = await freshPostgres({ empty: true })
        cleanups.push(pg.drop)
        env.DATABASE_URL = pg.url
      }
      const runOnce = async (round: number) => {
        // its own process group, so that whatever the walkthrough leaves running is stopped with it
        const child = Bun.spawn(["bash", "-euo", "pipefail", "-c", script], {
          cwd: dir,
          env,
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe",
          detached: true
        })
        cleanups.push(() => {
          try {
            process.kill(-child.pid, "SIGKILL")
          } catch {}
        })
        const timer = setTimeout(() => {
          try {
            process.kill(-child.pid, "SIGKILL")
          } catch {}
        }, 150_000)
        // bash's exit, then the group's: a server the walkthrough failed to stop would hold the pipes open
        const code = await child.exited
        try {
          process.kill(-child.pid, "SIGKILL")
        } catch {}
        const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()])
        clearTimeout(timer)
        if (code !== 0)
          console.error(`walkthrough (run ${round}) exited ${code}\n--- stdout\n${out}\n--- stderr\n${err}`)
        expect(code).toBe(0)
        expect(err).not.toContain("curl:")
        expect(out).not.toContain('"state":"failed"')
        return out
      }
      const subjects = () =>
        Bun.spawnSync(["git", "--git-dir", path.join(dir, "data/git/local/acme/app.git"), "log", "--format=%s", "main"])
          .stdout.toString()
          .trim()
          .split("\n")

      const first = await runOnce(1)
      expect(subjects()).toContain("Add one (#1)")
      expect(subjects()).toContain("Add two (#2)")
      expect(first).toContain('"state":"merged"')

      // again, in the same checkout: two more pull requests, on top of what the first run merged
      const second = await runOnce(2)
      expect(subjects()).toContain("Add one (#3)")
      expect(subjects()).toContain("Add two (#4)")
      expect(second.match(/"state":"merged"/g)?.length).toBeGreaterThanOrEqual(2)
    }, 320_000)
  })
}

test("every npm script the README names exists in package.json", () => {
  const readme = fs.readFileSync(path.join(ROOT, "README.md"), "utf8")
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
    scripts: Record<string, string>
  }
  const named = [...readme.matchAll(/npm run ([\w:-]+)/g)].map((m) => m[1] as string)
  expect(named.length).toBeGreaterThan(5)
  expect(named.filter((name) => pkg.scripts[name] === undefined)).toEqual([])
})
