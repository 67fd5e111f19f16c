import assert from "node:assert/strict";
import { AuditLog } from "../audit/mod.ts";
import { EventBus, TermadaError } from "../shared/mod.ts";
import { rejectsWith, testRuntime, until } from "./_test_util.ts";
import { type PolicyPort, type PolicyVerdict, Recorder } from "./mod.ts";

const A = "agent-a";
const OP = { kind: "operator" as const, id: "cli" };

/** A policy by substring: "forbidden" → deny, "needs-ok" → confirm, else allow. */
function verdict(text: string): PolicyVerdict {
  if (text.includes("forbidden")) {
    return {
      action: "deny",
      reason: `denied by rule "*forbidden*" for "${text}"`,
      rule: { list: "deny", pattern: "*forbidden*" },
    };
  }
  if (text.includes("needs-ok")) {
    return {
      action: "confirm",
      reason: `confirm by rule "*needs-ok*"`,
      rule: { list: "confirm", pattern: "*needs-ok*" },
    };
  }
  return { action: "allow", reason: "allowed" };
}

const POLICY: PolicyPort = {
  decide: (_a, cmd) => verdict(cmd.join(" ")),
  decideLine: (_a, line) => verdict(line),
  autoAnswer: (_a, prompt) => (/Continue\? $/.test(prompt) ? "yes" : undefined),
};

/** The job-related audit events (sessions, agents and the daemon's own left out). */
const JOB_EVENTS = /^(job|approval|policy|admission|input)\./;

Deno.test("the intent is on disk before an allowed job runs, its outcome after", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  const r = await rt.engine.run(A, { command: ["echo", "ok"] });
  assert.equal(r.output, "ok\n");
  await until(() => rt.records().some((x) => x.event === "job.finished"), 5000, "the outcome");
  const mine = rt.records().filter((x) => JOB_EVENTS.test(x.event));
  assert.deepEqual(mine.map((x) => x.event), ["job.requested", "job.finished"]);
  assert.equal(mine[0]!.data.job_id, r.job_id);
  assert.deepEqual(mine[0]!.actor, { kind: "agent", id: A });
  assert.equal(mine[1]!.data.status, "exited");
  // The row was stored before the gate decided, and its outcome (output inline) at the end.
  const row = rt.store.jobs.get(r.job_id)!;
  assert.equal(row.status, "exited");
  assert.equal(new TextDecoder().decode(row.output!), "ok\n");
});

Deno.test("a denied command never runs, is audited and listed as denied, the session stays usable", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  const e = rt.engine;
  const err = await rejectsWith(
    () => e.run(A, { command: ["touch forbidden-file"] }),
    "DENIED_BY_POLICY",
  ) as TermadaError;
  const jobId = err.details?.job_id!;
  assert.equal(err.details?.rule, "*forbidden*");
  assert.equal((await e.poll(A, { job_id: jobId })).status, "denied");
  assert.throws(() => Deno.statSync(`${rt.dir}/forbidden-file`), Deno.errors.NotFound);
  assert.ok(rt.records().some((x) => x.event === "policy.denied" && x.data.job_id === jobId));
  assert.equal((await e.run(A, { command: ["echo", "fine"] })).output, "fine\n");
});

Deno.test("if the audit cannot be written, nothing runs and no session opens", async () => {
  let fail = false;
  await using rt = await testRuntime({
    policy: POLICY,
    audit: (log) => ({
      append: (a, e, d) => {
        if (fail) throw new Error("disk full");
        return log.append(a, e, d);
      },
      write: (a, e, d) => log.write(a, e, d),
      appendDurable: (a, e, d) =>
        fail ? Promise.reject(new Error("disk full")) : log.appendDurable(a, e, d),
      get healthy() {
        return !fail && log.healthy;
      },
    }),
  });
  await rt.engine.run(A, { command: ["true"] }); // the default session exists
  fail = true;
  await rejectsWith(() => rt.engine.run(A, { command: ["touch made-it"] }), "AUDIT_UNAVAILABLE");
  assert.throws(() => Deno.statSync(`${rt.dir}/made-it`), Deno.errors.NotFound);
  await rejectsWith(() => rt.engine.createSession(A), "AUDIT_UNAVAILABLE");
  assert.equal(rt.engine.listSessions(A).length, 1);
  fail = false;
  assert.equal((await rt.engine.run(A, { command: ["echo", "back"] })).output, "back\n");
});

