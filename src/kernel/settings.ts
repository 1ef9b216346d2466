import * as fs from "node:fs"
import * as net from "node:net"
import { Config, ConfigError, Either, Option, Redacted } from "effect"

/**
 * Environment variables declared once each (issue 38): the parser (type and range), the default, and what the
 * variable does, on top of Effect's `Config`. `src/config.ts` lists the server's; `docs/configuration.md` is written
 * from that list (`npm run docs:config`), and a test feeds every variable each of its `invalid` values.
 *
 * A value that is set is checked whole, and refused with a message that names the variable, the value (a secret's
 * only by its length) and what is accepted. Refusals of several variables are reported together (`Config.all`
 * gathers them; `describeConfigError` lists them).
 */
export interface Setting<A> {
  readonly variable: string
  /** What is accepted, as a phrase: "an integer from 1 to 65535". */
  readonly accepts: string
  /** The default as documented ("8080", "`$DATA_DIR/git`"); undefined: none (unset means off). */
  readonly default: string | undefined
  readonly description: string
  /** Values never printed: refusals give their length only. */
  readonly secret: boolean
  /** Values that must be refused: the generated test starts the server with each. */
  readonly invalid: ReadonlyArray<string>
  readonly config: Config.Config<A>
}

/** How one value is read: the value, or why it is refused (a phrase; the variable and value are added). */
export interface Kind<A> {
  readonly accepts: string
  readonly parse: (raw: string) => Either.Either<A, string>
  readonly invalid: ReadonlyArray<string>
  /** Never printed: refusals give the value's length only. */
  readonly secret?: boolean
  /** How a refusal shows the value, when not as it is (a URL with its password masked). */
  readonly show?: (raw: string) => string
}

export interface Doc {
  readonly description: string
  /** More refused values than the kind's own. */
  readonly invalid?: ReadonlyArray<string>
}

/** `PORT=70000`, `LOG_LEVEL="two words"`, or a secret's length: `BOOTSTRAP_TOKEN (12 characters, not shown)`. */
export const showValue = (variable: string, raw: string, secret: boolean): string => {
  if (secret) return `${variable} (${raw.length} characters, not shown)`
  const shown = raw.length > 200 ? `${raw.slice(0, 200)}…` : raw
  return /^[\w.:/@+,=%-]+$/.test(shown) ? `${variable}=${shown}` : `${variable}=${JSON.stringify(shown)}`
}

const refusal = (variable: string, shown: string, reason: string, accepts: string) =>
  ConfigError.InvalidData([variable], `${shown}: ${reason}; ${variable} takes ${accepts}`)

const read = <A>(variable: string, kind: Kind<A>, raw: string): Either.Either<A, ConfigError.ConfigError> =>
  Either.mapLeft(kind.parse(raw), (reason) =>
    refusal(
      variable,
      showValue(variable, kind.show === undefined ? raw : kind.show(raw), kind.secret === true),
      reason,
      kind.accepts
    )
  )

/**
 * A variable with a default. Set but empty (`PORT=`) is refused: unset it to get the default (an empty value that
 * quietly meant something, like `PORT=` meaning any free port, is what issue 38 found).
 */
export const withDefault = <A>(
  variable: string,
  kind: Kind<A>,
  fallback: A,
  shownDefault: string,
  doc: Doc
): Setting<A> => ({
  variable,
  accepts: kind.accepts,
  default: shownDefault,
  description: doc.description,
  secret: kind.secret === true,
  invalid: ["", ...kind.invalid, ...(doc.invalid ?? [])],
  config: Config.option(Config.string(variable)).pipe(
    Config.mapOrFail(
      (raw): Either.Either<A, ConfigError.ConfigError> =>
        Option.isNone(raw)
          ? Either.right(fallback)
          : raw.value === ""
            ? Either.left(
                refusal(
                  variable,
                  `${variable}=""`,
                  `set but empty (unset it for the default, ${shownDefault})`,
                  kind.accepts
                )
              )
            : read(variable, kind, raw.value)
    )
  )
})

/** A variable without a default: unset, or set to the empty string (`VAR=` in an env file), is `Option.none()`. */
export const optional = <A>(
  variable: string,
  kind: Kind<A>,
  doc: Doc & { readonly unset?: string }
): Setting<Option.Option<A>> => ({
  variable,
  accepts: kind.accepts,
  default: doc.unset,
  description: doc.description,
  secret: kind.secret === true,
  invalid: [...kind.invalid, ...(doc.invalid ?? [])],
  config: Config.option(Config.string(variable)).pipe(
    Config.mapOrFail(
      (raw): Either.Either<Option.Option<A>, ConfigError.ConfigError> =>
        Option.isNone(raw) || raw.value === ""
          ? Either.right(Option.none())
          : Either.map(read(variable, kind, raw.value), Option.some)
    )
  )
})

