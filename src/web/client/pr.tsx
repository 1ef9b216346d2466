import { useState } from "preact/hooks"
import { type Answer, ApiFailure, call } from "./api.ts"
import { useLive } from "./hooks.ts"
import {
  ago,
  Badge,
  Crumbs,
  ErrorView,
  Eta,
  ExternalLink,
  Loading,
  PriorityBadge,
  prPath,
  queuePath,
  type RepoKey,
  repoPath,
  runPath,
  StateBadge,
  shortId,
  shortSha,
  when
} from "./ui.tsx"

/** The pull request page: state and actions, the timeline, its runs with their CI output, the comments. */

type Activity = Answer<"getPullRequestActivity">
type Run = Activity["runs"][number]
type CiOutput = Activity["ciOutputs"][number]

const ACTIVE = new Set(["not_ready", "pending", "testing", "tests_passed", "pending_failure"])

/** The run a timeline item belongs to: the latest run of this PR that had started by then and had not ended. */
const runAt = (runs: ReadonlyArray<Run>, at: string) => {
  const t = Date.parse(at)
  return runs.find(
    (r) => Date.parse(r.createdAt) <= t + 1000 && (r.endedAt === null || Date.parse(r.endedAt) >= t - 1000)
  )
}

export const CiOutputBlock = ({ output, open }: { output: CiOutput; open: boolean }) => (
  <details class="ci-output" open={open}>
    <summary>
      CI output · {shortSha(output.sha)} · {output.exitCode === null ? "running" : `exit code ${output.exitCode}`} ·{" "}
      {when(output.createdAt)}
    </summary>
    {output.truncated && <p class="muted">The first part is left out (the last 64 KiB are shown).</p>}
    <pre>{output.output}</pre>
    <p>
      <a href={`/ci/output/${output.id}`}>Plain text</a>
    </p>
  </details>
)

const Actions = ({
  repo,
  branch,
  pr,
  onDone
}: {
  repo: RepoKey
  branch: string
  pr: Activity["pullRequest"]
  onDone: () => void
}) => {
  const [busy, setBusy] = useState(false)
  const [message, setMessage] = useState<string | undefined>(undefined)
  const act = async (what: string, f: () => Promise<unknown>) => {
    setBusy(true)
    setMessage(undefined)
    try {
      await f()
      setMessage(`${what}: done`)
      onDone()
    } catch (e) {
      setMessage(`${what}: ${e instanceof ApiFailure ? e.message : String(e)}`)
    } finally {
      setBusy(false)
    }
  }
  const key = { repo, targetBranch: branch, pr: { number: pr.prNumber } }
  const active = ACTIVE.has(pr.state)
  return (
    <fieldset class="actions" aria-label="Actions">
      {active && (
        <button type="button" disabled={busy} onClick={() => act("Cancel", () => call("cancelPullRequest", key))}>
          Cancel
        </button>
      )}
      {(pr.state === "testing" || pr.state === "pending_failure") && (
        <button
          type="button"
          disabled={busy}
          onClick={() => act("Restart tests", () => call("restartTestsOnPullRequest", key))}
        >
          Restart tests
        </button>
      )}
      {!active && (
        <button type="button" disabled={busy} onClick={() => act("Submit", () => call("submitPullRequest", key))}>
          Submit again
        </button>
      )}
      {active && (
        <label>
          Priority{" "}
          <select
            disabled={busy}
            value={String(pr.priorityValue)}
            onChange={(e) => {
              const priority = Number((e.currentTarget as HTMLSelectElement).value)
              void act("Priority", () => call("submitPullRequest", { ...key, priority }))
            }}
          >
            <option value="0">urgent</option>
            <option value="10">high</option>
            <option value="100">medium</option>
            <option value="200">low</option>
          </select>
        </label>
      )}
      {message !== undefined && (
        <span role="status" class="muted">
          {message}
        </span>
      )}
    </fieldset>
  )
}

