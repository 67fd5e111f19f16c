/**
 * Black-box tests of Mission Control through MCP (agents) and the CLI / operator API against a
 * real daemon: the runtime's step evidence rules, success rules, approvals moving a mission to
 * needs_attention, restart → interrupted → resume, the evidence report and its audited hash,
 * and owner isolation.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  call,
  homeWithConfig,
  operatorFetch,
  startDaemon,
  stdioClient,
  termada,
} from "./_daemon.ts";

type S = Record<string, unknown>;
type Step = {
  step_id: string;
  text: string;
  status: string;
  verified: boolean;
  job_id?: string;
  note?: string;
  evidence?: S;
};

const CONFIG = `policies:
  default:
    confirm: ["touch *"]
approvals:
  confirm_timeout_ms: 60000
`;

const homeWith = (config = CONFIG) => homeWithConfig(config);

async function errorOf(
  c: Client,
  name: string,
  args: S,
): Promise<{ code: string; message: string }> {
  const r = await c.callTool({ name, arguments: args });
  assert.equal(r.isError, true, `${name} should fail: ${JSON.stringify(r.structuredContent)}`);
  return (r.structuredContent as { error: { code: string; message: string } }).error;
}

const PLAN = ["Probe the service", "Fix it", "Verify it answers"];

async function newMission(
  c: Client,
  plan = PLAN,
): Promise<S & { mission_id: string; session_id: string }> {
  const m = await call(c, "mission_create", {
    goal: "Make the demo service answer 200 again.\nIt answers 503 since this morning.",
    plan,
  });
  assert.match(String(m.mission_id), /^msn_[0-9a-z]{12}$/);
  assert.match(String(m.session_id), /^ses_/);
  assert.equal(m.status, "planned");
  return m as S & { mission_id: string; session_id: string };
}

const steps = (m: S) => m.steps as Step[];

Deno.test("mission steps pass only on a job of the mission's session that exited 0, checked by the runtime", async () => {
  const home = await homeWith();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    await using other = await stdioClient(home, ["--agent", "intruder"]);
    const m = await newMission(c);
    const id = m.mission_id;

    // Made-up job id, and a job of another agent: both unknown to this agent.
    assert.equal(
      (await errorOf(c, "mission_update", {
        mission_id: id,
        step_id: "s1",
        step_status: "passed",
        job_id: "job_aaaaaaaaaaaa",
      })).code,
      "NOT_FOUND",
    );
    const theirs = await call(other, "exec_run", { command: ["true"] });
    assert.equal(theirs.status, "exited");
    assert.equal(
      (await errorOf(c, "mission_update", {
        mission_id: id,
        step_id: "s1",
        step_status: "passed",
        job_id: theirs.job_id,
      })).code,
      "NOT_FOUND",
    );
    // A job of this agent in another session.
    const elsewhere = await call(c, "exec_run", { command: ["true"] });
    assert.equal(elsewhere.status, "exited");
    const wrong = await errorOf(c, "mission_update", {
      mission_id: id,
      step_id: "s1",
      step_status: "passed",
      job_id: elsewhere.job_id,
    });
    assert.equal(wrong.code, "INVALID_ARGUMENT");
    assert.match(wrong.message, /not in a session of mission/);
    // A non-zero exit.
    const bad = await call(c, "exec_run", {
      command: ["sh", "-c", "exit 3"],
      session: m.session_id,
    });
    assert.equal(bad.exit_code, 3);
    assert.match(
      (await errorOf(c, "mission_update", {
        mission_id: id,
        step_id: "s1",
        step_status: "passed",
        job_id: bad.job_id,
      })).message,
      /exited with code 3/,
    );
    // Still running.
    const slow = await call(c, "exec_start", { command: ["sleep 30"], session: m.session_id });
    assert.equal(slow.status, "running", JSON.stringify(slow));
    assert.match(
      (await errorOf(c, "mission_update", {
        mission_id: id,
        step_id: "s1",
        step_status: "passed",
        job_id: slow.job_id,
      })).message,
      /still running/,
    );
    // passed needs a job at all.
    assert.equal(
      (await errorOf(c, "mission_update", { mission_id: id, step_id: "s1", step_status: "passed" }))
        .code,
      "INVALID_ARGUMENT",
    );
    const killed = await call(c, "exec_kill", { job_id: slow.job_id, grace_ms: 200 });
    assert.equal(killed.status, "killed");
    assert.match(
      (await errorOf(c, "mission_update", {
        mission_id: id,
        step_id: "s1",
        step_status: "passed",
        job_id: slow.job_id,
      })).message,
      /ended killed/,
    );
    // The mission moved to running with its first job; nothing passed yet.
    const mid = await call(c, "mission_get", { mission_id: id });
    assert.equal(mid.status, "running");
    assert.deepEqual(steps(mid).map((s) => s.status), ["pending", "pending", "pending"]);

    // A good job passes, with the runtime's evidence snapshot.
    // A job of the session's shell is attachable, but its status is the shell's marker: the
    // step is passed yet not verified.
    const shellJob = await call(c, "exec_run", { command: ["true"], session: m.session_id });
    const claimed = await call(c, "mission_update", {
      mission_id: id,
      step_id: "s1",
      step_status: "passed",
      job_id: shellJob.job_id,
    });
    assert.equal(steps(claimed)[0]!.verified, false);
    assert.equal((steps(claimed)[0]!.evidence as S).exit_source, "shell");
    // An argv job the daemon spawned in the mission's session: its exit status is the kernel's.
    const good = await call(c, "exec_run", {
      command: ["printf 'HTTP 503\\n'"],
      session: m.session_id,
      mode: "background",
    });
    assert.equal(good.exit_code, 0);
    const after = await call(c, "mission_update", {
      mission_id: id,
      step_id: "s1",
      step_status: "passed",
      job_id: good.job_id,
      note: "the probe saw 503",
    });
    const s1 = steps(after)[0]!;
    assert.equal(s1.status, "passed");
    assert.equal(s1.verified, true);
    assert.equal(s1.job_id, good.job_id);
    const ev = s1.evidence as S;
    assert.equal(ev.exit_code, 0);
    assert.equal(ev.exit_source, "kernel");
    assert.equal(ev.session_id, m.session_id);
    assert.deepEqual(ev.command, ["printf 'HTTP 503\\n'"]);
    // The hash is of the job's recorded output, exactly what exec_poll pages.
    const out = await call(c, "exec_poll", { job_id: good.job_id });
    assert.equal(
      ev.output_sha256,
      createHash("sha256").update(String(out.output)).digest("hex"),
    );
    assert.equal(ev.output_bytes, new TextEncoder().encode(String(out.output)).length);
    assert.deepEqual(after.progress, {
      total: 3,
      passed: 1,
      failed: 0,
      skipped: 0,
      running: 0,
      pending: 2,
    });

    // Success is refused until every step is passed or skipped…
    assert.match(
      (await errorOf(c, "mission_update", { mission_id: id, status: "succeeded" })).message,
      /s2 is pending, s3 is pending/,
    );
    await call(c, "mission_update", { mission_id: id, step_id: "s2", step_status: "skipped" });
    const v = await call(c, "exec_run", { command: ["true"], session: m.session_id });
    await call(c, "mission_update", {
      mission_id: id,
      step_id: "s3",
      step_status: "passed",
      job_id: v.job_id,
    });
    // …and while a job of the mission is still active.
    const running = await call(c, "exec_start", {
      command: ["sleep", "30"],
      session: m.session_id,
      mode: "background",
    });
    const busy = await errorOf(c, "mission_update", { mission_id: id, status: "succeeded" });
    assert.match(busy.message, new RegExp(`${running.job_id} is running`));
    await call(c, "exec_kill", { job_id: running.job_id, grace_ms: 200 });
    const done = await call(c, "mission_update", {
      mission_id: id,
      status: "succeeded",
      summary: "Fixed | and verified",
    });
    assert.equal(done.status, "succeeded");
    assert.equal(done.session_id, null, "the mission's session is closed when it ends");
    assert.ok(done.ended_at);
    // Terminal missions are immutable.
    assert.match(
      (await errorOf(c, "mission_update", { mission_id: id, note: "one more thing" })).message,
      /finished mission cannot change/,
    );
    assert.equal(
      (await errorOf(c, "mission_update", { mission_id: id, status: "failed" })).code,
      "INVALID_ARGUMENT",
    );
    const list = await call(c, "mission_list", { status: "succeeded" });
    assert.deepEqual((list.missions as S[]).map((x) => x.mission_id), [id]);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("missions are owner-isolated: another agent gets NOT_FOUND for every mission tool", async () => {
  const home = await homeWith();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    await using other = await stdioClient(home, ["--agent", "intruder"]);
    const m = await newMission(c);
    for (
      const [tool, args] of [
        ["mission_get", { mission_id: m.mission_id }],
        ["mission_update", { mission_id: m.mission_id, note: "mine now" }],
        ["mission_resume", { mission_id: m.mission_id }],
        ["mission_report", { mission_id: m.mission_id }],
      ] as const
    ) {
      assert.equal((await errorOf(other, tool, args)).code, "NOT_FOUND", tool);
    }
    assert.deepEqual((await call(other, "mission_list", {})).missions, []);
    // Nor can it run in the mission's session.
    assert.equal(
      (await errorOf(other, "exec_run", { command: ["id"], session: m.session_id })).code,
      "NOT_FOUND",
    );
    // Secrets an agent writes into a mission are masked before they are stored or shown.
    const secret = await call(c, "mission_create", {
      goal: "Rotate the key AKIAIOSFODNN7EXAMPLE on the box",
      plan: ["use AKIAIOSFODNN7EXAMPLE"],
    });
    assert.equal(secret.goal, "Rotate the key [REDACTED] on the box");
    assert.equal(steps(secret)[0]!.text, "use [REDACTED]");
    const noted = await call(c, "mission_update", {
      mission_id: secret.mission_id,
      step_id: "s1",
      step_status: "skipped",
      note: "key was AKIAIOSFODNN7EXAMPLE",
    });
    assert.equal(steps(noted)[0]!.note, "key was [REDACTED]");
    // Bad input is a typed error.
    assert.equal(
      (await errorOf(c, "mission_create", { goal: "x", plan: [] })).code,
      "INVALID_ARGUMENT",
    );
    assert.equal(
      (await errorOf(c, "mission_create", { goal: "x", plan: Array(25).fill("step") })).code,
      "INVALID_ARGUMENT",
    );
    assert.equal(
      (await errorOf(c, "mission_update", {
        mission_id: m.mission_id,
        step_id: "s9",
        step_status: "skipped",
      }))
        .code,
      "INVALID_ARGUMENT",
    );
    assert.equal(
      (await errorOf(c, "mission_create", { goal: "x", plan: ["a"], target: "prod-1" })).code,
      "NOT_SUPPORTED",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("an approval in the mission session means needs_attention; the report shows the approver and its hash is audited", async () => {
  const home = await homeWith();
  const work = await Deno.makeTempDir();
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const m = await newMission(c, ["Repair under approval"]);
    const r = await call(c, "exec_run", {
      command: [`touch ${work}/fixed`],
      session: m.session_id,
      mode: "background",
    });
    assert.equal(r.status, "pending_approval");
    const waiting = await call(c, "mission_get", { mission_id: m.mission_id });
    assert.equal(waiting.status, "needs_attention");
    assert.equal((waiting.pending_approvals as S[])[0]!.approval_id, r.approval_id);
    // The operator sees it too, with the whole timeline.
    const api = operatorFetch(d);
    const listed = await (await api("/missions")).json() as { missions: S[] };
    assert.equal(listed.missions[0]!.pending_approvals, 1);
    assert.equal(listed.missions[0]!.owner, "dev");

    const ok = await termada(home, ["approve", String(r.approval_id)]);
    assert.equal(ok.code, 0, ok.stderr);
    const w = await call(c, "exec_wait", { job_id: r.job_id, timeout_ms: 10_000 });
    assert.equal(w.exit_code, 0);
    const back = await call(c, "mission_update", {
      mission_id: m.mission_id,
      step_id: "s1",
      step_status: "passed",
      job_id: r.job_id,
    });
    assert.equal(back.status, "running");
    const approval = (steps(back)[0]!.evidence as { approval: S }).approval;
    assert.equal(approval.status, "approved");
    assert.match(String(approval.decided_by), /^operator:cli-/);
    await call(c, "mission_update", {
      mission_id: m.mission_id,
      status: "succeeded",
      summary: "Repaired.",
    });

    const rep = await call(c, "mission_report", { mission_id: m.mission_id });
    const md = String(rep.markdown);
    assert.equal(rep.sha256, createHash("sha256").update(md).digest("hex"));
    assert.match(md, new RegExp(`# Mission report`));
    assert.match(md, new RegExp(m.mission_id));
    assert.match(md, /> Make the demo service answer 200 again\.\n> It answers 503/);
    assert.match(md, /verified by runtime/);
    assert.match(md, /approval `apr_[0-9a-z]{12}`: approved by `operator:cli-/);
    assert.match(md, /Summary, \*\*claimed by the agent\*\*/);
    for (
      const e of ["mission.created", "approval.requested", "approval.resolved", "job.finished"]
    ) {
      assert.match(
        md,
        new RegExp(`\\| \\d+ \\| ${e.replace(".", "\\.")} \\| \`[0-9a-f]{64}\` \\|`),
        e,
      );
    }
    const evidence = rep.evidence as { anchors: { seq: number; hash: string }[]; schema: string };
    assert.equal(evidence.schema, "termada.mission.evidence/1");
    // Every anchor is the real record of the audit log, and the report's hash is recorded there.
    const audit = await (await api("/audit?n=500")).json() as {
      records: { seq: number; hash: string; event: string; data: S }[];
    };
    const bySeq = new Map(audit.records.map((x) => [x.seq, x]));
    for (const a of evidence.anchors) assert.equal(bySeq.get(a.seq)?.hash, a.hash, `seq ${a.seq}`);
    const reported = bySeq.get(Number(rep.audit_seq))!;
    assert.equal(reported.event, "mission.reported");
    assert.equal(reported.data.sha256, rep.sha256);
    // The operator's download is the same document (a new report record, same content).
    const dl = await api(`/missions/${m.mission_id}/report`);
    assert.equal(dl.headers.get("content-type"), "text/markdown; charset=utf-8");
    const text = await dl.text();
    assert.equal(
      dl.headers.get("x-termada-report-sha256"),
      createHash("sha256").update(text).digest("hex"),
    );
    assert.equal(text.replace(/at \S+\. Every/, ""), md.replace(/at \S+\. Every/, ""));
    const show = await termada(home, ["mission", "show", m.mission_id]);
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, new RegExp(`s1 passed\\s+verified by runtime \\(${r.job_id}\\)`));
    const cli = await termada(home, ["mission", "report", m.mission_id]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /verified by runtime/);
    const verify = await termada(home, ["audit", "verify"]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

Deno.test("a restart interrupts a live mission; resume opens a fresh session and keeps passed steps", async () => {
  const home = await homeWith();
  try {
    let m: S & { mission_id: string; session_id: string };
    {
      await using _d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      m = await newMission(c, ["Set up", "Check"]);
      const j = await call(c, "exec_run", {
        command: ["export MARK=1; cd /tmp"],
        session: m.session_id,
      });
      await call(c, "mission_update", {
        mission_id: m.mission_id,
        step_id: "s1",
        step_status: "passed",
        job_id: j.job_id,
      });
      assert.equal(
        (await errorOf(c, "mission_resume", { mission_id: m.mission_id })).code,
        "INVALID_ARGUMENT",
        "only an interrupted mission resumes",
      );
    }
    await using _d2 = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const after = await call(c, "mission_get", { mission_id: m.mission_id });
    assert.equal(after.status, "interrupted");
    assert.equal(after.session_id, null);
    const kept = steps(after)[0]!;
    assert.equal(kept.status, "passed", "evidence survives the restart");
    assert.match(String((kept.evidence as S).job_id), /^job_/);
    // The old session is gone for good.
    assert.equal(
      (await errorOf(c, "exec_run", { command: ["true"], session: m.session_id })).code,
      "NOT_FOUND",
    );
    const resumed = await call(c, "mission_resume", { mission_id: m.mission_id });
    assert.equal(resumed.status, "running");
    assert.notEqual(resumed.session_id, m.session_id);
    const sessions = resumed.sessions as { attempt: number; ended_at?: string }[];
    assert.deepEqual(sessions.map((s) => s.attempt), [1, 2]);
    assert.ok(sessions[0]!.ended_at);
    // A fresh shell: nothing of the first attempt's state carried over.
    const probe = await call(c, "exec_run", {
      command: ['echo "mark=${MARK:-none}"'],
      session: resumed.session_id,
    });
    assert.match(String(probe.output), /mark=none/);
    await call(c, "mission_update", {
      mission_id: m.mission_id,
      step_id: "s2",
      step_status: "passed",
      job_id: probe.job_id,
    });
    const events = (resumed.timeline as { event: string }[]).map((t) => t.event);
    assert.ok(events.includes("mission.resumed"), events.join());
    const fin = await call(c, "mission_update", { mission_id: m.mission_id, status: "succeeded" });
    assert.equal(fin.status, "succeeded");
    const rep = await call(c, "mission_report", { mission_id: m.mission_id });
    assert.match(String(rep.markdown), /attempt 2/);
    assert.match(String(rep.markdown), /fresh shell/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a closed mission session interrupts the mission; an operator can cancel one", async () => {
  const home = await homeWith();
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const m = await newMission(c, ["Look around"]);
    const first = await call(c, "mission_get", { mission_id: m.mission_id });
    assert.deepEqual(
      (first.timeline as { event: string }[]).map((t) => t.event),
      ["session.created"],
      "the session's opening is part of the mission",
    );
    await call(c, "session_close", { session_id: m.session_id });
    const closed = await call(c, "mission_get", { mission_id: m.mission_id });
    assert.equal(closed.status, "interrupted");
    assert.equal(closed.session_id, null);
    const resumed = await call(c, "mission_resume", { mission_id: m.mission_id });
    assert.equal(resumed.status, "running");

    // The operator cancels: audited, the running job is killed with the session.
    const slow = await call(c, "exec_start", {
      command: ["sleep 60"],
      session: resumed.session_id,
    });
    const api = operatorFetch(d, "alice");
    const res = await api(`/missions/${m.mission_id}/cancel`, {
      method: "POST",
      body: JSON.stringify({ reason: "wrong machine" }),
    });
    assert.equal(res.status, 200);
    const cancelled = await res.json() as S;
    assert.equal(cancelled.status, "cancelled");
    const job = await call(c, "exec_poll", { job_id: slow.job_id });
    assert.equal(job.status, "killed");
    const events = cancelled.timeline as { event: string; summary: string; actor: S }[];
    const last = events.filter((e) => e.event === "mission.status").pop()!;
    assert.equal(last.summary, "status running → cancelled: wrong machine");
    assert.deepEqual(last.actor, { kind: "operator", id: "alice" });
    // Unauthenticated and unknown requests are refused with typed errors.
    const anon = await fetch(`http://127.0.0.1:${d.port}/api/missions`);
    assert.equal(anon.status, 401);
    await anon.body?.cancel();
    const missing = await api("/missions/msn_zzzzzzzzzzzz");
    assert.equal(missing.status, 404);
    assert.equal((await missing.json() as { error: S }).error.code, "NOT_FOUND");
    const cli = await termada(home, ["mission", "list"]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, new RegExp(`${m.mission_id}\\s+cancelled`));
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a program held at exec for approval in the mission session means needs_attention", async () => {
  const home = await homeWith();
  const work = await Deno.makeTempDir();
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const m = await newMission(c, ["Repair under approval"]);
    // A copy of touch passes the command's text; its execve meets the confirm rule.
    await Deno.copyFile("/usr/bin/touch", `${work}/t`);
    await Deno.chmod(`${work}/t`, 0o755);
    const st = await call(c, "exec_start", {
      command: [`${work}/t ${work}/fixed; echo rc=$?`],
      session: m.session_id,
    });
    const api = operatorFetch(d);
    let held: S | undefined;
    for (let i = 0; i < 200 && !held; i++) {
      const list = await (await api("/approvals")).json() as { approvals: S[] };
      held = list.approvals.find((a) => a.exec !== undefined);
      if (!held) await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(held, "the exec-time approval is listed");
    const waiting = await call(c, "mission_get", { mission_id: m.mission_id });
    assert.equal(waiting.status, "needs_attention");
    const deny = await api(`/approvals/${held.approval_id}/deny`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(deny.status, 200, await deny.text());
    const w = await call(c, "exec_wait", { job_id: st.job_id, timeout_ms: 10_000 });
    assert.match(String(w.output), /rc=126/);
    assert.equal((await call(c, "mission_get", { mission_id: m.mission_id })).status, "running");
    const tl = await call(c, "mission_get", { mission_id: m.mission_id });
    assert.ok(
      JSON.stringify(tl.timeline).includes("at exec for approval"),
      "the timeline shows the held exec",
    );
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});
