/**
 * The dependency rule of docs/architecture.md, checked in CI (`npm run check:deps`).
 * Layers, inside out: pure cores → feature services (queue, flaky, tenancy, events, audit) and the shared kernel →
 * adapters (http, web, db, git-local, github, metrics) → the composition root (main, cli, server, providers, startup,
 * and config, the settings' schema).
 */
const core = "^src/(queue/planner/|flaky/junit/|flaky/(classify|codeowners|normalize|testCaseIds)[.]ts$)"
const feature = "^src/(queue|flaky|tenancy|events|audit|triage)/"
// a feature's HTTP handlers and inbound webhooks are part of the HTTP edge, kept beside the feature they serve
const edgeModule = "/(Http|webhooks)[.]ts$"
const adapter = "^src/(http|web|db|git-local|github|metrics)/"
const root = "^src/(main|serve|cli|server|providers|startup|config)[.]ts$"
/**
 * A folder and a folder inside it depend on each other one way only. Dependency-cruiser's folder scope counts a
 * subfolder's modules as its parent's too, so it cannot see such a cycle: these two lists say which way each
 * subfolder goes, and `nested-folders-one-way` forbids the other (a subfolder in neither list imports nothing of its
 * parent and its parent nothing of it; a new one must pick a way).
 */
// composed by their parent: the parent imports them, they import nothing of it (pure cores)
const composedByParent = ["queue/planner", "flaky/junit"]
// built on their parent: they import its modules (ports, repositories, the contract), it imports nothing of them
const builtOnParent = ["queue/runner", "queue/engine", "http/docs", "http/routes"]
const under = (folders) => folders.map((f) => `^src/${f}/`)

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "No cycles between files.",
      from: {},
      to: { circular: true }
    },
    {
      name: "no-folder-cycles",
      severity: "error",
      comment: "No cycles between folders.",
      scope: "folder",
      from: {},
      to: { circular: true }
    },
    {
      name: "nested-folders-one-way",
      severity: "error",
      comment:
        "No cycle between a folder and a folder inside it: a folder's own modules import only the subfolders it " +
        "composes (composedByParent), and only the subfolders built on it (builtOnParent) import its modules.",
      from: { path: "^src/([^/]+)/[^/]+$" },
      to: { path: "^src/$1/[^/]+/", pathNot: under(composedByParent) }
    },
    {
      name: "nested-folders-one-way-up",
      severity: "error",
      comment: "The other way of nested-folders-one-way: a subfolder not built on its parent imports nothing of it.",
      from: { path: "^src/([^/]+)/[^/]+/", pathNot: under(builtOnParent) },
      to: { path: "^src/$1/[^/]+$" }
    },
    {
      name: "drivers-independent",
      severity: "error",
      comment:
        "The Git host drivers (github/, git-local/) import nothing of each other, their inbound webhooks included " +
        "(the composition root, providers.ts, picks one per repository).",
      from: { path: "^src/(github|git-local)/" },
      to: { path: "^src/(github|git-local)/", pathNot: "^src/$1/" }
    },
    {
      name: "core-is-pure",
      severity: "error",
      comment: "Pure cores import only themselves and effect's data modules: no I/O, no clock, no adapters.",
      from: { path: core },
      to: { pathNot: [core, "^node_modules/effect/", "^crypto$", "^node:crypto$"] }
    },
    {
      name: "feature-not-to-adapter",
      severity: "error",
      comment: "Feature services depend on the ports they own, never on an adapter or the HTTP layer.",
      from: { path: feature, pathNot: edgeModule },
      to: { path: [adapter, root] }
    },
    {
      name: "adapters-independent",
      severity: "error",
      comment: "Adapters implement ports and know nothing of each other (the composition root wires them).",
      // the dashboard's browser code shares the API's schema types (type imports of src/http/Api.ts; issue 16)
      from: { path: "^src/(db|git-local|github|metrics|web)/", pathNot: [edgeModule, "^src/web/client/"] },
      to: { path: adapter, pathNot: "^src/$1/" }
    },
    {
      name: "web-client-reads-the-contract",
      severity: "error",
      comment: "The dashboard's browser code reaches the server only through the API contract's types.",
      from: { path: "^src/web/client/" },
      to: { path: "^src/", pathNot: ["^src/web/client/", "^src/http/Api[.]ts$"] }
    },
    {
      name: "config-is-the-roots",
      severity: "error",
      comment:
        "The settings' schema (src/config.ts) is read only by the composition root: each feature and adapter gets " +
        "its own settings as a tag in its own folder (queue/QueueEnv.ts, github/GitHubEnv.ts, ...), which config.ts " +
        "provides (FeatureEnvsLive). This keeps config.ts, which names every feature's settings, out of any cycle.",
      from: { path: "^src/", pathNot: root },
      to: { path: "^src/config[.]ts$" }
    },
    {
      name: "root-is-the-top",
      severity: "error",
      comment: "Nothing imports the composition root.",
      from: { path: "^src/", pathNot: root },
      to: { path: root }
    },
    {
      name: "runtime-behind-its-port",
      severity: "error",
      comment:
        "Bun's own APIs (a SHA-1 into a buffer, the collector) are reached through the RuntimeHost port " +
        "(kernel/RuntimeHost.ts): only the composition root imports its implementation.",
      from: { path: "^src/", pathNot: [root, "^src/kernel/bunRuntime[.]ts$"] },
      to: { path: "^src/kernel/bunRuntime[.]ts$" }
    },
    {
      name: "repositories-are-private",
      severity: "error",
      comment:
        "A feature's tables belong to it: other code reaches the feature through its service (a type names a row's " +
        "shape and reads nothing, so type-only imports are allowed).",
      from: { path: "^src/([^/]+)/" },
      to: { path: "^src/([^/]+)/(.*Repo|repo|store)[.]ts$", pathNot: "^src/$1/", dependencyTypesNot: ["type-only"] }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
    reporterOptions: { text: { highlightFocused: true } }
  }
}
