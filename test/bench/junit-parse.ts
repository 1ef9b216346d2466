/**
 * JUnit parser benchmark: `bun test/bench/junit-parse.ts`
 *
 * Generates a ~20 MiB JUnit file in memory, parses it with the streaming parser (64 KiB chunks) and prints
 * results/second and peak RSS growth, next to a baseline regex scan counting `<testcase` over the same bytes.
 */

import { parseJunit } from "../../src/flaky/junit/sources.ts"
import { generate } from "./junitGen.ts"

const TARGET_BYTES = 20 * 1024 * 1024
const CHUNK = 64 * 1024

async function* chunks(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += CHUNK) yield bytes.subarray(i, i + CHUNK)
}

const mib = (n: number): string => (n / (1024 * 1024)).toFixed(1)

const main = async (): Promise<void> => {
  const { bytes, testcases } = generate(TARGET_BYTES)
  Bun.gc(true)

  // baseline: regex scan over the same bytes (decoded per chunk, as the parser does)
  const t0 = performance.now()
  const decoder = new TextDecoder()
  let scanned = 0
  let carry = ""
  const re = /<testcase\b/g
  const KEEP = 9 // "<testcase".length: a match starting in the last 9 chars is counted with the next chunk
  for await (const c of chunks(bytes)) {
    const text = carry + decoder.decode(c, { stream: true })
    const limit = text.length - KEEP
    re.lastIndex = 0
    for (let m = re.exec(text); m !== null && m.index < limit; m = re.exec(text)) scanned++
    carry = text.slice(Math.max(0, limit))
  }
  scanned += (carry + decoder.decode()).match(re)?.length ?? 0
  const scanMs = performance.now() - t0

  Bun.gc(true)
  const rss0 = process.memoryUsage.rss()
  let peak = rss0
  let results = 0
  const t1 = performance.now()
  const summary = await parseJunit(chunks(bytes), () => {
    results++
    if ((results & 1023) === 0) peak = Math.max(peak, process.memoryUsage.rss())
  })
  const parseMs = performance.now() - t1
  peak = Math.max(peak, process.memoryUsage.rss())

  if (summary.testcases !== testcases || scanned !== testcases) {
    throw new Error(`count mismatch: generated ${testcases}, parsed ${summary.testcases}, scanned ${scanned}`)
  }
  const rate = (n: number, ms: number): string => Math.round((n / ms) * 1000).toLocaleString("en-US")
  console.log(`input: ${mib(bytes.length)} MiB, ${testcases.toLocaleString("en-US")} testcases\n`)
  console.log("| method | time (ms) | testcases/s | MiB/s | peak RSS growth (MiB) |")
  console.log("|---|---:|---:|---:|---:|")
  console.log(
    `| streaming byte parser (JunitByteParser) | ${parseMs.toFixed(0)} | ${rate(results, parseMs)} | ${(Number(mib(bytes.length)) / (parseMs / 1000)).toFixed(1)} | ${mib(peak - rss0)} |`
  )
  console.log(
    `| regex scan \`<testcase\` (baseline) | ${scanMs.toFixed(0)} | ${rate(scanned, scanMs)} | ${(Number(mib(bytes.length)) / (scanMs / 1000)).toFixed(1)} | n/a |`
  )
}

await main()
