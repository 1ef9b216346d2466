/**
 * The local provider's push detection (#37): one shared check that looks at the files behind the watched refs, not a
 * git process per queue. Real bare repositories; the test steps the check itself (`check`), its timer never fires.
 */
import { afterEach, expect, test } from "bun:test"
import { Effect, Exit, Scope } from "effect"
import { makeRefWatch } from "../../src/git-local/RefWatch.ts"
import { createTestRepo, type TestRepo } from "../support/git.ts"

let repos: Array<TestRepo> = []
afterEach(() => {
  for (const r of repos) r.cleanup()
  repos = []
})
const newRepo = () => {
  const r = createTestRepo({ files: { "README.md": "hello\n" } })
  repos.push(r)
  return r
}

const HOUR = 3_600_000

test("a push to the watched branch, a PR's force-push and a pack-refs are noticed; other refs are not", async () => {
  const repo = newRepo()
  repo.createPr(1)
  const watch = makeRefWatch(HOUR)
  const scope = Effect.runSync(Scope.make())
  let refs: ReadonlyArray<string> = ["refs/heads/main"]
  let changes = 0
  Effect.runSync(
    Scope.extend(
      watch.watch(
        repo.gitDir,
        () => refs,
        () => changes++
      ),
      scope
    )
  )
  expect(watch.size()).toBe(1)
  watch.check()
  expect(changes).toBe(0)
  // another branch moves, and a PR not watched: nothing the queue polls for
  repo.setBranch("other", repo.branchSha("main") ?? "")
  repo.createPr(2)
  watch.check()
  expect(changes).toBe(0)
  repo.pushToMain({ "a.txt": "a\n" })
  watch.check()
  expect(changes).toBe(1)
  watch.check()
  expect(changes).toBe(1)
  // the queue's entries' PR heads are watched too, once it has some
  refs = ["refs/heads/main", "refs/pull/1/head"]
  watch.check()
  changes = 0
  repo.forcePushPr(1, { files: { "a.txt": "A\n" } })
  watch.check()
  expect(changes).toBe(1)
  // refs packed: the loose file goes, packed-refs changes; then a push to the packed branch writes a loose one
  repo.git("pack-refs", "--all")
  watch.check()
  expect(changes).toBe(2)
  repo.pushToMain({ "b.txt": "b\n" })
  watch.check()
  expect(changes).toBe(3)
  await Effect.runPromise(Scope.close(scope, Exit.void))
  expect(watch.size()).toBe(0)
})

test("one pass serves many watchers of one repository; each is told once", async () => {
  const repo = newRepo()
  const watch = makeRefWatch(HOUR)
  const scope = Effect.runSync(Scope.make())
  const told: Array<number> = []
  for (let i = 0; i < 50; i++) {
    Effect.runSync(
      Scope.extend(
        watch.watch(
          repo.gitDir,
          () => ["refs/heads/main"],
          () => told.push(i)
        ),
        scope
      )
    )
  }
  repo.pushToMain({ "a.txt": "a\n" })
  watch.check()
  expect(told.length).toBe(50)
  expect(new Set(told).size).toBe(50)
  await Effect.runPromise(Scope.close(scope, Exit.void))
  expect(watch.size()).toBe(0)
})

test("a repository that does not exist is watched without failing", async () => {
  const repo = newRepo()
  const watch = makeRefWatch(HOUR)
  const scope = Effect.runSync(Scope.make())
  let changes = 0
  Effect.runSync(
    Scope.extend(
      watch.watch(
        `${repo.gitDir}-missing`,
        () => ["refs/heads/main"],
        () => changes++
      ),
      scope
    )
  )
  watch.check()
  expect(changes).toBe(0)
  await Effect.runPromise(Scope.close(scope, Exit.void))
})
