import * as fs from "node:fs"
import * as path from "node:path"
import { settingList } from "../src/config.ts"

/**
 * docs/configuration.md, written from the settings' schema (src/config.ts): `npm run docs:config` rewrites it, and
 * test/unit/config.test.ts fails when the file differs from what this renders.
 */

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ")

export const configurationDoc = (): string => {
  const rows = settingList.map(
    (s) =>
      `| \`${s.variable}\`${s.secret ? " (secret)" : ""} | ${cell(s.accepts)} | ${cell(s.default ?? "unset")} | ${cell(s.description)} |`
  )
  return `# Configuration

<!-- Written by \`npm run docs:config\` from src/config.ts; a test checks that it matches. Edit the schema, not this. -->

Greenline reads its settings from the environment. Every variable is declared once, in \`src/config.ts\`, with what it
accepts, its default and what it does; this page is written from that declaration.

**Checked before anything starts.** At start the server reads every variable and refuses the whole start when any
value is not accepted: each refusal is one \`ERROR\` log line (on stderr) naming the variable, the value (a secret's
length only; a URL's password masked) and what the variable takes, followed by a summary line; the process exits with
code **78** (\`EX_CONFIG\`). All refusals are reported together. Then it checks what the settings point at: that
\`HOST\` resolves to an address of this machine and \`PORT\` is free there, that \`DATA_DIR\` is a directory (or does not
exist yet), and that \`DATABASE_URL\` answers and is PostgreSQL (5 s at most each). Only then does it open the
database: a refused start runs no migration and no retention pass, and leaves the data directory as it was (it is not
even created).

**Unset and empty.** A variable with a default takes its default when unset; set but empty (\`PORT=\`) it is refused,
since an empty value that quietly means something is a trap. A variable without a default is off when unset or empty
(\`BOOTSTRAP_TOKEN=\` in an env file is the same as no line). Text values are trimmed; a value of only spaces is
refused. Integers may group digits with \`_\` (\`60_000\`); booleans are \`true\`/\`false\`, \`yes\`/\`no\`, \`on\`/\`off\` or
\`1\`/\`0\`; choices are read in any letter case.

| variable | accepts | default (when unset) | what it does |
|---|---|---|---|
${rows.join("\n")}

Variables read by the libraries underneath, not by Greenline: the OpenTelemetry SDK's \`OTEL_EXPORTER_OTLP_HEADERS\`,
\`OTEL_RESOURCE_ATTRIBUTES\`, \`OTEL_TRACES_SAMPLER\` and the others (README, Observability). The CLI's client commands
read \`GREENLINE_URL\`, \`GREENLINE_TOKEN\`, \`GREENLINE_REPO\` and \`GREENLINE_ORG\` (README, The CI client).

## Adding a variable

Add one entry to \`settings\` in \`src/config.ts\`: \`withDefault(NAME, kind, value, "shown default", { description })\`
or \`optional(NAME, kind, { unset, description })\`, with a kind from \`src/kernel/settings.ts\` (\`integer(min, max)\`,
\`boolean\`, \`oneOf([...])\`, \`text()\`, \`secret(min)\`, \`url([...])\`, \`host\`, ...) or a \`Kind\` of its own (a parser,
what it accepts, and values it refuses). The entry's key becomes the field of \`AppConfigShape\`. A feature or
adapter that needs the value gets it through its own settings tag (\`queue/QueueEnv.ts\`, \`github/GitHubEnv.ts\`, ...,
filled in \`FeatureEnvsLive\`): only the composition root imports \`src/config.ts\`. Then run \`npm run docs:config\`. The start-up check, this page and the generated test (every variable started with each value
its kind refuses) follow from the entry.
`
}

if (import.meta.main) {
  const file = path.join(import.meta.dir, "..", "docs", "configuration.md")
  fs.writeFileSync(file, configurationDoc())
  process.stdout.write(`wrote ${path.relative(process.cwd(), file)}\n`)
}