Deno.test("a job whose row cannot be stored does not run", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  await rt.engine.run(A, { command: ["true"] });
  const insert = rt.store.jobs.insert.bind(rt.store.jobs);
  rt.store.jobs.insert = () => {
    throw new TermadaError("INTERNAL", "database or disk is full");
  };
  try {
    const err = await rejectsWith(
      () => rt.engine.run(A, { command: ["touch stored-nowhere"] }),
      "INTERNAL",
    );
    assert.match(err.message, /Cannot store job/);
    assert.throws(() => Deno.statSync(`${rt.dir}/stored-nowhere`), Deno.errors.NotFound);
    assert.ok(
      !rt.records().some((x) => JSON.stringify(x.data).includes("stored-nowhere")),
      "nothing was requested",
    );
  } finally {
    rt.store.jobs.insert = insert;
  }
  assert.equal((await rt.engine.run(A, { command: ["echo", "stored"] })).output, "stored\n");
});

Deno.test("confirm parks the job; approve runs it exactly once; deny and expiry end it denied", async () => {
  await using rt = await testRuntime({ policy: POLICY, confirmTimeoutMs: 300 });
  const e = rt.engine;
  const a = await e.run(A, { command: ["echo needs-ok-1; touch approved-file"], timeout_ms: 5000 });
  assert.equal(a.status, "pending_approval");
  assert.match(a.approval_id ?? "", /^apr_/);
  assert.throws(() => Deno.statSync(`${rt.dir}/approved-file`), Deno.errors.NotFound);
  await rejectsWith(() => e.run(A, { command: ["echo", "other"] }), "SESSION_BUSY");
  assert.deepEqual(rt.ops.pendingApprovals().map((p) => p.job_id), [a.job_id]);
  assert.equal(rt.store.approvals.get(a.approval_id!)?.status, "pending");
  await rt.ops.approve(OP, a.approval_id!, "looks fine");
  const done = await e.wait(A, { job_id: a.job_id, timeout_ms: 5000 });
  assert.equal(done.output, "needs-ok-1\n");
  Deno.statSync(`${rt.dir}/approved-file`);
  await rejectsWith(() => rt.ops.approve(OP, a.approval_id!), "INVALID_ARGUMENT");
  assert.equal(rt.store.approvals.get(a.approval_id!)?.status, "approved");

  const b = await e.start("b", { command: ["echo needs-ok-2"] });
  await rt.ops.deny(OP, b.approval_id!, "no");
  const bv = await e.poll("b", { job_id: b.job_id });
  assert.equal(bv.status, "denied");
  assert.match(bv.reason ?? "", /denied by operator:cli: no/);
  assert.equal((await e.run("b", { command: ["echo", "free"] })).output, "free\n");

  const c = await e.start("c", { command: ["echo needs-ok-3"] });
  const cv = await e.wait("c", { job_id: c.job_id, timeout_ms: 5000 });
  assert.equal(cv.status, "denied");
  assert.match(cv.reason ?? "", /expired/);
  assert.equal(rt.store.approvals.get(c.approval_id!)?.status, "expired");
  const kinds = rt.records().filter((x) => x.event.startsWith("approval.")).map((x) => x.event);
  // Each operator decision is a vote first (who, how they proved it), then the resolution.
  assert.deepEqual(kinds, [
    "approval.requested",
    "approval.vote",
    "approval.resolved",
    "approval.requested",
    "approval.vote",
    "approval.resolved",
    "approval.requested",
    "approval.resolved",
  ]);
  const resolved = rt.records().find((x) => x.event === "approval.resolved")!;
  assert.deepEqual(resolved.actor, OP);
  assert.deepEqual(rt.ops.pendingApprovals(), []);
});

