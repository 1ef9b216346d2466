/**
 * The GitHub App's installations and the repositories they cover, as the `installation` and
 * `installation_repositories` webhooks report them. With the App configured, an organization may claim a repository
 * of the GitHub host only while the App is installed on it (and the installation is not suspended): the App could not
 * act on any other. Repositories already claimed stay claimed when the App is removed; their queues then fail to
 * reach GitHub until it is installed again.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { RepoClaimGuard } from "../tenancy/Tenancy.ts"
import { GitHubClient } from "./GitHubClient.ts"
import { GitHubEnv } from "./GitHubEnv.ts"

export interface InstalledRepo {
  readonly owner: string
  readonly name: string
}

/** `owner/name` as GitHub writes `full_name`; undefined when it is not of that form. */
export const splitFullName = (fullName: string): InstalledRepo | undefined => {
  const parts = fullName.split("/")
  if (parts.length !== 2 || parts[0] === "" || parts[1] === "") return undefined
  return { owner: parts[0]!, name: parts[1]! }
}

/** The installation storage over one SqlClient (used inside the webhook's transaction). */
export const makeInstallations = (sql: SqlClient.SqlClient, host: string) => {
  const h = host.toLowerCase()

  const upsert = (id: number, account: string, suspended: boolean) =>
    sql`insert into github_installations (id, account, suspended, updated_at)
        values (${id}, ${account}, ${suspended}, now())
        on conflict (id) do update set account = excluded.account, suspended = excluded.suspended,
          updated_at = excluded.updated_at`.pipe(Effect.asVoid)

  const addRepos = (id: number, repos: ReadonlyArray<InstalledRepo>) =>
    Effect.forEach(
      repos,
      (r) =>
        sql`insert into github_installation_repos (installation_id, host, owner, name)
            values (${id}, ${h}, ${r.owner.toLowerCase()}, ${r.name.toLowerCase()})
            on conflict (host, owner, name) do update set installation_id = excluded.installation_id`,
      { discard: true }
    )

  const removeRepos = (id: number, repos: ReadonlyArray<InstalledRepo>) =>
    Effect.forEach(
      repos,
      (r) =>
        sql`delete from github_installation_repos
            where installation_id = ${id} and host = ${h} and owner = ${r.owner.toLowerCase()} and name = ${r.name.toLowerCase()}`,
      { discard: true }
    )

  /** The repositories an installation covered (before it is deleted). */
  const reposOf = (id: number) =>
    sql<InstalledRepo>`select owner, name from github_installation_repos where installation_id = ${id} order by owner, name`

  const remove = (id: number) => sql`delete from github_installations where id = ${id}`.pipe(Effect.asVoid)

  const setSuspended = (id: number, suspended: boolean) =>
    sql`update github_installations set suspended = ${suspended}, updated_at = now() where id = ${id}`.pipe(
      Effect.asVoid
    )

  /** The installation known to cover `owner/name`, suspended or not. */
  const knownInstallation = (owner: string, name: string) =>
    Effect.map(
      sql<{ id: string | number; suspended: boolean }>`
        select i.id, i.suspended from github_installation_repos r join github_installations i on i.id = r.installation_id
        where r.host = ${h} and r.owner = ${owner.toLowerCase()} and r.name = ${name.toLowerCase()}`,
      (rows) => Option.map(Option.fromNullable(rows[0]), (r) => ({ id: Number(r.id), suspended: r.suspended }))
    )

  /** Records an installation learnt from the API (a webhook's later account and suspension win). */
  const ensure = (id: number, account: string) =>
    sql`insert into github_installations (id, account) values (${id}, ${account}) on conflict (id) do nothing`.pipe(
      Effect.asVoid
    )

  return { upsert, ensure, addRepos, removeRepos, reposOf, remove, setSuspended, knownInstallation }
}

/** True in GitHub App mode (App id and key configured); a personal access token alone is not an App. */
export const appMode = (c: {
  readonly githubAppId: Option.Option<string>
  readonly githubAppPrivateKey: Option.Option<unknown>
}) => Option.isSome(c.githubAppId) && Option.isSome(c.githubAppPrivateKey)

/**
 * In App mode, a repository of the GitHub host may be claimed only while the App is installed on it; other hosts, and
 * every repository without an App, are not restricted. A repository no webhook told about (the App was installed
 * before this server received its webhooks) is looked up on GitHub once (`GET /repos/{owner}/{repo}/installation`)
 * and remembered.
 */
export const InstallationClaimGuardLive = Layer.effect(
  RepoClaimGuard,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GitHubEnv
    const client = yield* GitHubClient
    const installations = makeInstallations(sql, config.githubHost)
    const enabled = appMode(config)
    const notInstalled = (repo: { owner: string; name: string }) =>
      `the GitHub App is not installed on ${repo.owner}/${repo.name}: install it there first`
    return {
      refusal: (repo) =>
        Effect.gen(function* () {
          if (!enabled || repo.host.toLowerCase() !== config.githubHost) return undefined
          const known = yield* installations.knownInstallation(repo.owner, repo.name)
          if (Option.isSome(known)) {
            return known.value.suspended ? `the GitHub App's installation on ${repo.owner} is suspended` : undefined
          }
          const asked = yield* client.installationId(repo.owner, repo.name).pipe(Effect.either)
          if (asked._tag === "Left") {
            const e = asked.left
            return e._tag === "GitHubApiError" && e.status === 404
              ? notInstalled(repo)
              : `could not ask GitHub whether the App is installed on ${repo.owner}/${repo.name}: ${e.message}`
          }
          yield* installations.ensure(asked.right, repo.owner)
          yield* installations.addRepos(asked.right, [{ owner: repo.owner, name: repo.name }])
          return undefined
        })
    }
  })
)
