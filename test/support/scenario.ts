/**
 * A small driver for end-to-end scenarios of the merge queue: one bare repository and one queue on a running test
 * server, CI played by the test (`ciPass`/`ciFail` report the required status on the PR's current run), and the one
 * promise (semantics.md §1) checked on the real repository afterwards.
 *
 * ```ts
 * const s = await openScenario(server, root, { name: "s1", concurrency: 3 })
 * s.createPr(1); await s.submit(1)
 * await s.ciPass(1)
 * await s.waitState(1, "merged")
 * await s.checkOnePromise()
 * await s.close()
 * ```
 */
import { expect } from "bun:test"
import * as fs from "node:fs"
import * as path from "node:path"
import { createTestRepo, type FileChanges, type PrSpec, type TestRepo } from "./git.ts"
import type { TestServer } from "./server.ts"

/** What a scenario needs of a server: its API and a signal that the queue moved. An in-process TestServer ticks the
 * queue's runner (rounds.ts); a server in its own process (support/process.ts) has no tick, and signals each event
 * it streams (GET /v1/events/stream). */
export type ScenarioServer = Pick<TestServer, "post" | "nextRound"> &
  Partial<Pick<TestServer, "tick" | "settled" | "queueId">>

export type PrState =
  | "not_ready"
  | "pending"
  | "testing"
  | "tests_passed"
  | "pending_failure"
  | "merged"
  | "failed"
  | "cancelled"

export interface TimelineItem {
  readonly at: string
  readonly state: PrState
  readonly reason: string
}

export interface PrRecord {
  readonly id: string
  readonly state: PrState
  readonly prNumber: number
  readonly prSha: string
  readonly prTitle: string
  readonly priorityValue: number
  readonly skipTheLine: boolean
  readonly testRunId: string | null
  readonly verifiedByTestRun: string | null
  readonly position: number | null
  readonly isCurrentlySubmittedToQueue: boolean
  readonly timeline?: ReadonlyArray<TimelineItem>
  /** Extension (issue #18): where the PR's time went, with the PR whose failure caused each restart. */
  readonly timeBreakdown?: {
    readonly restarts: ReadonlyArray<{
      readonly at: string
      readonly reason: string
      readonly causedByPr: number | null
    }>
  }
}

export interface TestingDetails {
  readonly requiredStatuses: ReadonlyArray<string>
  readonly requiredStatusesSource: string | null
  readonly testBranch: string
  readonly testBranchSha: string
  readonly statusChecks: ReadonlyArray<{ context: string; url: string; state: string }>
  readonly testedPullRequests: ReadonlyArray<{ prNumber: number; title: string }>
  readonly createdAt: string
  readonly status: string
  readonly dependentPrs: ReadonlyArray<number>
}

export interface RunView {
  readonly runId: string
  readonly sha: string
  readonly details: TestingDetails
}

export interface ScenarioOptions {
  /** repository name (one repository, and so one queue, per scenario) */
  readonly name: string
  readonly files?: FileChanges
  readonly concurrency?: number
  /** queue override; null = none (default ["ci"]) */
  readonly requiredStatuses?: ReadonlyArray<string> | null
  /** more updateQueue fields */
  readonly config?: Record<string, unknown>
  /** The repository (default: a new local bare repository under `root`); its `repo` is the queue's key. Another
   * provider's (e.g. the simulated GitHub's, test/support/github/scenarioGitHub.ts) plugs in here. */
  readonly repo?: TestRepo
  /** How long waitState/waitRun/reportRun wait (default 15 s; a provider over REST needs longer on a busy machine). */
  readonly waitMs?: number
  /** Whether main takes the tested commits themselves (default; local Git), or commits of its own with the tested
   * trees (GitHub, whose squash and rebase merges write new commits). */
  readonly landsTestedCommits?: boolean
  /** How CI results reach Greenline (default POST /v1/reportStatus). */
  readonly report?: (sha: string, state: "pending" | "success" | "failure" | "error", context: string) => Promise<void>
  /** What the provider still has on its way to the server (the simulated GitHub's webhooks), awaited before each
   * step: a tick then reads it. */
  readonly settle?: () => Promise<void>
}

