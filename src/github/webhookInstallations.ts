import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import { GitHubClient } from "./GitHubClient.ts"
import { GitHubEnv } from "./GitHubEnv.ts"
import { makeInstallations, splitFullName } from "./installations.ts"
import { decode, done, type Plan } from "./webhookPlan.ts"

/** The App's installations and their repositories: stored, and the client's installation cache kept in step. */

const Installation = Schema.Struct({
  id: Schema.Number,
  account: Schema.optional(Schema.NullOr(Schema.Struct({ login: Schema.String })))
})
const RepoName = Schema.Struct({ full_name: Schema.String })

const InstallationEvent = Schema.Struct({
  action: Schema.String,
  installation: Installation,
  repositories: Schema.optional(Schema.NullOr(Schema.Array(RepoName)))
})

const InstallationRepositoriesEvent = Schema.Struct({
  action: Schema.String,
  installation: Installation,
  repositories_added: Schema.optional(Schema.Array(RepoName)),
  repositories_removed: Schema.optional(Schema.Array(RepoName))
})

/** What the installation events work with: the stored installations, and the client's installation cache for one id. */
const installationTools = (id: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GitHubEnv
    const client = yield* GitHubClient
    const remember = (repos: ReadonlyArray<{ owner: string; name: string }>) =>
      Effect.forEach(repos, (r) => client.rememberInstallation(r.owner, r.name, id), { discard: true })
    const forget = (repos: ReadonlyArray<{ owner: string; name: string }>) =>
      Effect.forEach(repos, (r) => client.forgetInstallation(r.owner, r.name), { discard: true })
    return { sql, store: makeInstallations(sql, config.githubHost), remember, forget }
  })

/** `owner/name` of the repositories an installation event lists (unparseable names left out). */
const repoNames = (list: ReadonlyArray<{ readonly full_name: string }> | null | undefined) =>
  (list ?? []).flatMap((r) => {
    const split = splitFullName(r.full_name)
    return split === undefined ? [] : [split]
  })

export const onInstallation = (payload: unknown) =>
  Effect.map(
    decode("installation", InstallationEvent)(payload),
    (event): Plan =>
      Effect.gen(function* () {
        const id = event.installation.id
        const { store, remember, forget } = yield* installationTools(id)
        const account = event.installation.account?.login ?? ""
        const listed = repoNames(event.repositories)
        switch (event.action) {
          case "created":
          case "new_permissions_accepted":
          case "unsuspend": {
            yield* store.upsert(id, account, false)
            yield* store.addRepos(id, listed)
            return done(`installation ${event.action}: ${listed.length} repository(ies)`, [], remember(listed))
          }
          case "suspend": {
            yield* store.upsert(id, account, true)
            yield* store.addRepos(id, listed)
            const covered = yield* store.reposOf(id)
            return done("installation suspend", [], forget(covered))
          }
          case "deleted": {
            const covered = yield* store.reposOf(id)
            yield* store.remove(id)
            return done(`installation deleted: ${covered.length} repository(ies)`, [], forget([...covered, ...listed]))
          }
          default:
            return done(`installation ${event.action}: nothing to do`)
        }
      })
  )

export const onInstallationRepositories = (payload: unknown) =>
  Effect.map(
    decode("installation_repositories", InstallationRepositoriesEvent)(payload),
    (event): Plan =>
      Effect.gen(function* () {
        const id = event.installation.id
        const { sql, store, remember, forget } = yield* installationTools(id)
        const added = repoNames(event.repositories_added)
        const removed = repoNames(event.repositories_removed)
        const known = yield* sql<{ suspended: boolean }>`select suspended from github_installations where id = ${id}`
        yield* store.upsert(id, event.installation.account?.login ?? "", known[0]?.suspended ?? false)
        yield* store.addRepos(id, added)
        yield* store.removeRepos(id, removed)
        return done(
          `installation_repositories ${event.action}: +${added.length} -${removed.length}`,
          [],
          Effect.zipRight(remember(added), forget(removed))
        )
      })
  )
