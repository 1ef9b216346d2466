import { describe, expect, test } from "bun:test"
import { Effect, Option, Runtime, Schema } from "effect"
import { post } from "../../src/http/operation.ts"
import { PERMISSIONS } from "../../src/http/roles.ts"
import { handle, makeApp, RateLimiter } from "../../src/http/router.ts"
import type { Organization } from "../../src/tenancy/Tenancy.ts"

/**
 * How the router answers (src/http/router.ts `handle`): an answer whose schema transforms values is always encoded;
 * a plain JSON answer is checked against its schema only with `checkAnswers` (CHECK_ANSWERS), and otherwise sent as
 * the handler made it.
 */

const TOKEN = "glt_router_answers_0123456789"
const org = { id: "00000000-0000-0000-0000-000000000001", slug: "acme" } as unknown as Organization
const who = { org, principal: { actor: { kind: "token", id: "t1", name: "test" }, role: "admin" } } as const

// two of the API's operation names, with schemas of this test's own
const plain = post("getQueue", "/getQueue", Schema.Struct({}), Schema.Struct({ n: Schema.Int }))
const counted = post("listQueues", "/listQueues", Schema.Struct({}), Schema.Struct({ n: Schema.NumberFromString }))

const appWith = (checkAnswers: boolean) =>
  makeApp({
    routes: [handle(plain, () => Effect.succeed({ n: 1.5 })), handle(counted, () => Effect.succeed({ n: 5 }))],
    runtime: Runtime.defaultRuntime,
    authenticator: {
      authenticate: async (t) => (t === TOKEN ? Option.some(who) : Option.none())
    },
    permissions: PERMISSIONS,
    rateLimiter: new RateLimiter(10_000, () => Date.now()),
    observer: { observe: () => {} },
    logError: () => {},
    checkAnswers,
    extra: () => undefined
  })

const call = async (app: ReturnType<typeof appWith>, op: string) => {
  const response = await app(
    new Request(`http://gl.test/v1/${op}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-token": TOKEN },
      body: "{}"
    })
  )
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

describe("answers and their schemas", () => {
  test("without checkAnswers a plain answer is sent as made; with it, one that breaks its schema is a 500", async () => {
    expect(await call(appWith(false), "getQueue")).toEqual({ status: 200, body: { n: 1.5 } })
    const checked = await call(appWith(true), "getQueue")
    expect(checked.status).toBe(500)
    expect((checked.body.error as { code: string; message: string }).message).toBe(
      "the answer did not match its schema"
    )
  })

  test("an answer whose schema transforms values is encoded either way", async () => {
    for (const check of [false, true]) {
      expect(await call(appWith(check), "listQueues")).toEqual({
        status: 200,
        body: { n: "5" }
      })
    }
  })
})
