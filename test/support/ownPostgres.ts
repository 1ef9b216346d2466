/**
 * A PostgreSQL server of the test's own, for what must not happen to the shared one (TEST_DATABASE_URL): stopping it
 * under load and starting it again. A cluster made with the installed binaries (`initdb`, `pg_ctl` under
 * /usr/lib/postgresql/<version>/bin) in a temporary folder, listening on a free loopback port only (and a socket in
 * that folder). PostgreSQL refuses to run as root: as root, its commands run as the `postgres` user (`runuser`).
 *
 * ```ts
 * const pg = ownPostgres()            // undefined when no PostgreSQL is installed
 * await pg.start()                    // initdb on the first start
 * const url = await pg.createDatabase("greenline")
 * pg.stop(); await pg.start()         // the same cluster, the same port
 * pg.destroy()                        // stops it and removes the folder (also done when the process exits)
 * ```
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { SQL } from "bun"
import { tempDir } from "./tmp.ts"

/** The newest installed PostgreSQL's bin folder, or undefined. */
export const postgresBin = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  let versions: Array<string> = []
  try {
    versions = fs.readdirSync(root).filter((v) => fs.existsSync(path.join(root, v, "bin", "pg_ctl")))
  } catch {
    return undefined
  }
  versions.sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : path.join(root, versions[0], "bin")
}

/** A port nobody listens on right now, on 127.0.0.1. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

export interface OwnPostgres {
  readonly port: number
  /** `postgres://postgres@127.0.0.1:<port>/<database>` */
  readonly url: (database: string) => string
  /** Starts the server (making the cluster on the first start) and waits until it accepts connections. */
  readonly start: () => Promise<void>
  /** Stops it (`pg_ctl stop -m fast`: connections are ended, as in an outage) and waits until it is down. */
  readonly stop: () => void
  readonly createDatabase: (name: string) => Promise<string>
  /** Stops it and removes its folder. */
  readonly destroy: () => void
}

const asRoot = typeof process.getuid === "function" && process.getuid() === 0

/** The test's own PostgreSQL, not started yet; undefined when no PostgreSQL binaries are installed. */
export const ownPostgres = async (): Promise<OwnPostgres | undefined> => {
  const bin = postgresBin()
  if (bin === undefined) return undefined
  const dir = tempDir("greenline-own-pg-")
  const data = path.join(dir, "data")
  const port = await freePort()
  if (asRoot) {
    const id = (flag: string) => Number(Bun.spawnSync(["id", flag, "postgres"]).stdout.toString().trim())
    fs.chownSync(dir, id("-u"), id("-g"))
  }
  const run = (args: ReadonlyArray<string>) => {
    const command = asRoot ? ["runuser", "-u", "postgres", "--", ...args] : [...args]
    const r = Bun.spawnSync(command, { cwd: dir, stdout: "pipe", stderr: "pipe" })
    if (r.exitCode !== 0) {
      const log = fs.existsSync(path.join(dir, "log"))
        ? fs.readFileSync(path.join(dir, "log"), "utf8").slice(-2000)
        : ""
      throw new Error(
        `${args.join(" ")} exited with ${r.exitCode}: ${r.stderr.toString()}${r.stdout.toString()}\n${log}`
      )
    }
  }
  let made = false
  let running = false
  const url = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`
  const stopNow = (mode: "fast" | "immediate") => {
    if (!running) return
    run([path.join(bin, "pg_ctl"), "-D", data, "-m", mode, "-w", "stop"])
    running = false
  }
  const cleanup = () => {
    try {
      stopNow("immediate")
    } catch {}
  }
  // before the temporary folders are removed (tmp.ts), or the server would outlive them
  process.prependOnceListener("exit", cleanup)
  return {
    port,
    url,
    start: async () => {
      if (!made) {
        run([
          path.join(bin, "initdb"),
          "-D",
          data,
          "-U",
          "postgres",
          "-A",
          "trust",
          "-E",
          "UTF8",
          "--no-sync",
          "--no-instructions"
        ])
        made = true
      }
      const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=50`
      run([path.join(bin, "pg_ctl"), "-D", data, "-l", path.join(dir, "log"), "-o", options, "-w", "-t", "60", "start"])
      running = true
    },
    stop: () => stopNow("fast"),
    createDatabase: async (name) => {
      const admin = new SQL(url("postgres"))
      try {
        await admin.unsafe(`create database ${name}`)
      } finally {
        await admin.close()
      }
      return url(name)
    },
    destroy: () => {
      cleanup()
      process.off("exit", cleanup)
    }
  }
}
