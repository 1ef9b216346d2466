import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { LocalGitLayer } from "../../src/git-local/LocalGit.ts"
import { parseTrunkYaml, readRequiredStatuses, readTrunkConfig } from "../../src/queue/trunkConfig.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"

describe("parseTrunkYaml", () => {
  test("present", () => {
    const text = "version: 0.1\nmerge:\n  required_statuses:\n    - ci\n    - lint\n    - ci\n"
    expect(parseTrunkYaml(text)).toEqual({ _tag: "Found", statuses: ["ci", "lint"] })
  })

  test("absent", () => {
    expect(parseTrunkYaml(null)).toEqual({ _tag: "Absent" })
  })

  test("present without required statuses", () => {
    expect(parseTrunkYaml("version: 0.1\n")).toEqual({ _tag: "Found", statuses: [] })
    expect(parseTrunkYaml("merge:\n")).toEqual({ _tag: "Found", statuses: [] })
    expect(parseTrunkYaml("")).toEqual({ _tag: "Found", statuses: [] })
  })

  test("malformed", () => {
    expect(parseTrunkYaml("merge: [unclosed\n")._tag).toBe("Malformed")
    expect(parseTrunkYaml("- a\n- b\n")._tag).toBe("Malformed")
    expect(parseTrunkYaml("merge: 3\n")._tag).toBe("Malformed")
    expect(parseTrunkYaml("merge:\n  required_statuses: ci\n")._tag).toBe("Malformed")
    expect(parseTrunkYaml("merge:\n  required_statuses:\n    - 1\n")._tag).toBe("Malformed")
  })
})

describe("readTrunkConfig", () => {
  let repo: TestRepo
  beforeAll(() => {
    repo = createTestRepo({ files: { "README.md": "hello\n" } })
  })
  afterAll(() => repo.cleanup())

  const read = (sha: string) =>
    Effect.runPromise(
      Effect.all([readTrunkConfig(repo.repo, sha), readRequiredStatuses(repo.repo, sha)]).pipe(
        Effect.provide(LocalGitLayer(repo.root))
      )
    )

  test("from a commit", async () => {
    const sha = repo.createPr(1, {
      files: { ".trunk/trunk.yaml": "version: 0.1\nmerge:\n  required_statuses: [build, test]\n" }
    })
    expect(await read(sha)).toEqual([{ _tag: "Found", statuses: ["build", "test"] }, { statuses: ["build", "test"] }])
  })

  test("absent and malformed give no statuses", async () => {
    expect(await read(repo.branchSha()!)).toEqual([{ _tag: "Absent" }, null])
    const bad = repo.createPr(2, { files: { ".trunk/trunk.yaml": "merge: {\n" } })
    const [config, statuses] = await read(bad)
    expect(config._tag).toBe("Malformed")
    expect(statuses).toBeNull()
  })
})
