/**
 * Governance through a real daemon (docs/GOVERNANCE.md): strict identity refusals on every
 * transport, agent and operator JWTs minted here with jose (valid, expired, wrong audience,
 * unknown key, tampered), a 2-of-3 quorum with the requester excluded and MFA required, a policy
 * changed between request and approval (refused at consume), budgets, and a crash between
 * intent and outcome (outcome_unknown after restart, reconciled by an operator).
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mint, mintKeys, writeJwks } from "../src/governance/_jwt_testing.ts";
import {
  call,
  homeWithConfig,
  operatorFetch,
  type RunningDaemon,
  startDaemon,
  stdioClient,
  termada,
} from "./_daemon.ts";
import { pollUntil } from "./_clients.ts";

const AGENT_TOKEN = "Tk7-governance-strict-agent-token-0123456789";
const ISS = "https://idp.test.example";

interface Fixture {
  home: string;
  agentKeys: Awaited<ReturnType<typeof mintKeys>>;
  opKeys: Awaited<ReturnType<typeof mintKeys>>;
  stray: Awaited<ReturnType<typeof mintKeys>>;
}

async function fixture(): Promise<Fixture> {
  const agentKeys = await mintKeys("EdDSA");
  const opKeys = await mintKeys("ES256");
  const stray = await mintKeys("EdDSA");
  const home = await homeWithConfig("");
  await writeJwks(`${home}/agent-jwks.json`, [agentKeys.publicJwk]);
  await writeJwks(`${home}/operator-jwks.json`, [opKeys.publicJwk]);
  await Deno.writeTextFile(`${home}/config.yaml`, config(home, "confirm"));
  return { home, agentKeys, opKeys, stray };
}

/** `touch` is `confirm` (2 of sre, MFA, requester excluded) or `deny`. */
function config(home: string, touch: "confirm" | "deny", budget = 1000): string {
  return `
security:
  identity_mode: strict
  agent_jwt:
    issuer: ${ISS}
    audience: termada-agents
    jwks_file: ${home}/agent-jwks.json
    max_ttl_s: 600
    clock_skew_s: 30
  operator_jwt:
    issuer: ${ISS}
    audience: termada-operators
    jwks_file: ${home}/operator-jwks.json
  quotas:
    pending_per_owner: 3
agents:
  bot:
    token: "${AGENT_TOKEN}"
    policy: team
    principal: dave
  ci:
    jwt: true
    policy: team
default_policy: team
policies:
  team:
    rules:
      - effect: allow
        action: exec
        resource: ["echo *", "true", "sleep *", "cat *"]
      - effect: ${touch}
        action: exec
        resource: "touch *"
        approval: { quorum: 2, roles: [sre], mfa: true, exclude_requester: true }
    budgets:
      - name: ops
        scope: principal
        metric: operations
        limit: ${budget}
        window: 1h
`;
}

async function agentJwt(
  f: Fixture,
  claims: Record<string, unknown> = {},
  key = f.agentKeys,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return await mint(key.privateKey, "EdDSA", key.publicJwk.kid as string, {
    iss: ISS,
    aud: "termada-agents",
    sub: "alice",
    agent_id: "ci",
    iat: now,
    exp: now + 300,
    ...claims,
  });
}

async function operatorJwt(f: Fixture, sub: string, roles: string[], amr: string[]) {
  const now = Math.floor(Date.now() / 1000);
  return await mint(f.opKeys.privateKey, "ES256", f.opKeys.publicJwk.kid as string, {
    iss: ISS,
    aud: "termada-operators",
    sub,
    roles,
    amr,
    iat: now,
    exp: now + 600,
  });
}

async function httpClient(d: RunningDaemon, bearer: string): Promise<Client> {
  const client = new Client({ name: "gov-test", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${d.port}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${bearer}` } },
  });
  await client.connect(transport);
  return client;
}

async function mcpStatus(d: RunningDaemon, bearer?: string): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${d.port}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "probe", version: "1" },
      },
    }),
  });
  await r.body?.cancel();
  return r.status;
}

function asOperator(d: RunningDaemon, jwt: string) {
  return (path: string, init: RequestInit = {}) =>
    fetch(`http://127.0.0.1:${d.port}/api${path}`, {
      ...init,
      headers: {
        authorization: `Bearer ${jwt}`,
        "content-type": "application/json",
        ...init.headers,
      },
    });
}

