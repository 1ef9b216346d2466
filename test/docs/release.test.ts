import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { VERSION } from "../../src/kernel/version.ts"
import { startTestServer, type TestServer } from "../support/server.ts"

/**
 * Releases (issue 38): one semver version, in package.json, at the top of CHANGELOG.md, in `/healthz`, in
 * `greenline_build_info` and in the dashboard's pages; a LICENSE with the Apache License 2.0's full text.
 */

const ROOT = path.join(import.meta.dir, "..", "..")
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), "utf8")
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/

test("package.json has a semver version, the newest release of CHANGELOG.md", () => {
  const pkg = JSON.parse(read("package.json")) as { version: string; license: string }
  expect(pkg.version).toMatch(SEMVER)
  expect(VERSION).toBe(pkg.version)
  const releases = [...read("CHANGELOG.md").matchAll(/^## \[([^\]]+)\]/gm)].map((m) => m[1])
  expect(releases.filter((r) => r !== "Unreleased")[0]).toBe(pkg.version)
})

test("LICENSE is the Apache License 2.0, whole", () => {
  const license = read("LICENSE")
  expect(license).toContain("Apache License")
  expect(license).toContain("Version 2.0, January 2004")
  for (let section = 1; section <= 9; section++) expect(license).toMatch(new RegExp(`^\\s*${section}\\. [A-Z]`, "m"))
  expect(license).toContain("END OF TERMS AND CONDITIONS")
  expect(license.length).toBeGreaterThan(10_000)
  expect((JSON.parse(read("package.json")) as { license: string }).license).toBe("Apache-2.0")
})

describe("the running server shows its version", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startTestServer({ db: "pglite" })
  })
  afterAll(async () => {
    await server.close()
  })

  test("/healthz, /metrics and the dashboard's pages", async () => {
    expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ status: "ok", version: VERSION })
    const metrics = await (await fetch(`${server.url}/metrics`)).text()
    expect(metrics).toContain("# TYPE greenline_build_info gauge")
    expect(metrics).toContain(`greenline_build_info{version="${VERSION}",bun="${Bun.version}"} 1`)
    const login = await (await fetch(`${server.url}/login`)).text()
    expect(login).toContain(`<footer class="foot">Greenline ${VERSION}</footer>`)
    // signed in: the page shell hands the version to the dashboard's footer
    const signIn = await fetch(`${server.url}/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: server.url },
      body: new URLSearchParams({ token: server.token, next: "/" })
    })
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] ?? ""
    expect(cookie).toStartWith("greenline_session=")
    const shell = await (await fetch(`${server.url}/`, { headers: { cookie } })).text()
    expect(shell).toContain(`<meta name="greenline-version" content="${VERSION}">`)
  })
})