const TERMINAL = new Set<PrState>(["merged", "failed", "cancelled"])
const WAIT_MS = 15_000

export interface Scenario<S extends ScenarioServer = TestServer> {
  /** the server requests go to (the last `switchTo`) */
  readonly server: S
  /** sends the requests from now on to `server` (a restarted server, another instance on the same database) */
  readonly switchTo: (server: S) => void
  readonly repo: TestRepo
  readonly key: { readonly repo: TestRepo["repo"]; readonly targetBranch: string }
  readonly initialSha: string
  /** POST with the queue key merged in. */
  readonly post: (op: string, body?: Record<string, unknown>) => Promise<{ status: number; body: unknown }>
  /** POST that must answer 200; returns the body. */
  readonly ok: <A = unknown>(op: string, body?: Record<string, unknown>) => Promise<A>
  /** POST that must fail with `status` and error `code`. */
  readonly fails: (op: string, body: Record<string, unknown>, status: number, code: string) => Promise<void>
  readonly updateQueue: (fields: Record<string, unknown>) => Promise<Record<string, unknown>>
  /** refs/pull/<n>/head with one commit adding `pr-<n>.txt` unless `spec` says otherwise; `marker` is the file whose
   * presence on main means the PR landed (default `pr-<n>.txt`). */
  readonly createPr: (n: number, spec?: PrSpec, marker?: string) => string
  readonly submit: (n: number, extra?: Record<string, unknown>) => Promise<void>
  readonly pr: (n: number) => Promise<PrRecord>
  readonly timeline: (n: number) => Promise<ReadonlyArray<TimelineItem>>
  /** how many test runs the PR was tested in (its `testing` transitions) */
  readonly testingCount: (n: number) => Promise<number>
  readonly waitState: (n: number, state: PrState, timeoutMs?: number) => Promise<PrRecord>
  readonly details: (runId: string) => Promise<TestingDetails>
  /** the PR's current run once built (testing, in progress), skipping runs already reported or listed */
  readonly waitRun: (n: number, exclude?: ReadonlyArray<string>) => Promise<RunView>
  readonly report: (sha: string, state: "pending" | "success" | "failure" | "error", context?: string) => Promise<void>
  readonly ciPass: (n: number, exclude?: ReadonlyArray<string>) => Promise<RunView>
  readonly ciFail: (n: number, exclude?: ReadonlyArray<string>) => Promise<RunView>
  /** distinct test run ids observed */
  readonly runsSeen: () => ReadonlySet<string>
  /** the sha of main now */
  readonly mainSha: () => string
  /** main is the tested commit `sha`, or has its tree where the merge writes commits of its own */
  readonly expectMainAt: (sha: string) => void
  /** subjects of main's first-parent history since the initial commit, oldest first */
  readonly history: () => ReadonlyArray<string>
  /** steps with the queue (the server's signal) until `check` returns a value; fails after the wait limit */
  readonly until: <A>(what: string, check: () => Promise<A | undefined>, timeoutMs?: number) => Promise<A>
  /** a round of the queue's runner now, once it settled (rounds.ts); an in-process server only */
  readonly tick: () => Promise<void>
  /** that `check` holds once the queue settled on everything sent so far (nothing happens while paused, ...): a
   * tick, then the check. An in-process server only. */
  readonly holds: (what: string, check: () => Promise<boolean>) => Promise<void>
  /** semantics.md §1 on the real repository; `outside` are commits pushed to main from outside the queue */
  readonly checkOnePromise: (options?: {
    outside?: ReadonlyArray<string>
    direct?: ReadonlyArray<string>
  }) => Promise<void>
  /** files of a commit's tree (sorted, as git lists them) */
  readonly files: (sha: string) => ReadonlyArray<string>
  /** waits until run `runId` is built and in progress, then reports `state` for each of its required statuses */
  readonly reportRun: (runId: string, state: "success" | "failure") => Promise<RunView>
  /** plays CI until every PR of `prs` ended: each run, once built, gets the verdict `decide` gives for it (and the
   * files of its test branch); returns the runs reported, in order */
  readonly autoCi: (
    prs: ReadonlyArray<number>,
    decide: (run: RunView, files: ReadonlyArray<string>) => "success" | "failure",
    timeoutMs?: number
  ) => Promise<ReadonlyArray<RunView>>
  /** POST /setImpactedTargets for the PR's current head (or `sha`) */
  readonly setTargets: (n: number, targets: ReadonlyArray<string> | string, sha?: string) => Promise<void>
  /** The one promise for parallel queues (semantics.md §1, lanes): every submitted PR ended; main only moved forward;
   * every commit on main is the change of exactly one merged PR (its tree diff equals the PR's diff) and every merged
   * PR landed exactly once, verified by a passing run that tested it and contained its dependencies. */
  readonly checkLanePromise: () => Promise<void>
  /** Deletes the queue (when nothing is active in it, so its runner stops polling) and the repository. */
  readonly close: () => Promise<void>
}

