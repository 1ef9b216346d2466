import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/**
 * Temporary folders of the test process. Each one is removed when the process exits, also when a test failed before
 * its own cleanup: a suite run leaves nothing behind (a full disk breaks the next run).
 */
const created: Array<string> = []

process.once("exit", () => {
  for (const dir of created) fs.rmSync(dir, { recursive: true, force: true })
})

export const tempDir = (prefix = "greenline-test-"): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  created.push(dir)
  return dir
}
