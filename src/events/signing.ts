import { createHmac, randomBytes } from "node:crypto"

/**
 * Standard Webhooks 1.0 signatures (the scheme Svix uses): secrets `whsec_<base64 of 24 random bytes>`, and
 * `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed with the secret's decoded bytes. Written here
 * rather than with the `standardwebhooks` package (a test dependency, which verifies them): it is these few lines of
 * node:crypto, and the package would pull its own base64 and SHA-256 code into the server.
 */

export const newSecret = () => `whsec_${randomBytes(24).toString("base64")}`

const keyOf = (secret: string) => Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64")

export const sign = (secret: string, id: string, timestamp: number, body: string) =>
  `v1,${createHmac("sha256", keyOf(secret)).update(`${id}.${timestamp}.${body}`).digest("base64")}`

/** The headers of one attempt: one signature per secret (two during a rotation), under both header names. */
export const signedHeaders = (
  secrets: ReadonlyArray<string>,
  id: string,
  timestamp: number,
  body: string
): Record<string, string> => {
  const signature = secrets.map((s) => sign(s, id, timestamp, body)).join(" ")
  const ts = String(timestamp)
  return {
    "content-type": "application/json",
    "user-agent": "Greenline-Webhooks/1.0",
    "webhook-id": id,
    "webhook-timestamp": ts,
    "webhook-signature": signature,
    "svix-id": id,
    "svix-timestamp": ts,
    "svix-signature": signature
  }
}