export const openScenario = async <S extends ScenarioServer = TestServer>(
  server: S,
  root: string,
  options: ScenarioOptions
): Promise<Scenario<S>> => {
  let current = server
  const repo =
    options.repo ??
    createTestRepo({
      root,
      repo: { host: "local", owner: "acme", name: options.name },
      ...(options.files === undefined ? {} : { files: options.files })
    })
  const key = { repo: repo.repo, targetBranch: "main" }
  const initialSha = repo.branchSha("main")!
  const markers = new Map<number, string>()
  const submitted = new Set<number>()
  const reported = new Map<number, Set<string>>()
  const seen = new Set<string>()

  // main's tip over time (read from the loose ref; Greenline moves it with update-ref)
  const tips: string[] = [initialSha]
  const refFile = path.join(repo.gitDir, "refs", "heads", "main")
  const sample = () => {
    let sha: string | null = null
    try {
      sha = fs.readFileSync(refFile, "utf8").trim()
    } catch {
      sha = repo.branchSha("main")
    }
    if (sha !== null && sha !== "" && tips[tips.length - 1] !== sha) tips.push(sha)
  }
  // main moves only in a runner's round (its Merge): sample it after each round settles (an observer, not a wait:
  // the time limit only makes sure it looks again when the signal missed a round)
  let closed = false
  void (async () => {
    while (!closed) {
      await current.nextRound(1000)
      sample()
    }
  })()

  const post = (op: string, body: Record<string, unknown> = {}) => current.post(op, { ...key, ...body })
  const ok = async <A = unknown>(op: string, body: Record<string, unknown> = {}): Promise<A> => {
    const r = await post(op, body)
    if (r.status !== 200)
      throw new Error(`${op} ${JSON.stringify(body)} answered ${r.status}: ${JSON.stringify(r.body)}`)
    return r.body as A
  }
  const fails = async (op: string, body: Record<string, unknown>, status: number, code: string) => {
    const r = await post(op, body)
    expect({ op, status: r.status, code: (r.body as { error?: { code?: string } }).error?.code }).toEqual({
      op,
      status,
      code
    })
  }

  await ok("createQueue", options.concurrency === undefined ? {} : { concurrency: options.concurrency })
  const queueId = await server.queueId?.(key)

  /**
   * Steps with the queue. An in-process server: the first step of a wait ticks the runner (what the test sent is read
   * now), the others wait for it to settle again (what the wait is for comes from elsewhere: a webhook, the Git
   * host; it wakes the runner, or the runner's Git poll finds it). A server in its own process has no tick: the next
   * event it streams, or 250 ms (not every change is an event: a test branch built, a status stored).
   */
  const step = async (first: boolean) => {
    await options.settle?.()
    const { tick, settled } = current
    if (queueId === undefined || tick === undefined || settled === undefined) return current.nextRound(250)
    return first ? tick(queueId) : settled(queueId)
  }
  const tick = async () => {
    await options.settle?.()
    if (queueId === undefined || current.tick === undefined) throw new Error("a tick needs an in-process server")
    await current.tick(queueId)
  }
  const required = options.requiredStatuses === undefined ? ["ci"] : options.requiredStatuses
  const fields = { ...(required === null ? {} : { requiredStatuses: required }), ...(options.config ?? {}) }
  if (Object.keys(fields).length > 0) await ok("updateQueue", fields)

  const pr = async (n: number) => {
    const r = await ok<PrRecord>("getSubmittedPullRequest", { pr: { number: n } })
    if (r.testRunId) seen.add(r.testRunId)
    if (r.verifiedByTestRun) seen.add(r.verifiedByTestRun)
    return r
  }
  const timeline = async (n: number) =>
    (await ok<PrRecord>("getSubmittedPullRequest", { pr: { number: n }, includeTimeline: true })).timeline ?? []

  const describe = async (n: number) => {
    const t = await timeline(n).catch(() => [])
    return t.map((x) => `${x.state}:${x.reason}`).join(" > ")
  }

  const waitMs = options.waitMs ?? WAIT_MS
  const waitState = async (n: number, state: PrState, timeoutMs = waitMs) => {
    let last: PrRecord | undefined
    try {
      return await stepUntil(
        async () => {
          last = await pr(n)
          if (last.state === state) return last
          if (TERMINAL.has(last.state)) throw new Fatal(`PR #${n} is ${last.state}, not ${state}`)
          return undefined
        },
        timeoutMs,
        `PR #${n} ${state}`,
        step
      )
    } catch (e) {
      throw new Error(`${String(e)} (last ${last?.state}; timeline ${await describe(n)})`)
    }
  }

  const details = async (runId: string) => {
    seen.add(runId)
    return ok<TestingDetails>("getMergeQueueTestingDetails", { testRunId: runId })
  }

  const waitRun = async (n: number, exclude: ReadonlyArray<string> = []) => {
    const skip = new Set([...(reported.get(n) ?? []), ...exclude])
    try {
      return await stepUntil(
        async () => {
          const r = await pr(n)
          if (TERMINAL.has(r.state)) throw new Fatal(`PR #${n} is ${r.state}`)
          if (r.state !== "testing" || r.testRunId === null || skip.has(r.testRunId)) return undefined
          const d = await details(r.testRunId)
          if (d.status !== "in_progress" || d.testBranchSha === "") return undefined
          return { runId: r.testRunId, sha: d.testBranchSha, details: d }
        },
        waitMs,
        `a new run of PR #${n}`,
        step
      )
    } catch (e) {
      throw new Error(`${String(e)} (timeline ${await describe(n)})`)
    }
  }

  const report = async (sha: string, state: "pending" | "success" | "failure" | "error", context = "ci") => {
    if (options.report) return options.report(sha, state, context)
    const r = await current.post("reportStatus", { repo: repo.repo, sha, context, state })
    if (r.status !== 200) throw new Error(`reportStatus answered ${r.status}: ${JSON.stringify(r.body)}`)
  }

  const ci =
    (state: "success" | "failure") =>
    async (n: number, exclude: ReadonlyArray<string> = []) => {
      const run = await waitRun(n, exclude)
      const set = reported.get(n) ?? new Set<string>()
      set.add(run.runId)
      reported.set(n, set)
      for (const context of run.details.requiredStatuses) await report(run.sha, state, context)
      return run
    }

  const firstParentWalk = () => {
    const out = repo.git("rev-list", "--first-parent", "--reverse", `${initialSha}..main`)
    return out === "" ? [] : out.split("\n")
  }

  const isAncestor = (a: string, b: string) => {
    try {
      repo.git("merge-base", "--is-ancestor", a, b)
      return true
    } catch {
      return false
    }
  }

  const checkOnePromise = async (opts: { outside?: ReadonlyArray<string>; direct?: ReadonlyArray<string> } = {}) => {
    sample()
    const exempt = new Set([initialSha, ...(opts.outside ?? []), ...(opts.direct ?? [])])
    // nothing submitted is lost: every submitted PR ended
    const records = new Map<number, PrRecord>()
    for (const n of submitted) {
      const r = await pr(n)
      records.set(n, r)
      expect({ pr: n, ended: TERMINAL.has(r.state) }).toEqual({ pr: n, ended: true })
    }
    // the tips of the runs that passed
    const passed: string[] = []
    for (const id of seen) {
      const d = await ok<TestingDetails>("getMergeQueueTestingDetails", { testRunId: id })
      if (d.status === "succeeded" && d.testBranchSha !== "") passed.push(d.testBranchSha)
    }
    // a commit is tested when a passed run contains it, or (merges that create their own commits, as GitHub's squash
    // and rebase merges do) when its tree is the tree of a commit of a passed run's chain (one git command for each set)
    const lines = (out: string) => (out === "" ? [] : out.split("\n"))
    const contained = new Set(passed.length === 0 ? [] : lines(repo.git("rev-list", ...passed, `^${initialSha}`)))
    let testedTrees: Set<string> | undefined
    const treeTested = (c: string) => {
      testedTrees ??= new Set(
        passed.length === 0 ? [] : lines(repo.git("log", "--first-parent", "--format=%T", ...passed, `^${initialSha}`))
      )
      return testedTrees.has(repo.git("rev-parse", `${c}^{tree}`))
    }
    const tested = (c: string) => exempt.has(c) || contained.has(c) || treeTested(c)
    const walk = firstParentWalk()
    for (const c of walk) expect({ commit: c, tested: tested(c) }).toEqual({ commit: c, tested: true })
    // every tip main moved to: tested, and main never moved backwards or sideways (a tip on main's first-parent path
    // is an ancestor of main without asking git)
    const final = repo.branchSha("main")!
    const onMain = new Set([initialSha, ...walk])
    for (const t of tips) {
      expect({ tip: t, tested: tested(t), ancestorOfMain: onMain.has(t) || isAncestor(t, final) }).toEqual({
        tip: t,
        tested: true,
        ancestorOfMain: true
      })
    }
    // a merged PR is verified by a run that passed and contains the commit that landed it
    for (const [n, r] of records) {
      if (r.state !== "merged" || r.verifiedByTestRun === null) continue
      const d = await ok<TestingDetails>("getMergeQueueTestingDetails", { testRunId: r.verifiedByTestRun })
      expect({ pr: n, status: d.status }).toEqual({ pr: n, status: "succeeded" })
    }
    // each PR's change landed at most once, and exactly once when merged
    const touched = new Map<string, number>()
    for (const c of walk) {
      const names = repo.git("diff-tree", "--no-commit-id", "--name-only", "-r", `${c}^1`, c)
      for (const f of names === "" ? [] : names.split("\n")) touched.set(f, (touched.get(f) ?? 0) + 1)
    }
    for (const [n, file] of markers) {
      const count = touched.get(file) ?? 0
      const merged = records.get(n)?.state === "merged"
      expect({ pr: n, file, landed: count }).toEqual({ pr: n, file, landed: merged ? 1 : 0 })
    }
  }

  const files = (sha: string) => {
    const out = repo.git("ls-tree", "--name-only", "-r", sha)
    return out === "" ? [] : out.split("\n")
  }

  const markReported = (run: RunView) => {
    for (const p of run.details.testedPullRequests) {
      const set = reported.get(p.prNumber) ?? new Set<string>()
      set.add(run.runId)
      reported.set(p.prNumber, set)
    }
  }

  const reportRun = async (runId: string, state: "success" | "failure") => {
    const run = await stepUntil(
      async () => {
        const d = await details(runId)
        if (d.status !== "in_progress" || d.testBranchSha === "") return undefined
        return { runId, sha: d.testBranchSha, details: d }
      },
      waitMs,
      `run ${runId} in progress`,
      step
    )
    markReported(run)
    for (const context of run.details.requiredStatuses) await report(run.sha, state, context)
    return run
  }

  const autoCi = async (
    prs: ReadonlyArray<number>,
    decide: (run: RunView, files: ReadonlyArray<string>) => "success" | "failure",
    timeoutMs = 30_000
  ) => {
    const handled = new Set<string>()
    const out: RunView[] = []
    // the server's clock is the wall clock: the limit is in its time (each step is still a round, not a sleep)
    const deadline = performance.now() + timeoutMs
    let first = true
    for (;;) {
      let open = 0
      for (const n of prs) {
        const r = await pr(n)
        if (TERMINAL.has(r.state)) continue
        open++
        if (r.state !== "testing" || r.testRunId === null || handled.has(r.testRunId)) continue
        const d = await details(r.testRunId)
        if (d.status !== "in_progress" || d.testBranchSha === "") continue
        const run = { runId: r.testRunId, sha: d.testBranchSha, details: d }
        handled.add(run.runId)
        markReported(run)
        out.push(run)
        const verdict = decide(run, files(run.sha))
        for (const context of d.requiredStatuses) await report(run.sha, verdict, context)
      }
      if (open === 0) return out
      if (performance.now() > deadline) {
        const states = []
        for (const n of prs) states.push(`#${n} ${(await pr(n)).state}: ${await describe(n)}`)
        throw new Error(`autoCi timed out; ${states.join("; ")}`)
      }
      await step(first)
      first = false
    }
  }

  const setTargets = async (n: number, targets: ReadonlyArray<string> | string, sha?: string) => {
    const head = sha ?? repo.git("rev-parse", `refs/pull/${n}/head`)
    await ok("setImpactedTargets", { pr: { number: n, sha: head }, impactedTargets: targets })
  }

  /** "path blob" for every file a diff touches (deleted files as "path -") */
  const changeOf = (from: string, to: string) => {
    const out = repo.git("diff-tree", "-r", "--no-renames", from, to)
    return (out === "" ? [] : out.split("\n"))
      .map((line) => {
        const [meta, file] = line.split("\t")
        const parts = (meta ?? "").split(" ")
        const blob = parts[3] ?? ""
        return `${file} ${/^0+$/.test(blob) ? "-" : blob}`
      })
      .sort()
  }

  const checkLanePromise = async () => {
    sample()
    const records = new Map<number, PrRecord>()
    for (const n of submitted) {
      const r = await pr(n)
      records.set(n, r)
      expect({ pr: n, ended: TERMINAL.has(r.state) }).toEqual({ pr: n, ended: true })
    }
    const final = repo.branchSha("main")!
    for (const t of tips)
      expect({ tip: t, ancestorOfMain: isAncestor(t, final) }).toEqual({ tip: t, ancestorOfMain: true })
    const walk = firstParentWalk()
    const walked = new Set([initialSha, ...walk])
    for (const t of tips)
      expect({ tip: t, onFirstParentPath: walked.has(t) }).toEqual({ tip: t, onFirstParentPath: true })
    // each commit on main is the change of one merged PR
    const prChange = new Map<number, string>()
    for (const [n, r] of records) {
      const base = repo.git("merge-base", final, r.prSha)
      prChange.set(n, JSON.stringify(changeOf(base, r.prSha)))
    }
    const landed = new Map<number, number>()
    for (const c of walk) {
      const change = JSON.stringify(changeOf(`${c}^1`, c))
      const owners = [...prChange].filter(([n, ch]) => ch === change && records.get(n)?.state === "merged")
      expect({ commit: c, change, prs: owners.length > 0 }).toEqual({ commit: c, change, prs: true })
      const n = owners.find(([m]) => (landed.get(m) ?? 0) === 0)?.[0] ?? owners[0]![0]
      landed.set(n, (landed.get(n) ?? 0) + 1)
    }
    for (const [n, r] of records) {
      const merged = r.state === "merged"
      expect({ pr: n, landed: landed.get(n) ?? 0 }).toEqual({ pr: n, landed: merged ? 1 : 0 })
      if (!merged) continue
      expect({ pr: n, verified: r.verifiedByTestRun !== null }).toEqual({ pr: n, verified: true })
      const d = await ok<TestingDetails>("getMergeQueueTestingDetails", { testRunId: r.verifiedByTestRun })
      const tree = new Set(files(d.testBranchSha))
      const contains = (m: number) => {
        const file = markers.get(m)
        return file === undefined || tree.has(file)
      }
      expect({
        pr: n,
        status: d.status,
        tested: d.testedPullRequests.some((p) => p.prNumber === n),
        containsItself: contains(n),
        containsDependencies: d.dependentPrs.every(contains)
      }).toEqual({ pr: n, status: "succeeded", tested: true, containsItself: true, containsDependencies: true })
      // the dependencies it was tested with landed ahead of it
      for (const m of d.dependentPrs)
        expect({ pr: n, dependency: m, state: records.get(m)?.state }).toEqual({
          pr: n,
          dependency: m,
          state: "merged"
        })
    }
  }

  return {
    get server() {
      return current
    },
    switchTo: (next) => {
      current = next
    },
    repo,
    key,
    initialSha,
    post,
    ok,
    fails,
    updateQueue: (f) => ok("updateQueue", f),
    createPr: (n, spec, marker) => {
      markers.set(n, marker ?? `pr-${n}.txt`)
      return repo.createPr(n, spec)
    },
    submit: async (n, extra = {}) => {
      submitted.add(n)
      await ok("submitPullRequest", { pr: { number: n }, ...extra })
    },
    pr,
    timeline,
    testingCount: async (n) => (await timeline(n)).filter((t) => t.state === "testing").length,
    waitState,
    details,
    waitRun,
    report,
    ciPass: ci("success"),
    ciFail: ci("failure"),
    runsSeen: () => seen,
    mainSha: () => repo.branchSha("main")!,
    expectMainAt: (sha) => {
      const main = repo.branchSha("main")!
      if (options.landsTestedCommits === false)
        expect({ tree: repo.git("rev-parse", `${main}^{tree}`) }).toEqual({
          tree: repo.git("rev-parse", `${sha}^{tree}`)
        })
      else expect({ main }).toEqual({ main: sha })
    },
    history: () => {
      const out = repo.git("log", "--first-parent", "--reverse", "--format=%s", `${initialSha}..main`)
      return out === "" ? [] : out.split("\n")
    },
    until: (what, check, timeoutMs = waitMs) => stepUntil(check, timeoutMs, what, step),
    tick,
    holds: async (what, check) => {
      await tick()
      if (!(await check())) throw new Error(`not true once the queue settled: ${what}`)
    },
    checkOnePromise,
    files,
    reportRun,
    autoCi,
    setTargets,
    checkLanePromise,
    close: async () => {
      closed = true
      await post("deleteQueue").catch(() => undefined)
      repo.cleanup()
    }
  }
}

/** An error that stops `stepUntil` at once (a PR reached the wrong terminal state). */
class Fatal extends Error {}

/**
 * Checks, then steps with the queue (`step`: a tick, the runner settling, the server's next event), until `check`
 * returns a value; a `Fatal` error ends the wait at once. The limit is in the server's time, the wall clock (the test
 * does not own it); each step is a round or an event, never a sleep.
 */
const stepUntil = async <A>(
  check: () => Promise<A | undefined>,
  timeoutMs: number,
  what: string,
  step: (first: boolean) => Promise<void>
): Promise<A> => {
  const deadline = performance.now() + timeoutMs
  let last: unknown
  for (let first = true; ; first = false) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (e) {
      if (e instanceof Fatal) throw e
      last = e
    }
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`)
    await step(first)
  }
}
