#!/usr/bin/env node
// Runs Bun with the given arguments, installing the pinned Bun (from the npm registry's `bun` package) and the
// project's dependencies first when they are missing. This is what lets `npm start` and `npm test` work on a
// machine that has only Node.js, npm and git.
//
// `node scripts/bun.mjs --path` only installs, then prints the path of the Bun to run: `npm start` and `npm run cli`
// then `exec` it from npm's shell, so that Bun is npm's child itself, with no wrapper in between to orphan it.
import { spawn, spawnSync } from "node:child_process"
import { existsSync, readFileSync, statSync } from "node:fs"
import { constants } from "node:os"
import { delimiter, dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))
const version = pkg.packageManager.replace(/^bun@/, "")
const tools = join(root, ".tools")
const localBun = join(tools, "node_modules", ".bin", process.platform === "win32" ? "bun.exe" : "bun")

const pathOnly = process.argv[2] === "--path"
// with --path, stdout carries only the path: what the installs print goes to stderr
const run = (cmd, args, options = {}) =>
  spawnSync(cmd, args, { stdio: pathOnly ? ["inherit", 2, "inherit"] : "inherit", cwd: root, ...options })
/** The `bun` that PATH finds, as a path (execve does not search PATH). */
const whichBun = () => {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const candidate = join(dir || ".", "bun")
    try {
      if (statSync(candidate).isFile()) return candidate
    } catch {}
  }
  return null
}
const versionOf = (bin) => {
  const r = spawnSync(bin, ["--version"], { encoding: "utf8" })
  return r.status === 0 ? r.stdout.trim() : null
}

const bun = versionOf("bun") === version ? "bun" : localBun
if (bun === localBun && versionOf(localBun) !== version) {
  process.stderr.write(`installing bun ${version} into .tools/ ...\n`)
  const r = run("npm", ["install", "--prefix", tools, "--no-audit", "--no-fund", "--loglevel=error", `bun@${version}`])
  if (r.status !== 0 || versionOf(localBun) !== version) {
    process.stderr.write("could not install bun from the npm registry\n")
    process.exit(1)
  }
}

const lock = join(root, "bun.lock")
const marker = join(root, "node_modules", ".bun-tag")
const stale = !existsSync(marker) || statSync(lock).mtimeMs > statSync(marker).mtimeMs
if (stale) {
  const r = run(bun, ["install", "--frozen-lockfile"])
  if (r.status !== 0) process.exit(r.status ?? 1)
  run(process.execPath, ["-e", `require("fs").writeFileSync(${JSON.stringify(marker)}, "")`])
}

if (pathOnly) {
  process.stdout.write(`${bun}\n`)
  process.exit(0)
}

// the pinned Bun first on PATH, so that what it runs can start `bun` again (the CLI, a server in its own process)
const binDir = bun === "bun" ? null : dirname(localBun)
const path = binDir === null ? {} : { PATH: `${binDir}${delimiter}${process.env.PATH ?? ""}` }
const args = process.argv.slice(2)

// Where Node.js can (22.15 and later), this process becomes Bun (execve): nothing is left between Bun and whoever
// started this, and a server follows that parent (GREENLINE_PARENT_PID, src/serve.ts): it stops when the parent is
// gone, even one killed with SIGKILL, which passes nothing on.
if (typeof process.execve === "function") {
  const executable = bun === "bun" ? whichBun() : bun
  if (executable !== null) {
    process.execve(executable, [executable, ...args], {
      ...process.env,
      ...path,
      GREENLINE_PARENT_PID: String(process.ppid)
    })
  }
}

// Otherwise Bun runs as a child that this process waits for: SIGINT, SIGTERM and SIGHUP are passed on to it, and
// this process ends only once Bun has ended (a server has closed its database by then), with Bun's exit code; when
// Bun was ended by a signal, this process ends by the same signal, so that npm (or a shell) sees what happened. A
// server follows this process (GREENLINE_PARENT_PID): killed with SIGKILL, this process cannot pass anything on,
// and the server stops by itself. When this process's own parent goes, it stops Bun as on SIGTERM.
const env = { ...process.env, ...path, GREENLINE_PARENT_PID: String(process.pid) }
const child = spawn(bun, args, { stdio: "inherit", cwd: process.cwd(), env })
const parent = process.ppid
const watch = setInterval(() => {
  if (process.ppid === parent) return
  clearInterval(watch)
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
}, 200)
watch.unref()
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"]
for (const signal of forwarded) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  })
}
child.on("error", (error) => {
  process.stderr.write(`could not start bun: ${error.message}\n`)
  process.exit(1)
})
child.on("exit", (code, signal) => {
  if (signal === null) process.exit(code ?? 1)
  for (const s of forwarded) process.removeAllListeners(s)
  process.kill(process.pid, signal)
  // a signal whose default action does not end the process: the conventional code instead
  process.exit(128 + (constants.signals[signal] ?? 0))
})
