/**
 * One model (issue #17, Build 1): a pull request's timeline (getSubmittedPullRequest) is what the event log holds
 * for it, and the pull request webhooks it got are those its timeline's transitions are told as; transitions Trunk
 * has no event for (`tests_passed`) are in the log but never delivered. Retention never cuts the timeline of a pull
 * request still in a queue, nor of one that ended within it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import * as fs from "node:fs"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { EventReader } from "../../src/events/EventLogLive.ts"
import { startReceiver } from "../support/receiver.ts"
import { openScenario, type TimelineItem } from "../support/scenario.ts"
import { databases, startTestServer, type TestServer, tempDir } from "../support/server.ts"

const TIMEOUT = 90_000

/**
 * The Trunk events a timeline is told as (docs/decisions.md, "Mapping"): a submission is `submitted` (and `queued`
 * once it may be tested), a move back to `pending` is `queued`; `tests_passed` and `not_ready` are not told.
 */
const toldAs = (timeline: ReadonlyArray<TimelineItem>): ReadonlyArray<string> => {
  const told: Array<string> = []
  let previous: string | null = null
  for (const { state } of timeline) {
    if (previous === null) told.push("submitted", ...(state === "pending" ? ["queued"] : []))
    else if (state === "pending" && previous !== "pending") told.push("queued")
    else if (state === "cancelled") told.push("canceled")
    else if (["testing", "pending_failure", "failed", "merged"].includes(state)) told.push(state)
    previous = state
  }
  return told.map((a) => `pull_request.${a}`)
}

