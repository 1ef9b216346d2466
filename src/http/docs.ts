import * as fs from "node:fs"
import type * as OpenApi from "@effect/platform/OpenApi"

/**
 * `/docs`: the API reference, rendered by Redoc (the npm package's standalone bundle, served by this server from
 * `/docs/redoc.standalone.js`: nothing is loaded from elsewhere, so it works offline; its logo, which it would load
 * from a CDN, is replaced) from `/v1/openapi.json`.
 */

export const REDOC_PATH = "/docs/redoc.standalone.js"

const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

export const renderDocs = (doc: OpenApi.OpenAPISpec): string => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(doc.info.title)}</title>
<style>body{margin:0}</style></head>
<body>
<noscript>The reference needs JavaScript; the document itself is <a href="/v1/openapi.json">/v1/openapi.json</a>.</noscript>
<redoc spec-url="/v1/openapi.json" path-in-middle-panel="true" required-props-first="true" sort-props-alphabetically="false"></redoc>
<script src="${REDOC_PATH}"></script>
</body></html>`

/** Redoc's own logo, which its bundle loads from a CDN beside "API docs by Redocly": an empty image instead. */
const REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
const NO_LOGO = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/%3E"

let redoc: string | undefined
/** Redoc's standalone bundle, read once from the installed package, without its one outside address (the logo). */
export const redocBundle = (): string => {
  redoc ??= fs
    .readFileSync(Bun.resolveSync("redoc/bundles/redoc.standalone.js", import.meta.dir), "utf8")
    .replaceAll(REDOC_CDN_LOGO, NO_LOGO)
  return redoc
}
