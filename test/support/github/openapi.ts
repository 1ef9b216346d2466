/**
 * GitHub's official OpenAPI description (`@octokit/openapi`, api.github.com) as a validator for the simulated GitHub:
 * which operation a request is (method + path template), whether its query and JSON body are valid, whether an
 * answer is valid for the operation and status, and whether a webhook payload is valid for its event.
 *
 * The description is loaded once per process (on first use) and validators are compiled lazily, one per operation and
 * status, with only the component schemas they reach. OpenAPI 3.0's `nullable` is rewritten into JSON Schema first.
 */
import Ajv, { type ValidateFunction } from "ajv"
import addFormats from "ajv-formats"

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
type Schema = { readonly [key: string]: unknown }

interface Parameter {
  readonly name: string
  readonly in: "path" | "query" | "header" | "cookie"
  readonly required?: boolean
  readonly schema?: Schema
}

interface Operation {
  readonly operationId: string
  readonly parameters?: ReadonlyArray<Parameter | { readonly $ref: string }>
  readonly requestBody?: {
    readonly required?: boolean
    readonly content?: Record<string, { readonly schema?: Schema }>
  }
  readonly responses: Record<string, { readonly $ref?: string; readonly content?: Record<string, { schema?: Schema }> }>
}

interface Description {
  readonly paths: Record<string, Record<string, Operation>>
  readonly "x-webhooks": Record<string, Record<string, Operation>>
  readonly components: {
    readonly schemas: Record<string, Schema>
    readonly parameters: Record<string, Parameter>
    readonly responses: Record<string, { readonly content?: Record<string, { schema?: Schema }> }>
  }
}

/** An operation of the description matched by a request. */
export interface MatchedOperation {
  /** "METHOD /path/{template}" */
  readonly route: string
  readonly operationId: string
  readonly pathParams: Readonly<Record<string, string>>
}

interface Template {
  readonly method: string
  readonly path: string
  readonly literals: number
  readonly strict: RegExp
  readonly loose: RegExp
  readonly names: ReadonlyArray<string>
}

/**
 * Statuses GitHub answers on any operation whether or not the description lists them (auth, limits, missing objects,
 * validation, outages); their body must still be GitHub's error shape.
 */
const GENERIC_STATUSES = new Set([304, 401, 403, 404, 409, 422, 429, 500, 502, 503])

const isErrorBody = (body: Json | undefined) =>
  body === undefined ||
  (body !== null &&
    typeof body === "object" &&
    !Array.isArray(body) &&
    typeof (body as { message?: unknown }).message === "string")

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Parameters whose values may contain `/` (refs, branches, file paths, `base...head`). */
const SLASHED = new Set(["ref", "path", "basehead", "branch"])

export const compileTemplate = (method: string, path: string): Template => {
  const names: string[] = []
  let strict = ""
  let loose = ""
  let literals = 0
  for (const part of path.split(/(\{[^}]+\})/)) {
    if (part === "") continue
    const m = /^\{([^}]+)\}$/.exec(part)
    if (m) {
      names.push(m[1]!)
      strict += "([^/]+)"
      loose += SLASHED.has(m[1]!) ? "(.+?)" : "([^/]+)"
    } else {
      literals += part.length
      strict += escapeRegExp(part)
      loose += escapeRegExp(part)
    }
  }
  return { method, path, literals, names, strict: new RegExp(`^${strict}$`), loose: new RegExp(`^${loose}$`) }
}

