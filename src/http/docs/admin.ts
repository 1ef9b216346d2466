import type { OpName } from "../Api.ts"
import { type OpDoc, repo } from "./examples.ts"

/** Organizations, repositories and API tokens (admin and self-service). */
export const ADMIN_DOCS = {
  adminCreateOrganization: {
    summary: "Create an organization (admin)",
    description: "Admin tokens only. Nothing happens when it exists.",
    request: { slug: "acme" },
    response: { id: "0b9c8a8e-3f3a-4d55-9a57-0e4f8d7a2c11", slug: "acme" }
  },
  adminCreateToken: {
    summary: "Create an API token (admin)",
    description: "Admin tokens only. The answer is the only place the token is shown: it is stored as a hash.",
    request: { org: "acme", name: "ci", admin: false },
    response: { id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f", token: "glt_2b7Q0c1v1l8Zf3x9J0u2m8Qk6V4y5T7w1r3e5t7y9u0" }
  },
  adminListTokens: {
    summary: "List an organization's tokens (admin)",
    description: "Admin tokens only. Ids, names, creation and revocation times; never the tokens.",
    request: { org: "acme" },
    response: {
      tokens: [
        {
          id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f",
          name: "ci",
          admin: false,
          createdAt: "2026-11-26T12:00:00.000Z",
          revokedAt: null
        }
      ]
    }
  },
  adminRevokeToken: {
    summary: "Revoke a token (admin)",
    description:
      "Admin tokens only. Every instance stops accepting the token at once. 404 when there is no such token.",
    request: { id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f" },
    response: {}
  },
  adminAddRepository: {
    summary: "Give a repository to an organization (admin)",
    description: "Admin tokens only. 400 when the repository belongs to another organization.",
    request: { org: "acme", repo },
    response: { id: "2f1e0d9c-8b7a-4c6d-9e8f-7a6b5c4d3e2f", repo }
  },
  listApiTokens: {
    summary: "List the organization's API tokens (extension)",
    description: "Ids, names, creation and revocation times of the caller's organization's tokens; never the tokens.",
    request: {},
    response: {
      tokens: [
        {
          id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f",
          name: "ci",
          createdAt: "2026-11-26T12:00:00.000Z",
          revokedAt: null
        }
      ]
    }
  },
  createApiToken: {
    summary: "Create an API token for the organization (extension)",
    description: "The answer is the only place the token is shown: it is stored as a hash.",
    request: { name: "ci" },
    response: {
      id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f",
      name: "ci",
      token: "glt_2b7Q0c1v1l8Zf3x9J0u2m8Qk6V4y5T7w1r3e5t7y9u0"
    }
  },
  revokeApiToken: {
    summary: "Revoke one of the organization's API tokens (extension)",
    description:
      "Every instance stops accepting the token at once, and the dashboard sessions opened with it end. 404 for a token of another organization.",
    request: { id: "6a4f4a57-5f8e-4c33-8f7b-1a2b3c4d5e6f" },
    response: {}
  }
} satisfies Partial<Record<OpName, OpDoc>>
