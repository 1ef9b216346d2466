/**
 * GitHub App authentication, the pure parts: loading the App's private key (PEM text or a path to a PEM file) and
 * signing the App JWT (RS256, `iss` = App id) with node:crypto. The token exchange and its cache live in
 * GitHubClient.ts, with time from Effect's Clock.
 *
 * Why not `@octokit/auth-app`: it reads the wall clock itself and keeps its own caches; signing a JWT is a few lines
 * and keeping the token cache in Effect lets the tests move time with the TestClock.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"

export interface LoadedKey {
  readonly key: crypto.KeyObject
}

/**
 * The App's private key from GITHUB_APP_PRIVATE_KEY: PEM text (PKCS#1 or PKCS#8; `\n` escapes, as some secret stores
 * write them, are unescaped) or the path of a PEM file. Throws with a message naming the problem, never the key.
 */
export const loadPrivateKey = (value: string): LoadedKey => {
  const trimmed = value.trim()
  let pem: string
  if (trimmed.includes("-----BEGIN")) {
    pem = trimmed.includes("\\n") && !trimmed.includes("\n") ? trimmed.replace(/\\n/g, "\n") : trimmed
  } else {
    try {
      pem = fs.readFileSync(trimmed, "utf8")
    } catch (cause) {
      const code = typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : "unreadable"
      throw new Error(`GITHUB_APP_PRIVATE_KEY is neither PEM text nor a readable file (${code})`)
    }
  }
  try {
    const key = crypto.createPrivateKey({ key: pem, format: "pem" })
    if (key.asymmetricKeyType !== "rsa") throw new Error(`an ${key.asymmetricKeyType ?? "unknown"} key`)
    return { key }
  } catch (cause) {
    throw new Error(
      `GITHUB_APP_PRIVATE_KEY is not an RSA private key in PEM: ${cause instanceof Error ? cause.message : cause}`
    )
  }
}

const base64url = (input: string | Buffer): string => Buffer.from(input).toString("base64url")

/** JWTs are valid for at most 10 minutes; ours for 9, issued 60 s in the past against clock drift (GitHub's advice). */
export const JWT_LIFETIME_SECONDS = 9 * 60
export const JWT_BACKDATE_SECONDS = 60

/** An App JWT issued at `nowMs` and its expiry (ms since the epoch); `iss` is the App id (a number when numeric). */
export const signAppJwt = (appId: string, key: LoadedKey, nowMs: number): { token: string; expiresAtMs: number } => {
  const now = Math.floor(nowMs / 1000)
  const header = base64url(JSON.stringify({ alg: "RS256", typ: "JWT" }))
  const exp = now + JWT_LIFETIME_SECONDS
  const iss = /^\d+$/.test(appId) ? Number(appId) : appId
  const payload = base64url(JSON.stringify({ iat: now - JWT_BACKDATE_SECONDS, exp, iss }))
  const signature = crypto.sign("RSA-SHA256", Buffer.from(`${header}.${payload}`), key.key).toString("base64url")
  return { token: `${header}.${payload}.${signature}`, expiresAtMs: exp * 1000 }
}