Deno.test("an approval whose job ended first (its session closed) is closed as denied and audited", async () => {
  await using rt = await testRuntime({ policy: POLICY, confirmTimeoutMs: 60_000 });
  const r = await rt.engine.start(A, { command: ["echo needs-ok-5"] });
  assert.equal(r.status, "pending_approval");
  await rt.engine.closeSession(A, { session_id: r.session_id });
  const v = await rt.engine.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.equal(v.status, "denied");
  await until(() => rt.store.approvals.get(r.approval_id!)?.status === "denied");
  await until(() =>
    rt.records().some((x) =>
      x.event === "approval.resolved" && x.data.approval_id === r.approval_id
    )
  );
  const last = rt.records().filter((x) => x.event === "approval.resolved").at(-1)!;
  assert.deepEqual(last.actor, { kind: "system", id: "termada" });
  assert.equal(last.data.approved, false);
  assert.deepEqual(rt.ops.pendingApprovals(), []);
  await rejectsWith(() => rt.ops.approve(OP, r.approval_id!), "INVALID_ARGUMENT");
});

Deno.test("background jobs pass the gate; waiting ones count against the quota; kill withdraws", async () => {
  await using rt = await testRuntime({
    policy: POLICY,
    engine: { limits: { backgroundPerOwner: 2 } },
  });
  const e = rt.engine;
  const bg = await e.start(A, { command: ["echo", "needs-ok", "bg"], mode: "background" });
  assert.equal(bg.status, "pending_approval");
  await e.start(A, { command: ["echo", "needs-ok", "2"], mode: "background" });
  await rejectsWith(
    () => e.start(A, { command: ["echo", "needs-ok", "3"], mode: "background" }),
    "QUOTA_EXCEEDED",
  );
  await rt.ops.approve(OP, bg.approval_id!);
  const w = await e.wait(A, { job_id: bg.job_id, timeout_ms: 5000 });
  assert.equal(w.output, "needs-ok bg\n");
  const fg = await e.start(A, { command: ["echo needs-ok again"] });
  const k = await e.kill(A, { job_id: fg.job_id });
  assert.equal(k.status, "denied");
  assert.match(k.reason ?? "", /withdrawn/);
  assert.equal((await e.run(A, { command: ["echo", "next"] })).output, "next\n");
});

Deno.test("stop-all: barrier refuses new work, running jobs stop, approvals are cancelled", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  const e = rt.engine;
  const running = await e.start("a", { command: ["sleep 30"] });
  const pending = await e.start("b", { command: ["echo needs-ok"] });
  const r = await rt.ops.stopAll(OP, { barrier_ms: 60_000, grace_ms: 200 });
  assert.deepEqual(r.cancelled_approvals, [pending.approval_id]);
  assert.ok(r.stopped_jobs.includes(running.job_id));
  assert.equal((await e.poll("a", { job_id: running.job_id })).status, "killed");
  assert.equal((await e.poll("b", { job_id: pending.job_id })).status, "denied");
  await rejectsWith(() => e.run("a", { command: ["echo", "x"] }), "STOPPED");
  await rejectsWith(() => e.createSession("c"), "STOPPED");
  rt.ops.resumeAdmissions(OP);
  assert.equal((await e.run("a", { command: ["echo", "back"] })).output, "back\n");
  assert.ok(rt.records().some((x) => x.event === "stop_all" && x.actor.id === "cli"));
});

Deno.test("a command line typed into a shell or interpreter is checked by the policy", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  const e = rt.engine;
  const r = await e.run(A, { command: ["bash", "--norc", "--noprofile"], timeout_ms: 5000 });
  assert.equal(r.status, "awaiting_input");
  assert.equal(e.jobOf(A, r.job_id).inputReader, "bash", JSON.stringify(r));
  await rejectsWith(
    () => e.write(A, { job_id: r.job_id, input: "touch forbidden-line" }),
    "DENIED_BY_POLICY",
  );
  // A confirm rule cannot wait inside a shell: it is refused with a hint to use exec_run.
  const c = await rejectsWith(
    () => e.write(A, { job_id: r.job_id, input: "echo needs-ok" }),
    "DENIED_BY_POLICY",
  );
  assert.match(c.message, /cannot wait for approval/);
  await e.write(A, { job_id: r.job_id, input: "exit 4" });
  const done = await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.equal(done.exit_code, 4);
  assert.throws(() => Deno.statSync(`${rt.dir}/forbidden-line`), Deno.errors.NotFound);
  assert.ok(rt.records().some((x) => x.event === "input.written" && x.data.line === "exit 4"));
  // A program that is not a command reader gets its input without the gate.
  const q = await e.run(A, { command: ["read -p 'Name? ' n; echo $n"], timeout_ms: 5000 });
  await e.write(A, { job_id: q.job_id, input: "forbidden is just a name" });
  assert.match((await e.wait(A, { job_id: q.job_id, timeout_ms: 5000 })).output, /just a name/);
});