const decode = (s: string) => {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

/**
 * Finds the template among `templates` (all of one method) that `rawPath` (still percent-encoded) matches. Parameters
 * match one path segment (an encoded `/` inside stays in it); only when no template matches that way may a parameter
 * span several segments (a ref such as `heads/feature/x` sent unencoded). The template with the most literal text wins.
 */
export const matchTemplate = <
  T extends {
    readonly strict: RegExp
    readonly loose: RegExp
    readonly literals: number
    readonly names: ReadonlyArray<string>
  }
>(
  templates: ReadonlyArray<T>,
  rawPath: string
): { readonly template: T; readonly params: Record<string, string> } | undefined => {
  for (const mode of ["strict", "loose"] as const) {
    let best: { template: T; match: RegExpExecArray } | undefined
    for (const t of templates) {
      const match = t[mode].exec(rawPath)
      if (match && (best === undefined || t.literals > best.template.literals)) best = { template: t, match }
    }
    if (best) {
      const params: Record<string, string> = {}
      best.template.names.forEach((name, i) => {
        params[name] = decode(best.match[i + 1]!)
      })
      return { template: best.template, params }
    }
  }
  return undefined
}

const COMPONENT = "#/components/schemas/"
const componentId = (name: string) => `urn:github-openapi:schema:${encodeURIComponent(name)}`

/** Rewrites OpenAPI 3.0 schema extensions (`nullable`) into plain JSON Schema; component `$ref`s point to their ids. */
const toJsonSchema = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(toJsonSchema)
  if (schema === null || typeof schema !== "object") return schema
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === "nullable" || key === "example" || key === "examples" || key.startsWith("x-")) continue
    if (key === "$ref" && typeof value === "string" && value.startsWith(COMPONENT)) {
      out[key] = componentId(value.slice(COMPONENT.length))
      continue
    }
    if (key === "properties" && value !== null && typeof value === "object") {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJsonSchema(v)]))
    } else if (key === "enum" || key === "required" || key === "default") {
      out[key] = value
    } else {
      out[key] = toJsonSchema(value)
    }
  }
  if ((schema as { nullable?: unknown }).nullable !== true) return out
  if (typeof out.type === "string") {
    out.type = [out.type, "null"]
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null]
    return out
  }
  return { anyOf: [out, { type: "null" }] }
}

export class OpenApiCatalog {
  private readonly ajv: Ajv
  private readonly byMethod = new Map<string, Template[]>()
  private readonly registered = new Set<string>()
  private readonly validators = new Map<string, ValidateFunction | string>()

