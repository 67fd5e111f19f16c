/**
 * Black-box tests of the daemon: `termada serve` and `termada serve --stdio` run as real
 * processes in a temporary TERMADA_HOME, driven by the MCP SDK client.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { TOOLS } from "../src/mcp/mod.ts";
import {
  call,
  homeWithConfig,
  lockPid,
  operatorFetch,
  startDaemon,
  stdioClient,
  tempHome,
  termada,
  waitGone,
} from "./_daemon.ts";

Deno.test("serve starts on embedded defaults, refuses a second daemon and stops on SIGTERM", async () => {
  const home = await tempHome();
  try {
    await using d = await startDaemon(home);
    const banner = d.stderr();
    assert.match(banner, /claude mcp add --scope user termada -- termada serve --stdio/);
    assert.match(banner, /"mcpServers"/);
    assert.match(banner, /Dashboard\s+http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}/);
    assert.equal(Deno.statSync(home).mode! & 0o777, 0o700);
    assert.equal(Deno.statSync(d.socketPath).mode! & 0o777, 0o600);
    const health = await fetch(`http://127.0.0.1:${d.port}/healthz`);
    assert.equal((await health.json()).ok, true);
    const pageUrl = /Dashboard\s+(\S+)/.exec(banner)![1]!;
    const page = await fetch(pageUrl);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<script[^>]+src=/);
    // The page is public; the data behind it needs the token.
    const noToken = await fetch(`http://127.0.0.1:${d.port}/api/status`);
    assert.equal(noToken.status, 401);
    await noToken.body?.cancel();
    const token = new URL(pageUrl).searchParams.get("token")!;
    const status = await fetch(`http://127.0.0.1:${d.port}/api/status`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal((await status.json()).stopped, false);

    const second = await termada(home, ["serve", "--bind", "127.0.0.1:0"]);
    assert.notEqual(second.code, 0);
    assert.match(second.stderr, /Another Termada daemon is already running \(pid \d+\)/);

    assert.equal(await d.stop(), 0);
    assert.throws(() => Deno.statSync(d.socketPath), Deno.errors.NotFound);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test(
  "two agents share one daemon through stdio shims and see only their own jobs",
  async () => {
    const home = await tempHome();
    try {
      await using d = await startDaemon(home);
      await using alice = await stdioClient(home, ["--agent", "alice"]);
      await using bob = await stdioClient(home, ["--agent", "bob"]);
      const tools = await alice.listTools();
      assert.equal(tools.tools.length, TOOLS.length);
      const r = await call(alice, "exec_run", { command: ["cd /tmp && echo from-alice"] });
      assert.equal(r.output, "from-alice\n");
      assert.equal((await call(alice, "exec_run", { command: ["pwd"] })).output, "/tmp\n");
      const peek = await call(bob, "exec_poll", { job_id: r.job_id });
      assert.equal((peek.error as { code: string }).code, "NOT_FOUND");
      assert.deepEqual((await call(bob, "session_list", {})).sessions, []);
      const caps = await call(bob, "capabilities", {});
      assert.equal(caps.agent, "bob");
      void d;
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
);

Deno.test("the stdio shim starts the daemon when none runs", async () => {
  const home = await tempHome();
  // Any free port: a real daemon may hold the default 7717 on a developer's machine.
  await Deno.writeTextFile(`${home}/config.yaml`, "server:\n  bind: 127.0.0.1:0\n");
  let pid: number | undefined;
  try {
    {
      await using client = await stdioClient(home, ["--agent", "solo"]);
      const r = await call(client, "exec_run", { command: ["echo", "auto-started"] });
      assert.equal(r.output, "auto-started\n");
      pid = lockPid(home);
      assert.ok(pid, "the daemon holds the lock");
    }
    // The daemon outlives the shim: a second client finds the same session.
    await using again = await stdioClient(home, ["--agent", "solo"]);
    assert.equal(((await call(again, "session_list", {})).sessions as unknown[]).length, 1);
    assert.equal(lockPid(home), pid);
  } finally {
    if (pid) {
      Deno.kill(pid, "SIGTERM");
      await waitGone(pid);
    }
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test(
  "after a crash, running jobs are orphaned and their output is still pageable",
  async () => {
    const home = await tempHome();
    try {
      let jobId: string;
      let finishedId: string;
      {
        const d = await startDaemon(home);
        try {
          await using c = await stdioClient(home, ["--agent", "crashy"]);
          finishedId = (await call(c, "exec_run", { command: ["echo", "finished-before"] }))
            .job_id as string;
          const s = await call(c, "exec_start", {
            command: ["for i in 1 2 3; do echo before-crash-$i; done; sleep 300"],
          });
          jobId = s.job_id as string;
          const w = await call(c, "exec_wait", {
            job_id: jobId,
            until: { pattern: "before-crash-3" },
            timeout_ms: 10_000,
          });
          assert.equal(w.matched, "pattern");
          // Give the spool writer a moment past the match is not needed: appends are synchronous.
        } finally {
          d.proc.kill("SIGKILL");
          await d.proc.status;
          await d.stop();
        }
      }
      await using d2 = await startDaemon(home);
      assert.match(d2.stderr(), /recovered after an unclean stop/);
      await using c2 = await stdioClient(home, ["--agent", "crashy"]);
      const list = (await call(c2, "exec_list", { filter: "all" })).jobs as {
        job_id: string;
        status: string;
      }[];
      assert.equal(list.find((j) => j.job_id === jobId)?.status, "orphaned");
      assert.equal(list.find((j) => j.job_id === finishedId)?.status, "exited");
      const p = await call(c2, "exec_poll", { job_id: jobId });
      assert.equal(p.status, "orphaned");
      assert.match(String(p.reason), /daemon stopped/);
      assert.equal(p.output, "before-crash-1\nbefore-crash-2\nbefore-crash-3\n");
      assert.equal(p.has_more, false);
      const f = await call(c2, "exec_poll", { job_id: finishedId });
      assert.equal(f.output, "finished-before\n");
      assert.equal(f.exit_code, 0);
      // Another agent still cannot see them.
      await using other = await stdioClient(home, ["--agent", "other"]);
      assert.equal(
        ((await call(other, "exec_poll", { job_id: jobId })).error as { code: string }).code,
        "NOT_FOUND",
      );
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  },
);

Deno.test("TCP needs an agent token from the config, with ${ENV} expansion", async () => {
  const home = await tempHome();
  const token = "t0ken-" + crypto.randomUUID();
  try {
    await Deno.writeTextFile(
      `${home}/config.yaml`,
      `agents:\n  ci:\n    token: "\${CI_AGENT_TOKEN}"\n    name: CI bot\n`,
    );
    await using d = await startDaemon(home, { env: { CI_AGENT_TOKEN: token } });
    const url = `http://127.0.0.1:${d.port}/mcp`;
    const anon = await fetch(url, { method: "POST", body: "{}" });
    assert.equal(anon.status, 401);
    assert.equal((await anon.json()).error.code, "UNAUTHORIZED");
    const client = new Client({ name: "ci", version: "1" });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    });
    await client.connect(transport);
    try {
      const r = await call(client, "exec_run", { command: ["echo", "over tcp"] });
      assert.equal(r.output, "over tcp\n");
      assert.equal((await call(client, "capabilities", {})).agent, "ci");
    } finally {
      await client.close();
    }
    // The configured id cannot be claimed without its token over the socket either.
    await assert.rejects(
      () => stdioClient(home, ["--agent", "ci"], { CI_AGENT_TOKEN: token }),
      /has a token: present it/,
    );
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("startup errors: unknown config key with its line, unset variable, busy port", async (t) => {
  const home = await tempHome();
  try {
    await t.step("unknown key", async () => {
      await Deno.writeTextFile(`${home}/config.yaml`, "server:\n  bind: 127.0.0.1:0\n  bnd: x\n");
      const r = await termada(home, ["serve"]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /line 3: unknown key "server\.bnd"/);
    });
    await t.step("unset variable", async () => {
      await Deno.writeTextFile(
        `${home}/config.yaml`,
        'agents:\n  x:\n    token: "${NOPE_UNSET_VAR}"\n',
      );
      const r = await termada(home, ["serve"]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /NOPE_UNSET_VAR/);
    });
    await t.step("busy port", async () => {
      await Deno.remove(`${home}/config.yaml`);
      using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (listener.addr as Deno.NetAddr).port;
      const r = await termada(home, ["serve", "--bind", `127.0.0.1:${port}`]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, new RegExp(`Cannot listen on 127\\.0\\.0\\.1:${port}`));
      assert.throws(() => Deno.statSync(`${home}/termada.sock`), Deno.errors.NotFound);
    });
    await t.step("non-loopback bind", async () => {
      const r = await termada(home, ["serve", "--bind", "0.0.0.0:7717"]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /loopback/);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("a graceful stop records running jobs as killed and they stay listed", async () => {
  const home = await tempHome();
  try {
    let jobId: string;
    {
      await using d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "grace"]);
      jobId = (await call(c, "exec_start", { command: ["echo started; sleep 300"] }))
        .job_id as string;
      await call(c, "exec_wait", {
        job_id: jobId,
        until: { pattern: "started" },
        timeout_ms: 5000,
      });
      assert.equal(await d.stop(), 0);
    }
    await using d2 = await startDaemon(home);
    assert.doesNotMatch(d2.stderr(), /recovered after an unclean stop/);
    await using c2 = await stdioClient(home, ["--agent", "grace"]);
    const p = await call(c2, "exec_poll", { job_id: jobId });
    assert.equal(p.status, "killed");
    assert.match(String(p.reason), /shutting down/);
    assert.equal(p.output, "started\n");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("when an agent's shim goes away its sessions are reaped after the grace", async () => {
  const home = await homeWithConfig("sessions:\n  reap_after_ms: 300\n");
  try {
    await using d = await startDaemon(home);
    const api = operatorFetch(d);
    const sessionsOf = async (agent: string) => {
      const r = await api("/sessions");
      const body = await r.json() as { sessions: { owner: string; session_id: string }[] };
      return body.sessions.filter((s) => s.owner === agent);
    };
    {
      await using c = await stdioClient(home, ["--agent", "leaver"]);
      await call(c, "exec_run", { command: ["echo", "hi"] });
      assert.equal((await sessionsOf("leaver")).length, 1);
    }
    const t0 = Date.now();
    while ((await sessionsOf("leaver")).length > 0) {
      if (Date.now() - t0 > 10_000) throw new Error("the gone agent's session was not reaped");
      await new Promise((r) => setTimeout(r, 50));
    }
    const audit = await (await api("/audit?n=50")).json() as { records: { event: string }[] };
    assert.ok(audit.records.some((r) => r.event === "agent.gone"));
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
