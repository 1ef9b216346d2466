import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/**
 * Temporary folders of the test process. Each one is removed when the process exits, also when a test failed before
 * its own cleanup: a suite run leaves nothing behind (a full disk breaks the next run).
 */
const created: Array<string> = []

/**
 * Removes `dir` and what is in it. Bun's recursive `fs.rmSync` can throw EFAULT for an errno it does not map (seen
 * in CI when a directory changed while it was being walked; oven-sh/bun#35749): then `rm -rf` is asked once more.
 */
export const removeDir = (dir: string): void => {
  try {
    fs.rmSync(dir, { recursive: true, force: true })
  } catch (error) {
    if (Bun.spawnSync(["rm", "-rf", dir]).exitCode !== 0) throw error
  }
}

process.once("exit", () => {
  for (const dir of created) removeDir(dir)
})

export const tempDir = (prefix = "greenline-test-"): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  created.push(dir)
  return dir
}