for (const db of databases) {
  describe(`the timeline is the event log (${db})`, () => {
    let server: TestServer
    let root: string
    beforeAll(async () => {
      root = tempDir("greenline-onemodel-git-")
      server = await startTestServer({ db, gitRoot: root, gitPollMs: 100, config: { webhookAllowPrivate: true } })
    })
    afterAll(async () => {
      await server.close()
      fs.rmSync(root, { recursive: true, force: true })
    })

    /** The log's records of a pull request's entry, in log order: its timeline as stored. */
    const logged = (entryId: string) =>
      server.run(
        Effect.flatMap(
          SqlClient,
          (sql) => sql<{ at: Date | string; state: string; reason: string; type: string | null }>`
            select occurred_at as at, state, reason, type from event_log where entry_id = ${entryId} order by seq`
        )
      )

    test(
      "each pull request's timeline equals its records in the log, and its webhooks are its timeline told as Trunk's",
      async () => {
        const receiver = startReceiver()
        try {
          const created = await server.post("createWebhookEndpoint", { url: receiver.url })
          expect(created.status).toBe(200)
          const s = await openScenario(server, root, { name: `onemodel-${db}`, concurrency: 2 })
          try {
            // #2 passes before #1 (tests_passed: no Trunk event), then both merge; #3 is cancelled while testing
            s.createPr(1)
            s.createPr(2)
            await s.submit(1)
            await s.submit(2)
            await s.waitState(2, "testing")
            await s.ciPass(2)
            await s.waitState(2, "tests_passed")
            await s.ciPass(1)
            await s.waitState(2, "merged")
            s.createPr(3)
            await s.submit(3)
            await s.waitState(3, "testing")
            await s.ok("cancelPullRequest", { pr: { number: 3 } })
            await s.waitState(3, "cancelled")
            /** The pull request webhooks #n of this queue got, in the order they arrived (one PR's are in order). */
            const typesOf = (n: number) =>
              receiver.received
                .filter(
                  (r) =>
                    r.message.type.startsWith("pull_request.") &&
                    r.message.data.pr_number === n &&
                    (r.message.data.repository as { name: string }).name === s.key.repo.name
                )
                .map((r) => r.message.type)
            // the runner's rounds that ended them committed (the API shows a cancellation before the runner's round)
            for (const [n, last] of [
              [1, "pull_request.merged"],
              [2, "pull_request.merged"],
              [3, "pull_request.canceled"]
            ] as const) {
              await receiver.waitFor(
                (r) =>
                  r.message.type === last &&
                  r.message.data.pr_number === n &&
                  (r.message.data.repository as { name: string }).name === s.key.repo.name,
                `${last} of #${n}`
              )
            }
            for (const n of [1, 2, 3]) {
              const pr = await s.pr(n)
              const timeline = await s.timeline(n)
              const records = await logged(pr.id)
              const plain = (t: { at: Date | string; state: string; reason: string }) => ({
                at: new Date(t.at).toISOString(),
                state: t.state,
                reason: t.reason
              })
              expect({ n, records: records.map(plain) }).toEqual({ n, records: timeline.map(plain) })
              // a transition Trunk has no event for is a record without a type, and so is the start of testing (its
              // event comes when the run's test branch is pushed, with the SHA); every other carries its first event
              expect(records.map((r) => r.type === null)).toEqual(
                timeline.map((t) => t.state === "tests_passed" || t.state === "testing")
              )
              // its last event arrived after the others (one pull request's events are delivered in order)
              expect({ n, delivered: typesOf(n) }).toEqual({ n, delivered: [...toldAs(timeline)] })
            }
            expect((await s.timeline(2)).map((t) => t.state)).toContain("tests_passed")
          } finally {
            await s.close()
          }
          await server.post("deleteWebhookEndpoint", { id: (created.body as { id: string }).id })
        } finally {
          await receiver.stop()
        }
      },
      TIMEOUT
    )

    test(
      "a restart names the pull request whose failure caused it, read from the log",
      async () => {
        const s = await openScenario(server, root, { name: `cause-${db}`, concurrency: 2 })
        try {
          // #2 is tested on top of #1; #1 fails, so #2 is tested again without it
          s.createPr(1)
          s.createPr(2)
          await s.submit(1)
          await s.submit(2)
          await s.waitState(2, "testing")
          await s.ciFail(1)
          await s.waitState(1, "failed")
          const pr = await s.ok<{
            timeBreakdown?: { restarts: ReadonlyArray<{ at: string; reason: string; causedByPr: number | null }> }
          }>("getSubmittedPullRequest", { pr: { number: 2 } })
          const restarts = pr.timeBreakdown?.restarts ?? []
          expect(restarts.length).toBe(1)
          expect(restarts[0]?.causedByPr).toBe(1)
        } finally {
          await s.close()
        }
      },
      TIMEOUT
    )

    test(
      "retention keeps the whole timeline of a pull request in a queue or ended within it, and drops older ones whole",
      async () => {
        const s = await openScenario(server, root, { name: `retention-${db}`, concurrency: 1 })
        try {
          // #1 merged long ago, #2 merged now, #3 still in the queue (testing): all their records 40 days old
          for (const n of [1, 2, 3]) s.createPr(n)
          await s.submit(1)
          await s.ciPass(1)
          await s.waitState(1, "merged")
          await s.submit(2)
          await s.ciPass(2)
          await s.waitState(2, "merged")
          await s.submit(3)
          await s.waitState(3, "testing")
          const ids = await Promise.all([1, 2, 3].map(async (n) => (await s.pr(n)).id))
          const before = await Promise.all([1, 2, 3].map((n) => s.timeline(n)))
          for (const t of before) expect(t.length).toBeGreaterThan(0)
          await server.run(
            Effect.flatMap(SqlClient, (sql) =>
              Effect.gen(function* () {
                yield* sql`update event_log set created_at = now() - interval '40 days'
                           where entry_id in ${sql.in(ids)}`
                yield* sql`update entries set ended_at = now() - interval '40 days' where id = ${ids[0]}`
              })
            )
          )
          let pruned = 0
          for (;;) {
            const n = await server.run(Effect.flatMap(EventReader, (r) => r.prune(30)))
            pruned += n
            if (n === 0) break
          }
          expect(pruned).toBeGreaterThan(0)
          expect(await s.timeline(1)).toEqual([])
          expect(await s.timeline(2)).toEqual(before[1] ?? [])
          expect(await s.timeline(3)).toEqual(before[2] ?? [])
        } finally {
          await s.close()
        }
      },
      TIMEOUT
    )
  })
}
