import { call } from "./api.ts"
import { useLive } from "./hooks.ts"
import {
  Badge,
  Crumbs,
  duration,
  ErrorView,
  Loading,
  queuePath,
  type RepoKey,
  repoPath,
  StateBadge,
  testsPath
} from "./ui.tsx"

/** Home: every queue of the organization with its figures; the repository page: one repository's queues. */

const QueueTable = ({ filter }: { filter?: RepoKey }) => {
  const live = useLive(() => call("listQueues", {}), "listQueues")
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const queues = live.data.queues.filter(
    (q) =>
      filter === undefined ||
      (q.repo.host === filter.host && q.repo.owner === filter.owner && q.repo.name === filter.name)
  )
  if (queues.length === 0) return <p class="muted">No queues yet: create one with POST /v1/createQueue.</p>
  return (
    <table class="list" id="queues">
      <thead>
        <tr>
          <th scope="col">Repository</th>
          <th scope="col">Branch</th>
          <th scope="col">State</th>
          <th scope="col">Mode</th>
          <th scope="col">Waiting</th>
          <th scope="col">Testing</th>
          <th scope="col">Merged 24 h</th>
          <th scope="col">Success rate</th>
          <th scope="col">p50 in queue</th>
        </tr>
      </thead>
      <tbody>
        {queues.map((q) => (
          <tr key={`${q.repo.host}/${q.repo.owner}/${q.repo.name}@${q.targetBranch}`}>
            <td>
              <a href={repoPath(q.repo)}>
                {q.repo.owner}/{q.repo.name}
              </a>{" "}
              <span class="muted">{q.repo.host}</span>
            </td>
            <td>
              <a href={queuePath(q.repo, q.targetBranch)}>{q.targetBranch}</a>
            </td>
            <td>
              <StateBadge state={q.state} />
            </td>
            <td>
              <Badge kind="mode">{q.mode}</Badge>
            </td>
            <td>{q.waiting}</td>
            <td>{q.testing}</td>
            <td>{q.merged24h}</td>
            <td>{q.successRate24h === null ? "—" : `${Math.round(q.successRate24h * 100)}%`}</td>
            <td>{duration(q.p50TimeInQueueSeconds)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

export const HomePage = () => (
  <>
    <h1>Queues</h1>
    <QueueTable />
  </>
)

export const RepoPage = ({ repo }: { repo: RepoKey }) => (
  <>
    <Crumbs
      items={[
        ["Queues", "/"],
        [`${repo.owner}/${repo.name}`, undefined]
      ]}
    />
    <h1>
      {repo.owner}/{repo.name} <span class="muted">{repo.host}</span>
    </h1>
    <p>
      <a href={testsPath(repo)}>Flaky tests</a>
    </p>
    <QueueTable filter={repo} />
  </>
)
