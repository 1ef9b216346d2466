import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { Effect, Fiber } from "effect"
import { CommandCi, type CommandCiInput, CommandCiLayer, makeCommandCi } from "../../src/git-local/CommandCi.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"

let repo: TestRepo
let head: string

beforeAll(() => {
  repo = createTestRepo({ files: { "README.md": "hello\n" } })
  head = repo.createPr(1, { files: { "pr.txt": "from the PR\n" } })
})

afterAll(() => repo.cleanup())

const ci = () => makeCommandCi(repo.root)
const run = (command: string, timeoutMs = 10_000, sha = head) =>
  Effect.runPromise(ci().run({ repo: repo.repo, sha, command, timeoutMs }))

/** Whether a process is running (a killed process not yet reaped by init is a zombie: not running). */
const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  const stat = `/proc/${pid}/stat`
  if (!fs.existsSync(stat)) return true
  const state = fs.readFileSync(stat, "utf8").split(") ")[1]?.[0]
  return state !== "Z" && state !== "X"
}

/** Worktrees registered in the bare repository besides itself. */
const worktrees = (): Array<string> =>
  repo
    .git("worktree", "list", "--porcelain")
    .split("\n")
    .filter((line) => line.startsWith("worktree "))
    .slice(1)

describe("CommandCi", () => {
  test("a passing command runs in a checkout of the commit", async () => {
    const result = await run("cat pr.txt README.md; echo to-stderr >&2; echo $GREENLINE_SHA")
    expect(result.exitCode).toBe(0)
    expect(result.timedOut).toBe(false)
    expect(result.output).toBe(`from the PR\nhello\nto-stderr\n${head}\n`)
    expect(result.durationMs).toBeGreaterThanOrEqual(0)
  })

  test("a failing command gives its exit code and output", async () => {
    const result = await run("echo failing; exit 3")
    expect(result.exitCode).toBe(3)
    expect(result.timedOut).toBe(false)
    expect(result.output).toBe("failing\n")
  })

  test("a command past its timeout is killed, with its children", async () => {
    const result = await run("sleep 30 & echo $!; sleep 30", 300)
    expect(result.timedOut).toBe(true)
    expect(result.exitCode).toBe(137)
    const child = Number(result.output.trim())
    expect(child).toBeGreaterThan(0)
    for (let i = 0; i < 50 && isRunning(child); i++) await Bun.sleep(20)
    expect(isRunning(child)).toBe(false)
  })

  test("the checkout is removed afterwards", async () => {
    const result = await run("pwd; git status --porcelain | wc -l; git rev-parse HEAD")
    const [dir, dirty, sha] = result.output.trim().split("\n")
    expect(dirty?.trim()).toBe("0")
    expect(sha).toBe(head)
    expect(fs.existsSync(dir!)).toBe(false)
    expect(worktrees()).toEqual([])
  })

  test("the checkout is removed after a timeout and after interruption", async () => {
    const timedOut = await run("pwd; sleep 30", 200)
    expect(fs.existsSync(timedOut.output.trim())).toBe(false)
    const fiber = Effect.runFork(ci().run({ repo: repo.repo, sha: head, command: "sleep 30", timeoutMs: 60_000 }))
    await Bun.sleep(300)
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(worktrees()).toEqual([])
  })

  test("output keeps the last 1 MiB", async () => {
    const result = await run("head -c 3000000 /dev/zero | tr '\\0' a; echo; echo the-end")
    expect(result.exitCode).toBe(0)
    expect(result.truncated).toBe(true)
    expect(result.output.length).toBeLessThan(1024 * 1024 + 100)
    expect(result.output.endsWith("a\nthe-end\n")).toBe(true)
    expect(result.output.startsWith("[... output truncated")).toBe(true)
  })

  test("errors: unknown repository, unknown commit", async () => {
    const input: CommandCiInput = { repo: { ...repo.repo, name: "gone" }, sha: head, command: "true", timeoutMs: 1000 }
    const missing = await Effect.runPromise(Effect.flip(ci().run(input)))
    expect(missing._tag).toBe("RepoNotFound")
    const layer = CommandCiLayer(repo.root)
    const bad = await Effect.runPromise(
      Effect.flip(Effect.flatMap(CommandCi, (c) => c.run({ ...input, repo: repo.repo, sha: "e".repeat(40) }))).pipe(
        Effect.provide(layer)
      )
    )
    expect(bad._tag).toBe("GitError")
    expect(worktrees()).toEqual([])
  })
})
