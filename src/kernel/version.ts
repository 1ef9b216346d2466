import pkg from "../../package.json" with { type: "json" }

/**
 * Greenline's version (semver), from package.json: what `/healthz`, `greenline_build_info` and the dashboard's footer
 * show, and the top release of CHANGELOG.md (a test checks that they agree).
 */
export const VERSION: string = pkg.version
