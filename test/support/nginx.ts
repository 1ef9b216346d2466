import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir } from "./tmp.ts"

/**
 * A TLS-terminating reverse proxy for the tests: Debian's nginx (/usr/sbin/nginx, or NGINX_PATH) with a config and
 * prefix of its own in a temporary directory, a self-signed certificate made there by `openssl`, on a loopback port,
 * in front of a server on `upstreamPort`. It sets X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-For as a
 * production proxy would. One process (no daemon, no master): it runs as the user who started it.
 */

export const NGINX = process.env.NGINX_PATH ?? "/usr/sbin/nginx"

export interface TlsProxy {
  /** `https://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  /** The self-signed certificate (PEM). */
  readonly certificate: string
  readonly stop: () => Promise<void>
}

const run = (cmd: Array<string>, cwd: string) => {
  const result = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" })
  if (result.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed: ${result.stderr.toString()}`)
}

const freePort = () => {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

/** A port for the proxy, chosen before it starts (the server behind it must know its PUBLIC_URL first). */
export const reserveProxyPort = freePort

export const startTlsProxy = async (upstreamPort: number, port = freePort()): Promise<TlsProxy> => {
  const prefix = tempDir("greenline-nginx-")
  for (const dir of ["logs", "tmp"]) fs.mkdirSync(path.join(prefix, dir))
  run(
    [
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      "key.pem",
      "-out",
      "cert.pem",
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost"
    ],
    prefix
  )
  const conf = `daemon off;
master_process off;
worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${prefix}/tmp/body;
  proxy_temp_path ${prefix}/tmp/proxy;
  fastcgi_temp_path ${prefix}/tmp/fastcgi;
  uwsgi_temp_path ${prefix}/tmp/uwsgi;
  scgi_temp_path ${prefix}/tmp/scgi;
  client_max_body_size 25m;
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate ${prefix}/cert.pem;
    ssl_certificate_key ${prefix}/key.pem;
    location / {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header Connection "";
      # the live event stream
      proxy_buffering off;
      proxy_read_timeout 300s;
    }
  }
}
`
  fs.writeFileSync(path.join(prefix, "nginx.conf"), conf)
  const child = Bun.spawn([NGINX, "-p", prefix, "-c", path.join(prefix, "nginx.conf"), "-e", "stderr"], {
    stdout: "ignore",
    stderr: "pipe"
  })
  const url = `https://127.0.0.1:${port}`
  // ready when it answers over TLS (the server behind it may answer anything)
  const deadline = performance.now() + 10_000
  for (;;) {
    try {
      await fetch(`${url}/healthz`, { tls: { rejectUnauthorized: false } } as RequestInit)
      break
    } catch (error) {
      if (child.exitCode !== null || performance.now() > deadline) {
        const stderr = await new Response(child.stderr).text().catch(() => "")
        const log = fs.readFileSync(path.join(prefix, "logs", "error.log"), "utf8")
        child.kill()
        throw new Error(`nginx did not start: ${String(error)}\n${stderr}\n${log}`)
      }
      await Bun.sleep(50)
    }
  }
  return {
    url,
    port,
    certificate: fs.readFileSync(path.join(prefix, "cert.pem"), "utf8"),
    stop: async () => {
      child.kill("SIGQUIT")
      const ended = await Promise.race([child.exited.then(() => true), Bun.sleep(5_000).then(() => false)])
      if (!ended) child.kill("SIGKILL")
      fs.rmSync(prefix, { recursive: true, force: true })
    }
  }
}