async function auditEvents(d: RunningDaemon, event: string): Promise<Record<string, unknown>[]> {
  const r = await operatorFetch(d)("/audit?n=2000");
  const body = await r.json() as { records: { event: string; data: Record<string, unknown> }[] };
  return body.records.filter((x) => x.event === event).map((x) => x.data);
}

Deno.test("strict identity mode refuses callers without a valid identity, on every transport", async (t) => {
  const f = await fixture();
  try {
    await using d = await startDaemon(f.home);
    await t.step("HTTP: no credential, an unknown token, bad JWTs → 401", async () => {
      assert.equal(await mcpStatus(d), 401);
      assert.equal(await mcpStatus(d, "not-a-token-of-anyone-here-0000000"), 401);
      const now = Math.floor(Date.now() / 1000);
      const expired = await agentJwt(f, { iat: now - 400, exp: now - 100 });
      const wrongAud = await agentJwt(f, { aud: "someone-else" });
      const unknownKey = await agentJwt(f, {}, f.stray);
      const valid = await agentJwt(f);
      const [h, p, s] = valid.split(".");
      const payload = JSON.parse(atob(p!.replace(/-/g, "+").replace(/_/g, "/")));
      payload.agent_id = "bot";
      const forged = btoa(JSON.stringify(payload)).replace(/=+$/, "").replace(/\+/g, "-")
        .replace(/\//g, "_");
      const tampered = `${h}.${forged}.${s}`;
      const tooLong = await agentJwt(f, { iat: now, exp: now + 3000 });
      for (
        const [what, jwt] of Object.entries({ expired, wrongAud, unknownKey, tampered, tooLong })
      ) {
        assert.equal(await mcpStatus(d, jwt), 401, what);
      }
      // An agent that does not accept JWTs cannot be claimed by one.
      assert.equal(await mcpStatus(d, await agentJwt(f, { agent_id: "bot" })), 401);
    });
    await t.step("the socket: no dev-mode self-naming in strict mode", async () => {
      await assert.rejects(() => stdioClient(f.home, ["--agent", "mallory"]));
    });
    await t.step("the refusals are audited, never with the credential", async () => {
      const refused = await pollUntil(
        () => auditEvents(d, "auth.refused").then((r) => r.length >= 5 ? r : undefined),
        "auth.refused records",
        5000,
      );
      const text = JSON.stringify(refused);
      assert.ok(!text.includes(AGENT_TOKEN.slice(0, 12)));
      assert.ok(refused.some((r) => /expired/.test(String(r.reason))), text);
      assert.ok(refused.some((r) => /audience/.test(String(r.reason))), text);
    });
    await t.step(
      "a valid token and a valid agent JWT work; what no allow rule matches is denied",
      async () => {
        const bot = await httpClient(d, AGENT_TOKEN);
        try {
          const r = await call(bot, "exec_run", { command: ["echo", "hi"] });
          assert.equal(r.output, "hi\n");
          const denied = await bot.callTool({
            name: "exec_run",
            arguments: { command: ["ls", "/"] },
          });
          assert.equal(denied.isError, true);
          const e =
            (denied.structuredContent as { error: { code: string; message: string } }).error;
          assert.equal(e.code, "DENIED_BY_POLICY");
          assert.match(e.message, /no allow rule/);
        } finally {
          await bot.close();
        }
        const ci = await httpClient(d, await agentJwt(f));
        try {
          assert.equal((await call(ci, "capabilities", {})).agent, "ci");
        } finally {
          await ci.close();
        }
      },
    );
    await t.step("operator JWTs on /api and /metrics; a bad one is 401", async () => {
      const good = await operatorJwt(f, "bob", ["sre"], ["pwd", "otp"]);
      const st = await asOperator(d, good)("/status");
      assert.equal(st.status, 200);
      await st.body?.cancel();
      const m = await fetch(`http://127.0.0.1:${d.port}/metrics`, {
        headers: { authorization: `Bearer ${good}` },
      });
      assert.equal(m.status, 200);
      await m.body?.cancel();
      const bad = await asOperator(d, await agentJwt(f))("/status");
      assert.equal(bad.status, 401);
      await bad.body?.cancel();
    });
  } finally {
    await Deno.remove(f.home, { recursive: true });
  }
});

Deno.test("a 2-of-3 quorum: requester excluded, roles and MFA required, one vote each; a policy change refuses at consume", async (t) => {
  const f = await fixture();
  try {
    await using d = await startDaemon(f.home);
    // ci's JWT says the human behind it is alice.
    const ci = await httpClient(d, await agentJwt(f));
    const dir = await Deno.makeTempDir();
    try {
      const alice = asOperator(d, await operatorJwt(f, "alice", ["sre"], ["mfa"]));
      const bob = asOperator(d, await operatorJwt(f, "bob", ["sre"], ["hwk"]));
      const carol = asOperator(d, await operatorJwt(f, "carol", ["sre"], ["otp"]));
      const eve = asOperator(d, await operatorJwt(f, "eve", ["dev"], ["otp"]));
      const noMfa = asOperator(d, await operatorJwt(f, "frank", ["sre"], ["pwd"]));
      const token = operatorFetch(d);
      const approve = async (who: typeof alice, id: string) => {
        const r = await who(`/approvals/${id}/approve`, { method: "POST", body: "{}" });
        return { status: r.status, body: await r.json() as Record<string, unknown> };
      };
      const pendingFor = async (file: string) => {
        const started = await call(ci, "exec_start", {
          command: ["touch", file],
          mode: "background",
        });
        const id = String(started.approval_id ?? "");
        assert.match(id, /^apr_/, JSON.stringify(started));
        return { job: String(started.job_id), approval: id };
      };

      await t.step("only eligible, distinct approvers count; the second makes it run", async () => {
        const { job, approval } = await pendingFor(`${dir}/a`);
        let r = await approve(alice, approval);
        assert.equal(r.status, 403, "the requester (alice) is excluded");
        assert.match(
          String((r.body.error as { message: string }).message),
          /excludes the requester/,
        );
        r = await approve(eve, approval);
        assert.equal(r.status, 403, "eve has no sre role");
        r = await approve(noMfa, approval);
        assert.equal(r.status, 403, "frank signed in without a second factor");
        r = await approve(token, approval);
        assert.equal(r.status, 403, "the static token holds no role here");
        r = await approve(bob, approval);
        assert.equal(r.status, 200);
        assert.deepEqual([r.body.status, r.body.votes, r.body.quorum], ["pending", 1, 2]);
        r = await approve(bob, approval);
        assert.equal(r.status, 403, "bob cannot vote twice");
        await assert.rejects(Deno.stat(`${dir}/a`), "nothing ran on one vote");
        r = await approve(carol, approval);
        assert.equal(r.status, 200);
        assert.equal(r.body.status, "approved");
        const done = await call(ci, "exec_poll", { job_id: job, wait_ms: 10_000 });
        assert.equal(done.status, "exited", JSON.stringify(done));
        assert.ok((await Deno.stat(`${dir}/a`)).isFile);
        const resolved = (await auditEvents(d, "approval.resolved")).find((x) =>
          x.approval_id === approval
        )!;
        assert.deepEqual(resolved.approvers, ["bob", "carol"]);
        const votes = (await auditEvents(d, "approval.vote")).filter((x) =>
          x.approval_id === approval
        );
        assert.deepEqual(votes.map((v) => [v.principal, v.amr]), [["bob", ["hwk"]], ["carol", [
          "otp",
        ]]]);
      });

      await t.step(
        "a policy changed between request and approval is refused at consume",
        async () => {
          const { job, approval } = await pendingFor(`${dir}/b`);
          assert.equal((await approve(bob, approval)).body.status, "pending");
          await Deno.writeTextFile(`${f.home}/config.yaml`, config(f.home, "deny"));
          const reload = await termada(f.home, ["policy", "reload"]);
          assert.equal(reload.code, 0, reload.stderr);
          const r = await approve(carol, approval);
          assert.equal(r.status, 403, JSON.stringify(r.body));
          assert.match(String((r.body.error as { message: string }).message), /now denies/);
          const done = await call(ci, "exec_poll", { job_id: job, wait_ms: 5000 });
          assert.equal(done.status, "denied");
          await assert.rejects(Deno.stat(`${dir}/b`));
          assert.ok(
            (await auditEvents(d, "approval.consume_refused")).some((x) =>
              x.approval_id === approval
            ),
          );
        },
      );

      await t.step("at most pending_per_owner requests wait per agent", async () => {
        await Deno.writeTextFile(`${f.home}/config.yaml`, config(f.home, "confirm"));
        assert.equal((await termada(f.home, ["policy", "reload"])).code, 0);
        for (let i = 0; i < 3; i++) await pendingFor(`${dir}/q${i}`);
        const r = await ci.callTool({
          name: "exec_start",
          arguments: { command: ["touch", `${dir}/q3`] },
        });
        assert.equal(r.isError, true);
        assert.equal(
          (r.structuredContent as { error: { code: string } }).error.code,
          "QUOTA_EXCEEDED",
        );
      });
    } finally {
      await ci.close();
      await Deno.remove(dir, { recursive: true });
    }
  } finally {
    await Deno.remove(f.home, { recursive: true });
  }
});

Deno.test("budgets refuse beyond their limit; a crash between intent and outcome is outcome_unknown, then reconciled", async (t) => {
  const f = await fixture();
  await Deno.writeTextFile(`${f.home}/config.yaml`, config(f.home, "confirm", 3));
  try {
    let jobId = "";
    {
      await using d = await startDaemon(f.home);
      const bot = await httpClient(d, AGENT_TOKEN);
      try {
        await t.step("the fourth operation of principal dave is BUDGET_EXCEEDED", async () => {
          for (let i = 0; i < 2; i++) {
            const r = await call(bot, "exec_run", { command: ["true"] });
            assert.equal(r.exit_code, 0, JSON.stringify(r));
          }
          const started = await call(bot, "exec_start", {
            command: ["sleep", "30"],
            mode: "background",
          });
          jobId = String(started.job_id);
          const r = await bot.callTool({ name: "exec_run", arguments: { command: ["true"] } });
          assert.equal(r.isError, true);
          const e = (r.structuredContent as {
            error: { code: string; details: Record<string, unknown> };
          }).error;
          assert.equal(e.code, "BUDGET_EXCEEDED");
          assert.equal(e.details.scope_key, "principal:dave");
          assert.equal(e.details.limit, 3);
          assert.match(String(e.details.reset_at), /^\d{4}-/);
        });
      } finally {
        await bot.close();
      }
      // A crash: no outcome is written for the sleeping job.
      d.proc.kill("SIGKILL");
      await d.proc.status;
    }
    await using d2 = await startDaemon(f.home);
    await t.step("after the restart the job's action is outcome_unknown", async () => {
      const r = await termada(f.home, ["reconcile", "--json"]);
      assert.equal(r.code, 0, r.stderr);
      const list = JSON.parse(r.stdout) as { id: string; state: string }[];
      assert.ok(list.some((a) => a.id === jobId && a.state === "outcome_unknown"), r.stdout);
    });
    await t.step("an operator reconciles it; a second reconcile is refused", async () => {
      const r = await termada(f.home, [
        "reconcile",
        jobId,
        "--failed",
        "--note",
        "killed by the crash",
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /Reconciled .*failed/);
      const again = await termada(f.home, ["reconcile", jobId, "--failed", "--note", "x"]);
      assert.notEqual(again.code, 0);
      const rec = (await auditEvents(d2, "action.reconciled")).find((x) => x.action_id === jobId);
      assert.equal(rec?.state, "failed");
    });
    await t.step("an anchor on demand; the chain and every anchor verify offline", async () => {
      const a = await termada(f.home, ["audit", "anchor", "--json"]);
      assert.equal(a.code, 0, a.stderr);
      const anchor = JSON.parse(a.stdout) as { seq: number; sig: string };
      assert.ok(anchor.seq > 0 && anchor.sig.length > 40, a.stdout);
      await d2.stop();
      const v = await termada(f.home, ["audit", "verify", "--anchors", "--json"]);
      assert.equal(v.code, 0, v.stdout + v.stderr);
      const r = JSON.parse(v.stdout) as { ok: boolean; anchors: { ok: boolean; anchors: number } };
      assert.equal(r.anchors.ok, true);
      // The ones made at each stop and the one asked for.
      assert.ok(r.anchors.anchors >= 2, v.stdout);
    });
  } finally {
    await Deno.remove(f.home, { recursive: true });
  }
});