// ---- kinds ----------------------------------------------------------------------------------------------------

const fmt = (n: number) => String(n)

/** An integer in `[min, max]` (underscores between digits allowed: `60_000`). */
export const integer = (min: number, max: number, note = ""): Kind<number> => ({
  accepts: `an integer from ${fmt(min)} to ${fmt(max)}${note === "" ? "" : ` (${note})`}`,
  parse: (raw) => {
    const text = raw.trim()
    if (!/^[+-]?\d+(_\d+)*$/.test(text)) return Either.left("not an integer")
    const n = Number(text.replace(/_/g, ""))
    if (n < min) return Either.left(`below ${fmt(min)}`)
    if (n > max) return Either.left(`above ${fmt(max)}`)
    return Either.right(n)
  },
  invalid: ["abc", "1.5", String(min - 1), ...(max < Number.MAX_SAFE_INTEGER ? [String(max + 1)] : [])]
})

const TRUE = ["true", "yes", "on", "1"]
const FALSE = ["false", "no", "off", "0"]

export const boolean: Kind<boolean> = {
  accepts: "true or false (also yes/no, on/off, 1/0)",
  parse: (raw) => {
    const v = raw.trim().toLowerCase()
    if (TRUE.includes(v)) return Either.right(true)
    if (FALSE.includes(v)) return Either.right(false)
    return Either.left("not a boolean")
  },
  invalid: ["maybe"]
}

/** One of `values`, in any letter case (read as written in `values`). */
export const oneOf = <const L extends string>(values: ReadonlyArray<L>, bad = "nonsense"): Kind<L> => ({
  accepts: `one of ${values.join(", ")}`,
  parse: (raw) => {
    const v = raw.trim().toLowerCase()
    const found = values.find((x) => x.toLowerCase() === v)
    return found === undefined ? Either.left("not one of them") : Either.right(found)
  },
  invalid: [bad]
})

/** Text that is not blank, trimmed; at most `max` characters, matching `pattern` when given. */
export const text = (
  options: { readonly max?: number; readonly pattern?: RegExp; readonly what?: string; readonly bad?: string } = {}
): Kind<string> => {
  const max = options.max ?? 4096
  return {
    accepts: options.what ?? `text (not blank, at most ${fmt(max)} characters)`,
    parse: (raw) => {
      const v = raw.trim()
      if (v === "") return Either.left("blank")
      if (v.length > max) return Either.left(`${v.length} characters long, more than ${fmt(max)}`)
      if (options.pattern !== undefined && !options.pattern.test(v)) return Either.left("not of that form")
      return Either.right(v)
    },
    invalid: ["   ", ...(options.bad === undefined ? [] : [options.bad])]
  }
}

/** A secret: not blank (surrounding whitespace, such as a file's last newline, is dropped), at least `min` long. */
export const secret = (min = 1, how = ""): Kind<Redacted.Redacted<string>> => ({
  accepts: min > 1 ? `a secret of at least ${min} characters${how === "" ? "" : ` (${how})`}` : "a secret (not blank)",
  secret: true,
  parse: (raw) => {
    const v = raw.trim()
    if (v === "") return Either.left("blank")
    if (v.length < min) return Either.left(`${v.length} characters long, fewer than ${min}`)
    return Either.right(Redacted.make(v))
  },
  invalid: ["   ", ...(min > 1 ? ["x".repeat(min - 1)] : [])]
})

const HOST_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i

/** A host name or an IP address, syntactically (whether it resolves is checked at start: `src/startup.ts`). */
export const isHostName = (v: string) =>
  net.isIP(v) !== 0 ||
  (v.length <= 253 &&
    v
      .replace(/\.$/, "")
      .split(".")
      .every((l) => HOST_LABEL.test(l)))

export const host: Kind<string> = {
  accepts: "a host name or an IP address",
  parse: (raw) => {
    const v = raw.trim().replace(/^\[(.*)\]$/, "$1")
    return isHostName(v) ? Either.right(v.toLowerCase()) : Either.left("not a host name or IP address")
  },
  invalid: ["not a host", "-bad-.example"]
}

