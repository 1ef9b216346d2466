import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"
import { type Answer, ApiFailure, call } from "./api.ts"
import { useLive } from "./hooks.ts"
import {
  ago,
  Badge,
  Crumbs,
  ErrorView,
  Eta,
  fromNow,
  healthPath,
  Loading,
  PriorityBadge,
  prPath,
  queuePath,
  type RepoKey,
  repoPath,
  runPath,
  StateBadge,
  settingsPath,
  shortId,
  shortSha,
  testsPath
} from "./ui.tsx"

/** The queue page: header and controls, the runs in flight as a graph, the waiting list, not ready, conclusions. */

type Queue = Answer<"getQueue">
type Activity = Answer<"getQueueActivity">
type Run = Activity["runs"][number]
type Entry = Queue["enqueuedPullRequests"][number]
type EntryView = Activity["active"][number]

/** Why an entry waits, in words, from its state, its run and the entries ahead of it. */
const waitReason = (e: Entry, queue: Queue, runs: ReadonlyArray<Run>, failedAhead: number | undefined) => {
  const run = runs.find((r) => r.id === e.testRunId)
  switch (e.state) {
    case "pending":
      if (failedAhead !== undefined) return `held: PR ${failedAhead} failed ahead`
      if (queue.state === "paused") return "waiting: the queue is paused"
      return queue.batch ? "filling a batch" : "waiting for a CI slot"
    case "testing":
      if (failedAhead !== undefined) return `testing; held: PR ${failedAhead} failed ahead`
      return run === undefined
        ? "testing"
        : run.testedPrNumbers.length > 1
          ? `testing in a batch of ${run.testedPrNumbers.length}`
          : "testing"
    case "tests_passed":
      return "passed; merges when the runs ahead pass"
    case "pending_failure":
      return "failed; held while the runs ahead finish"
    default:
      return e.state
  }
}

/**
 * What a not-ready PR waits for, from what the engine decides readiness on (getQueueActivity's `readiness`): the
 * impacted targets of its current head in a parallel queue, and when it is cancelled if it stays not ready.
 */
