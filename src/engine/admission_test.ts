import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { rejectsWith, testEngine } from "./_test_util.ts";
import type { AdmissionHook, AdmissionRequest, InputAdmissionRequest } from "./mod.ts";

const A = "agent-a";

/** A gate driven by the first word of the command: deny*, confirm*, anything else runs. */
function fakeGate(): AdmissionHook & { seen: AdmissionRequest[]; lines: InputAdmissionRequest[] } {
  let n = 0;
  const seen: AdmissionRequest[] = [];
  const lines: InputAdmissionRequest[] = [];
  return {
    seen,
    lines,
    admit(req) {
      seen.push(req);
      const text = req.command.join(" ");
      if (text.includes("forbidden")) {
        throw new TermadaError("DENIED_BY_POLICY", `Denied by rule "*forbidden*" for "${text}"`);
      }
      if (text.includes("needs-ok")) return { verdict: "confirm", approvalId: `apr_${++n}` };
      return { verdict: "run" };
    },
    admitInput(req) {
      lines.push(req);
      if (req.line.includes("forbidden")) {
        throw new TermadaError("DENIED_BY_POLICY", `Denied line "${req.line}"`);
      }
    },
  };
}

Deno.test("a denied command never runs, is listed as denied, and the session stays usable", async () => {
  const gate = fakeGate();
  await using te = await testEngine({ admission: gate });
  const e = te.engine;
  const err = await rejectsWith(
    () => e.run(A, { command: ["touch forbidden-file"] }),
    "DENIED_BY_POLICY",
  ) as TermadaError;
  const jobId = err.details?.job_id as string;
  assert.ok(jobId);
  assert.equal((await e.poll(A, { job_id: jobId })).status, "denied");
  assert.throws(() => Deno.statSync(`${te.dir}/forbidden-file`), Deno.errors.NotFound);
  assert.equal((await e.run(A, { command: ["echo", "fine"] })).output, "fine\n");
  assert.equal(gate.seen.length, 2);
});

Deno.test("confirm parks the job; approval runs it exactly once", async () => {
  const gate = fakeGate();
  await using te = await testEngine({ admission: gate });
  const e = te.engine;
  const r = await e.run(A, { command: ["echo needs-ok; touch approved-file"], timeout_ms: 5000 });
  assert.equal(r.status, "pending_approval");
  assert.equal(r.approval_id, "apr_1");
  assert.ok(r.waited_ms! < 1000, "returns at once");
  assert.throws(() => Deno.statSync(`${te.dir}/approved-file`), Deno.errors.NotFound);
  await rejectsWith(() => e.run(A, { command: ["echo", "other"] }), "SESSION_BUSY");
  assert.deepEqual(e.pendingApprovals().map((p) => p.job_id), [r.job_id]);
  const v = await e.resolveApproval("apr_1", { approve: true, by: "operator:test" });
  assert.equal(v.status === "running" || v.status === "exited", true);
  const done = await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.equal(done.exit_code, 0);
  assert.equal(done.output, "needs-ok\n");
  Deno.statSync(`${te.dir}/approved-file`);
  await rejectsWith(() => e.resolveApproval("apr_1", { approve: true, by: "x" }), "NOT_FOUND");
  assert.deepEqual(e.pendingApprovals(), []);
});

Deno.test("a denied approval ends the job as denied and frees the session", async () => {
  await using te = await testEngine({ admission: fakeGate() });
  const e = te.engine;
  const s = await e.start(A, { command: ["echo needs-ok"] });
  assert.equal(s.status, "pending_approval");
  await e.resolveApproval(s.approval_id!, {
    approve: false,
    by: "operator:test",
    reason: "not today",
  });
  const p = await e.poll(A, { job_id: s.job_id });
  assert.equal(p.status, "denied");
  assert.equal(p.reason, "not today");
  assert.equal((await e.run(A, { command: ["echo", "free"] })).output, "free\n");
});

Deno.test("background jobs pass the gate too; kill withdraws a pending request", async () => {
  await using te = await testEngine({ admission: fakeGate() });
  const e = te.engine;
  const bg = await e.start(A, { command: ["echo", "needs-ok", "bg"], mode: "background" });
  assert.equal(bg.status, "pending_approval");
  await e.resolveApproval(bg.approval_id!, { approve: true, by: "operator:test" });
  const w = await e.wait(A, { job_id: bg.job_id, timeout_ms: 5000 });
  assert.equal(w.output, "needs-ok bg\n");
  const fg = await e.start(A, { command: ["echo needs-ok again"] });
  const k = await e.kill(A, { job_id: fg.job_id });
  assert.equal(k.status, "denied");
  assert.match(k.reason ?? "", /withdrawn/);
  assert.equal((await e.run(A, { command: ["echo", "next"] })).output, "next\n");
});

