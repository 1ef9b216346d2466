/**
 * What a request is about, for the audit log, from its payload (decoded, or for a refused request the JSON as sent,
 * which is why every field is checked): `host/owner/name@branch #pr`, a test case, an id, a name, a role. Never a
 * secret: a webhook's URL or a token are not read.
 */
const str = (v: unknown, max = 200): string | undefined =>
  typeof v === "string" && v !== "" ? (v.length > max ? `${v.slice(0, max)}…` : v) : undefined

const num = (v: unknown): string | undefined =>
  typeof v === "number" && Number.isFinite(v)
    ? String(v)
    : typeof v === "string" && /^\d{1,10}$/.test(v)
      ? v
      : undefined

const NAMED = new Set([
  "repo",
  "targetBranch",
  "pr",
  "sha",
  "context",
  "test_case_id",
  "org",
  "slug",
  "id",
  "name",
  "role",
  "admin",
  "org_url_slug",
  "page_query",
  "ignoreFreeze"
])

export const auditTarget = (payload: unknown): string => {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return ""
  const p = payload as Record<string, unknown>
  const parts: Array<string> = []
  const repo = typeof p.repo === "object" && p.repo !== null ? (p.repo as Record<string, unknown>) : undefined
  if (repo !== undefined) {
    const host = str(repo.host)
    const owner = str(repo.owner)
    const name = str(repo.name)
    if (host !== undefined && owner !== undefined && name !== undefined) {
      parts.push(`${host}/${owner}/${name}${str(p.targetBranch) === undefined ? "" : `@${str(p.targetBranch)}`}`)
    }
  } else if (typeof p.repo === "string") {
    parts.push(str(p.repo) ?? "")
  }
  const pr = typeof p.pr === "object" && p.pr !== null ? num((p.pr as Record<string, unknown>).number) : undefined
  if (pr !== undefined) parts.push(`#${pr}`)
  const sha = str(p.sha, 40)
  if (sha !== undefined) parts.push(`sha ${sha.slice(0, 12)}`)
  const context = str(p.context, 100)
  if (context !== undefined) parts.push(`context ${context}`)
  const testCase = str(p.test_case_id, 100)
  if (testCase !== undefined) parts.push(`test ${testCase}`)
  const org = str(p.org, 100) ?? str(p.slug, 100)
  if (org !== undefined) parts.push(`org ${org}`)
  const id = str(p.id, 100)
  if (id !== undefined) parts.push(`id ${id}`)
  const name = str(p.name, 100)
  if (name !== undefined) parts.push(`name ${JSON.stringify(name)}`)
  // #31: who submitted past a freeze
  if (p.ignoreFreeze === true) parts.push("ignoreFreeze")
  const role = str(p.role, 20)
  if (role !== undefined) parts.push(`role ${role}`)
  else if (p.admin === true) parts.push("role admin")
  // the other fields by name only (their values may be long, or secret: a webhook's URL)
  const others = Object.keys(p)
    .filter((k) => !NAMED.has(k))
    .slice(0, 12)
  if (others.length > 0) parts.push(`(${others.map((k) => k.slice(0, 40)).join(", ")})`)
  return parts.join(" ")
}