const Checklist = ({ entry, branch, now }: { entry: EntryView; branch: string; now: number }) => {
  const r = entry.readiness
  if (r === undefined) return null
  const item = (done: boolean, text: ComponentChildren) => (
    <li class={done ? "check-done" : "check-open"}>
      <span aria-hidden="true">{done ? "☑" : "☐"}</span> <span class="sr-only">{done ? "done:" : "waiting for:"}</span>{" "}
      {text}
    </li>
  )
  return (
    <ul class="checklist">
      {r.impactedTargetsRequired
        ? item(
            r.impactedTargetsUploaded,
            <>
              impacted targets uploaded for the head <code>{shortSha(r.headSha)}</code>
            </>
          )
        : item(true, `no impacted targets needed (${branch} is not a parallel queue); the runner takes it next round`)}
      {r.cancelsAt === null ? (
        <li class="muted">never cancelled for waiting (the queue's not-ready timeout is beyond any date)</li>
      ) : (
        <li class="muted">
          cancelled{" "}
          <time dateTime={r.cancelsAt} title={new Date(r.cancelsAt).toLocaleString()}>
            {fromNow(r.cancelsAt, now)}
          </time>{" "}
          if still not ready
        </li>
      )}
    </ul>
  )
}

const QueueControls = ({
  repo,
  branch,
  queue,
  onDone
}: {
  repo: RepoKey
  branch: string
  queue: Queue
  onDone: () => void
}) => {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | undefined>(undefined)
  const set = async (state: "running" | "paused" | "draining") => {
    setBusy(true)
    setError(undefined)
    try {
      await call("updateQueue", { repo, targetBranch: branch, state })
      onDone()
    } catch (e) {
      setError(e instanceof ApiFailure ? e.message : String(e))
    } finally {
      setBusy(false)
    }
  }
  return (
    <fieldset class="actions" aria-label="Queue state">
      {queue.state !== "running" && (
        <button type="button" disabled={busy} onClick={() => set("running")}>
          Resume
        </button>
      )}
      {queue.state !== "paused" && (
        <button type="button" disabled={busy} onClick={() => set("paused")}>
          Pause
        </button>
      )}
      {queue.state !== "draining" && (
        <button type="button" disabled={busy} onClick={() => set("draining")}>
          Drain
        </button>
      )}
      {error !== undefined && (
        <span class="error" role="alert">
          {error}
        </span>
      )}
    </fieldset>
  )
}

/** One run: what it is built on (the PRs ahead, or the run it extends), what it tests, and its kind. */
const RunNode = ({
  run,
  repo,
  branch,
  runs,
  titles
}: {
  run: Run
  repo: RepoKey
  branch: string
  runs: ReadonlyArray<Run>
  titles: Map<number, string>
}) => {
  const ahead = run.prNumbers.filter((n) => !run.testedPrNumbers.includes(n))
  const base = runs.find(
    (r) =>
      r.id !== run.id &&
      r.prNumbers.length === ahead.length &&
      r.prNumbers.length > 0 &&
      r.prNumbers.every((n, i) => ahead[i] === n)
  )
  const kind = run.queueType === "bisection" ? "bisection half" : run.testedPrNumbers.length > 1 ? "batch" : "single"
  const Chip = ({ n, tested }: { n: number; tested: boolean }) => (
    <a
      class={tested ? "chip chip-tested" : "chip chip-ahead"}
      href={prPath(repo, n, branch)}
      title={titles.get(n) ?? ""}
    >
      #{n}
    </a>
  )
  return (
    <li class={`run run-${run.status}`}>
      <div class="run-head">
        <a href={runPath(repo, branch, run.id)}>run {shortId(run.id)}</a> <Badge kind={run.status}>{run.status}</Badge>{" "}
        <Badge kind="kind">{kind}</Badge> <span class="muted">started {ago(run.createdAt)} ago</span>
      </div>
      <div class="run-body">
        {ahead.length > 0 && (
          <span class="run-base">
            built on {base !== undefined ? <a href={runPath(repo, branch, base.id)}>run {shortId(base.id)}</a> : "PRs"}{" "}
            {ahead.map((n) => (
              <Chip key={n} n={n} tested={false} />
            ))}
            <span aria-hidden="true"> → </span>
          </span>
        )}
        <span class="run-tested">
          tests{" "}
          {run.testedPrNumbers.map((n) => (
            <Chip key={n} n={n} tested={true} />
          ))}
        </span>
        {run.parentRunId !== null && (
          <span class="muted">
            {" "}
            (half of <a href={runPath(repo, branch, run.parentRunId)}>run {shortId(run.parentRunId)}</a>)
          </span>
        )}
      </div>
    </li>
  )
}

const NO_ACTIVITY: Activity = { runs: [], active: [], recent: [] }

export const QueuePage = ({ repo, branch }: { repo: RepoKey; branch: string }) => {
  const key = { repo, targetBranch: branch }
  // the queue first (the list people come for), its runs and conclusions beside it: neither waits for the other
  const live = useLive(() => call("getQueue", key), queuePath(repo, branch))
  const more = useLive(() => call("getQueueActivity", key), `${queuePath(repo, branch)}#activity`)
  const loaded = live.data !== undefined
  useEffect(() => {
    // the first render with data, for the browser tests' Performance API measurement
    if (loaded && performance.getEntriesByName("greenline:queue-rendered").length === 0) {
      performance.mark("greenline:queue-rendered")
    }
  }, [loaded])
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const queue = live.data
  const activity = more.data ?? NO_ACTIVITY
  const refresh = () => {
    void live.refresh()
    void more.refresh()
  }
  const titles = new Map<number, string>()
  for (const e of activity.active) titles.set(e.prNumber, e.title)
  const byPr = new Map<number, EntryView>(activity.active.map((e) => [e.prNumber, e]))
  const now = Date.now()
  const notReady = activity.active.filter((e) => e.state === "not_ready")
  let failedAhead: number | undefined
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          [`${repo.owner}/${repo.name}`, repoPath(repo)],
          [branch, undefined]
        ]}
      />
      <header class="page-head">
        <h1>
          {repo.owner}/{repo.name} <span class="muted">→ {branch}</span>
        </h1>
        <p class="facts">
          <StateBadge state={queue.state} /> <Badge kind="mode">{queue.mode}</Badge> concurrency {queue.concurrency}
          {queue.batch && ` · batches of ${queue.batchingMinSize}+`} · {queue.enqueuedPullRequests.length} in queue
        </p>
        <QueueControls repo={repo} branch={branch} queue={queue} onDone={refresh} />
        <p class="links">
          <a href={healthPath(repo, branch)}>Health</a> · <a href={settingsPath(repo, branch)}>Settings</a> ·{" "}
          <a href={testsPath(repo)}>Flaky tests</a>
        </p>
        {live.error !== undefined && (
          <p class="error" role="status">
            Not updated: {live.error.message}
          </p>
        )}
      </header>

      <section aria-labelledby="testing-h">
        <h2 id="testing-h">Testing ({activity.runs.length} runs)</h2>
        {more.data === undefined ? (
          <Loading />
        ) : activity.runs.length === 0 ? (
          <p class="muted">No run in flight.</p>
        ) : (
          <ol class="graph">
            {activity.runs.map((r) => (
              <RunNode key={r.id} run={r} repo={repo} branch={branch} runs={activity.runs} titles={titles} />
            ))}
          </ol>
        )}
      </section>

      <section aria-labelledby="waiting-h">
        <h2 id="waiting-h">Queue ({queue.enqueuedPullRequests.length})</h2>
        {queue.enqueuedPullRequests.length === 0 ? (
          <p class="muted">Nothing queued.</p>
        ) : (
          <table class="list" id="waiting">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">PR</th>
                <th scope="col">Title</th>
                <th scope="col">Author</th>
                <th scope="col">State</th>
                <th scope="col">In queue</th>
                <th scope="col">ETA</th>
              </tr>
            </thead>
            <tbody>
              {queue.enqueuedPullRequests.map((e) => {
                const reason = waitReason(e, queue, activity.runs, failedAhead)
                if (e.state === "pending_failure" && failedAhead === undefined) failedAhead = e.prNumber
                const view = byPr.get(e.prNumber)
                return (
                  <tr key={e.id} data-pr={e.prNumber}>
                    <td>{e.position ?? "—"}</td>
                    <td>
                      <a href={prPath(repo, e.prNumber, branch)}>#{e.prNumber}</a>
                    </td>
                    <td>
                      {e.prTitle} <PriorityBadge value={e.priorityValue} />
                    </td>
                    <td>{e.prAuthor}</td>
                    <td>
                      <StateBadge state={e.state} /> <span class="reason">{reason}</span>
                    </td>
                    <td>{view === undefined ? "—" : ago(view.submittedAt, now)}</td>
                    <td>
                      <Eta
                        mergeAt={e.estimatedMergeAt}
                        testingStartAt={e.estimatedTestingStartAt}
                        range={e.estimatedMergeRange}
                        unavailable={e.estimateUnavailableReason}
                        now={now}
                      />
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        )}
      </section>

      <section aria-labelledby="notready-h">
        <h2 id="notready-h">Not ready ({notReady.length})</h2>
        {notReady.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <ul class="plain">
            {notReady.map((e) => (
              <li key={e.prNumber}>
                <a href={prPath(repo, e.prNumber, branch)}>#{e.prNumber}</a> {e.title}{" "}
                <span class="muted">
                  since {ago(e.stateChangedAt, now)} ago{e.reason !== "" && ` · ${e.reason}`}
                </span>
                <Checklist entry={e} branch={branch} now={now} />
              </li>
            ))}
          </ul>
        )}
      </section>

      <section aria-labelledby="recent-h">
        <h2 id="recent-h">Recent conclusions</h2>
        {more.data === undefined ? (
          <Loading />
        ) : activity.recent.length === 0 ? (
          <p class="muted">None yet.</p>
        ) : (
          <table class="list" id="recent">
            <thead>
              <tr>
                <th scope="col">PR</th>
                <th scope="col">Title</th>
                <th scope="col">Outcome</th>
                <th scope="col">Reason</th>
                <th scope="col">When</th>
              </tr>
            </thead>
            <tbody>
              {activity.recent.map((e) => (
                <tr key={`${e.prNumber}-${e.endedAt}`} data-pr={e.prNumber}>
                  <td>
                    <a href={prPath(repo, e.prNumber, branch)}>#{e.prNumber}</a>
                  </td>
                  <td>{e.title}</td>
                  <td>
                    <StateBadge state={e.state} />
                  </td>
                  <td>
                    {e.reason}
                    {e.state === "failed" && e.runId !== null && (
                      <>
                        {" "}
                        · <a href={runPath(repo, branch, e.runId)}>failing run</a>
                      </>
                    )}
                  </td>
                  <td>{ago(e.endedAt, now)} ago</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  )
}
