import type { Answer } from "./api.ts"
import { call } from "./api.ts"
import { useLive } from "./hooks.ts"
import {
  Badge,
  Crumbs,
  ErrorView,
  ExternalLink,
  Loading,
  prPath,
  queuePath,
  type RepoKey,
  repoPath,
  runPath,
  shortId,
  shortSha,
  testPath,
  when
} from "./ui.tsx"

/** Failure triage on the dashboard (issue #33): why a PR failed, where its time went, and a queue's failures. */

type Submitted = Answer<"getSubmittedPullRequest">
type Failure = NonNullable<Submitted["failure"]>
type Breakdown = NonNullable<Submitted["timeBreakdown"]>

const MARK_TEXT = { new: "new", known_flaky: "known flaky", broken_on_target: "broken on the target branch" } as const

const percent = (rate: number) => `${Math.round(rate * 100)}%`

/** A failed test's mark as the GitHub comment says it: "new", "known flaky, 4% of runs, quarantined". */
export const markText = (t: Failure["tests"]["failed"][number]) =>
  t.mark === "known_flaky"
    ? `known flaky, ${percent(t.failureRate)} of runs${t.quarantined ? ", quarantined" : ""}`
    : MARK_TEXT[t.mark]

/** The failure block: the failing run and statuses, the causing PR, the failed tests with their marks. */
export const FailureDetails = ({ repo, target, failure }: { repo: RepoKey; target: string; failure: Failure }) => (
  <div class="triage" id="triage">
    {failure.causedBy !== null && (
      <p id="caused-by">
        Caused by <a href={prPath(repo, failure.causedBy.prNumber, target)}>#{failure.causedBy.prNumber}</a>
        {failure.causedBy.testRunId !== null && (
          <>
            {" "}
            (its run{" "}
            <a href={runPath(repo, target, failure.causedBy.testRunId)}>{shortId(failure.causedBy.testRunId)}</a>)
          </>
        )}
      </p>
    )}
    {failure.failedStatuses.length > 0 && (
      <>
        <h3 id="failed-statuses-h">Failed required statuses</h3>
        <ul class="plain" aria-labelledby="failed-statuses-h" id="failed-statuses">
          {failure.failedStatuses.map((s) => (
            <li key={s.context}>
              <ExternalLink url={s.url}>{s.context}</ExternalLink> <Badge kind={s.state.toLowerCase()}>{s.state}</Badge>
            </li>
          ))}
        </ul>
      </>
    )}
    <h3 id="failed-tests-h">Failed tests</h3>
    {failure.tests.uploads === 0 ? (
      <p class="muted">
        No test results were uploaded for the run's commit <code>{shortSha(failure.testBranchSha)}</code>.
      </p>
    ) : failure.tests.failed.length === 0 ? (
      <p class="muted">No failed test in the {failure.tests.uploads} upload(s) of the run's commit.</p>
    ) : (
      <table class="list" aria-labelledby="failed-tests-h" id="failed-tests">
        <thead>
          <tr>
            <th scope="col">Test</th>
            <th scope="col">Mark</th>
            <th scope="col">Failure</th>
          </tr>
        </thead>
        <tbody>
          {failure.tests.failed.map((t) => (
            <tr key={t.testCaseId} data-test={t.name}>
              <td>
                <a href={testPath(repo, t.testCaseId)}>{t.name}</a>
                {t.classname !== "" && <span class="muted"> {t.classname}</span>}
              </td>
              <td>
                <Badge kind={`mark_${t.mark}`}>{markText(t)}</Badge>
              </td>
              <td>
                <code class="failure-summary">{t.message}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
    {failure.tests.truncated && <p class="muted">Only the first {failure.tests.failed.length} are shown.</p>}
  </div>
)

const seconds = (ms: number) =>
  ms < 1000 ? `${ms} ms` : ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`

/** Where the PR's time went, and each restart with the PR (and its run) whose failure caused it. */
export const TimeBreakdownView = ({ repo, target, b }: { repo: RepoKey; target: string; b: Breakdown }) => (
  <section aria-labelledby="breakdown-h" id="breakdown">
    <h2 id="breakdown-h">Time in the queue</h2>
    <p class="facts">
      waiting for a CI slot {seconds(b.waitingForSlotMs)} · waiting for a batch {seconds(b.waitingForBatchMs)} · testing{" "}
      {seconds(b.testingMs)} · restarts {b.restarts.length}
    </p>
    {b.restarts.length > 0 && (
      <ul class="plain" id="restarts">
        {b.restarts.map((r, i) => (
          <li key={`${r.at}-${i}`}>
            {when(r.at)} · {r.reason}
            {r.causedByPr !== null && (
              <>
                {" "}
                · caused by <a href={prPath(repo, r.causedByPr, target)}>#{r.causedByPr}</a>
                {r.causedByTestRunId != null && (
                  <>
                    {" "}
                    (run <a href={runPath(repo, target, r.causedByTestRunId)}>{shortId(r.causedByTestRunId)}</a>)
                  </>
                )}
              </>
            )}
          </li>
        ))}
      </ul>
    )}
  </section>
)

/** A queue's last failures, grouped by reason, by causing PR and by test failure kind. */
export const FailuresPage = ({ repo, branch }: { repo: RepoKey; branch: string }) => {
  const live = useLive(
    () => call("listQueueFailures", { repo, targetBranch: branch, limit: 50 }),
    `${queuePath(repo, branch)}/failures`
  )
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const v = live.data
  const prs = (list: ReadonlyArray<number>) =>
    list.map((n, i) => (
      <span key={`${n}-${i}`}>
        {i > 0 && ", "}
        <a href={prPath(repo, n, branch)}>#{n}</a>
      </span>
    ))
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          [branch, queuePath(repo, branch)],
          ["Failures", undefined]
        ]}
      />
      <header class="page-head">
        <h1>Failures of {branch}</h1>
        <p class="facts">the last {v.failures.length} failures, newest first</p>
      </header>
      <section aria-labelledby="by-reason-h">
        <h2 id="by-reason-h">By reason</h2>
        <ul class="plain" id="by-reason">
          {v.byReason.map((g) => (
            <li key={g.reason}>
              <strong>{g.reason}</strong> ({g.count}): {prs(g.prs)}
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="by-cause-h">
        <h2 id="by-cause-h">By causing pull request</h2>
        {v.byCausingPr.length === 0 && <p class="muted">None: every failure was the PR's own.</p>}
        <ul class="plain" id="by-cause">
          {v.byCausingPr.map((g) => (
            <li key={g.prNumber}>
              <a href={prPath(repo, g.prNumber, branch)}>#{g.prNumber}</a> took out {g.count}: {prs(g.prs)}
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="by-test-h">
        <h2 id="by-test-h">By test failure</h2>
        {v.byTest.length === 0 && <p class="muted">No failed test in the uploads of the failing runs.</p>}
        <table class="list" id="by-test">
          <thead>
            <tr>
              <th scope="col">Failure</th>
              <th scope="col">Tests</th>
              <th scope="col">Marks</th>
              <th scope="col">Pull requests</th>
            </tr>
          </thead>
          <tbody>
            {v.byTest.map((g, i) => (
              <tr key={`${g.message}-${i}`}>
                <td>
                  <code class="failure-summary">{g.message === "" ? "(no message)" : g.message}</code>
                </td>
                <td>{g.tests.join(", ")}</td>
                <td>{g.marks.map((m) => MARK_TEXT[m]).join(", ")}</td>
                <td>
                  {g.count}: {prs(g.prs)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <section aria-labelledby="all-failures-h">
        <h2 id="all-failures-h">Failures</h2>
        <table class="list" id="all-failures">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Pull request</th>
              <th scope="col">Reason</th>
              <th scope="col">Run</th>
              <th scope="col">Failed tests</th>
            </tr>
          </thead>
          <tbody>
            {v.failures.map((f, i) => (
              <tr key={`${f.prNumber}-${f.at}-${i}`} data-pr={f.prNumber}>
                <td>{when(f.at)}</td>
                <td>
                  <a href={prPath(repo, f.prNumber, branch)}>#{f.prNumber}</a> {f.title}
                </td>
                <td>
                  {f.reason}
                  {f.causedByPr !== null && (
                    <>
                      {" "}
                      (caused by <a href={prPath(repo, f.causedByPr, branch)}>#{f.causedByPr}</a>)
                    </>
                  )}
                </td>
                <td>
                  {f.testRunId === null ? "" : <a href={runPath(repo, branch, f.testRunId)}>{shortId(f.testRunId)}</a>}
                </td>
                <td>{f.failedTests}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </>
  )
}
