import { type Browser, chromium } from "playwright-core"

/** Debian's chromium (CHROMIUM_PATH to use another), driven by playwright-core: no browser download of its own. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/**
 * One chromium for a test file, started when first asked for (Playwright gives it a fresh temporary profile; a test
 * makes a new context per database). A second chromium started in the same process sometimes never answered its
 * close. The file calls `close` in its `afterAll`: a close that does not finish in 10 s is left to the test runner,
 * which ends the processes a file leaves behind.
 */
export const sharedBrowser = () => {
  let shared: Promise<Browser> | undefined
  return {
    get: (): Promise<Browser> => {
      shared ??= chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS })
      return shared
    },
    close: async () => {
      if (shared === undefined) return
      const browser = await shared
      await Promise.race([browser.close(), Bun.sleep(10_000)])
    }
  }
}
