import assert from "node:assert/strict";
import { rejectsWith, testEngine } from "../engine/_test_util.ts";
import { AuditLog } from "../audit/mod.ts";
import { EventBus } from "../shared/mod.ts";
import { Gateway, type PolicyVerdict } from "./mod.ts";

/** A policy by substring: "forbidden" → deny, "needs-ok" → confirm, else allow. */
function policy(text: string): PolicyVerdict {
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

function harness(opts: { failAudit?: () => boolean; confirmTimeoutMs?: number } = {}) {
  const events: { actor: string; event: string; data: Record<string, unknown> }[] = [];
  const approvals = new Map<string, string>();
  const gateway = new Gateway({
    policy: {
      decide: (_a, cmd) => policy(cmd.join(" ")),
      decideLine: (_a, line) => policy(line),
      autoAnswer: (_a, prompt) => (/Continue\? $/.test(prompt) ? "yes" : undefined),
    },
    audit: {
      append(actor, event, data = {}) {
        if (opts.failAudit?.()) throw new Error("disk full");
        events.push({ actor: `${actor.kind}:${actor.id}`, event, data });
      },
    },
    approvals: {
      insertApproval: (a) => void approvals.set(a.id, "pending"),
      decideApproval(id, d) {
        if (approvals.get(id) !== "pending") return false;
        approvals.set(id, d.status);
        return true;
      },
    },
    confirmTimeoutMs: opts.confirmTimeoutMs,
  });
  return { gateway, events, approvals };
}

const OP = { kind: "operator" as const, id: "cli" };

Deno.test("the gateway audits the intent before an allowed job runs", async () => {
  const h = harness();
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const r = await te.engine.run("a", { command: ["echo", "ok"] });
  assert.equal(r.output, "ok\n");
  assert.deepEqual(h.events.map((e) => e.event), ["job.requested"]);
  assert.equal(h.events[0]!.data.job_id, r.job_id);
  assert.equal(h.events[0]!.actor, "agent:a");
  h.gateway.close();
});

Deno.test("a policy denial is audited and nothing runs", async () => {
  const h = harness();
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  await rejectsWith(() => te.engine.run("a", { command: ["touch forbidden"] }), "DENIED_BY_POLICY");
  assert.deepEqual(h.events.map((e) => e.event), ["policy.denied"]);
  assert.throws(() => Deno.statSync(`${te.dir}/forbidden`), Deno.errors.NotFound);
  h.gateway.close();
});

Deno.test("if the audit cannot be written, nothing runs", async () => {
  const h = harness({ failAudit: () => true });
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  await rejectsWith(() => te.engine.run("a", { command: ["touch made-it"] }), "AUDIT_UNAVAILABLE");
  assert.throws(() => Deno.statSync(`${te.dir}/made-it`), Deno.errors.NotFound);
  h.gateway.close();
});

Deno.test("confirm → approve runs once; deny and expiry end the job as denied", async () => {
  const h = harness({ confirmTimeoutMs: 200 });
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const e = te.engine;
  const a = await e.run("a", { command: ["echo needs-ok-1"] });
  assert.equal(a.status, "pending_approval");
  assert.equal(h.approvals.get(a.approval_id!), "pending");
  await h.gateway.approve(a.approval_id!, OP, "looks fine");
  assert.equal((await e.wait("a", { job_id: a.job_id, timeout_ms: 5000 })).output, "needs-ok-1\n");
  await rejectsWith(() => h.gateway.approve(a.approval_id!, OP), "NOT_FOUND");

  const b = await e.start("b", { command: ["echo needs-ok-2"] });
  await h.gateway.deny(b.approval_id!, OP, "no");
  const bv = await e.poll("b", { job_id: b.job_id });
  assert.equal(bv.status, "denied");
  assert.match(bv.reason ?? "", /denied by operator:cli: no/);

  const c = await e.start("c", { command: ["echo needs-ok-3"] });
  const cv = await e.wait("c", { job_id: c.job_id, timeout_ms: 5000 });
  assert.equal(cv.status, "denied");
  assert.match(cv.reason ?? "", /expired/);
  assert.equal(h.approvals.get(c.approval_id!), "expired");
  const kinds = h.events.map((x) => x.event);
  assert.deepEqual(kinds, [
    "approval.requested",
    "approval.resolved",
    "approval.requested",
    "approval.resolved",
    "approval.requested",
    "approval.resolved",
  ]);
  assert.equal(h.events[1]!.actor, "operator:cli");
  h.gateway.close();
});

Deno.test("an approval whose job ended first (its session closed) is closed as denied and audited", async () => {
  const h = harness({ confirmTimeoutMs: 60_000 });
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const r = await te.engine.start("a", { command: ["echo needs-ok-5"] });
  assert.equal(r.status, "pending_approval");
  await te.engine.closeSession("a", { session_id: r.session_id });
  const v = await te.engine.wait("a", { job_id: r.job_id, timeout_ms: 5000 });
  assert.notEqual(v.status, "pending_approval");
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(h.approvals.get(r.approval_id!), "denied");
  const last = h.events.at(-1)!;
  assert.equal(last.event, "approval.resolved");
  assert.equal(last.actor, "system:termada");
  assert.equal(last.data.approved, false);
  assert.equal(last.data.approval_id, r.approval_id);
  assert.deepEqual(te.engine.pendingApprovals(), []);
  await rejectsWith(() => h.gateway.approve(r.approval_id!, OP), "NOT_FOUND");
  h.gateway.close();
});

Deno.test("stop-all: barrier refuses new work, running jobs stop, approvals are cancelled", async () => {
  const h = harness();
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const e = te.engine;
  const running = await e.start("a", { command: ["sleep 30"] });
  const pending = await e.start("b", { command: ["echo needs-ok"] });
  const r = await h.gateway.stopAll(OP, { barrierMs: 60_000, graceMs: 200 });
  assert.deepEqual(r.cancelled_approvals, [pending.approval_id]);
  assert.ok(r.stopped_jobs.includes(running.job_id));
  assert.equal((await e.poll("a", { job_id: running.job_id })).status, "killed");
  assert.equal((await e.poll("b", { job_id: pending.job_id })).status, "denied");
  await rejectsWith(() => e.run("a", { command: ["echo", "x"] }), "STOPPED");
  h.gateway.resume(OP);
  assert.equal((await e.run("a", { command: ["echo", "back"] })).output, "back\n");
  assert.ok(h.events.some((x) => x.event === "stop_all" && x.actor === "operator:cli"));
  h.gateway.close();
});

Deno.test("a command line typed into a shell is checked by the policy", async () => {
  const h = harness();
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const e = te.engine;
  const r = await e.run("a", { command: ["sh"], timeout_ms: 5000 });
  assert.equal(r.status, "awaiting_input");
  await rejectsWith(
    () => e.write("a", { job_id: r.job_id, input: "touch forbidden" }),
    "DENIED_BY_POLICY",
  );
  await rejectsWith(
    () => e.write("a", { job_id: r.job_id, input: "echo needs-ok" }),
    "DENIED_BY_POLICY",
  );
  await e.write("a", { job_id: r.job_id, input: "exit 0" });
  assert.equal((await e.wait("a", { job_id: r.job_id, timeout_ms: 5000 })).exit_code, 0);
  assert.ok(h.events.some((x) => x.event === "input.written" && x.data.line === "exit 0"));
  h.gateway.close();
});

Deno.test("a secret line to a shell is still checked; a password at a no-echo prompt is not a command", async () => {
  const h = harness();
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const e = te.engine;
  const r = await e.run("a", { command: ["sh"], timeout_ms: 5000 });
  // Marking input secret never skips the policy.
  await rejectsWith(
    () => e.write("a", { job_id: r.job_id, input: "touch forbidden-secret", secret: true }),
    "DENIED_BY_POLICY",
  );
  const denied = h.events.find((x) => x.event === "policy.denied")!;
  assert.equal(denied.data.line, "[secret]");
  assert.ok(!JSON.stringify(denied).includes("forbidden-secret"));
  // A program that turned echo off reads a password: that is not a command line.
  await e.write("a", {
    job_id: r.job_id,
    input: "stty -echo; read pw; stty echo; echo got ${#pw}",
  });
  const w = await e.wait("a", { job_id: r.job_id, until: { prompt: true }, timeout_ms: 5000 });
  assert.equal(w.matched, "prompt", JSON.stringify(w));
  await e.write("a", { job_id: r.job_id, input: "forbidden-password" });
  const written = h.events.filter((x) => x.event === "input.written");
  assert.equal(written.at(-1)!.data.line, "[not echoed]");
  await e.wait("a", { job_id: r.job_id, until: { pattern: "got 18" }, timeout_ms: 5000 });
  await e.wait("a", { job_id: r.job_id, until: { prompt: true }, timeout_ms: 5000 });
  await e.write("a", { job_id: r.job_id, input: "exit 0" });
  const done = await e.wait("a", { job_id: r.job_id, timeout_ms: 5000 });
  assert.match(done.output, /got 18/);
  h.gateway.close();
});

Deno.test("the policy's standing answers are typed at matching prompts and audited", async () => {
  const h = harness();
  await using te = await testEngine({ admission: h.gateway });
  h.gateway.attach(te.engine);
  const r = await te.engine.run("a", {
    command: ["read -p 'Continue? ' a; read -p 'Name? ' b; echo got-$a-$b"],
    timeout_ms: 5000,
  });
  // The first prompt was answered for the agent; the second one is the agent's to answer.
  assert.equal(r.status, "awaiting_input");
  assert.equal(r.prompt, "Name? ");
  await te.engine.write("a", { job_id: r.job_id, input: "ada" });
  const done = await te.engine.wait("a", { job_id: r.job_id, timeout_ms: 5000 });
  assert.match(done.output, /got-yes-ada/);
  const auto = h.events.find((x) => x.event === "input.auto_answered")!;
  assert.equal(auto.data.answer, "yes");
  assert.equal(auto.data.prompt, "Continue? ");
  h.gateway.close();
});

Deno.test("the bus mirrors each record as the audit log wrote it: redacted, with its seq and hash", () => {
  const dir = Deno.makeTempDirSync({ prefix: "termada-gw-bus-" });
  try {
    const log = AuditLog.open(dir, { redact: (t) => t.replaceAll("hunter2", "[REDACTED]") });
    const bus = new EventBus(10);
    const seen: Record<string, unknown>[] = [];
    bus.subscribe((e) => seen.push(e.data));
    const gateway = new Gateway({
      policy: { decide: () => policy(""), decideLine: () => policy("") },
      audit: log,
      approvals: { insertApproval: () => {}, decideApproval: () => true },
      bus,
    });
    gateway.record(OP, "operator.note", { text: "password hunter2" });
    const rec = log.tail(1)[0]!;
    log.close();
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0], {
      actor: OP,
      text: "password [REDACTED]",
      audit_seq: rec.seq,
      audit_hash: rec.hash,
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
