/**
 * OIDC_ROLE_RULES and OIDC_ROLE_CLAIM (tenancy/roleRules.ts): parsing, a claim's values (a string, a list, a dotted
 * path), the highest role per organization; and the settings' checks at start-up (config.ts).
 */
import { describe, expect, test } from "bun:test"
import { ConfigProvider, Effect, Either, Option } from "effect"
import { appConfig } from "../../src/config.ts"
import { claimValues, hasClaim, orgsOfRules, parseRoleRules, rolesOf } from "../../src/tenancy/roleRules.ts"

const parse = (text: string) => {
  const parsed = parseRoleRules(text)
  if ("error" in parsed) throw new Error(parsed.error)
  return parsed.rules
}

describe("role rules", () => {
  test("parsed: ; and new lines, values with colons, equals signs and spaces, * for everyone", () => {
    expect(parse("acme:admin=acme:platform; acme:write = Engineering Team\nbeta:READ=*;;")).toEqual([
      { org: "acme", role: "admin", value: "acme:platform" },
      { org: "acme", role: "write", value: "Engineering Team" },
      { org: "beta", role: "read", value: "*" }
    ])
    expect(parse("acme:read=a=b")).toEqual([{ org: "acme", role: "read", value: "a=b" }])
    expect(parse("")).toEqual([])
  })

  test("refused, with the rule named: no =, no org, an unknown role, an empty value", () => {
    for (const [text, message] of [
      ["acme:admin", "is not <org>:<role>=<claim value>"],
      ["admin=devs", "is not <org>:<role>"],
      ["acme:owner=devs", "must be one of read, write, maintain, admin"],
      ["acme:write=", "the claim value is empty"],
      ["ac me:write=devs", "is not <org>:<role>"]
    ] as const) {
      const parsed = parseRoleRules(text)
      expect("error" in parsed ? parsed.error : "").toContain(message)
    }
  })

  test("the highest role per organization, organizations in the rules' order", () => {
    const rules = parse("acme:write=devs; acme:admin=admins; beta:read=*; acme:read=*; beta:maintain=devs")
    expect(rolesOf(rules, ["devs"])).toEqual([
      { org: "acme", role: "write" },
      { org: "beta", role: "maintain" }
    ])
    expect(rolesOf(rules, ["admins", "devs"])).toEqual([
      { org: "acme", role: "admin" },
      { org: "beta", role: "maintain" }
    ])
    expect(rolesOf(rules, [])).toEqual([
      { org: "beta", role: "read" },
      { org: "acme", role: "read" }
    ])
    expect(rolesOf(parse("acme:admin=admins"), ["Admins", "admin"])).toEqual([])
    expect(orgsOfRules(rules)).toEqual(["acme", "beta"])
  })

  test("a claim's values: a string, a list (strings only), a dotted path", () => {
    const claims = { groups: ["a", 1, "b"], hd: "acme.com", realm_access: { roles: ["x"] }, "dotted.name": "d" }
    expect(claimValues(claims, "groups")).toEqual(["a", "b"])
    expect(claimValues(claims, "hd")).toEqual(["acme.com"])
    expect(claimValues(claims, "realm_access.roles")).toEqual(["x"])
    expect(claimValues(claims, "dotted.name")).toEqual(["d"])
    expect(claimValues(claims, "missing")).toEqual([])
    expect(claimValues(claims, "realm_access.missing")).toEqual([])
    expect(hasClaim(claims, "realm_access.roles")).toBe(true)
    expect(hasClaim(claims, "realm_access.nope")).toBe(false)
    expect(hasClaim(claims, "groups")).toBe(true)
    expect(hasClaim({}, "groups")).toBe(false)
  })
})

describe("settings", () => {
  const load = (env: Record<string, string>) =>
    Effect.runSync(
      Effect.either(Effect.withConfigProvider(appConfig, ConfigProvider.fromMap(new Map(Object.entries(env)))))
    )

  test("OIDC_ROLE_RULES is parsed at start-up, and a bad rule stops it with the rule named", () => {
    const ok = load({ OIDC_ROLE_RULES: "acme:write=devs" })
    expect(Either.isRight(ok) && ok.right.oidcRoleRules).toEqual([{ org: "acme", role: "write", value: "devs" }])
    const bad = load({ OIDC_ROLE_RULES: "acme:owner=devs" })
    expect(Either.isLeft(bad) && String(bad.left)).toContain("OIDC_ROLE_RULES")
  })

  test("OIDC_ISSUER_URL needs OIDC_CLIENT_ID; the defaults; PUBLIC_URL and TRUST_PROXY", () => {
    expect(Either.isLeft(load({ OIDC_ISSUER_URL: "https://idp.example" }))).toBe(true)
    const c = load({ OIDC_ISSUER_URL: " https://idp.example ", OIDC_CLIENT_ID: "greenline" })
    if (Either.isLeft(c)) throw new Error(String(c.left))
    expect(c.right.oidcIssuerUrl).toEqual(Option.some("https://idp.example"))
    expect(c.right.oidcScopes).toBe("openid profile email")
    expect(c.right.oidcRoleClaim).toBe("groups")
    expect(c.right.oidcRefreshSeconds).toBe(300)
    expect(Option.isNone(c.right.oidcClientSecret)).toBe(true)
    expect(c.right.trustProxy).toBe(false)
    expect(c.right.publicUrlConfigured).toBe(false)
    expect(c.right.publicUrl).toBe("http://localhost:8080")
    const p = load({ PUBLIC_URL: "https://greenline.example/", TRUST_PROXY: "true" })
    if (Either.isLeft(p)) throw new Error(String(p.left))
    expect(p.right.publicUrl).toBe("https://greenline.example")
    expect(p.right.publicUrlConfigured).toBe(true)
    expect(p.right.trustProxy).toBe(true)
    expect(Either.isLeft(load({ PUBLIC_URL: "greenline.example" }))).toBe(true)
  })
})