Deno.test("stopAll cancels pending approvals and stops running jobs of every agent", async () => {
  await using te = await testEngine({ admission: fakeGate() });
  const e = te.engine;
  const running = await e.start("a", { command: ["sleep 30"] });
  const pending = await e.start("b", { command: ["echo needs-ok"] });
  const r = await e.stopAll(200, "stop-all by operator");
  assert.deepEqual(r.cancelled, [pending.approval_id]);
  assert.ok(r.stopped.includes(running.job_id));
  assert.equal((await e.poll("a", { job_id: running.job_id })).status, "killed");
  assert.equal((await e.poll("b", { job_id: pending.job_id })).status, "denied");
});

Deno.test("a line typed into a shell waiting for input is checked like a command", async () => {
  const gate = fakeGate();
  await using te = await testEngine({ admission: gate });
  const e = te.engine;
  const r = await e.run(A, { command: ["bash", "--norc", "--noprofile"], timeout_ms: 5000 });
  assert.equal(r.status, "awaiting_input");
  await rejectsWith(
    () => e.write(A, { job_id: r.job_id, input: "touch forbidden-line" }),
    "DENIED_BY_POLICY",
  );
  assert.equal(gate.lines.at(-1)?.reader, "bash");
  await e.write(A, { job_id: r.job_id, input: "exit 4" });
  const done = await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.equal(done.exit_code, 4);
  assert.throws(() => Deno.statSync(`${te.dir}/forbidden-line`), Deno.errors.NotFound);
  // A program that is not a command reader gets its input without the gate.
  const q = await e.run(A, { command: ["read -p 'Name? ' n; echo $n"], timeout_ms: 5000 });
  await e.write(A, { job_id: q.job_id, input: "forbidden is just a name" });
  assert.equal(gate.lines.length, 2);
});

Deno.test("background jobs waiting for approval count against the background quota", async () => {
  await using te = await testEngine({ admission: fakeGate(), limits: { backgroundPerOwner: 2 } });
  const e = te.engine;
  await e.start(A, { command: ["echo", "needs-ok", "1"], mode: "background" });
  await e.start(A, { command: ["echo", "needs-ok", "2"], mode: "background" });
  await rejectsWith(
    () => e.start(A, { command: ["echo", "needs-ok", "3"], mode: "background" }),
    "QUOTA_EXCEEDED",
  );
  assert.equal(e.pendingApprovals().length, 2);
});

Deno.test("takeover: agents wait while an operator types, and the operator's command is an operator job", async () => {
  await using te = await testEngine();
  const e = te.engine;
  const r = await e.run(A, { command: ["echo", "before"] });
  e.takeover(r.session_id, "alice-op");
  assert.equal(e.listSessions(A)[0]!.state, "operator");
  const busy = await rejectsWith(
    () => e.run(A, { command: ["echo", "x"] }),
    "SESSION_BUSY",
  ) as TermadaError;
  assert.equal(busy.details?.state, "operator");
  await rejectsWith(
    () => e.operatorInput(r.session_id, "someone-else", "ls\r"),
    "INVALID_ARGUMENT",
  );
  await e.operatorInput(r.session_id, "alice-op", "echo typed-by-hand\r");
  let op: { job_id: string; status: string; owner: string; command: string[] } | undefined;
  for (let i = 0; i < 200; i++) {
    op = e.allJobs(10).find((j) => j.owner === "operator:alice-op");
    if (op?.status === "exited") break;
    await new Promise((res) => setTimeout(res, 10));
  }
  assert.equal(op?.status, "exited");
  assert.deepEqual(op?.command, ["echo typed-by-hand"]);
  assert.equal(e.jobOf("operator:alice-op", op!.job_id).buffer.read().output, "typed-by-hand\n");
  assert.equal(e.listJobs(A).jobs.some((j) => j.job_id === op!.job_id), false, "not an agent job");
  e.releaseSession(r.session_id, "alice-op");
  assert.equal((await e.run(A, { command: ["echo", "after"] })).output, "after\n");
});

Deno.test("pause agent output: the agent reads nothing new until the operator resumes", async () => {
  await using te = await testEngine();
  const e = te.engine;
  const s = await e.start(A, {
    command: ["read -p 'Password: ' pw; echo got-${#pw}; sleep 0.2; echo done"],
  });
  const w = await e.wait(A, { job_id: s.job_id, until: { prompt: true }, timeout_ms: 5000 });
  e.takeover(s.session_id, "op");
  e.pauseOutput(s.session_id, "op");
  assert.equal(e.listSessions(A)[0]!.output_paused, true);
  await e.operatorInput(s.session_id, "op", "hunter2\r");
  await new Promise((r) => setTimeout(r, 100));
  const held = await e.poll(A, { job_id: s.job_id, cursor: w.next_cursor });
  assert.equal(held.output, "", "nothing reaches the agent while paused");
  e.resumeOutput(s.session_id, "op");
  const done = await e.wait(A, { job_id: s.job_id, cursor: w.next_cursor, timeout_ms: 5000 });
  assert.match(done.output, /got-7/);
  e.releaseSession(s.session_id, "op");
});
