import { useState } from "preact/hooks"
import { type Answer, ApiFailure, call } from "./api.ts"
import { useLive } from "./hooks.ts"
import { Badge, Crumbs, ErrorView, Loading, NotFound, when } from "./ui.tsx"

/**
 * Webhook deliveries (issue #34): the organization's endpoints with their health, and an endpoint's messages with
 * every attempt (request headers, the receiver's status, the first 4 KiB of its answer, the duration). Actions:
 * resend one message, resend every failed message since a time, disable (or enable), rotate the secret. The page
 * needs role `maintain` (the webhook operations' role, `http/routes/events.ts`).
 */

type Endpoint = Answer<"listWebhookEndpoints">["endpoints"][number]
type Message = Answer<"listWebhookDeliveries">["messages"][number]
type Attempt = Message["attempts"][number]

export const webhooksPath = "/webhooks"
export const endpointPath = (id: string) => `/webhooks/${encodeURIComponent(id)}`

const messageOf = (e: unknown) =>
  e instanceof ApiFailure
    ? `${e.message}${e.details.length > 0 ? `: ${e.details.map((d) => d.message).join("; ")}` : ""}`
    : String(e)

const HealthBadge = ({ endpoint }: { endpoint: Endpoint }) => (
  <Badge kind={endpoint.health.state}>{endpoint.health.state}</Badge>
)

const Health = ({ endpoint }: { endpoint: Endpoint }) => {
  const h = endpoint.health
  return (
    <>
      <HealthBadge endpoint={endpoint} />
      {h.state === "failing" && h.failingSince !== null && (
        <span class="reason">
          {" "}
          failing since {when(h.failingSince)}
          {h.nextProbeAt !== null && <>, next try {when(h.nextProbeAt)}</>}
        </span>
      )}
      {h.state === "disabled" && endpoint.disabledReason !== null && (
        <span class="reason"> {endpoint.disabledReason}</span>
      )}
    </>
  )
}

