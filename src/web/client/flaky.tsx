import { useMemo, useState } from "preact/hooks"
import { type Answer, ApiFailure, call, orgSlug } from "./api.ts"
import { Chart } from "./chart.tsx"
import { ConfirmButton } from "./confirm.tsx"
import { useLive } from "./hooks.ts"
import {
  Badge,
  Crumbs,
  ErrorView,
  ExternalLink,
  Loading,
  type RepoKey,
  repoPath,
  testPath,
  testsPath,
  uploadPath,
  when
} from "./ui.tsx"

/** Flaky tests: the list (by status, searchable, sorted by impact) and a test's page with its failure chart. */

type TestCase = Answer<"getTestDetails">["test"]
type Filter = "flaky" | "broken" | "quarantined"
type Sort = "impact" | "rate" | "name"

const PAGE = { page_size: 100, page_token: "" }

export const FlakyListPage = ({ repo }: { repo: RepoKey }) => {
  const [filter, setFilter] = useState<Filter>("flaky")
  const [search, setSearch] = useState("")
  const [sort, setSort] = useState<Sort>("impact")
  const live = useLive(
    async (): Promise<{
      tests: ReadonlyArray<TestCase | Answer<"listQuarantinedTests">["quarantined_tests"][number]>
      stats: ReadonlyMap<string, TestCase>
    }> => {
      const scope = { repo, org_url_slug: orgSlug(), page_query: PAGE }
      if (filter !== "quarantined") {
        return { tests: (await call("listUnhealthyTests", { ...scope, status: filter })).tests, stats: new Map() }
      }
      // the quarantined list has no impact figures: they come from the flaky and broken lists (a quarantined test
      // that is neither, e.g. always quarantined while healthy, has none in 7 days worth sorting by)
      const [quarantined, flaky, broken] = await Promise.all([
        call("listQuarantinedTests", scope),
        call("listUnhealthyTests", { ...scope, status: "flaky" }),
        call("listUnhealthyTests", { ...scope, status: "broken" })
      ])
      return {
        tests: quarantined.quarantined_tests,
        stats: new Map([...flaky.tests, ...broken.tests].map((t) => [t.id, t]))
      }
    },
    `${testsPath(repo)}/${filter}`,
    10_000
  )
  const rows = useMemo(() => {
    const stats = live.data?.stats ?? new Map<string, TestCase>()
    const list = (live.data?.tests ?? []).map((t) =>
      "test_case_id" in t
        ? {
            id: t.test_case_id,
            name: t.name,
            status: t.status.value,
            impact: stats.get(t.test_case_id)?.pull_requests_impacted_last_7d ?? 0,
            rate: stats.get(t.test_case_id)?.failure_rate_last_7d ?? 0,
            owners: t.codeowners,
            quarantined: true
          }
        : {
            id: t.id,
            name: t.name,
            status: t.status.value,
            impact: t.pull_requests_impacted_last_7d,
            rate: t.failure_rate_last_7d,
            owners: t.codeowners,
            quarantined: t.quarantined
          }
    )
    const q = search.trim().toLowerCase()
    const found = q === "" ? list : list.filter((t) => t.name.toLowerCase().includes(q))
    return [...found].sort((a, b) =>
      sort === "impact"
        ? b.impact - a.impact || b.rate - a.rate
        : sort === "rate"
          ? b.rate - a.rate
          : a.name.localeCompare(b.name)
    )
  }, [live.data, search, sort])
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          ["Flaky tests", undefined]
        ]}
      />
      <h1>Flaky tests</h1>
      <div class="toolbar">
        <fieldset>
          <legend>Status</legend>
          {(["flaky", "broken", "quarantined"] as const).map((f) => (
            <label key={f}>
              <input type="radio" name="status" checked={filter === f} onChange={() => setFilter(f)} /> {f}
            </label>
          ))}
        </fieldset>
        <label>
          Search{" "}
          <input type="search" value={search} onInput={(e) => setSearch((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <label>
          Sort by{" "}
          <select value={sort} onChange={(e) => setSort((e.currentTarget as HTMLSelectElement).value as Sort)}>
            <option value="impact">PRs impacted (7 days)</option>
            <option value="rate">failure rate</option>
            <option value="name">name</option>
          </select>
        </label>
      </div>
      {live.error !== undefined && <ErrorView error={live.error} />}
      {live.data === undefined ? (
        <Loading />
      ) : rows.length === 0 ? (
        <p class="muted">No {filter} tests.</p>
      ) : (
        <table class="list" id="tests">
          <thead>
            <tr>
              <th scope="col">Test</th>
              <th scope="col">Status</th>
              <th scope="col">PRs impacted (7 d)</th>
              <th scope="col">Failure rate (7 d)</th>
              <th scope="col">Owners</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((t) => (
              <tr key={t.id}>
                <td>
                  <a href={testPath(repo, t.id)}>{t.name}</a>
                </td>
                <td>
                  <Badge kind={t.status}>{t.status}</Badge>{" "}
                  {t.quarantined && <Badge kind="quarantined">quarantined</Badge>}
                </td>
                <td>{t.impact}</td>
                <td>{(t.rate * 100).toFixed(1)}%</td>
                <td>{t.owners.join(", ")}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  )
}

const Override = ({ repo, test, onDone }: { repo: RepoKey; test: TestCase; onDone: () => void }) => {
  const [message, setMessage] = useState<string | undefined>(undefined)
  const set = async (override: "always_quarantine" | "never_quarantine" | "unspecified") => {
    try {
      await call("setQuarantineOverride", { repo, org_url_slug: orgSlug(), test_case_id: test.id, override })
      setMessage("saved")
      onDone()
    } catch (e) {
      setMessage(e instanceof ApiFailure ? e.message : String(e))
    }
  }
  return (
    <fieldset class="actions" aria-label="Quarantine override">
      <ConfirmButton label="Always quarantine" onConfirm={() => void set("always_quarantine")}>
        <p>
          Quarantine <strong>{test.name}</strong> whatever its results? Its failures then stop failing the runs of the
          queue and of CI.
        </p>
      </ConfirmButton>
      <ConfirmButton label="Never quarantine" onConfirm={() => void set("never_quarantine")}>
        <p>
          Never quarantine <strong>{test.name}</strong>, even when it is flaky? Its failures then always fail the runs.
        </p>
      </ConfirmButton>
      <button type="button" onClick={() => set("unspecified")}>
        Automatic
      </button>
      {message !== undefined && <span role="status">{message}</span>}
    </fieldset>
  )
}

type StatusChange = Answer<"getTestHistory">["statusHistory"][number]

const OVERRIDE: Record<string, string> = {
  always_quarantine: "always quarantine",
  never_quarantine: "never quarantine",
  unspecified: "automatic"
}

/** One change of the status history, in words, with its badge. */
const ChangeRow = ({ c }: { c: StatusChange }) => {
  const what =
    c.kind === "status" ? (
      <>
        {c.previous === null ? "status" : <Badge kind={c.previous}>{c.previous}</Badge>}
        {c.previous === null ? " " : " → "}
        <Badge kind={c.current}>{c.current}</Badge>
      </>
    ) : c.kind === "quarantine" ? (
      c.current === "quarantined" ? (
        <Badge kind="quarantined">quarantined</Badge>
      ) : (
        <Badge kind="healthy">released from quarantine</Badge>
      )
    ) : (
      <>
        override {c.previous === null ? "" : `${OVERRIDE[c.previous] ?? c.previous} → `}
        <strong>{OVERRIDE[c.current] ?? c.current}</strong>
      </>
    )
  const why =
    c.kind === "override" && c.reason === "expired"
      ? "the override expired"
      : [c.reason, c.actor === null ? "" : `by ${c.actor}`].filter((x) => x !== "").join(" · ")
  return (
    <tr data-kind={c.kind}>
      <td>{when(c.at)}</td>
      <td>{what}</td>
      <td>{why}</td>
    </tr>
  )
}

export const TestPage = ({ repo, id }: { repo: RepoKey; id: string }) => {
  const live = useLive(
    async () => {
      const [details, history] = await Promise.all([
        call("getTestDetails", { repo, org_url_slug: orgSlug(), test_id: id }),
        call("getTestHistory", { repo, test_id: id, days: 30 })
      ])
      return { test: details.test, history }
    },
    testPath(repo, id),
    10_000
  )
  const chart = useMemo(() => {
    const daily = live.data?.history.daily ?? []
    return [
      daily.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000),
      daily.map((d) => Math.round(d.failureRate * 1000) / 10)
    ] as [number[], number[]]
  }, [live.data])
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const { test: t, history } = live.data
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          ["Flaky tests", testsPath(repo)],
          [t.name, undefined]
        ]}
      />
      <header class="page-head">
        <h1>{t.name}</h1>
        <p class="facts">
          <Badge kind={t.status.value}>{t.status.value}</Badge>{" "}
          {t.quarantined && <Badge kind="quarantined">quarantined</Badge>} since {when(t.status.timestamp)} ·{" "}
          {t.status.reason}
        </p>
        <p class="facts">
          {t.file_path !== "" && (
            <>
              <code>{t.file_path}</code> ·{" "}
            </>
          )}
          {t.classname !== "" && <>{t.classname} · </>}
          owners: {t.codeowners.length === 0 ? "none" : t.codeowners.join(", ")}
          {t.ticket !== null && (
            <>
              {" "}
              · ticket{" "}
              <ExternalLink url={t.ticket.html_url}>{t.ticket.external_ticket_id ?? t.ticket.html_url}</ExternalLink>
            </>
          )}
        </p>
        <p>
          Failure rate: {(t.failure_rate_last_24h * 100).toFixed(1)}% (24 h),{" "}
          {(t.failure_rate_last_7d * 100).toFixed(1)}% (7 days) · {t.pull_requests_impacted_last_7d} PRs impacted in 7
          days
        </p>
        <Override repo={repo} test={t} onDone={() => void live.refresh()} />
      </header>
      <section aria-labelledby="chart-h">
        <h2 id="chart-h">Failure rate per day</h2>
        {history.daily.length === 0 ? (
          <p class="muted">No results in 30 days.</p>
        ) : (
          <Chart
            title="Failure rate per day (%)"
            data={chart}
            series={[{ label: "failure rate %", stroke: "#d9534f" }]}
            yLabel="%"
            bars={true}
          />
        )}
      </section>
      <section aria-labelledby="status-history-h">
        <h2 id="status-history-h">Status history</h2>
        {history.statusHistory.length === 0 ? (
          <p class="muted">Healthy since it was first seen; never quarantined.</p>
        ) : (
          <table class="list" id="status-history">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Change</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {history.statusHistory.map((c, i) => (
                <ChangeRow key={`${c.at}-${c.kind}-${i}`} c={c} />
              ))}
            </tbody>
          </table>
        )}
      </section>
      <section aria-labelledby="failures-h">
        <h2 id="failures-h">Most common failures</h2>
        {t.most_common_failures.length === 0 && <p class="muted">None.</p>}
        <ul class="plain">
          {t.most_common_failures.map((f) => (
            <li key={f.summary}>
              <pre class="failure-summary">{f.summary}</pre>
              <span class="muted">
                {f.occurrence_count}× · last {when(f.last_occurrence)}
              </span>
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="results-h">
        <h2 id="results-h">Recent results</h2>
        <table class="list">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Commit</th>
              <th scope="col">Branch</th>
              <th scope="col">Outcome</th>
              <th scope="col">Upload</th>
            </tr>
          </thead>
          <tbody>
            {history.recent.map((r, i) => (
              <tr key={`${r.uploadId}-${i}`}>
                <td>{when(r.runAt)}</td>
                <td>
                  <code>{r.sha.slice(0, 8)}</code>
                  {r.prNumber !== null && (
                    <>
                      {" "}
                      (<a href={`${repoPath(repo)}/pull/${r.prNumber}`}>#{r.prNumber}</a>)
                    </>
                  )}
                </td>
                <td>{r.branch}</td>
                <td>
                  <Badge kind={r.status}>{r.status}</Badge> {r.failureSummary ?? ""}
                </td>
                <td>
                  <a href={uploadPath(repo, r.uploadId)} title={r.uploadId}>
                    <code>{r.uploadId.slice(0, 8)}</code>
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </>
  )
}

/** One upload of test results: what CI sent, its counts and the tests that failed in it. */
export const UploadPage = ({ repo, id }: { repo: RepoKey; id: string }) => {
  const live = useLive(() => call("getUpload", { repo, upload_id: id }), uploadPath(repo, id), 60_000)
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const u = live.data
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          ["Flaky tests", testsPath(repo)],
          [`Upload ${u.id.slice(0, 8)}`, undefined]
        ]}
      />
      <header class="page-head">
        <h1>
          Upload <code>{u.id.slice(0, 8)}</code>
        </h1>
        <p class="facts" id="upload-facts">
          commit <code>{u.sha.slice(0, 12)}</code> on {u.branch}
          {u.prNumber !== null && (
            <>
              {" "}
              (<a href={`${repoPath(repo)}/pull/${u.prNumber}`}>#{u.prNumber}</a>)
            </>
          )}
          {u.jobName !== null && <> · job {u.jobName}</>}
          {u.variant !== "" && <> · variant {u.variant}</>} · ran {when(u.runAt)} · received {when(u.receivedAt)}
        </p>
        <p id="upload-counts">
          {u.tests} tests: {u.passed} passed, {u.failed} failed, {u.skipped} skipped, {u.ignored} ignored
          {u.infra && (
            <>
              {" "}
              · <Badge kind="broken">infrastructure failure</Badge>
            </>
          )}
        </p>
      </header>
      <section aria-labelledby="upload-failures-h">
        <h2 id="upload-failures-h">Failed tests</h2>
        {u.failures.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <ul class="plain" id="upload-failures">
            {u.failures.map((f, i) => (
              <li key={`${f.testId}-${i}`}>
                <a href={testPath(repo, f.testId)}>{f.name}</a>
                {f.failureSummary !== null && <pre class="failure-summary">{f.failureSummary}</pre>}
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  )
}
