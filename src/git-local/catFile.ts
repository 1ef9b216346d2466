/**
 * One long-lived `git cat-file --batch` process per repository, for the reads that happen per request (a PR's head
 * and its commit at submission): a request is a line on its standard input instead of a new process. Requests are
 * pipelined (written as they come, answered in order); the process is started on first use, closed after a few idle
 * seconds and started again when it died.
 */
import * as os from "node:os"
import { Effect } from "effect"
import { GitError } from "../queue/GitHost.ts"
import { gitEnvironment } from "./gitEnv.ts"

export interface CatFileObject {
  readonly sha: string
  readonly type: string
  readonly content: Uint8Array
}

const IDLE_MS = 10_000
const encoder = new TextEncoder()
const NEWLINE = 10

type Proc = Bun.Subprocess<"pipe", "pipe", "ignore">

class BatchProcess {
  private readonly proc: Proc
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>
  private buffer: Uint8Array = new Uint8Array(0)
  /** Readers waiting for their answer, in the order their lines were written. */
  private readonly waiting: Array<{
    readonly resolve: (object: CatFileObject | null) => void
    readonly reject: (error: Error) => void
  }> = []
  private flushing = false
  private idle: ReturnType<typeof setTimeout> | undefined
  closed = false

  constructor(
    gitDir: string,
    private readonly onClose: () => void
  ) {
    this.proc = Bun.spawn(["git", `--git-dir=${gitDir}`, "cat-file", "--batch"], {
      env: gitEnvironment(),
      cwd: os.tmpdir(),
      stdin: "pipe",
      stdout: "pipe",
      stderr: "ignore"
    })
    // Bun's typing of the default reader differs from the DOM's by its buffer type only
    this.reader = this.proc.stdout.getReader() as unknown as ReadableStreamDefaultReader<Uint8Array>
    void this.proc.exited.then(() => this.close())
    void this.answers()
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    if (this.idle !== undefined) clearTimeout(this.idle)
    this.onClose()
    const error = new Error("git cat-file closed")
    for (const w of this.waiting.splice(0)) w.reject(error)
    try {
      this.proc.stdin.end()
    } catch {
      // already gone
    }
    this.proc.kill()
  }

  /**
   * The object named `name` (e.g. `refs/pull/3/head^{commit}`), null when it does not exist. Reads are pipelined:
   * each line is written at once (the lines of one turn of the event loop flushed together) and git answers them in order.
   */
  read(name: string): Promise<CatFileObject | null> {
    if (this.closed) return Promise.reject(new Error("git cat-file closed"))
    if (this.idle !== undefined) {
      clearTimeout(this.idle)
      this.idle = undefined
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject })
      this.proc.stdin.write(encoder.encode(`${name}\n`))
      if (!this.flushing) {
        this.flushing = true
        setImmediate(() => {
          this.flushing = false
          if (!this.closed) this.proc.stdin.flush()
        })
      }
    })
  }

  private async fill(): Promise<void> {
    const { done, value } = await this.reader.read()
    if (done || value === undefined) throw new Error("git cat-file exited")
    if (this.buffer.length === 0) {
      this.buffer = value
      return
    }
    const merged = new Uint8Array(this.buffer.length + value.length)
    merged.set(this.buffer)
    merged.set(value, this.buffer.length)
    this.buffer = merged
  }

  /** One whole answer from the buffer, or undefined when more output is needed. */
  private parse(): { readonly object: CatFileObject | null } | undefined {
    const eol = this.buffer.indexOf(NEWLINE)
    if (eol < 0) return undefined
    const header = new TextDecoder().decode(this.buffer.subarray(0, eol))
    const parts = header.split(" ")
    if (parts.length === 3 && /^[0-9a-f]{40,64}$/.test(parts[0] ?? "")) {
      const size = Number(parts[2])
      if (this.buffer.length < eol + 1 + size + 1) return undefined
      const object = {
        sha: parts[0] ?? "",
        type: parts[1] ?? "",
        content: this.buffer.slice(eol + 1, eol + 1 + size)
      }
      this.buffer = this.buffer.subarray(eol + 1 + size + 1)
      return { object }
    }
    // "<name> missing" or "<name> ambiguous"
    this.buffer = this.buffer.subarray(eol + 1)
    return { object: null }
  }

  /** Hands each answer to the reader that waits longest, for as long as the process lives. */
  private async answers(): Promise<void> {
    try {
      for (;;) {
        for (let next = this.parse(); next !== undefined; next = this.parse()) {
          const waiter = this.waiting.shift()
          if (waiter === undefined) throw new Error("git cat-file answered a question not asked")
          waiter.resolve(next.object)
        }
        if (this.waiting.length === 0 && this.idle === undefined && !this.closed) {
          this.idle = setTimeout(() => this.close(), IDLE_MS)
          this.idle.unref?.()
        }
        await this.fill()
      }
    } catch {
      this.close()
    }
  }
}

/** The batch processes of one provider instance, by git directory. */
export const makeCatFile = () => {
  const processes = new Map<string, BatchProcess>()

  const processFor = (gitDir: string): BatchProcess => {
    const existing = processes.get(gitDir)
    if (existing !== undefined && !existing.closed) return existing
    const created: BatchProcess = new BatchProcess(gitDir, () => {
      if (processes.get(gitDir) === created) processes.delete(gitDir)
    })
    processes.set(gitDir, created)
    return created
  }

  /** Reads one object; a process that failed is replaced and the read tried once more. */
  const read = (gitDir: string, name: string): Effect.Effect<CatFileObject | null, GitError> =>
    Effect.tryPromise({
      try: async () => {
        try {
          return await processFor(gitDir).read(name)
        } catch {
          processes.get(gitDir)?.close()
          return await processFor(gitDir).read(name)
        }
      },
      catch: (cause) =>
        new GitError({
          args: ["cat-file", "--batch"],
          exitCode: null,
          stderr: "",
          message: `git cat-file --batch failed: ${cause}`
        })
    })

  const closeAll = () => {
    for (const p of [...processes.values()]) p.close()
  }

  return { read, closeAll }
}

export interface CommitSummary {
  /** the first paragraph of the message, its lines joined by spaces (git's subject) */
  readonly subject: string
  readonly authorName: string
}

/** Subject and author name of a raw commit object. */
export const summarizeCommit = (content: Uint8Array): CommitSummary => {
  const text = new TextDecoder().decode(content)
  const split = text.indexOf("\n\n")
  const headers = split < 0 ? text : text.slice(0, split)
  const message = split < 0 ? "" : text.slice(split + 2)
  let authorName = ""
  for (const line of headers.split("\n")) {
    if (line.startsWith("author ")) {
      const lt = line.indexOf(" <")
      authorName = lt < 0 ? line.slice(7) : line.slice(7, lt)
      break
    }
  }
  const paragraph = message.replace(/^\n+/, "").split(/\n[ \t]*\n/)[0] ?? ""
  const subject = paragraph
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .join(" ")
  return { subject, authorName }
}