export const WebhooksPage = () => {
  const live = useLive(() => call("listWebhookEndpoints", {}), "webhooks", 10_000)
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          ["Webhooks", undefined]
        ]}
      />
      <h1>Webhook deliveries</h1>
      {live.error !== undefined && live.data === undefined ? (
        <ErrorView error={live.error} />
      ) : live.data === undefined ? (
        <Loading />
      ) : live.data.endpoints.length === 0 ? (
        <p class="muted">No webhook endpoints yet: register one with POST /v1/createWebhookEndpoint.</p>
      ) : (
        <table class="list" id="endpoints">
          <thead>
            <tr>
              <th scope="col">Endpoint</th>
              <th scope="col">Events</th>
              <th scope="col">Health</th>
              <th scope="col">Last delivery</th>
              <th scope="col">Waiting</th>
              <th scope="col">Failed</th>
            </tr>
          </thead>
          <tbody>
            {live.data.endpoints.map((e) => (
              <tr key={e.id}>
                <td>
                  <a href={endpointPath(e.id)}>{e.url}</a>
                  {e.description !== "" && <div class="muted">{e.description}</div>}
                </td>
                <td>
                  {e.eventTypes === null ? <span class="muted">all</span> : e.eventTypes.join(", ")}
                  {e.repo !== null && (
                    <div class="muted">
                      {e.repo.owner}/{e.repo.name}
                    </div>
                  )}
                </td>
                <td>
                  <Health endpoint={e} />
                </td>
                <td>{e.health.lastSuccessAt === null ? "—" : when(e.health.lastSuccessAt)}</td>
                <td>{e.health.pending}</td>
                <td>{e.health.failed}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  )
}

const AttemptView = ({ attempt, n }: { attempt: Attempt; n: number }) => (
  <details class="attempt">
    <summary>
      Attempt {n}: {when(attempt.at)} —{" "}
      {attempt.status === null ? (
        <Badge kind="failed">no answer</Badge>
      ) : (
        <Badge kind={attempt.status < 300 ? "success" : "failed"}>{String(attempt.status)}</Badge>
      )}{" "}
      <span class="muted">{attempt.durationMs} ms</span>
      {attempt.error !== null && <span class="reason"> {attempt.error}</span>}
    </summary>
    <h4>Request headers</h4>
    {attempt.requestHeaders === null ? (
      <p class="muted">not recorded</p>
    ) : (
      <table class="list headers">
        <tbody>
          {Object.entries(attempt.requestHeaders).map(([k, v]) => (
            <tr key={k}>
              <th scope="row">{k}</th>
              <td>
                <code>{v}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    )}
    <h4>Response body (first 4 KiB)</h4>
    {attempt.responseBody === null || attempt.responseBody === "" ? (
      <p class="muted">empty</p>
    ) : (
      <pre class="response-body">{attempt.responseBody}</pre>
    )}
  </details>
)

const MessageRow = ({ message, resend }: { message: Message; resend: (id: string) => Promise<void> }) => (
  <li class="card message" data-message={message.id}>
    <div class="toolbar">
      <strong>{message.eventType}</strong>
      <Badge kind={message.status}>{message.status}</Badge>
      <span class="muted">{when(message.timestamp)}</span>
      <code class="muted">{message.id}</code>
      {message.nextAttemptAt !== null && <span class="reason">next attempt {when(message.nextAttemptAt)}</span>}
      <button type="button" onClick={() => resend(message.id)}>
        Resend
      </button>
    </div>
    {message.attempts.length === 0 ? (
      <p class="muted">not attempted yet</p>
    ) : (
      message.attempts.map((a, i) => <AttemptView key={a.at + i} attempt={a} n={i + 1} />)
    )}
  </li>
)

/** A local date-time input's value for a time (minutes precision). */
const localInput = (ms: number) => {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000)
  return d.toISOString().slice(0, 16)
}

export const EndpointPage = ({ id }: { id: string }) => {
  const [filter, setFilter] = useState<"" | "pending" | "delivered" | "failed">("")
  const endpoints = useLive(() => call("listWebhookEndpoints", {}), `webhook/${id}`, 10_000)
  const messages = useLive(
    () =>
      call("listWebhookDeliveries", {
        endpointId: id,
        ...(filter === "" ? {} : { status: filter }),
        page_query: { page_size: 50, page_token: "" }
      }),
    `webhook-messages/${id}/${filter}`,
    5_000
  )
  const [since, setSince] = useState(() => localInput(Date.now() - 24 * 3_600_000))
  const [notice, setNotice] = useState<string | undefined>(undefined)
  const [secret, setSecret] = useState<string | undefined>(undefined)
  const [problem, setProblem] = useState<string | undefined>(undefined)
  if (endpoints.error !== undefined && endpoints.data === undefined) return <ErrorView error={endpoints.error} />
  if (endpoints.data === undefined) return <Loading />
  const endpoint = endpoints.data.endpoints.find((e) => e.id === id)
  if (endpoint === undefined) return <NotFound message="There is no such webhook endpoint in your organization." />
  const act = async (what: () => Promise<string>) => {
    setProblem(undefined)
    setNotice(undefined)
    try {
      setNotice(await what())
      void endpoints.refresh()
      void messages.refresh()
    } catch (e) {
      setProblem(messageOf(e))
    }
  }
  const resend = (messageId: string) =>
    act(async () => {
      const r = await call("replayWebhookMessages", { endpointId: id, messageIds: [messageId] })
      return r.replayed === 1 ? `Message ${messageId} will be sent again.` : "Nothing to resend."
    })
  const resendFailed = (event: Event) => {
    event.preventDefault()
    return act(async () => {
      const at = new Date(since)
      if (Number.isNaN(at.getTime())) throw new Error("choose a date and time")
      const r = await call("replayWebhookMessages", { endpointId: id, since: at.toISOString(), onlyFailed: true })
      return `${r.replayed} failed message${r.replayed === 1 ? "" : "s"} will be sent again.`
    })
  }
  const toggle = () =>
    act(async () => {
      if (!endpoint.disabled && !confirm("Disable this endpoint? It gets no messages until it is enabled again.")) {
        return "Not disabled."
      }
      await call("updateWebhookEndpoint", { id, disabled: !endpoint.disabled })
      return endpoint.disabled ? "Enabled." : "Disabled."
    })
  const rotate = () =>
    act(async () => {
      if (!confirm("Rotate the signing secret? The old one still signs for 24 hours beside the new one.")) {
        return "Not rotated."
      }
      const r = await call("rotateWebhookSecret", { id })
      setSecret(r.secret)
      return "Secret rotated: for 24 hours messages carry both signatures."
    })
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          ["Webhooks", webhooksPath],
          [endpoint.url, undefined]
        ]}
      />
      <h1>
        {endpoint.url} <Health endpoint={endpoint} />
      </h1>
      <section class="card" aria-labelledby="endpoint-h">
        <h2 id="endpoint-h">Endpoint</h2>
        <p>
          {endpoint.description !== "" && <>{endpoint.description} · </>}
          events: {endpoint.eventTypes === null ? "all" : endpoint.eventTypes.join(", ")}
          {endpoint.repo !== null && (
            <>
              {" "}
              · repository {endpoint.repo.owner}/{endpoint.repo.name}
            </>
          )}{" "}
          · {endpoint.health.pending} waiting · {endpoint.health.failed} failed · last delivery{" "}
          {endpoint.health.lastSuccessAt === null ? "never" : when(endpoint.health.lastSuccessAt)}
        </p>
        <fieldset class="actions">
          <legend class="sr-only">Endpoint actions</legend>
          <button type="button" onClick={toggle}>
            {endpoint.disabled ? "Enable" : "Disable"}
          </button>{" "}
          <button type="button" onClick={rotate}>
            Rotate secret
          </button>
        </fieldset>
        <form class="toolbar" onSubmit={resendFailed}>
          <label for="resend-since">Failed messages since</label>
          <input
            id="resend-since"
            type="datetime-local"
            value={since}
            onInput={(e) => setSince((e.currentTarget as HTMLInputElement).value)}
          />
          <button type="submit">Resend failed</button>
        </form>
        {secret !== undefined && (
          <p role="status">
            New secret (shown only now): <code class="secret">{secret}</code>
          </p>
        )}
        {notice !== undefined && (
          <p role="status" class="muted">
            {notice}
          </p>
        )}
        {problem !== undefined && (
          <p role="alert" class="error">
            {problem}
          </p>
        )}
      </section>
      <section aria-labelledby="messages-h">
        <h2 id="messages-h">Messages</h2>
        <p>
          <label for="message-filter">Show</label>{" "}
          <select
            id="message-filter"
            value={filter}
            onChange={(e) => setFilter((e.currentTarget as HTMLSelectElement).value as typeof filter)}
          >
            <option value="">all</option>
            <option value="pending">waiting</option>
            <option value="delivered">delivered</option>
            <option value="failed">failed</option>
          </select>
        </p>
        {messages.error !== undefined && messages.data === undefined ? (
          <ErrorView error={messages.error} />
        ) : messages.data === undefined ? (
          <Loading />
        ) : messages.data.messages.length === 0 ? (
          <p class="muted">No messages.</p>
        ) : (
          <ul class="plain" id="messages">
            {messages.data.messages.map((m) => (
              <MessageRow key={m.id} message={m} resend={resend} />
            ))}
          </ul>
        )}
      </section>
    </>
  )
}
