/**
 * The trail writes a job's end just after its reply (write-behind): these tests pin what that
 * must never change — no reader of the jobs table and no later audit record sees the trail
 * behind, the end lands by itself, and the chain keeps the order things happened in.
 */
import assert from "node:assert/strict";
import { testRuntime, until } from "./_test_util.ts";

const A = "agent-a";

const finishedOf = (records: { event: string; data: Record<string, unknown> }[], id: string) =>
  records.filter((r) => r.event === "job.finished" && r.data.job_id === id);

Deno.test("a job's end is written just after its reply; a read of the jobs table flushes it first", async () => {
  await using rt = await testRuntime();
  const r = await rt.engine.run(A, { command: ["echo", "hi"] });
  assert.equal(r.status, "exited");
  // The reply was built from the live job; its end is still held back (it goes in the next
  // macrotask), which is what takes the store and the audit write off the reply's path.
  assert.equal(finishedOf(rt.records(), r.job_id).length, 0, "not written before the reply");
  const row = rt.store.jobs.get(r.job_id);
  assert.equal(row?.status, "exited", "a reader never sees the row behind the runtime");
  assert.equal(row?.exit_code, 0);
  assert.deepEqual(row?.output, new TextEncoder().encode("hi\n"));
  assert.equal(finishedOf(rt.records(), r.job_id).length, 1, "the read flushed the record too");
});

Deno.test("a job's end lands by itself when nobody reads", async () => {
  await using rt = await testRuntime();
  const r = await rt.engine.run(A, { command: ["true"] });
  await until(() => finishedOf(rt.records(), r.job_id).length === 1, 5000, "job.finished");
  assert.equal(rt.store.jobs.get(r.job_id)?.status, "exited");
});

Deno.test("the audit chain keeps the order: each job's end comes before the next record", async () => {
  await using rt = await testRuntime();
  const first = await rt.engine.run(A, { command: ["echo", "one"] });
  // The next command goes at once: its intent record must come after the first one's end.
  const second = await rt.engine.run(A, { command: ["echo", "two"] });
  rt.control.recorder.note({ kind: "system", id: "test" }, "agent.connected", { via: "dev" });
  const events = rt.records()
    .filter((r) => r.data.job_id === first.job_id || r.data.job_id === second.job_id)
    .map((r) => `${r.event} ${r.data.job_id === first.job_id ? "first" : "second"}`);
  assert.deepEqual(events, [
    "job.requested first",
    "job.finished first",
    "job.requested second",
    "job.finished second",
  ]);
});

Deno.test("a session's cwd is stored when it changes, and only the latest counts", async () => {
  await using rt = await testRuntime();
  const r = await rt.engine.run(A, { command: ["cd /tmp"] });
  const sid = r.session_id;
  assert.equal(rt.store.sessions.get(sid)?.cwd, "/tmp");
  await rt.engine.run(A, { command: ["true"] });
  assert.equal(rt.store.sessions.get(sid)?.cwd, "/tmp", "unchanged");
  await rt.engine.run(A, { command: [`cd ${rt.dir}`] });
  assert.equal(rt.store.sessions.get(sid)?.cwd, rt.dir);
  // A per-command cwd is not the session's.
  await rt.engine.run(A, { command: ["pwd"], cwd: "/tmp" });
  assert.equal(rt.store.sessions.get(sid)?.cwd, rt.dir);
});
