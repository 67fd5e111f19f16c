/**
 * Black-box tests of governance: policy decisions, the approval queue, the kill switch and the
 * audit trail, through MCP (agents) and the CLI (the operator) against a real daemon.
 */
import assert from "node:assert/strict";
import { call, homeWithConfig, startDaemon, stdioClient, termada } from "./_daemon.ts";

const CONFIG = `policies:
  default:
    deny: ["rm -rf *"]
    confirm: ["touch *"]
approvals:
  confirm_timeout_ms: 60000
`;

const homeWith = (config = CONFIG) => homeWithConfig(config);

Deno.test("policy: deny is an error result, confirm parks the job until the operator approves it once", async () => {
  const home = await homeWith();
  const work = await Deno.makeTempDir();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const denied = await c.callTool({
      name: "exec_run",
      arguments: { command: [`rm -rf ${work}/x`] },
    });
    assert.equal(denied.isError, true);
    assert.equal(
      (denied.structuredContent as { error: { code: string } }).error.code,
      "DENIED_BY_POLICY",
    );
    // A bypass through a nested shell is still denied.
    const nested = await c.callTool({
      name: "exec_run",
      arguments: { command: ["bash", "-c", `echo hi; rm -rf ${work}/x`] },
    });
    assert.equal(
      (nested.structuredContent as { error: { code: string } }).error.code,
      "DENIED_BY_POLICY",
    );

    const r = await call(c, "exec_run", { command: [`touch ${work}/approved`] });
    assert.equal(r.status, "pending_approval");
    const approvalId = r.approval_id as string;
    assert.match(approvalId, /^apr_/);
    assert.throws(() => Deno.statSync(`${work}/approved`), Deno.errors.NotFound);

    const pending = await termada(home, ["pending"]);
    assert.equal(pending.code, 0);
    assert.match(pending.stdout, new RegExp(approvalId));
    const ok = await termada(home, ["approve", approvalId, "--reason", "fine"]);
    assert.equal(ok.code, 0, ok.stderr);
    const w = await call(c, "exec_wait", { job_id: r.job_id, timeout_ms: 10_000 });
    assert.equal(w.status, "exited");
    Deno.statSync(`${work}/approved`);
    const again = await termada(home, ["approve", approvalId]);
    assert.notEqual(again.code, 0, "an approval lets the job run once");

    const r2 = await call(c, "exec_run", { command: [`touch ${work}/denied`] });
    const no = await termada(home, ["deny", r2.approval_id as string, "--reason", "not now"]);
    assert.equal(no.code, 0, no.stderr);
    const w2 = await call(c, "exec_wait", { job_id: r2.job_id, timeout_ms: 10_000 });
    assert.equal(w2.status, "denied");
    assert.match(String(w2.reason), /not now/);
    assert.throws(() => Deno.statSync(`${work}/denied`), Deno.errors.NotFound);

    const audit = await termada(home, ["audit", "-n", "100"]);
    for (
      const ev of [
        "agent.connected",
        "policy.denied",
        "approval.requested",
        "approval.resolved",
        "job.finished",
      ]
    ) {
      assert.match(audit.stdout, new RegExp(`\\t${ev.replace(".", "\\.")}\\t`), ev);
    }
    const dash = await termada(home, ["dashboard"]);
    assert.match(dash.stdout, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}\n$/);
    const verify = await termada(home, ["audit", "verify"]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    assert.match(verify.stdout, /records verified/);
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

Deno.test("an unanswered approval expires as denied", async () => {
  const home = await homeWith(CONFIG.replace("60000", "300"));
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const r = await call(c, "exec_start", { command: ["touch /tmp/never-approved-x"] });
    assert.equal(r.status, "pending_approval");
    const w = await call(c, "exec_wait", { job_id: r.job_id, timeout_ms: 10_000 });
    assert.equal(w.status, "denied");
    assert.match(String(w.reason), /expired/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a pending approval does not survive a daemon restart: it expires, the job is denied", async () => {
  const home = await homeWith();
  try {
    let jobId: string;
    {
      await using d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      jobId = (await call(c, "exec_start", { command: ["touch /tmp/restart-x"] })).job_id as string;
      d.proc.kill("SIGKILL");
      await d.proc.status;
    }
    await using _d2 = await startDaemon(home);
    await using c2 = await stdioClient(home, ["--agent", "dev"]);
    const p = await call(c2, "exec_poll", { job_id: jobId });
    assert.equal(p.status, "denied");
    assert.match(String(p.reason), /restarted/);
    assert.match((await termada(home, ["pending"])).stdout, /No approvals pending/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("stop-all: running jobs are stopped, new ones refused, and it is audited", async () => {
  const home = await homeWith();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const s = await call(c, "exec_start", { command: ["sleep 300"] });
    const stop = await termada(home, ["stop", "--barrier-ms", "60000", "--grace-ms", "200"]);
    assert.equal(stop.code, 0, stop.stderr);
    assert.match(stop.stdout, /Stopped 1 job/);
    assert.equal((await call(c, "exec_poll", { job_id: s.job_id })).status, "killed");
    const refused = await c.callTool({ name: "exec_run", arguments: { command: ["echo", "x"] } });
    assert.equal((refused.structuredContent as { error: { code: string } }).error.code, "STOPPED");
    assert.equal((await termada(home, ["resume"])).code, 0);
    assert.equal((await call(c, "exec_run", { command: ["echo", "back"] })).output, "back\n");
    assert.match((await termada(home, ["audit"])).stdout, /operator:cli[^\t]*\tstop_all\t/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("agents cannot reach operator routes by any transport", async () => {
  const home = await homeWith(
    CONFIG + `agents:\n  ci:\n    token: "agent-token-0123456789abcdef"\n`,
  );
  try {
    await using d = await startDaemon(home);
    const url = `http://127.0.0.1:${d.port}/api/approvals`;
    for (const auth of [undefined, "Bearer agent-token-0123456789abcdef"]) {
      const r = await fetch(url, { headers: auth ? { authorization: auth } : {} });
      assert.equal(r.status, 401);
      await r.body?.cancel();
    }
    for (const auth of [undefined, "Bearer agent-token-0123456789abcdef"]) {
      const m = await fetch(`http://127.0.0.1:${d.port}/metrics`, {
        headers: auth ? { authorization: auth } : {},
      });
      assert.equal(m.status, 401);
      await m.body?.cancel();
    }
    const opToken = new URL(/Dashboard\s+(\S+)/.exec(d.stderr())![1]!).searchParams.get("token")!;
    const metrics = await fetch(`http://127.0.0.1:${d.port}/metrics`, {
      headers: { authorization: `Bearer ${opToken}` },
    });
    assert.match(await metrics.text(), /^termada_sessions_open 0$/m);
    const policy = await (await fetch(`http://127.0.0.1:${d.port}/api/policy`, {
      headers: { authorization: `Bearer ${opToken}` },
    })).json();
    assert.deepEqual(policy.policies.default.deny, ["rm -rf *"]);
    assert.equal(policy.agents.ci.policy, "default");
    assert.ok(!JSON.stringify(policy).includes("agent-token-0123456789abcdef"), "no tokens");
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const tools = (await c.listTools()).tools.map((t: { name: string }) => t.name);
    for (const forbidden of ["approve", "deny", "stop", "policy"]) {
      assert.ok(!tools.some((t: string) => t.includes(forbidden)), forbidden);
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("the daemon refuses to start on a broken audit chain and says what to do", async () => {
  const home = await homeWith();
  try {
    {
      await using d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      await call(c, "exec_run", { command: ["echo", "recorded"] });
      assert.equal(await d.stop(), 0);
    }
    const seg = [...Deno.readDirSync(`${home}/audit`)].map((e) => e.name)
      .filter((n) => n.endsWith(".jsonl")).sort()[0]!;
    const path = `${home}/audit/${seg}`;
    const text = Deno.readTextFileSync(path);
    Deno.writeTextFileSync(path, text.replace('"recorded"', '"forged!!"').replace("echo", "ech0"));
    const verify = await termada(home, ["audit", "verify"]);
    assert.equal(verify.code, 1);
    assert.match(verify.stdout, /BROKEN at seq \d+/);
    const start = await termada(home, ["serve", "--bind", "127.0.0.1:0"]);
    assert.notEqual(start.code, 0);
    assert.match(start.stderr, /AUDIT_UNAVAILABLE/);
    assert.match(start.stderr, /termada audit verify/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("an agent token over the Unix socket does not reach operator routes either", async () => {
  const home = await homeWith(
    CONFIG + `agents:\n  ci:\n    token: "agent-token-0123456789abcdef"\n`,
  );
  try {
    await using d = await startDaemon(home);
    const client = Deno.createHttpClient({ proxy: { transport: "unix", path: d.socketPath } });
    try {
      for (const path of ["/api/approvals", "/api/audit"]) {
        const r = await fetch(`http://termada${path}`, {
          client,
          headers: {
            authorization: "Bearer agent-token-0123456789abcdef",
            "x-termada-agent": "ci",
          },
        } as RequestInit);
        assert.equal(r.status, 401, path);
        await r.body?.cancel();
      }
      const stop = await fetch("http://termada/api/stop", {
        client,
        method: "POST",
        headers: { authorization: "Bearer agent-token-0123456789abcdef" },
      } as RequestInit);
      assert.equal(stop.status, 401);
      await stop.body?.cancel();
    } finally {
      client.close();
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
