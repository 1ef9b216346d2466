/**
 * Impacted-target lists reduced for the overlap test of parallel mode. A list may hold hundreds of thousands of
 * names; the runner keeps each active entry's list as a sorted array of 53-bit hashes (8 bytes a target, no strings)
 * and tests two lists for a shared target by one merge pass. A hash collision can only add a dependency between two
 * entries (they then share a lane), never lose one: the lanes stay safe.
 */

/** A 53-bit hash of a string (two multiplicative 32-bit lanes, mixed at the end); exact in a float64. */
export const hash53 = (s: string): number => {
  let a = 0x9e3779b9
  let b = 0x85ebca6b
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    a = Math.imul(a ^ c, 0x9e3779b1)
    b = Math.imul(b ^ c, 0x5f356495)
  }
  a = Math.imul(a ^ (a >>> 16), 0x85ebca6b) ^ Math.imul(b ^ (b >>> 13), 0xc2b2ae35)
  b = Math.imul(b ^ (b >>> 16), 0x85ebca6b) ^ Math.imul(a ^ (a >>> 13), 0xc2b2ae35)
  return 0x100000000 * (b & 0x1fffff) + (a >>> 0)
}

/** The sorted hashes of a list of target names. */
export const hashTargets = (targets: ReadonlyArray<string>): Float64Array => {
  const out = new Float64Array(targets.length)
  for (let i = 0; i < targets.length; i++) out[i] = hash53(targets[i]!)
  return out.sort()
}

/** Whether two sorted hash arrays share a value. */
export const sharesTarget = (a: Float64Array, b: Float64Array): boolean => {
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    const x = a[i]!
    const y = b[j]!
    if (x === y) return true
    if (x < y) i++
    else j++
  }
  return false
}
