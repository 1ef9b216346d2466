import type { OpName } from "../Api.ts"
import { type OpDoc, page, QUARANTINE_EXAMPLE, repo, scope, testCase } from "./examples.ts"

/** The flaky-test service's operations (contract §3) and the quarantine export and import. */
export const FLAKY_DOCS = {
  listFailingTests: {
    summary: "List the tests that failed in a time range",
    description: "Tests with at least one failure between `start_time` and `end_time`, by name, a page at a time.",
    request: {
      ...scope,
      start_time: "2026-11-25T00:00:00Z",
      end_time: "2026-11-26T00:00:00Z",
      page_query: { page_size: 20, page_token: "" }
    },
    response: { tests: [testCase], page }
  },
  listQuarantinedTests: {
    summary: "List the quarantined tests",
    description:
      "Tests whose failures do not fail CI: quarantined by an override (`always_quarantine`) or automatically.",
    request: { ...scope, page_query: { page_size: 20, page_token: "" } }
  },
  getTestDetails: {
    summary: "Read one test",
    description: "A test case's status, failure rates, most common failures, code owners and ticket.",
    request: { ...scope, test_id: testCase.id },
    response: { test: testCase }
  },
  listUnhealthyTests: {
    summary: "List flaky or broken tests",
    description: "Tests classified `flaky` (passed and failed on the same code) or `broken` (failing every time).",
    request: { ...scope, status: "flaky", page_query: { page_size: 20, page_token: "" } },
    response: { tests: [testCase], page }
  },
  linkTicketToTestCase: {
    summary: "Link a ticket to a test",
    description: "Records the issue tracking a test's repair; shown with the test.",
    request: {
      ...scope,
      test_case_id: testCase.id,
      external_ticket_id: "ACME-123",
      html_url: "https://tracker.example/ACME-123"
    },
    response: {}
  },
  setQuarantineOverride: {
    summary: "Override quarantine for one test",
    description:
      "`always_quarantine`, `never_quarantine`, or `unspecified` (the repository's settings and the test's status decide).",
    request: { ...scope, test_case_id: testCase.id, override: "always_quarantine" },
    response: {}
  },
  getFlakySettings: {
    summary: "Read a repository's flaky-test settings",
    description: "Whether quarantining is on, and whether flaky tests are quarantined automatically.",
    request: scope,
    response: { quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 20 }
  },
  updateFlakySettings: {
    summary: "Change a repository's flaky-test settings",
    description: "Changes only the fields given.",
    request: { ...scope, quarantining_enabled: true, auto_quarantine: true },
    response: { quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 20 }
  },
  uploadTestResults: {
    summary: "Upload JUnit results",
    description:
      "A multipart body: a `metadata` part (JSON: repo, org_url_slug, sha, branch, optional pr_number, variant, job_name) and one or more `junit` parts (XML, gzip allowed). The answer says whether every failure is quarantined: the CI job may pass then. The `greenline` CI client (`GET /cli/greenline.mjs`) sends it for you. An `Idempotency-Key` header (1 to 200 visible ASCII characters) makes it safe to send again: the same key within a day answers the first upload's summary and stores nothing; under another upload's content it is a 400.",
    response: {
      upload_id: "5c0b8f0e-8d6c-4f7e-9a51-2f7b6e1d9c3a",
      tests: 120,
      passed: 118,
      failed: 1,
      skipped: 1,
      ignored: 0,
      quarantined_failures: 1,
      unquarantined_failures: 0,
      all_failures_quarantined: true
    }
  },
  exportQuarantine: {
    summary: "Export a repository's quarantine state (extension)",
    description:
      "The repository's flaky-test settings and every test with a quarantine override or in quarantine, with the " +
      "override's owner, reason, ticket and expiry. `repo` is `host/owner/name` (or `owner/name` on github.com). " +
      "The same document is accepted by importQuarantine.",
    request: { org_url_slug: "acme", repo: "github.com/acme/web" },
    response: {
      repo,
      exported_at: "2026-11-26T12:00:00.000Z",
      settings: { quarantining_enabled: true, auto_quarantine: true, auto_release_clean_runs: 20 },
      tests: [QUARANTINE_EXAMPLE]
    }
  },
  exportQuarantineCsv: {
    summary: "Export a repository's quarantine state as CSV (extension)",
    description: "exportQuarantine as CSV, one test a row with a header row; importQuarantine takes it in `csv`.",
    request: { org_url_slug: "acme", repo: "github.com/acme/web" },
    response:
      "test_case_id,name,classname,file,parent,variant,quarantine_setting,quarantined,status,owner,reason,ticket_url,expires_at,set_at\n" +
      "d3b07384-d9a0-5c1b-8f3e-2a4b6c8d0e1f,adds two numbers,math,test/math.test.js,math,,always_quarantine,true,flaky,@acme/web,times out on the shared runners,https://issues.example/WEB-12,2026-12-31T00:00:00.000Z,2026-11-26T12:00:00.000Z\n"
  },
  importQuarantine: {
    summary: "Import a quarantine state (extension)",
    description:
      "Sets the quarantine overrides of the listed tests (by `test_case_id`, or by name with classname, file, " +
      "parent and variant), from exportQuarantine's `tests` or its CSV text in `csv`: one of the two. All or nothing.",
    request: {
      org_url_slug: "acme",
      repo,
      tests: [
        {
          name: "adds two numbers",
          classname: "math",
          file: "test/math.test.js",
          quarantine_setting: "always_quarantine"
        }
      ]
    },
    response: { imported: 1, created: 1, cleared: 0 }
  }
} satisfies Partial<Record<OpName, OpDoc>>
