import type * as OpenApi from "@effect/platform/OpenApi"

/** `/docs`: a reference page rendered from the OpenAPI document, self-contained so it works offline. */

const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

export const renderDocs = (doc: OpenApi.OpenAPISpec): string => {
  const sections: Array<string> = []
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item as Record<string, OpenApi.OpenAPISpecOperation>)) {
      if (typeof op !== "object" || op === null || !("responses" in op)) continue
      const body = op.requestBody?.content
      const schema = body ? Object.values(body)[0]?.schema : undefined
      const ok = op.responses["200"]?.content
      const answer = ok ? Object.values(ok)[0]?.schema : undefined
      sections.push(`<section id="${escapeHtml(op.operationId ?? path)}">
<h3><span class="m">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
${op.description ? `<p>${escapeHtml(op.description)}</p>` : ""}
${schema ? `<details><summary>Request</summary><pre>${escapeHtml(JSON.stringify(schema, null, 2))}</pre></details>` : ""}
${answer ? `<details><summary>Answer 200</summary><pre>${escapeHtml(JSON.stringify(answer, null, 2))}</pre></details>` : ""}
</section>`)
    }
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(doc.info.title)}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#1d2327}
code,pre{font:13px ui-monospace,monospace}pre{background:#f5f6f7;padding:.75rem;overflow:auto}
.m{display:inline-block;min-width:3.5rem;color:#fff;background:#2e7d32;border-radius:3px;padding:0 .4rem;font-size:12px}
section{border-top:1px solid #ddd;padding:.5rem 0}</style></head>
<body><h1>${escapeHtml(doc.info.title)}</h1><p>${escapeHtml(doc.info.description ?? "")}</p>
<p>Every <code>/v1</code> request carries <code>x-api-token: &lt;token&gt;</code> (or <code>Authorization: Bearer</code>).
Errors are JSON: <code>{"error":{"code","message","details?"}}</code>. The machine-readable document is
<a href="/v1/openapi.json">/v1/openapi.json</a>.</p>
${sections.join("\n")}
<h2>Schemas</h2><pre>${escapeHtml(JSON.stringify(doc.components.schemas, null, 2))}</pre>
</body></html>`
}