  constructor(private readonly doc: Description) {
    this.ajv = new Ajv({ strict: false, allErrors: false, logger: false, validateSchema: false, inlineRefs: false })
    addFormats(this.ajv)
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of Object.keys(item)) {
        if (!["get", "post", "put", "patch", "delete", "head"].includes(method)) continue
        const list = this.byMethod.get(method.toUpperCase()) ?? []
        list.push(compileTemplate(method.toUpperCase(), path))
        this.byMethod.set(method.toUpperCase(), list)
      }
    }
  }

  /** The operation `method rawPath` is (rawPath without the query string, percent-encoded as sent). */
  findOperation(method: string, rawPath: string): MatchedOperation | undefined {
    const found = matchTemplate(this.byMethod.get(method.toUpperCase()) ?? [], rawPath)
    if (!found) return undefined
    const op = this.operation(found.template.method, found.template.path)
    return {
      route: `${found.template.method} ${found.template.path}`,
      operationId: op.operationId,
      pathParams: found.params
    }
  }

  /** Problems with a request's query and JSON body (empty when valid). */
  validateRequest(op: MatchedOperation, query: URLSearchParams, body: Json | undefined): string[] {
    const [method, path] = op.route.split(" ") as [string, string]
    const operation = this.operation(method, path)
    const problems: string[] = []
    const params = (operation.parameters ?? []).map((p) => this.parameter(p))
    for (const key of new Set(query.keys())) {
      const p = params.find((x) => x.in === "query" && x.name === key)
      if (!p) {
        problems.push(`unknown query parameter "${key}"`)
        continue
      }
      const v = this.validator(`param ${op.route} ${key}`, () => p.schema ?? {})
      const raw = query.get(key) ?? ""
      const value = coerce(raw, p.schema)
      if (typeof v === "string") problems.push(v)
      else if (!v(value)) problems.push(`query parameter ${key}=${raw}: ${errorsText(v)}`)
    }
    for (const p of params) {
      if (p.in === "query" && p.required === true && !query.has(p.name)) problems.push(`missing query ${p.name}`)
    }
    const content = operation.requestBody?.content?.["application/json"]
    if (content === undefined) {
      if (body !== undefined) problems.push("the operation takes no JSON body but one was sent")
      return problems
    }
    if (body === undefined) {
      if (operation.requestBody?.required === true) problems.push("missing required JSON body")
      return problems
    }
    const v = this.validator(`request ${op.route}`, () => content.schema ?? {})
    if (typeof v === "string") problems.push(v)
    else if (!v(body)) problems.push(`request body: ${errorsText(v)}`)
    return problems
  }

  /** Problems with an answer (empty when valid); `body` undefined means no body. */
  validateResponse(op: MatchedOperation, status: number, body: Json | undefined): string[] {
    const [method, path] = op.route.split(" ") as [string, string]
    const operation = this.operation(method, path)
    let response = operation.responses[String(status)] ?? operation.responses.default
    if (response === undefined) {
      if (GENERIC_STATUSES.has(status) && isErrorBody(body)) return []
      return [`status ${status} is not documented for ${op.route}`]
    }
    if (response.$ref) response = this.doc.components.responses[response.$ref.split("/").pop()!] ?? {}
    const schema = response.content?.["application/json"]?.schema
    // documented without a body (GitHub still sends `{ message }` on some of them, e.g. the merges API's 409)
    if (schema === undefined) return status === 304 && body !== undefined ? ["a 304 must have no body"] : []
    if (body === undefined) return [`status ${status} of ${op.route} must have a JSON body`]
    const v = this.validator(`response ${op.route} ${status}`, () => schema)
    if (typeof v === "string") return [v]
    return v(body) ? [] : [`response ${status}: ${errorsText(v)}`]
  }

  /** Problems with a webhook payload for `event` (e.g. "pull_request") and `action` (empty when valid). */
  validateWebhook(event: string, action: string | undefined, payload: Json): string[] {
    const key = `${event.replace(/_/g, "-")}${action === undefined ? "" : `-${action.replace(/_/g, "-")}`}`
    const hook = this.doc["x-webhooks"][key]?.post
    if (hook === undefined) return [`no webhook "${key}" in the description`]
    const schema = hook.requestBody?.content?.["application/json"]?.schema
    if (schema === undefined) return []
    const v = this.validator(`webhook ${key}`, () => schema)
    if (typeof v === "string") return [v]
    return v(payload) ? [] : [`webhook ${key}: ${errorsText(v)}`]
  }

  private operation(method: string, path: string): Operation {
    const op = this.doc.paths[path]?.[method.toLowerCase()]
    if (!op) throw new Error(`no operation ${method} ${path}`)
    return op
  }

  private parameter(p: Parameter | { readonly $ref: string }): Parameter {
    if ("$ref" in p) return this.doc.components.parameters[p.$ref.split("/").pop()!]!
    return p
  }

  /** A compiled validator, or why the schema could not be compiled. */
  private validator(key: string, schema: () => Schema): ValidateFunction | string {
    const cached = this.validators.get(key)
    if (cached !== undefined) return cached
    let v: ValidateFunction | string
    try {
      const root = schema()
      this.register(root)
      v = this.ajv.compile(toJsonSchema(root) as Schema)
    } catch (e) {
      v = `the schema of ${key} could not be compiled: ${String(e)}`
    }
    this.validators.set(key, v)
    return v
  }

  /**
   * Adds every component schema `schema` reaches to Ajv once, under its own id (`$ref`s are rewritten to it), so
   * each is compiled once per process and shared by the operations that use it.
   */
  private register(schema: unknown) {
    const visit = (x: unknown) => {
      if (Array.isArray(x)) {
        for (const y of x) visit(y)
      } else if (x !== null && typeof x === "object") {
        for (const [k, v] of Object.entries(x)) {
          if (k === "$ref" && typeof v === "string" && v.startsWith(COMPONENT)) {
            const name = v.slice(COMPONENT.length)
            if (!this.registered.has(name)) {
              this.registered.add(name)
              this.ajv.addSchema(toJsonSchema(this.doc.components.schemas[name]) as Schema, componentId(name))
              visit(this.doc.components.schemas[name])
            }
          } else {
            visit(v)
          }
        }
      }
    }
    visit(schema)
  }
}

const coerce = (raw: string, schema: Schema | undefined): unknown => {
  const type = schema?.type
  if ((type === "integer" || type === "number") && /^-?\d+(\.\d+)?$/.test(raw)) return Number(raw)
  if (type === "boolean" && (raw === "true" || raw === "false")) return raw === "true"
  return raw
}

const errorsText = (v: ValidateFunction) =>
  (v.errors ?? [])
    .slice(0, 5)
    .map((e) => `${e.instancePath || "/"} ${e.message ?? e.keyword}${e.params ? ` ${JSON.stringify(e.params)}` : ""}`)
    .join("; ")

let shared: Promise<OpenApiCatalog> | undefined

/** The catalog of `@octokit/openapi`'s api.github.com description, loaded once per process. */
export const openApiCatalog = (): Promise<OpenApiCatalog> => {
  shared ??= (async () => {
    const file = Bun.resolveSync("@octokit/openapi/generated/api.github.com.json", import.meta.dir)
    return new OpenApiCatalog((await Bun.file(file).json()) as Description)
  })()
  return shared
}

export type { Json }