export const PrPage = ({ repo, number, branch }: { repo: RepoKey; number: number; branch: string | undefined }) => {
  const live = useLive(
    () =>
      call("getPullRequestActivity", {
        repo,
        pr: { number },
        ...(branch === undefined ? {} : { targetBranch: branch })
      }),
    prPath(repo, number, branch)
  )
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const a = live.data
  const pr = a.pullRequest
  const target = a.targetBranch
  const failingRun = pr.state === "failed" && pr.testRunId !== null ? pr.testRunId : null
  const failingOutput = failingRun === null ? undefined : a.ciOutputs.find((o) => o.runId === failingRun)
  const timeline = pr.timeline ?? []
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          [target, queuePath(repo, target)],
          [`#${number}`, undefined]
        ]}
      />
      <header class="page-head">
        <h1>
          {pr.prTitle} <span class="muted">#{pr.prNumber}</span>
        </h1>
        <p class="facts">
          <StateBadge state={pr.state} /> <PriorityBadge value={pr.priorityValue} /> by {pr.prAuthor} · head{" "}
          <code>{shortSha(pr.prSha)}</code> · into <a href={queuePath(repo, target)}>{target}</a>
          {pr.position !== null && ` · position ${pr.position}`}
          {ACTIVE.has(pr.state) && (
            <span class="pr-eta">
              {" "}
              · ETA{" "}
              <Eta
                mergeAt={pr.estimatedMergeAt}
                testingStartAt={pr.estimatedTestingStartAt}
                range={pr.estimatedMergeRange}
                unavailable={pr.estimateUnavailableReason}
              />
            </span>
          )}
          {a.targetBranches.length > 1 &&
            a.targetBranches
              .filter((b) => b !== target)
              .map((b) => (
                <span key={b}>
                  {" "}
                  · also in <a href={prPath(repo, number, b)}>{b}</a>
                </span>
              ))}
        </p>
        <Actions repo={repo} branch={target} pr={pr} onDone={() => void live.refresh()} />
      </header>

      {pr.state === "not_ready" && (
        <section class="card" aria-labelledby="ready-h" id="readiness">
          <h2 id="ready-h">Not ready: what it waits for</h2>
          <ul class="checklist">
            {pr.readiness.requiresImpactedTargets ? (
              <li>
                {pr.readiness.hasImpactedTargets ? "☑" : "☐"} impacted targets uploaded for the head{" "}
                <code>{shortSha(pr.prSha)}</code>
              </li>
            ) : (
              <li>☑ no impacted targets needed ({target} is not a parallel queue)</li>
            )}
            <li>
              {pr.readiness.doesBaseBranchMatch ? "☑" : "☐"} based on {target}
            </li>
            {pr.readiness.gitHubMergeability !== "unspecified" && (
              <li>
                {pr.readiness.gitHubMergeability === "mergeable" ? "☑" : "☐"} mergeable (
                {pr.readiness.gitHubMergeability.replace(/_/g, " ")})
              </li>
            )}
          </ul>
        </section>
      )}

      {failingRun !== null && (
        <section class="card failure" aria-labelledby="failed-h">
          <h2 id="failed-h">Why it failed</h2>
          <p>
            {timeline.at(-1)?.reason ?? "failed"} in{" "}
            <a href={runPath(repo, target, failingRun)}>run {shortId(failingRun)}</a>
            {failingOutput !== undefined && (
              <>
                {" "}
                · <a href="#failing-output">CI output of the failing run</a>
              </>
            )}
          </p>
          {failingOutput !== undefined && (
            <div id="failing-output">
              <CiOutputBlock output={failingOutput} open={true} />
            </div>
          )}
        </section>
      )}

      <section aria-labelledby="timeline-h">
        <h2 id="timeline-h">Timeline</h2>
        <table class="list">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">State</th>
              <th scope="col">Reason</th>
              <th scope="col">Run</th>
            </tr>
          </thead>
          <tbody>
            {timeline.map((t, i) => {
              const run =
                t.state === "testing" || t.state === "failed" || t.state === "merged" ? runAt(a.runs, t.at) : undefined
              return (
                <tr key={`${t.at}-${i}`}>
                  <td>{when(t.at)}</td>
                  <td>
                    <StateBadge state={t.state} />
                  </td>
                  <td>{t.reason}</td>
                  <td>{run === undefined ? "" : <a href={runPath(repo, target, run.id)}>{shortId(run.id)}</a>}</td>
                </tr>
              )
            })}
          </tbody>
        </table>
      </section>

      <section aria-labelledby="runs-h">
        <h2 id="runs-h">Test runs ({a.runs.length})</h2>
        {a.runs.length === 0 && <p class="muted">Not tested yet.</p>}
        {a.runs.map((r) => {
          const outputs = a.ciOutputs.filter((o) => o.runId === r.id)
          const others = r.testedPrNumbers.filter((n) => n !== number)
          return (
            <article key={r.id} class="card">
              <h3>
                <a href={runPath(repo, target, r.id)}>run {shortId(r.id)}</a> <Badge kind={r.status}>{r.status}</Badge>
              </h3>
              <p class="facts">
                branch <code>{r.branch}</code> · sha <code>{shortSha(r.testBranchSha)}</code> · started{" "}
                {ago(r.createdAt)} ago
                {others.length > 0 && (
                  <>
                    {" "}
                    · tested with{" "}
                    {others.map((n) => (
                      <a key={n} href={prPath(repo, n, target)}>
                        #{n}{" "}
                      </a>
                    ))}
                  </>
                )}
                {r.failureReason !== null && ` · ${r.failureReason}`}
              </p>
              {outputs
                .filter((o) => o !== failingOutput)
                .map((o) => (
                  <CiOutputBlock key={o.id} output={o} open={false} />
                ))}
            </article>
          )
        })}
      </section>

      <section aria-labelledby="comments-h">
        <h2 id="comments-h">Comments ({a.comments.length})</h2>
        {a.comments.length === 0 && <p class="muted">None.</p>}
        {a.comments.map((c) => (
          <article key={c.id} class="card comment">
            <p class="muted">{when(c.createdAt)}</p>
            <pre class="comment-body">{c.body}</pre>
          </article>
        ))}
      </section>
    </>
  )
}

