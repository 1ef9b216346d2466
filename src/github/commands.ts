import { PRIORITY_VALUES, type PriorityName } from "../queue/schemas.ts"

/**
 * Merge-queue commands given as pull request comments (pure): `/trunk merge [--priority|-p <p>] [--no-batch]` and
 * `/trunk cancel`. `<p>` is an integer 0..255 or a priority name (`urgent`, `high`, `medium`, `low`), as in
 * submitPullRequest.
 *
 * Rules:
 * - A command is a line of the comment that starts with `/trunk` (leading spaces allowed); the first such line is the
 *   comment's command and the rest of the comment is ignored. Lines inside fenced code blocks (```` ``` ````,
 *   `~~~`) and quoted lines (`> ...`) are not commands, so quoting someone's command does not repeat it.
 * - Keywords and priority names are case-insensitive. Options may come in any order; `--priority=high` and `-p=high`
 *   are accepted too. A repeated option, an unknown option or word, or a priority outside 0..255 makes the command
 *   invalid (the service answers with the reason instead of guessing).
 */

export type QueueCommand =
  | {
      readonly _tag: "Merge"
      /** undefined: not given (a new entry takes the default, an active one keeps its priority) */
      readonly priority: number | undefined
      /** true with `--no-batch`; undefined when not given */
      readonly noBatch: true | undefined
    }
  | { readonly _tag: "Cancel" }

export type ParsedComment =
  | { readonly _tag: "None" }
  | { readonly _tag: "Command"; readonly command: QueueCommand; readonly line: string }
  | { readonly _tag: "Invalid"; readonly message: string; readonly line: string }

export const USAGE = "usage: `/trunk merge [--priority <0-255|urgent|high|medium|low>] [--no-batch]` or `/trunk cancel`"

const FENCE = /^\s{0,3}(```|~~~)/
const COMMAND_LINE = /^\s*\/trunk(?=\s|$)/i

/** The first command line of a comment body (outside code blocks and quotes), or undefined. */
export const commandLine = (body: string): string | undefined => {
  let fence: string | null = null
  for (const raw of body.split(/\r?\n/)) {
    const opened = FENCE.exec(raw)
    if (fence !== null) {
      if (opened?.[1] === fence) fence = null
      continue
    }
    if (opened?.[1] !== undefined) {
      fence = opened[1]
      continue
    }
    if (COMMAND_LINE.test(raw)) return raw.trim()
  }
  return undefined
}

/** Parses a priority given as a decimal integer 0..255 or a name; undefined when it is neither. */
export const parsePriority = (text: string): number | undefined => {
  const lower = text.toLowerCase()
  if (Object.hasOwn(PRIORITY_VALUES, lower)) return PRIORITY_VALUES[lower as PriorityName]
  if (!/^\d{1,3}$/.test(text)) return undefined
  const n = Number(text)
  return n <= 255 ? n : undefined
}

const invalid = (line: string, message: string): ParsedComment => ({
  _tag: "Invalid",
  message: `${message}; ${USAGE}`,
  line
})

const parseLine = (line: string): ParsedComment => {
  const words = line.split(/\s+/).filter((w) => w !== "")
  const verb = words[1]?.toLowerCase()
  if (verb === undefined) return invalid(line, "`/trunk` needs a command")
  const args = words.slice(2)
  if (verb === "cancel") {
    if (args.length > 0) return invalid(line, `\`/trunk cancel\` takes no options (got \`${args.join(" ")}\`)`)
    return { _tag: "Command", command: { _tag: "Cancel" }, line }
  }
  if (verb !== "merge") return invalid(line, `unknown command \`${words[1]}\``)

  let priority: number | undefined
  let noBatch: true | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const eq = arg.indexOf("=")
    const name = (eq >= 0 ? arg.slice(0, eq) : arg).toLowerCase()
    if (name === "--priority" || name === "-p") {
      if (priority !== undefined) return invalid(line, "the priority is given twice")
      const value = eq >= 0 ? arg.slice(eq + 1) : args[++i]
      if (value === undefined || value === "") return invalid(line, `\`${name}\` needs a value`)
      const parsed = parsePriority(value)
      if (parsed === undefined) {
        return invalid(line, `\`${value}\` is not a priority (an integer from 0 to 255, or urgent, high, medium, low)`)
      }
      priority = parsed
    } else if (name === "--no-batch" && eq < 0) {
      if (noBatch !== undefined) return invalid(line, "`--no-batch` is given twice")
      noBatch = true
    } else {
      return invalid(line, `unknown option \`${arg}\``)
    }
  }
  return { _tag: "Command", command: { _tag: "Merge", priority, noBatch }, line }
}

/** The command of a comment: none, a command, or an invalid command with the reason. */
export const parseComment = (body: string): ParsedComment => {
  const line = commandLine(body)
  return line === undefined ? { _tag: "None" } : parseLine(line)
}
