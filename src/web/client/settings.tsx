import { useEffect, useState } from "preact/hooks"
import { type Answer, ApiFailure, type Body, call, orgSlug, ROLE_ORDER, role } from "./api.ts"
import { useLive } from "./hooks.ts"
import { Crumbs, ErrorView, Loading, queuePath, type RepoKey, repoPath, when } from "./ui.tsx"

/** Settings: a queue's settings (updateQueue, with the API's own validation messages), flaky settings, API tokens. */

type Config = Answer<"updateQueue">
type Update = Body<"updateQueue">

const NUMBERS = [
  ["concurrency", "Concurrency"],
  ["bisectionConcurrency", "Bisection concurrency"],
  ["testingTimeoutMinutes", "Testing timeout (minutes)"],
  ["pendingFailureDepth", "Pending failure depth"],
  ["batchingMaxWaitTimeMinutes", "Batching: max wait (minutes)"],
  ["batchingMinSize", "Batching: min size"],
  ["notReadyTimeoutHours", "Not-ready timeout (hours)"],
  ["flakyRetryBudget", "Retries of a run with known-flaky failures"]
] as const
const BOOLEANS = [
  ["batch", "Batching"],
  ["canOptimisticallyMerge", "Optimistic merging"],
  ["commentsEnabled", "Comments"],
  ["commandsEnabled", "Comment commands"],
  ["statusCheckEnabled", "Status check"],
  ["createPrsForTestingBranches", "PRs for testing branches"],
  ["labelCommandsEnabled", "Label commands"],
  ["stateLabelsEnabled", "State labels"],
  ["adaptive", "Adaptive mode (depth, batch size and bisection chosen from the observed rates)"],
  ["quarantinedFailuresPass", "A run that failed only in quarantined tests passes"],
  ["extensionEnabled", "Extensions"]
] as const
/** Settings written as text: a comma-separated list, JSON, or a string ("" for none where the API takes null). */
const TEXTS = [
  ["enqueueingLabel", "Enqueueing label (empty: none)", "nullable"],
  ["allowedBotSubmitters", "Bots allowed to submit (comma-separated)", "list"],
  ["testBranchConstructionMode", "Test branch construction mode", "text"],
  ["batchingRules", "Batching rules (JSON array)", "json"]
] as const

const textOf = (c: Config, k: (typeof TEXTS)[number][0]): string => {
  const v = c[k]
  return v === null ? "" : Array.isArray(v) ? (k === "batchingRules" ? JSON.stringify(v) : v.join(", ")) : String(v)
}
const CHOICES = [
  ["mode", "Mode", ["single", "parallel"]],
  ["mergeMethod", "Merge method", ["merge_commit", "squash", "rebase"]],
  ["directMergeMode", "Direct merge", ["off", "always"]],
  ["optimizationMode", "Optimization", ["off", "bisection_skip_redundant_tests"]]
] as const

type Draft = Record<string, string | boolean>

const draftOf = (c: Config): Draft => {
  const d: Draft = {}
  for (const [k] of NUMBERS) d[k] = String(c[k] ?? 0)
  for (const [k] of BOOLEANS) d[k] = c[k] ?? false
  for (const [k] of TEXTS) d[k] = textOf(c, k)
  for (const [k] of CHOICES) d[k] = c[k]
  d.requiredStatuses = c.requiredStatuses.join(", ")
  return d
}