/** The test run page: branch, SHA, status, required and reported statuses, PRs tested and dependent, targets. */
export const RunPage = ({ repo, branch, id }: { repo: RepoKey; branch: string; id: string }) => {
  const live = useLive(
    async () => {
      const details = await call("getMergeQueueTestingDetails", { repo, targetBranch: branch, testRunId: id })
      const first = details.testedPullRequests[0]
      const activity =
        first === undefined
          ? undefined
          : await call("getPullRequestActivity", { repo, targetBranch: branch, pr: { number: first.prNumber } })
      return { details, outputs: activity?.ciOutputs.filter((o) => o.runId === id) ?? [] }
    },
    `${repoPath(repo)}/runs/${id}/${branch}`
  )
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const { details: d, outputs } = live.data
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          [branch, queuePath(repo, branch)],
          [`run ${shortId(id)}`, undefined]
        ]}
      />
      <header class="page-head">
        <h1>
          Test run <code>{shortId(id)}</code>
        </h1>
        <p class="facts">
          <Badge kind={d.status}>{d.status}</Badge> · branch <code>{d.testBranch}</code> · sha{" "}
          <code>{shortSha(d.testBranchSha)}</code> · created {when(d.createdAt)}
        </p>
      </header>
      <section aria-labelledby="tested-h">
        <h2 id="tested-h">Pull requests</h2>
        <ul class="plain">
          {d.testedPullRequests.map((p) => (
            <li key={p.prNumber}>
              <a href={prPath(repo, p.prNumber, branch)}>#{p.prNumber}</a> {p.title}
            </li>
          ))}
        </ul>
        {d.dependentPrs.length > 0 && (
          <p>
            Built on (dependent PRs):{" "}
            {d.dependentPrs.map((n) => (
              <a key={n} href={prPath(repo, n, branch)}>
                #{n}{" "}
              </a>
            ))}
          </p>
        )}
      </section>
      <section aria-labelledby="statuses-h">
        <h2 id="statuses-h">Statuses</h2>
        <p>
          Required: {d.requiredStatuses.length === 0 ? "none" : d.requiredStatuses.join(", ")}
          {d.requiredStatusesSource !== null && <span class="muted"> (from {d.requiredStatusesSource})</span>}
        </p>
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">State</th>
            </tr>
          </thead>
          <tbody>
            {d.statusChecks.map((s) => (
              <tr key={s.context}>
                <td>
                  <ExternalLink url={s.url}>{s.context}</ExternalLink>
                </td>
                <td>
                  <Badge kind={s.state.toLowerCase()}>{s.state}</Badge>
                </td>
              </tr>
            ))}
            {d.checkSuites.flatMap((suite) =>
              suite.checkRuns.map((c) => (
                <tr key={`check-${c.name}`}>
                  <td>
                    <ExternalLink url={c.url}>{c.name}</ExternalLink>
                  </td>
                  <td>
                    <Badge kind={(c.conclusion ?? c.status ?? "").toLowerCase()}>
                      {c.conclusion ?? c.status ?? "—"}
                    </Badge>
                  </td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      </section>
      {d.impactedTargets !== undefined && (
        <section aria-labelledby="targets-h">
          <h2 id="targets-h">Impacted targets</h2>
          <p>{d.impactedTargets.length === 0 ? "none" : d.impactedTargets.slice(0, 200).join(", ")}</p>
        </section>
      )}
      <section aria-labelledby="output-h" id="output">
        <h2 id="output-h">CI output</h2>
        {outputs.length === 0 && <p class="muted">No output from the built-in CI.</p>}
        {outputs.map((o) => (
          <CiOutputBlock key={o.id} output={o} open={true} />
        ))}
      </section>
    </>
  )
}