Deno.test("a secret line to a shell is still checked; a password at a no-echo prompt is not a command", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  const e = rt.engine;
  const r = await e.run(A, { command: ["sh"], timeout_ms: 5000 });
  // Marking input secret never skips the policy.
  await rejectsWith(
    () => e.write(A, { job_id: r.job_id, input: "touch forbidden-secret", secret: true }),
    "DENIED_BY_POLICY",
  );
  const denied = rt.records().find((x) => x.event === "policy.denied")!;
  assert.equal(denied.data.line, "[secret]");
  assert.ok(!JSON.stringify(denied).includes("forbidden-secret"));
  // A program that turned echo off reads a password: that is not a command line.
  await e.write(A, {
    job_id: r.job_id,
    input: "stty -echo; read pw; stty echo; echo got ${#pw}",
  });
  const w = await e.wait(A, { job_id: r.job_id, until: { prompt: true }, timeout_ms: 5000 });
  assert.equal(w.matched, "prompt", JSON.stringify(w));
  await e.write(A, { job_id: r.job_id, input: "forbidden-password" });
  const written = rt.records().filter((x) => x.event === "input.written");
  assert.equal(written.at(-1)!.data.line, "[not echoed]");
  await e.wait(A, { job_id: r.job_id, until: { pattern: "got 18" }, timeout_ms: 5000 });
  await e.wait(A, { job_id: r.job_id, until: { prompt: true }, timeout_ms: 5000 });
  await e.write(A, { job_id: r.job_id, input: "exit 0" });
  const done = await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.match(done.output, /got 18/);
});

Deno.test("the policy's standing answers are typed at matching prompts and audited", async () => {
  await using rt = await testRuntime({ policy: POLICY });
  const r = await rt.engine.run(A, {
    command: ["read -p 'Continue? ' a; read -p 'Name? ' b; echo got-$a-$b"],
    timeout_ms: 5000,
  });
  // The first prompt was answered for the agent; the second one is the agent's to answer.
  assert.equal(r.status, "awaiting_input");
  assert.equal(r.prompt, "Name? ");
  await rt.engine.write(A, { job_id: r.job_id, input: "ada" });
  const done = await rt.engine.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.match(done.output, /got-yes-ada/);
  const auto = rt.records().find((x) => x.event === "input.auto_answered")!;
  assert.equal(auto.data.answer, "yes");
  assert.equal(auto.data.prompt, "Continue? ");
});

Deno.test("takeover: agents wait while an operator types, and the operator's command is an operator job", async () => {
  await using rt = await testRuntime();
  const e = rt.engine;
  const alice = { kind: "operator" as const, id: "alice-op" };
  const r = await e.run(A, { command: ["echo", "before"] });
  rt.ops.takeover(alice, r.session_id);
  assert.equal(e.listSessions(A)[0]!.state, "operator");
  const busy = await rejectsWith(
    () => e.run(A, { command: ["echo", "x"] }),
    "SESSION_BUSY",
  ) as TermadaError;
  assert.equal(busy.details?.state, "operator");
  await rejectsWith(
    () => rt.ops.type({ kind: "operator", id: "someone-else" }, r.session_id, "ls\r"),
    "INVALID_ARGUMENT",
  );
  await rt.ops.type(alice, r.session_id, "echo typed-by-hand\r");
  await until(
    () => rt.ops.jobs(10).some((j) => j.owner === "operator:alice-op" && j.status === "exited"),
    5000,
    "the operator's job",
  );
  const op = rt.ops.jobs(10).find((j) => j.owner === "operator:alice-op")!;
  assert.deepEqual(op.command, ["echo typed-by-hand"]);
  assert.equal(rt.ops.jobOutput(op.job_id).output, "typed-by-hand\n");
  assert.equal(e.listJobs(A).jobs.some((j) => j.job_id === op.job_id), false, "not an agent job");
  assert.ok(rt.records().some((x) => x.event === "job.started_by_operator"));
  rt.ops.release(alice, r.session_id);
  assert.equal((await e.run(A, { command: ["echo", "after"] })).output, "after\n");
});