/** An absolute URL with one of `schemes` and a host, without a trailing slash. */
export const url = (schemes: ReadonlyArray<string>, options: { readonly plain?: boolean } = {}): Kind<string> => ({
  accepts: `an absolute ${schemes.join(" or ")} URL (${schemes[0]}://host[:port][/path]${
    options.plain === true ? ", no query or fragment" : ""
  })`,
  parse: (raw) => {
    const v = raw.trim()
    let u: URL
    try {
      u = new URL(v)
    } catch {
      return Either.left("not a URL")
    }
    const scheme = u.protocol.replace(/:$/, "")
    if (!schemes.includes(scheme) || !v.toLowerCase().startsWith(`${scheme}://`)) {
      return Either.left(/^[a-z][a-z0-9+.-]*:\/\//i.test(v) ? `the scheme ${scheme}: is not accepted` : "no scheme")
    }
    if (u.hostname === "") return Either.left("no host")
    if (options.plain === true && (u.search !== "" || u.hash !== "")) return Either.left("it has a query or fragment")
    return Either.right(v.replace(/\/+$/, ""))
  },
  invalid: ["localhost:8080", "not a url", "ftp://example.com"]
})

/** What the password of a connection URL is replaced with in messages. */
export const maskPassword = (raw: string) => raw.replace(/^((?:[a-z][a-z0-9+.-]*:\/\/)?[^:/@]*:)[^@/]*@/i, "$1***@")

/** A PostgreSQL connection URL; shown with its password masked. */
export const postgresUrl: Kind<Redacted.Redacted<string>> = {
  accepts: "a PostgreSQL URL: postgres://user:password@host:5432/database (or postgresql://)",
  parse: (raw) => {
    const v = raw.trim()
    let u: URL
    try {
      u = new URL(v)
    } catch {
      return Either.left("not a URL")
    }
    const scheme = u.protocol.replace(/:$/, "")
    if (scheme !== "postgres" && scheme !== "postgresql") {
      return Either.left(`a ${scheme}: URL is not PostgreSQL, the only database Greenline runs on`)
    }
    if (u.hostname === "" && u.searchParams.get("host") === null) return Either.left("no host")
    return Either.right(Redacted.make(v))
  },
  // printed with its password masked
  show: maskPassword,
  invalid: ["not-a-url", "mysql://root@127.0.0.1:3306/greenline", "postgres://"]
}

/** A PEM private key given as its text, or as the path of a readable file. */
export const pemOrFile: Kind<Redacted.Redacted<string>> = {
  accepts: "PEM text (-----BEGIN ... PRIVATE KEY-----, `\\n` escapes allowed) or the path of a readable PEM file",
  secret: true,
  parse: (raw) => {
    const v = raw.trim()
    if (v === "") return Either.left("blank")
    if (v.includes("-----BEGIN")) return Either.right(Redacted.make(v))
    try {
      fs.accessSync(v, fs.constants.R_OK)
      return fs.statSync(v).isFile() ? Either.right(Redacted.make(v)) : Either.left("a path that is not a file")
    } catch {
      return Either.left("neither PEM text nor the path of a readable file")
    }
  },
  invalid: ["   ", "/no/such/key.pem"]
}

/** A file-system path (not blank). */
export const filePath: Kind<string> = text({ what: "a path (not blank)" })

// ---- reporting ------------------------------------------------------------------------------------------------

/** Every refusal in a `ConfigError`, in the order the variables were declared. */
export const configProblems = (error: ConfigError.ConfigError): ReadonlyArray<string> => {
  switch (error._op) {
    case "And":
    case "Or":
      return [...configProblems(error.left), ...configProblems(error.right)]
    case "InvalidData":
    case "MissingData":
    case "SourceUnavailable":
    case "Unsupported":
      return [
        error.path.length > 0 && !error.message.startsWith(error.path.join("."))
          ? `${error.path.join(".")}: ${error.message}`
          : error.message
      ]
  }
}

/** The refusals in the order of `variables` (the order they are declared in). */
export const sortedProblems = (error: ConfigError.ConfigError, variables: ReadonlyArray<string>): string[] => {
  const rank = (p: string) => {
    const i = variables.findIndex((v) => p.startsWith(`${v}=`) || p.startsWith(`${v} `) || p.startsWith(`${v}:`))
    return i < 0 ? variables.length : i
  }
  return [...configProblems(error)].sort((a, b) => rank(a) - rank(b))
}
