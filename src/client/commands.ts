import { parseArgs } from "node:util"
import {
  type ClientIo,
  CONNECTION_HELP,
  CONNECTION_OPTIONS,
  call,
  type Env,
  EXIT_CODES_HELP,
  exitCodeOf,
  orgOf,
  prOf,
  repoOf,
  serverOf,
  UsageError
} from "./io.ts"

/** `quarantine`, `queue status`, `submit` and `cancel`: thin calls of the v1 API. */

const COMMON = {
  url: { type: "string" },
  token: { type: "string" },
  repo: { type: "string" },
  help: { type: "boolean", short: "h" },
  ...CONNECTION_OPTIONS
} as const

const COMMON_HELP = `  --url URL              the Greenline server (default: $GREENLINE_URL)
  --token TOKEN          an API token (default: $GREENLINE_TOKEN)
  --repo HOST/OWNER/NAME the repository (default: $GREENLINE_REPO)
${CONNECTION_HELP}
  -h, --help             this text

${EXIT_CODES_HELP}`

const QUEUE_HELP = `  --target-branch NAME   the queue's target branch (default: $GREENLINE_TARGET_BRANCH, else main)`

export const USAGES = {
  "quarantine list": `usage: greenline quarantine list [options]

Lists the repository's quarantined tests: id, setting (always or auto) and name.

  --org SLUG             the organization (default: $GREENLINE_ORG)
${COMMON_HELP}`,
  "quarantine set": `usage: greenline quarantine set [options] <test id> always|never|auto

Overrides quarantine for one test: always quarantined, never quarantined, or auto (the repository's settings
and the test's status decide). The test id is the one 'quarantine list' and the dashboard show.

  --org SLUG             the organization (default: $GREENLINE_ORG)
${COMMON_HELP}`,
  "queue status": `usage: greenline queue status [options]

Shows the merge queue: its state and every pull request in it, in order.

${QUEUE_HELP}
${COMMON_HELP}`,
  submit: `usage: greenline submit [options] --pr N

Submits a pull request to the merge queue.

  --pr N                 the pull request (default: from $GITHUB_REF, or $CI_MERGE_REQUEST_IID)
  --priority P           0-255, or urgent, high, medium, low (default: the queue's)
  --no-batch             test this pull request alone, never in a batch
${QUEUE_HELP}
${COMMON_HELP}`,
  cancel: `usage: greenline cancel [options] --pr N

Takes a pull request out of the merge queue.

  --pr N                 the pull request (default: from $GITHUB_REF, or $CI_MERGE_REQUEST_IID)
${QUEUE_HELP}
${COMMON_HELP}`
} as const

type CommandName = keyof typeof USAGES

type OptionSpec = Record<string, { readonly type: "string" | "boolean"; readonly short?: string }>

const parse = (argv: ReadonlyArray<string>, options: OptionSpec, allowPositionals = false) => {
  try {
    const parsed = parseArgs({ args: [...argv], options: { ...COMMON, ...options }, allowPositionals, strict: true })
    return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals }
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e))
  }
}

const targetBranchOf = (value: string | undefined, env: Env) =>
  value !== undefined && value !== "" ? value : env.GREENLINE_TARGET_BRANCH || "main"

const SETTINGS = { always: "always_quarantine", never: "never_quarantine", auto: "unspecified" } as const

interface QuarantinedTest {
  readonly test_case_id: string
  readonly name: string
  readonly parent: string
  readonly classname: string
  readonly quarantine_setting: string
}

interface Entry {
  readonly prNumber: number
  readonly state: string
  readonly position: number | null
  readonly priorityName: string
  readonly prTitle: string
}