Deno.test("a refused lease action is not recorded: no takeover, input or pause that never happened", async () => {
  await using rt = await testRuntime();
  const alice = { kind: "operator" as const, id: "alice-op" };
  const bob = { kind: "operator" as const, id: "bob-op" };
  const r = await rt.engine.run(A, { command: ["true"] });
  rt.ops.takeover(alice, r.session_id);
  const before = rt.records().length;
  assert.throws(() => rt.ops.takeover(bob, r.session_id), /holds session/);
  assert.throws(() => rt.ops.release(bob, r.session_id), /holds session/);
  assert.throws(() => rt.ops.pauseOutput(bob, r.session_id), /Take over session/);
  await rejectsWith(() => rt.ops.type(bob, r.session_id, "ls\r"), "INVALID_ARGUMENT");
  await rejectsWith(
    () => rt.ops.type(alice, r.session_id, "x".repeat(70_000)),
    "INVALID_ARGUMENT",
  );
  const refused = rt.records().slice(before).map((x) => x.event);
  assert.deepEqual(refused, [], "nothing recorded for what did not happen");
  rt.ops.release(alice, r.session_id);
  assert.equal(rt.records().at(-1)?.event, "session.release");
});

Deno.test("pause agent output: the agent reads nothing new until the operator resumes", async () => {
  await using rt = await testRuntime();
  const e = rt.engine;
  const op = { kind: "operator" as const, id: "op" };
  const s = await e.start(A, {
    command: ["read -p 'Password: ' pw; echo got-${#pw}; read -p 'more? ' x; echo done"],
  });
  const w = await e.wait(A, { job_id: s.job_id, until: { prompt: true }, timeout_ms: 5000 });
  rt.ops.takeover(op, s.session_id);
  rt.ops.pauseOutput(op, s.session_id);
  assert.equal(e.listSessions(A)[0]!.output_paused, true);
  await rt.ops.type(op, s.session_id, "hunter2\r");
  // The operator's terminal sees the program reach its next prompt; the agent sees nothing.
  const session = e.sessionOf(A, s.session_id);
  await until(() => new TextDecoder().decode(session.ring.snapshot()).includes("got-7"));
  const held = await e.poll(A, { job_id: s.job_id, cursor: w.next_cursor });
  assert.equal(held.output, "", "nothing reaches the agent while paused");
  rt.ops.resumeOutput(op, s.session_id);
  const after = await e.poll(A, { job_id: s.job_id, cursor: w.next_cursor });
  assert.match(after.output, /got-7/);
  await rt.ops.type(op, s.session_id, "\r");
  rt.ops.release(op, s.session_id);
  assert.equal((await e.wait(A, { job_id: s.job_id, timeout_ms: 5000 })).exit_code, 0);
});

Deno.test("the bus mirrors each record as the audit log wrote it: redacted, with its seq and hash", () => {
  const dir = Deno.makeTempDirSync({ prefix: "termada-gw-bus-" });
  try {
    const log = AuditLog.open(dir, { redact: (t) => t.replaceAll("hunter2", "[REDACTED]") });
    const bus = new EventBus(10);
    const seen: Record<string, unknown>[] = [];
    bus.subscribe((e) => seen.push(e.data));
    const recorder = new Recorder(log, bus);
    recorder.record(OP, "operator.input", { session_id: "ses_x hunter2", bytes: 3 });
    const rec = log.tail(1)[0]!;
    log.close();
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0], {
      actor: OP,
      session_id: "ses_x [REDACTED]",
      bytes: 3,
      audit_seq: rec.seq,
      audit_hash: rec.hash,
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
