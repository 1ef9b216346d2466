import { useState } from "preact/hooks"
import { type Answer, call, orgSlug } from "./api.ts"
import { useLive } from "./hooks.ts"
import { Badge, Crumbs, ErrorView, Loading, when } from "./ui.tsx"

/**
 * The audit log (role admin): every change made through the API or the dashboard, and every refused attempt, with
 * who made it, in which role, on what, and from where. Filters by outcome, action and actor; pages of 50, newest
 * first; a listing's pages stay the same while new events arrive (the first page follows them).
 */

type Outcome = "" | "allowed" | "refused"
const SIZE = 50

export const AuditPage = () => {
  const [outcome, setOutcome] = useState<Outcome>("")
  // what is typed (kept as typed), and what filters (applied on Enter or leaving the field)
  const [actionDraft, setActionDraft] = useState("")
  const [actorDraft, setActorDraft] = useState("")
  const [action, setAction] = useState("")
  const [actor, setActor] = useState("")
  // the page tokens of the pages before this one, and this one's ("" is the first, which follows new events)
  const [tokens, setTokens] = useState<ReadonlyArray<string>>([""])
  const token = tokens[tokens.length - 1] ?? ""
  const filters = {
    ...(outcome === "" ? {} : { outcome }),
    ...(action.trim() === "" ? {} : { action: action.trim() }),
    ...(actor.trim() === "" ? {} : { actor: actor.trim() })
  }
  const live = useLive(
    (): Promise<Answer<"listAuditEvents">> =>
      call("listAuditEvents", { ...filters, page_query: { page_size: SIZE, page_token: token } }),
    `/audit?${JSON.stringify(filters)}&${token}`,
    token === "" ? 10_000 : 3_600_000
  )
  const refilter = (f: () => void) => {
    f()
    setTokens([""])
  }
  const page = live.data?.page
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          ["Audit log", undefined]
        ]}
      />
      <h1>Audit log of {orgSlug()}</h1>
      <p class="muted">
        Every change made through the API or the dashboard, and every attempt refused for its role (403), newest first.
      </p>
      <div class="toolbar">
        <fieldset>
          <legend>Outcome</legend>
          {(
            [
              ["", "all"],
              ["allowed", "allowed"],
              ["refused", "refused"]
            ] as const
          ).map(([value, label]) => (
            <label key={label}>
              <input
                type="radio"
                name="outcome"
                value={value}
                checked={outcome === value}
                onChange={() => refilter(() => setOutcome(value))}
              />{" "}
              {label}
            </label>
          ))}
        </fieldset>
        <label>
          Action{" "}
          <input
            id="audit-action"
            placeholder="e.g. createQueue"
            value={actionDraft}
            onInput={(e) => setActionDraft((e.currentTarget as HTMLInputElement).value)}
            onChange={(e) => refilter(() => setAction((e.currentTarget as HTMLInputElement).value))}
          />
        </label>
        <label>
          Actor{" "}
          <input
            id="audit-actor"
            placeholder="a token's name or id"
            value={actorDraft}
            onInput={(e) => setActorDraft((e.currentTarget as HTMLInputElement).value)}
            onChange={(e) => refilter(() => setActor((e.currentTarget as HTMLInputElement).value))}
          />
        </label>
      </div>
      {live.error !== undefined && <ErrorView error={live.error} />}
      {live.data === undefined ? (
        live.error === undefined && <Loading />
      ) : live.data.events.length === 0 ? (
        <p class="muted">No events.</p>
      ) : (
        <table class="list" id="audit">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Who</th>
              <th scope="col">Role</th>
              <th scope="col">Action</th>
              <th scope="col">Target</th>
              <th scope="col">Outcome</th>
              <th scope="col">From</th>
            </tr>
          </thead>
          <tbody>
            {live.data.events.map((e) => (
              <tr key={e.id} data-outcome={e.outcome}>
                <td>{when(e.at)}</td>
                <td title={`${e.actor.kind} ${e.actor.id}`}>
                  {e.actor.name === "" ? <span class="muted">({e.actor.kind})</span> : e.actor.name}
                  {e.actor.kind === "person" && e.actor.email !== undefined && (
                    <span class="muted"> {e.actor.email}</span>
                  )}
                </td>
                <td>{e.role}</td>
                <td>
                  <code>{e.action}</code>
                </td>
                <td>{e.target}</td>
                <td>
                  <Badge kind={e.outcome === "refused" ? "failed" : "passed"}>{e.outcome}</Badge>
                </td>
                <td>{e.sourceIp ?? <span class="muted">—</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {page !== undefined && page.total_pages > 1 && (
        <nav class="toolbar" aria-label="Pages">
          <button type="button" disabled={tokens.length <= 1} onClick={() => setTokens(tokens.slice(0, -1))}>
            Newer
          </button>
          <span>
            page {page.page_index + 1} of {page.total_pages} ({page.total_rows} events)
          </span>
          <button
            type="button"
            disabled={page.next_page_token === ""}
            onClick={() => setTokens([...tokens, page.next_page_token])}
          >
            Older
          </button>
        </nav>
      )}
    </>
  )
}