const run: Record<CommandName, (argv: ReadonlyArray<string>, env: Env, io: ClientIo) => Promise<number>> = {
  "quarantine list": async (argv, env, io) => {
    const { values } = parse(argv, { org: { type: "string" } })
    if (values.help) return help(io, "quarantine list")
    const server = serverOf(values, env)
    const scope = {
      repo: repoOf(values.repo as string | undefined, env),
      org_url_slug: orgOf(values.org as string | undefined, env)
    }
    let pageToken = ""
    let count = 0
    for (;;) {
      const answer = (await call(
        io,
        server,
        "flaky-tests/list-quarantined-tests",
        { ...scope, page_query: { page_size: 100, page_token: pageToken } },
        "idempotent"
      )) as { quarantined_tests: ReadonlyArray<QuarantinedTest>; page: { next_page_token: string } }
      for (const t of answer.quarantined_tests) {
        count++
        const setting = t.quarantine_setting === "always_quarantine" ? "always" : "auto"
        const where = [t.parent, t.classname].filter((s) => s !== "").join(" > ")
        io.out(`${t.test_case_id}\t${setting}\t${where === "" ? t.name : `${where} > ${t.name}`}`)
      }
      if (answer.page.next_page_token === "") break
      pageToken = answer.page.next_page_token
    }
    if (count === 0) io.err("no quarantined tests")
    return 0
  },
  "quarantine set": async (argv, env, io) => {
    const { values, positionals } = parse(argv, { org: { type: "string" } }, true)
    if (values.help) return help(io, "quarantine set")
    const [test, setting, ...rest] = positionals
    if (test === undefined || setting === undefined || rest.length > 0) {
      throw new UsageError("expected <test id> always|never|auto")
    }
    if (!(setting in SETTINGS)) throw new UsageError(`the setting is always, never or auto, not ${setting}`)
    const server = serverOf(values, env)
    await call(
      io,
      server,
      "flaky-tests/set-quarantine-override",
      {
        repo: repoOf(values.repo as string | undefined, env),
        org_url_slug: orgOf(values.org as string | undefined, env),
        test_case_id: test,
        override: SETTINGS[setting as keyof typeof SETTINGS]
      },
      "idempotent"
    )
    io.out(`${test}: quarantine ${setting}`)
    return 0
  },
  "queue status": async (argv, env, io) => {
    const { values } = parse(argv, { "target-branch": { type: "string" } })
    if (values.help) return help(io, "queue status")
    const server = serverOf(values, env)
    const repo = repoOf(values.repo as string | undefined, env)
    const targetBranch = targetBranchOf(values["target-branch"] as string | undefined, env)
    const queue = (await call(io, server, "getQueue", { repo, targetBranch }, "idempotent")) as {
      state: string
      mode: string
      concurrency: number
      enqueuedPullRequests: ReadonlyArray<Entry>
    }
    const entries = queue.enqueuedPullRequests
    io.out(
      `${repo.host}/${repo.owner}/${repo.name}@${targetBranch}: ${queue.state}, ${queue.mode} mode, concurrency ${queue.concurrency}, ${entries.length} pull request${entries.length === 1 ? "" : "s"}`
    )
    for (const e of entries) {
      io.out(
        `${e.position === null ? "-" : `#${e.position}`}\tPR ${e.prNumber}\t${e.state}\t${e.priorityName}\t${e.prTitle}`
      )
    }
    return 0
  },
  submit: async (argv, env, io) => {
    const { values } = parse(argv, {
      "target-branch": { type: "string" },
      pr: { type: "string" },
      priority: { type: "string" },
      "no-batch": { type: "boolean" }
    })
    if (values.help) return help(io, "submit")
    const server = serverOf(values, env)
    const repo = repoOf(values.repo as string | undefined, env)
    const targetBranch = targetBranchOf(values["target-branch"] as string | undefined, env)
    const pr = prOf(values.pr as string | undefined, env)
    if (pr === undefined) throw new UsageError("--pr is required")
    const priority = values.priority as string | undefined
    // submitting again is harmless (an active PR keeps its place, with the priority given)
    await call(
      io,
      server,
      "submitPullRequest",
      {
        repo,
        targetBranch,
        pr: { number: pr },
        ...(priority !== undefined ? { priority: /^\d+$/.test(priority) ? Number(priority) : priority } : {}),
        ...(values["no-batch"] ? { noBatch: true } : {})
      },
      "idempotent"
    )
    io.out(`PR ${pr} submitted to ${repo.host}/${repo.owner}/${repo.name}@${targetBranch}`)
    return 0
  },
  cancel: async (argv, env, io) => {
    const { values } = parse(argv, { "target-branch": { type: "string" }, pr: { type: "string" } })
    if (values.help) return help(io, "cancel")
    const server = serverOf(values, env)
    const repo = repoOf(values.repo as string | undefined, env)
    const targetBranch = targetBranchOf(values["target-branch"] as string | undefined, env)
    const pr = prOf(values.pr as string | undefined, env)
    if (pr === undefined) throw new UsageError("--pr is required")
    // not repeated once it may have arrived: a second cancel answers 409 PR_NOT_ACTIVE
    await call(io, server, "cancelPullRequest", { repo, targetBranch, pr: { number: pr } }, "once")
    io.out(`PR ${pr} cancelled in ${repo.host}/${repo.owner}/${repo.name}@${targetBranch}`)
    return 0
  }
}

const help = (io: ClientIo, name: CommandName) => {
  io.out(USAGES[name])
  return 0
}

export const isApiCommand = (name: string): name is CommandName => name in run

/** Runs an API command; its exit code (io.ts `EXIT`: 2 a usage error, 3 unreachable, 4 an error answer). */
export const runApiCommand = async (name: CommandName, argv: ReadonlyArray<string>, env: Env, io: ClientIo) => {
  try {
    return await run[name](argv, env, io)
  } catch (e) {
    io.err(`${name}: ${e instanceof Error ? e.message : String(e)}`)
    if (e instanceof UsageError) io.err(USAGES[name].split("\n")[0] ?? "")
    return exitCodeOf(e)
  }
}
