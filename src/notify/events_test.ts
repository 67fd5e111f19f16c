import assert from "node:assert/strict";
import { EventBus } from "../shared/mod.ts";
import { INPUT_NEEDED_EVENT, notificationFor, notificationsFromBus } from "./events.ts";
import type { Notification } from "./message.ts";

// Payloads as the recorder mirrors them (src/control/recorder.ts #mirror: actor + data + audit).
const audit = { audit_seq: 7, audit_hash: "ab".repeat(32) };
const agent = { actor: { kind: "agent", id: "builder" } };
const operator = { actor: { kind: "operator", id: "alice" } };

Deno.test("approval.requested → approval_pending with command, ids and reason", () => {
  assert.deepEqual(
    notificationFor({
      type: "approval.requested",
      data: {
        ...agent,
        job_id: "job_1",
        session_id: "ses_1",
        command: ["terraform", "apply"],
        mode: "foreground",
        approval_id: "apr_1",
        decision: {
          action: "confirm",
          reason: "infra change",
          rule: { list: "confirm", pattern: "terraform *" },
        },
        ...audit,
      },
    }),
    {
      kind: "approval_pending",
      actor: "builder",
      actor_kind: "agent",
      approval_id: "apr_1",
      job_id: "job_1",
      command: "terraform apply",
      reason: "infra change",
    },
  );
});

Deno.test("exec and action approvals map too", () => {
  const exec = notificationFor({
    type: "exec.approval_requested",
    data: {
      ...agent,
      job_id: "job_2",
      session_id: "ses_1",
      approval_id: "apr_2",
      pid: 4242,
      path: "/usr/bin/curl",
      argv: ["curl", "https://example.com"],
      decision: { action: "confirm", rule: { list: "confirm", pattern: "curl *" } },
    },
  });
  assert.equal(exec?.command, "curl https://example.com");
  assert.equal(exec?.reason, 'rule "curl *"');
  const action = notificationFor({
    type: "action.approval_requested",
    data: {
      ...agent,
      action_id: "act_1",
      kind: "file.write",
      summary: ["/etc/hosts"],
      approval_id: "apr_3",
      decision: { action: "confirm" },
    },
  });
  assert.equal(action?.kind, "approval_pending");
  assert.equal(action?.command, "file.write: /etc/hosts");
});

Deno.test("job.finished → job_failed for failure statuses only", async (t) => {
  const finished = (extra: Record<string, unknown>) => ({
    type: "job.finished",
    data: {
      ...agent,
      job_id: "job_3",
      session_id: "ses_1",
      duration_ms: 5,
      output_bytes: 0,
      ...extra,
    },
  });
  await t.step("timed_out", () => {
    const n = notificationFor(finished({ status: "timed_out", reason: "timeout 30s" }), {
      commandOf: (id) => id === "job_3" ? "make test" : undefined,
    });
    assert.deepEqual(n, {
      kind: "job_failed",
      actor: "builder",
      actor_kind: "agent",
      job_id: "job_3",
      outcome: "timed out",
      reason: "timeout 30s",
      command: "make test",
    });
  });
  await t.step("killed, with its signal", () => {
    assert.equal(
      notificationFor(finished({ status: "killed", signal: "TERM" }))?.outcome,
      "was killed (TERM)",
    );
  });
  await t.step("exited 0 and exited 1 are quiet by default", () => {
    assert.equal(notificationFor(finished({ status: "exited", exit_code: 0 })), undefined);
    assert.equal(notificationFor(finished({ status: "exited", exit_code: 1 })), undefined);
  });
  await t.step("exited 1 with nonzeroExit", () => {
    assert.equal(
      notificationFor(finished({ status: "exited", exit_code: 1 }), { nonzeroExit: true })?.outcome,
      "exited with 1",
    );
    assert.equal(
      notificationFor(finished({ status: "exited", exit_code: 0 }), { nonzeroExit: true }),
      undefined,
    );
  });
  await t.step("statuses are configurable", () => {
    assert.equal(
      notificationFor(finished({ status: "killed" }), { failureStatuses: ["failed"] }),
      undefined,
    );
    assert.equal(notificationFor(finished({ status: "denied" })), undefined);
  });
});

Deno.test("stop_all and stop_all.done → stop_all", () => {
  assert.deepEqual(
    notificationFor({ type: "stop_all", data: { ...operator, barrier_ms: 30_000 } }),
    {
      kind: "stop_all",
      actor: "alice",
      actor_kind: "operator",
      outcome: "every job is being stopped; new work is refused for 30 s",
    },
  );
  assert.equal(
    notificationFor({
      type: "stop_all.done",
      data: { ...operator, stopped_jobs: ["job_1", "job_2"], cancelled_approvals: ["apr_1"] },
    })?.outcome,
    "done: 2 jobs stopped, 1 approval cancelled",
  );
});

Deno.test("job.awaiting_input (published by the daemon wiring) → input_needed", () => {
  assert.deepEqual(
    notificationFor({
      type: INPUT_NEEDED_EVENT,
      data: {
        job_id: "job_4",
        session_id: "ses_1",
        owner: "operator:alice",
        command: ["ssh", "prod"],
        reader: "ssh",
      },
    }),
    {
      kind: "input_needed",
      actor: "alice",
      actor_kind: "operator",
      job_id: "job_4",
      command: "ssh prod",
      reader: "ssh",
    },
  );
});

Deno.test("unrelated or malformed events map to nothing and never throw", () => {
  for (
    const e of [
      { type: "session.created", data: { session_id: "s" } },
      { type: "job.finished", data: {} },
      { type: "approval.requested", data: { command: 42, decision: null, actor: "x" } },
      { type: "stop_all.done", data: { stopped_jobs: "x" } },
    ]
  ) notificationFor(e);
  assert.equal(notificationFor({ type: "vault.unlocked", data: {} }), undefined);
});

Deno.test("notificationsFromBus: remembers commands for job.finished and unsubscribes", () => {
  const bus = new EventBus(16);
  const got: Notification[] = [];
  const off = notificationsFromBus(bus, { notify: (n) => got.push(n) });
  bus.publish("job.requested", {
    ...agent,
    job_id: "job_5",
    session_id: "s",
    command: ["npm", "test"],
    mode: "foreground",
    decision: { action: "allow" },
  });
  bus.publish("job.finished", {
    ...agent,
    job_id: "job_5",
    session_id: "s",
    status: "failed",
    duration_ms: 1,
    output_bytes: 1,
  });
  bus.publish("session.closed", { session_id: "s", reason: "x" });
  assert.equal(got.length, 1);
  assert.equal(got[0]!.command, "npm test");
  off();
  bus.publish("stop_all", { ...operator, barrier_ms: 1000 });
  assert.equal(got.length, 1);
});
