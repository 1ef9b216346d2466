import { afterAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { makeCatFile, summarizeCommit } from "../../src/git-local/catFile.ts"
import { createTestRepo } from "../support/git.ts"

/** The long-lived `git cat-file --batch` reader: pipelined reads must each get their own answer. */
describe("cat-file batch reader", () => {
  const repo = createTestRepo()
  const heads = new Map<number, string>()
  for (let n = 1; n <= 40; n++) {
    heads.set(n, repo.createPr(n, { files: { [`f${n}.txt`]: `${n}\n`.repeat(n * 50) }, title: `PR number ${n}` }))
  }
  const catFile = makeCatFile()
  afterAll(() => {
    catFile.closeAll()
    repo.cleanup()
  })
  const read = (name: string) => Effect.runPromise(catFile.read(repo.gitDir, name))

  test("many reads at once, existing and missing interleaved, each answered with its own object", async () => {
    const names = Array.from({ length: 120 }, (_, i) => (i % 3 === 2 ? 1000 + i : (i % 40) + 1))
    const answers = await Promise.all(names.map((n) => read(`refs/pull/${n}/head^{commit}`)))
    names.forEach((n, i) => {
      const answer = answers[i]
      if (n > 40) {
        expect(answer).toBeNull()
        return
      }
      expect(answer?.sha).toBe(heads.get(n))
      expect(answer?.type).toBe("commit")
      expect(summarizeCommit(answer?.content ?? new Uint8Array()).subject).toBe(`PR number ${n}`)
    })
    // blobs larger than one pipe read arrive whole
    const blobs = await Promise.all([1, 20, 40].map((n) => read(`refs/pull/${n}/head:f${n}.txt`)))
    blobs.forEach((b, i) => {
      const n = [1, 20, 40][i] ?? 0
      expect(new TextDecoder().decode(b?.content)).toBe(`${n}\n`.repeat(n * 50))
    })
  })

  test("a process that died is started again", async () => {
    expect((await read("refs/pull/1/head^{commit}"))?.sha).toBe(heads.get(1))
    catFile.closeAll()
    expect((await read("refs/pull/2/head^{commit}"))?.sha).toBe(heads.get(2))
  })
})
