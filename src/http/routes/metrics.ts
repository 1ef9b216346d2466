import { Clock, Effect, Option } from "effect"
import { renderQueueMetrics } from "../../queue/metricsReport.ts"
import { Tenancy } from "../../tenancy/Tenancy.ts"
import { ops } from "../Api.ts"
import { invalidRequest, notFound } from "../errors.ts"
import { CurrentOrg, handle } from "../router.ts"

export const metricsRoutes = [
  handle(ops.getMergeQueueMetrics, (query) =>
    Effect.gen(function* () {
      const org = yield* CurrentOrg
      const now = yield* Clock.currentTimeMillis
      if (query.repo === undefined) {
        if (query.repoHost !== undefined && query.repoHost !== "") {
          return yield* invalidRequest("repoHost needs repo (owner/name)", [
            { path: "repo", message: "is required with repoHost" }
          ])
        }
        return yield* Effect.orDie(renderQueueMetrics({ orgId: org.id }, now))
      }
      const [owner, name, ...rest] = query.repo.split("/")
      if (!owner || !name || rest.length > 0) {
        return yield* invalidRequest("repo must be owner/name", [{ path: "repo", message: "must be owner/name" }])
      }
      if (query.repoHost === undefined || query.repoHost === "") {
        return yield* invalidRequest("repo needs repoHost", [{ path: "repoHost", message: "is required with repo" }])
      }
      const tenancy = yield* Tenancy
      const repo = yield* Effect.orDie(tenancy.findRepo(org, { host: query.repoHost, owner, name }))
      if (Option.isNone(repo))
        return yield* notFound("NOT_FOUND", `repository ${query.repoHost}/${query.repo} not found`)
      return yield* Effect.orDie(renderQueueMetrics({ orgId: org.id, repoId: repo.value.id }, now))
    })
  )
]
