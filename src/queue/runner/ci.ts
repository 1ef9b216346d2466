import { Effect, FiberMap, Option } from "effect"
import type { RunRecord } from "../planner/index.ts"
import type { RunnerCtx } from "./context.ts"

/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647

/** Runs the built-in CI (CI_COMMAND) on a run's test branch and reports its status; a no-op without it. */
export const startCi = (ctx: RunnerCtx, run: RunRecord, sha: string) =>
  Option.match(ctx.config.ciCommand, {
    onNone: () => Effect.void,
    onSome: (command) =>
      FiberMap.run(ctx.ciJobs, run.id, ctx.ciSemaphore.withPermits(1)(ciJob(ctx, run, sha, command))).pipe(
        Effect.asVoid
      )
  })

const ciJob = (ctx: RunnerCtx, run: RunRecord, sha: string, command: string) => {
  const { sql, statuses, config } = ctx
  const repoId = ctx.queue.repo.id
  return Effect.gen(function* () {
    const outputId = crypto.randomUUID()
    const url = `${config.publicUrl}/ci/output/${outputId}`
    yield* sql`insert into ci_outputs (id, run_id, repo_id, sha, output) values (${outputId}, ${run.id}, ${repoId}, ${sha}, '')`
    yield* statuses.report(repoId, sha, config.ciContext, "pending", url, "running CI_COMMAND")
    const result = yield* ctx.ci.run({
      repo: ctx.repo,
      sha,
      command,
      timeoutMs: Math.min(ctx.queue.config.testingTimeoutMinutes * 60_000, MAX_TIMER_MS),
      env: { GREENLINE_TEST_RUN_ID: run.id, GREENLINE_TEST_BRANCH: run.branch }
    })
    yield* sql`update ci_outputs set output = ${result.output}, exit_code = ${result.exitCode} where id = ${outputId}`
    const ok = result.exitCode === 0 && !result.timedOut
    const description = result.timedOut ? "timed out" : `exit code ${result.exitCode}`
    yield* statuses.report(repoId, sha, config.ciContext, ok ? "success" : "failure", url, description)
  }).pipe(
    Effect.catchAllCause((cause) =>
      Effect.logWarning("built-in CI failed to run", cause).pipe(
        Effect.zipRight(
          statuses.report(repoId, sha, config.ciContext, "error", null, "CI_COMMAND could not run").pipe(Effect.ignore)
        )
      )
    )
  )
}

/** Built-in CI jobs do not survive a crash: start them again for the runs still waiting on them. */
export const restartCiJobs = (ctx: RunnerCtx) =>
  Effect.gen(function* () {
    if (Option.isNone(ctx.config.ciCommand)) return
    for (const run of ctx.state.runs) {
      if (run.status !== "in_progress" || run.testBranchSha === null) continue
      const reported = yield* ctx.statuses.forSha(ctx.queue.repo.id, run.testBranchSha)
      const since = (yield* ctx.statuses.requirements(run.id))?.sinceMs ?? run.createdAt - 1000
      const final = reported.some(
        (s) => s.context === ctx.config.ciContext && s.state !== "pending" && s.updatedAt.getTime() >= since
      )
      if (!final) yield* startCi(ctx, run, run.testBranchSha)
    }
  })
