/** The parent's environment without any `GIT_*` variable, so that no git run by Greenline inherits a repository. */
export const environmentWithoutGit = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("GIT_")) env[key] = value
  }
  env.GIT_TERMINAL_PROMPT = "0"
  return env
}

/**
 * The environment of every git process: the parent's environment without any `GIT_*` variable, plus
 * `GIT_TERMINAL_PROMPT=0`, no system/global configuration and the C locale.
 */
export const gitEnvironment = (extra?: Readonly<Record<string, string>>): Record<string, string> => {
  const env = environmentWithoutGit()
  env.GIT_CONFIG_NOSYSTEM = "1"
  env.GIT_CONFIG_GLOBAL = "/dev/null"
  env.GIT_OPTIONAL_LOCKS = "0"
  env.LC_ALL = "C"
  if (extra !== undefined) Object.assign(env, extra)
  return env
}
