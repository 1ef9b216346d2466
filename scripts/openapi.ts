import { openApiDocument } from "../src/http/Api.ts"
import { refineDocument } from "../src/http/docs/openapi.ts"

/** Prints the OpenAPI document as `/v1/openapi.json` serves it (PUBLIC_URL, default https://greenline.example.org). */
const publicUrl = (process.env.PUBLIC_URL || "https://greenline.example.org").replace(/\/+$/, "")
process.stdout.write(`${JSON.stringify(refineDocument(openApiDocument(), publicUrl), null, 2)}\n`)
