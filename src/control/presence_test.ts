import assert from "node:assert/strict";
import { testRuntime, until } from "./_test_util.ts";

const A = "agent-a";

Deno.test("a gone agent's idle sessions are closed after the grace, and that is audited", async () => {
  await using rt = await testRuntime({ reapAfterMs: 150 });
  const detach = rt.control.presence.attach(A, "dev");
  const s1 = await rt.engine.createSession(A);
  await rt.engine.run(A, { command: ["echo", "hi"] }); // the default session too
  assert.equal(rt.engine.listSessions(A).length, 2);
  detach();
  detach(); // idempotent
  await until(
    () => rt.records().filter((r) => r.event === "session.closed").length === 2,
    5000,
    "reaping",
  );
  assert.equal(rt.engine.listSessions(A).length, 0);
  const gone = rt.records().find((r) => r.event === "agent.gone")!;
  assert.equal(gone.data.agent, A, "the record names the agent that went away");
  assert.ok((gone.data.sessions as string[]).includes(s1.session_id));
  const closed = rt.records().filter((r) => r.event === "session.closed");
  assert.equal(closed.length, 2);
  assert.ok(closed.every((r) => r.data.reason === "its agent went away"));
  // The agent comes back later: a fresh default session, nothing stale.
  const back = rt.control.presence.attach(A, "dev");
  assert.equal((await rt.engine.run(A, { command: ["echo", "again"] })).output, "again\n");
  back();
});

Deno.test("an agent that reconnects within the grace keeps its sessions", async () => {
  await using rt = await testRuntime({ reapAfterMs: 300 });
  const first = rt.control.presence.attach(A, "dev");
  const s = await rt.engine.createSession(A);
  first();
  const second = rt.control.presence.attach(A, "dev");
  // Well past the grace: the reconnect cancelled it.
  await new Promise((r) => setTimeout(r, 600));
  assert.deepEqual(rt.engine.listSessions(A).map((x) => x.session_id), [s.session_id]);
  assert.ok(!rt.records().some((r) => r.event === "agent.gone"));
  second();
});

Deno.test("a session whose job still runs is reaped when the job ends; one an operator holds, when released", async () => {
  await using rt = await testRuntime({ reapAfterMs: 100 });
  const detach = rt.control.presence.attach(A, "dev");
  const busy = await rt.engine.createSession(A);
  const held = await rt.engine.createSession(A);
  const job = await rt.engine.start(A, {
    command: ["read -p 'go? ' x; echo done"],
    session_id: busy.session_id,
  });
  await rt.engine.wait(A, { job_id: job.job_id, until: { prompt: true }, timeout_ms: 5000 });
  const op = { kind: "operator" as const, id: "op" };
  rt.ops.takeover(op, held.session_id);
  detach();
  await until(() => rt.records().some((r) => r.event === "agent.gone"), 5000, "the grace");
  // Both are still open: one runs a job, an operator holds the other.
  assert.equal(rt.engine.listSessions(A).length, 2);
  await rt.ops.takeover(op, busy.session_id);
  await rt.ops.type(op, busy.session_id, "y\r");
  rt.ops.release(op, busy.session_id);
  await until(() => rt.engine.listSessions(A).length === 1, 5000, "the finished job's session");
  assert.equal(rt.engine.listSessions(A)[0]!.session_id, held.session_id);
  assert.equal((await rt.engine.poll(A, { job_id: job.job_id })).status, "exited");
  rt.ops.release(op, held.session_id);
  await until(() => rt.engine.listSessions(A).length === 0, 5000, "the released session");
});
