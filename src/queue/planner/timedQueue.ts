/** Events ordered by time, then by the order they were scheduled in: a binary heap on (at, seq). */
export interface Timed {
  readonly at: number
  readonly seq: number
}

const less = (a: Timed, b: Timed) => a.at < b.at || (a.at === b.at && a.seq < b.seq)

export class TimedQueue<T extends Timed> {
  private readonly h: T[] = []
  get size() {
    return this.h.length
  }
  push(x: T) {
    const h = this.h
    h.push(x)
    let i = h.length - 1
    while (i > 0) {
      const p = (i - 1) >> 1
      if (less(h[p]!, x)) break
      h[i] = h[p]!
      i = p
    }
    h[i] = x
  }
  pop(): T | undefined {
    const h = this.h
    const top = h[0]
    const last = h.pop()
    if (top === undefined || last === undefined || h.length === 0) return top
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      const at = (k: number) => (k === i ? last : h[k]!)
      if (l < h.length && less(h[l]!, at(m))) m = l
      if (r < h.length && less(h[r]!, at(m))) m = r
      if (m === i) break
      h[i] = h[m]!
      i = m
    }
    h[i] = last
    return top
  }
}