const QueueSettings = ({ repo, branch }: { repo: RepoKey; branch: string }) => {
  const live = useLive(() => call("getQueue", { repo, targetBranch: branch }), `settings/${branch}`, 60_000)
  const [draft, setDraft] = useState<Draft | undefined>(undefined)
  const [errors, setErrors] = useState<Record<string, string>>({})
  const [message, setMessage] = useState<string | undefined>(undefined)
  useEffect(() => {
    if (live.data !== undefined && draft === undefined) setDraft(draftOf(live.data))
  }, [live.data, draft])
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined || draft === undefined) return <Loading />
  const config = live.data
  const save = async (event: Event) => {
    event.preventDefault()
    const update: Record<string, unknown> = { repo, targetBranch: branch }
    for (const [k] of NUMBERS) if (draft[k] !== String(config[k] ?? 0)) update[k] = Number(draft[k])
    for (const [k] of BOOLEANS) if (draft[k] !== (config[k] ?? false)) update[k] = draft[k]
    for (const [k, , kind] of TEXTS) {
      const text = String(draft[k])
      if (text === textOf(config, k)) continue
      if (kind === "nullable") update[k] = text.trim() === "" ? null : text.trim()
      else if (kind === "list")
        update[k] = text
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== "")
      else if (kind === "json") {
        try {
          update[k] = JSON.parse(text === "" ? "[]" : text)
        } catch {
          setErrors({ [k]: "must be a JSON array" })
          setMessage("batchingRules: must be a JSON array")
          return
        }
      } else update[k] = text
    }
    for (const [k] of CHOICES) if (draft[k] !== config[k]) update[k] = draft[k]
    const statuses = String(draft.requiredStatuses)
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "")
    if (statuses.join(",") !== config.requiredStatuses.join(",")) {
      if (statuses.length === 0) update.deleteRequiredStatuses = true
      else update.requiredStatuses = statuses
    }
    setErrors({})
    setMessage(undefined)
    try {
      const saved = await call("updateQueue", update as Update)
      setDraft(draftOf(saved))
      setMessage("Saved.")
      void live.refresh()
    } catch (e) {
      if (e instanceof ApiFailure) {
        const byField: Record<string, string> = {}
        for (const d of e.details) byField[d.path.replace(/^\$?\.?/, "").split(/[.[]/)[0] ?? ""] = d.message
        setErrors(byField)
        setMessage(e.message)
      } else setMessage(String(e))
    }
  }
  const field = (k: string) => ({ "aria-invalid": errors[k] !== undefined, "aria-describedby": `${k}-error` })
  const ErrorOf = ({ k }: { k: string }) =>
    errors[k] === undefined ? null : (
      <span class="error" id={`${k}-error`}>
        {errors[k]}
      </span>
    )
  return (
    <form class="card settings" onSubmit={save} noValidate>
      <h2>Queue {branch}</h2>
      {NUMBERS.map(([k, label]) => (
        <p key={k}>
          <label for={k}>{label}</label>
          <input
            id={k}
            inputMode="numeric"
            value={String(draft[k])}
            onInput={(e) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value })}
            {...field(k)}
          />
          <ErrorOf k={k} />
        </p>
      ))}
      {CHOICES.map(([k, label, values]) => (
        <p key={k}>
          <label for={k}>{label}</label>
          <select
            id={k}
            value={String(draft[k])}
            onChange={(e) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLSelectElement).value })}
          >
            {values.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
          <ErrorOf k={k} />
        </p>
      ))}
      {BOOLEANS.map(([k, label]) => (
        <p key={k}>
          <label>
            <input
              type="checkbox"
              checked={draft[k] === true}
              onChange={(e) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).checked })}
            />{" "}
            {label}
          </label>
        </p>
      ))}
      {TEXTS.map(([k, label]) => (
        <p key={k}>
          <label for={k}>{label}</label>
          <input
            id={k}
            value={String(draft[k])}
            onInput={(e) => setDraft({ ...draft, [k]: (e.currentTarget as HTMLInputElement).value })}
            {...field(k)}
          />
          <ErrorOf k={k} />
        </p>
      ))}
      <p>
        <label for="requiredStatuses">Required statuses (comma-separated; empty: from the provider)</label>
        <input
          id="requiredStatuses"
          value={String(draft.requiredStatuses)}
          onInput={(e) => setDraft({ ...draft, requiredStatuses: (e.currentTarget as HTMLInputElement).value })}
          {...field("requiredStatuses")}
        />
        <ErrorOf k="requiredStatuses" />
      </p>
      <button type="submit">Save queue settings</button>{" "}
      {message !== undefined && (
        <span role="status" class={Object.keys(errors).length > 0 ? "error" : "muted"}>
          {message}
        </span>
      )}
    </form>
  )
}

