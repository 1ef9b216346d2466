/** A synthetic JUnit report for the benchmarks: suites of 100 testcases, every 10th failing, some skipped. */
export const generate = (targetBytes: number): { bytes: Uint8Array; testcases: number } => {
  const parts: string[] = ['<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="bench">\n']
  let size = 0
  let i = 0
  let suite = 0
  while (size < targetBytes) {
    let chunk = `<testsuite name="suite-${suite}" timestamp="2025-01-01T00:00:00Z" file="src/suite${suite}.ts">\n`
    for (let k = 0; k < 100; k++, i++) {
      const head = `<testcase name="test number ${i} &amp; more" classname="pkg.Class${i % 50}" time="0.${i % 1000}"`
      if (i % 10 === 0) {
        chunk += `${head}><failure message="expected ${i} to equal ${i + 1}" type="AssertionError"><![CDATA[Error: expected ${i}\n    at Object.<anonymous> (src/suite${suite}.ts:${k}:7)\n${"    at frame\n".repeat(8)}]]></failure><system-out>${"log line\n".repeat(5)}</system-out></testcase>\n`
      } else if (i % 25 === 1) {
        chunk += `${head}><skipped message="todo"/></testcase>\n`
      } else {
        chunk += `${head}/>\n`
      }
    }
    chunk += "</testsuite>\n"
    suite++
    size += chunk.length
    parts.push(chunk)
  }
  parts.push("</testsuites>\n")
  return { bytes: new TextEncoder().encode(parts.join("")), testcases: i }
}
