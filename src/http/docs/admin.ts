import type { OpName } from "../Api.ts"
import { type OpDoc, repo } from "./examples.ts"

/** Organizations, repositories and API tokens (admin and self-service), and the audit log. */
const TOKEN_ID = "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f"
const TOKEN = "glt_2b7Q0c1v1l8Zf3x9J0u2m8Qk6V4y5T7w1r3e5t7y9u0"

export const ADMIN_DOCS = {
  adminCreateOrganization: {
    summary: "Create an organization (admin)",
    description: "Role `admin`. Nothing happens when it exists.",
    request: { slug: "acme" },
    response: { id: "0b9c8a8e-3f3a-4d55-9a57-0e4f8d7a2c11", slug: "acme" }
  },
  adminCreateToken: {
    summary: "Create an API token (admin)",
    description:
      "Role `admin`. A token of any role for any organization (`role`, default `write`; `admin: true` is the same as `role: admin`). The answer is the only place the token is shown: it is stored as a hash.",
    request: { org: "acme", name: "ci", role: "write" },
    response: { id: TOKEN_ID, role: "write", token: TOKEN }
  },
  adminListTokens: {
    summary: "List an organization's tokens (admin)",
    description:
      "Role `admin`. Ids, names, roles, creation and revocation times; never the tokens. `admin` is `role == admin`, for clients from before roles.",
    request: { org: "acme" },
    response: {
      tokens: [
        {
          id: TOKEN_ID,
          name: "ci",
          role: "write",
          admin: false,
          createdAt: "2026-11-26T12:00:00.000Z",
          revokedAt: null
        }
      ]
    }
  },
  adminRevokeToken: {
    summary: "Revoke a token (admin)",
    description: "Role `admin`. Every instance stops accepting the token at once. 404 when there is no such token.",
    request: { id: TOKEN_ID },
    response: {}
  },
  adminAddRepository: {
    summary: "Give a repository to an organization (admin)",
    description: "Role `admin`. 400 when the repository belongs to another organization.",
    request: { org: "acme", repo },
    response: { id: "2f1e0d9c-8b7a-4c6d-9e8f-7a6b5c4d3e2f", repo }
  },
  listApiTokens: {
    summary: "List the organization's API tokens (extension)",
    description:
      "Role `maintain`. Ids, names, roles, creation and revocation times of the caller's organization's tokens; never the tokens. An `admin` sees every token; below `admin`, a caller sees only its own: the tokens it made, and itself.",
    request: {},
    response: {
      tokens: [{ id: TOKEN_ID, name: "ci", role: "write", createdAt: "2026-11-26T12:00:00.000Z", revokedAt: null }]
    }
  },
  createApiToken: {
    summary: "Create an API token for the organization (extension)",
    description:
      "Role `maintain`. `role` is what the new token may do: `read`, `write` (the default), `maintain` or `admin`, at most the caller's own role (else 403 PERMISSION_DENIED). The answer is the only place the token is shown: it is stored as a hash.",
    request: { name: "ci", role: "write" },
    response: { id: TOKEN_ID, name: "ci", role: "write", token: TOKEN }
  },
  revokeApiToken: {
    summary: "Revoke one of the organization's API tokens (extension)",
    description:
      "Role `maintain`. Every instance stops accepting the token at once, and the dashboard sessions opened with it end. Below `admin`, only the caller's own tokens (the ones it made, and itself): another's answers 403 PERMISSION_DENIED. 404 for a token of another organization.",
    request: { id: TOKEN_ID },
    response: {}
  },
  listAuditEvents: {
    summary: "Read the organization's audit log (extension)",
    description:
      "Role `admin`. Every change made through the API or the dashboard, and every call refused with 403 PERMISSION_DENIED, newest first: when, who (a token's id and name, or a person's subject, name and e-mail) in which role, the operation, its target, allowed or refused, and the client's address. Filters: `actor` (an id, subject or name), `action` (an operation), `outcome`, `target` (a part of it, any letter case), `start_time` and `end_time`. Paged as the flaky-test lists are (`page_query` in, `page` out); the pages of one listing stay the same while new events arrive. Events are kept for EVENT_RETENTION_DAYS days when it is set, else a year.",
    request: { action: "revokeApiToken", outcome: "refused", page_query: { page_size: 20, page_token: "" } },
    response: {
      events: [
        {
          id: "412",
          at: "2026-11-26T12:00:00.000Z",
          actor: { kind: "token", id: "9e0d3c5a-1b2c-4d3e-8f4a-5b6c7d8e9f01", name: "ci" },
          role: "write",
          action: "revokeApiToken",
          target: `id ${TOKEN_ID}`,
          outcome: "refused",
          sourceIp: "203.0.113.7"
        }
      ],
      page: {
        total_rows: 1,
        total_pages: 1,
        next_page_token: "",
        prev_page_token: "",
        last_page_token: "eyJxIjoiLi4uIiwibyI6MCwidCI6IjQxMiJ9",
        page_index: 0
      }
    }
  }
} satisfies Partial<Record<OpName, OpDoc>>