const FlakySettings = ({ repo }: { repo: RepoKey }) => {
  const scope = { repo, org_url_slug: orgSlug() }
  const live = useLive(() => call("getFlakySettings", scope), `flaky-settings/${repoPath(repo)}`, 60_000)
  const [message, setMessage] = useState<string | undefined>(undefined)
  if (live.error !== undefined && live.data === undefined) return <ErrorView error={live.error} />
  if (live.data === undefined) return <Loading />
  const set = async (change: { quarantining_enabled?: boolean; auto_quarantine?: boolean }) => {
    try {
      await call("updateFlakySettings", { ...scope, ...change })
      setMessage("Saved.")
      void live.refresh()
    } catch (e) {
      setMessage(e instanceof ApiFailure ? e.message : String(e))
    }
  }
  return (
    <section class="card" aria-labelledby="flaky-settings-h">
      <h2 id="flaky-settings-h">Flaky tests</h2>
      <p>
        <label>
          <input
            type="checkbox"
            checked={live.data.quarantining_enabled}
            onChange={(e) => set({ quarantining_enabled: (e.currentTarget as HTMLInputElement).checked })}
          />{" "}
          Quarantining enabled
        </label>
      </p>
      <p>
        <label>
          <input
            type="checkbox"
            checked={live.data.auto_quarantine}
            onChange={(e) => set({ auto_quarantine: (e.currentTarget as HTMLInputElement).checked })}
          />{" "}
          Quarantine flaky tests automatically
        </label>
      </p>
      {message !== undefined && <p role="status">{message}</p>}
    </section>
  )
}

export const QueueSettingsPage = ({ repo, branch }: { repo: RepoKey; branch: string }) => (
  <>
    <Crumbs
      items={[
        ["Queues", "/"],
        [`${repo.owner}/${repo.name}`, repoPath(repo)],
        [branch, queuePath(repo, branch)],
        ["Settings", undefined]
      ]}
    />
    <h1>Settings</h1>
    <QueueSettings repo={repo} branch={branch} />
    <FlakySettings repo={repo} />
  </>
)

export const TokensPage = () => {
  const live = useLive(() => call("listApiTokens", {}), "tokens", 30_000)
  const [name, setName] = useState("")
  const roles = ROLE_ORDER.slice(0, Math.max(1, ROLE_ORDER.indexOf(role() as (typeof ROLE_ORDER)[number]) + 1))
  const [newRole, setNewRole] = useState<(typeof ROLE_ORDER)[number]>("write")
  const [created, setCreated] = useState<Answer<"createApiToken"> | undefined>(undefined)
  const [message, setMessage] = useState<string | undefined>(undefined)
  const create = async (event: Event) => {
    event.preventDefault()
    try {
      setCreated(await call("createApiToken", { name, role: newRole }))
      setName("")
      setMessage(undefined)
      void live.refresh()
    } catch (e) {
      setMessage(e instanceof ApiFailure ? `${e.message} ${e.details.map((d) => d.message).join("; ")}` : String(e))
    }
  }
  const revoke = async (id: string) => {
    if (!confirm("Revoke this token? Clients using it stop working at once.")) return
    try {
      await call("revokeApiToken", { id })
      void live.refresh()
    } catch (e) {
      setMessage(e instanceof ApiFailure ? e.message : String(e))
    }
  }
  return (
    <>
      <Crumbs
        items={[
          ["Queues", "/"],
          ["Settings", undefined]
        ]}
      />
      <h1>API tokens of {orgSlug()}</h1>
      <form class="card" onSubmit={create}>
        <label for="token-name">Name</label>{" "}
        <input id="token-name" value={name} onInput={(e) => setName((e.currentTarget as HTMLInputElement).value)} />{" "}
        <label for="token-role">Role</label>{" "}
        <select
          id="token-role"
          value={newRole}
          onChange={(e) => setNewRole((e.currentTarget as HTMLSelectElement).value as (typeof ROLE_ORDER)[number])}
        >
          {roles.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>{" "}
        <button type="submit">Create token</button>
        {message !== undefined && (
          <p class="error" role="alert">
            {message}
          </p>
        )}
        {created !== undefined && (
          <p role="status">
            New {created.role} token <strong>{created.name}</strong> (shown only now):{" "}
            <code class="secret">{created.token}</code>
          </p>
        )}
      </form>
      {live.error !== undefined && <ErrorView error={live.error} />}
      {live.data === undefined ? (
        <Loading />
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Role</th>
              <th scope="col">Created</th>
              <th scope="col">State</th>
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {live.data.tokens.map((t) => (
              <tr key={t.id}>
                <td>{t.name === "" ? <span class="muted">(no name)</span> : t.name}</td>
                <td>{t.role}</td>
                <td>{when(t.createdAt)}</td>
                <td>{t.revokedAt === null ? "active" : <>revoked {when(t.revokedAt)}</>}</td>
                <td>
                  {t.revokedAt === null && (
                    <button type="button" onClick={() => revoke(t.id)}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  )
}
