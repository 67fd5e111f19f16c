/**
 * Black-box tests of remote servers: a real daemon, the official MCP SDK client over the stdio
 * shim, and real OpenSSH `sshd` instances on 127.0.0.1 (src/remote/_test_sshd.ts). The daemon's
 * HOME holds the test client key as ~/.ssh/id_ed25519 (the default-key path), no ssh-agent.
 */
import assert from "node:assert/strict";
import { call, homeWithConfig, operatorFetch, startDaemon, stdioClient } from "./_daemon.ts";
import { denoDir, pollUntil } from "./_clients.ts";
import { clientHome, freePort, sshdAvailable, TestSshd } from "../src/remote/_test_sshd.ts";

const ignore = !sshdAvailable();

const sshHome = (sshd: TestSshd) => clientHome(sshd);

function serverYaml(name: string, port: number, tags: string[] = []): string {
  return `  - name: ${name}\n    host: 127.0.0.1\n    port: ${port}\n    user: ${
    Deno.env.get("USER") ?? "root"
  }\n    tags: [${tags.join(", ")}]\n`;
}

const DENO_DIR = await denoDir();
const env = (home: string) => ({ HOME: home, SSH_AUTH_SOCK: "", DENO_DIR });

interface Err {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

Deno.test({
  name: "a session on a server keeps cwd and env, gives exact exit codes and answers prompts",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const state = await homeWithConfig(`servers:\n${serverYaml("box", sshd.port, ["web"])}`);
    await using _d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));

    const list = await call(c, "server_list", {});
    assert.deepEqual((list.servers as { name: string }[]).map((s) => s.name), ["box"]);

    const s = await call(c, "session_create", { target: "box" });
    assert.equal(s.target, "box", JSON.stringify(s));
    const sid = s.session_id as string;
    const run = (command: string[]) => call(c, "exec_run", { session_id: sid, command });

    const a = await run(["cd /tmp && export TM_X=42"]);
    assert.equal(a.status, "exited", JSON.stringify(a));
    assert.equal(a.exit_code, 0);
    const b = await run(["pwd; echo $TM_X"]);
    assert.equal(b.output, "/tmp\n42\n");
    assert.equal(b.cwd, "/tmp");
    const e = await run(["sh", "-c", "exit 7"]);
    assert.equal(e.exit_code, 7);

    const p = await run(["read -p 'name? ' n; echo \"hi $n\""]);
    assert.equal(p.status, "awaiting_input", JSON.stringify(p));
    await call(c, "exec_write", { job_id: p.job_id, input: "bob" });
    const w = await call(c, "exec_wait", {
      job_id: p.job_id,
      until: { exit: true },
      timeout_ms: 10_000,
    });
    assert.match(w.output as string, /hi bob/);

    // A background job beside the session runs on the server too, in its cwd.
    const bg = await call(c, "exec_run", {
      session_id: sid,
      mode: "background",
      command: ["pwd; echo bg; exit 3"],
    });
    const bgw = await call(c, "exec_wait", {
      job_id: bg.job_id,
      until: { exit: true },
      timeout_ms: 15_000,
    });
    assert.equal(bgw.exit_code, 3, JSON.stringify(bgw));
    assert.match(bgw.output as string, /^\/tmp\r?\nbg/);
    const bgLong = await call(c, "exec_start", {
      session_id: sid,
      mode: "background",
      command: ["sleep", "300"],
    });
    const bgk = await call(c, "exec_kill", { job_id: bgLong.job_id, grace_ms: 300 });
    assert.equal(bgk.status, "killed", JSON.stringify(bgk));
    const screen = await call(c, "session_screen", { session_id: sid });
    assert.ok((screen.lines as string[]).some((l) => l.includes("hi bob")), JSON.stringify(screen));

    // The host key was recorded on first contact.
    const kh = Deno.readTextFileSync(`${state}/known_hosts`);
    assert.match(kh, new RegExp(`^\\[127\\.0\\.0\\.1\\]:${sshd.port} ssh-ed25519 `, "m"));
    const after = await call(c, "server_list", {});
    assert.equal((after.servers as { reachable?: boolean }[])[0]!.reachable, true);

    // kill is best effort and says so.
    const long = await call(c, "exec_start", { session_id: sid, command: ["sleep", "300"] });
    const k = await call(c, "exec_kill", { job_id: long.job_id, grace_ms: 300 });
    assert.equal(k.status, "killed", JSON.stringify(k));
    const again = await pollUntil(
      async () => {
        const r = await call(c, "exec_run", { session_id: sid, command: ["echo", "back"] });
        return r.status === "exited" ? r : undefined;
      },
      "the session takes commands after a kill",
      20_000,
    );
    assert.equal(again.output, "back\n");
  },
});

Deno.test({
  name: "a dropped link orphans the running job and the session reconnects with a fresh shell",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const state = await homeWithConfig(`servers:\n${serverYaml("box", sshd.port)}`);
    await using _d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));
    const sid = (await call(c, "session_create", { target: "box" })).session_id as string;
    await call(c, "exec_run", { session_id: sid, command: ["cd /tmp"] });
    const job = await call(c, "exec_start", { session_id: sid, command: ["sleep", "300"] });
    await sshd.dropConnections();
    const w = await call(c, "exec_wait", {
      job_id: job.job_id,
      until: { exit: true },
      timeout_ms: 30_000,
    });
    assert.equal(w.status, "orphaned", JSON.stringify(w));
    assert.match(w.reason as string, /may still run/);
    const r = await pollUntil(
      async () => {
        const x = await call(c, "exec_run", { session_id: sid, command: ["pwd"] });
        return x.status === "exited" ? x : undefined;
      },
      "the session comes back",
      30_000,
    );
    assert.match(r.notice as string, /fresh shell/);
    assert.notEqual(r.output, "/tmp\n");
    const sessions = (await call(c, "session_list", {})).sessions as {
      session_id: string;
      link?: { reconnects: number };
    }[];
    assert.equal(sessions.find((x) => x.session_id === sid)?.link?.reconnects, 1);
  },
});

Deno.test({
  name: "unknown and unreachable servers are typed errors, fast",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const down = freePort();
    const state = await homeWithConfig(`servers:\n${serverYaml("down", down)}`);
    await using _d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));
    const u = await call(c, "session_create", { target: "nope" }) as unknown as Err;
    assert.equal(u.error.code, "NOT_FOUND");
    const t0 = Date.now();
    const d = await call(c, "session_create", { target: "down" }) as unknown as Err;
    assert.equal(d.error.code, "SERVER_UNREACHABLE", JSON.stringify(d));
    assert.ok(Date.now() - t0 < 5000, "refused fast");
    const l = await call(c, "server_list", {});
    assert.equal((l.servers as { reachable?: boolean }[])[0]!.reachable, false);
  },
});

Deno.test({
  name: "a changed host key is refused naming both fingerprints",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const state = await homeWithConfig(`servers:\n${serverYaml("box", sshd.port)}`);
    // Another key on record for this host:port.
    await using other = await TestSshd.start();
    const pub = Deno.readTextFileSync(`${other.hostKeyPath}.pub`).trim().split(/\s+/);
    Deno.writeTextFileSync(
      `${state}/known_hosts`,
      `[127.0.0.1]:${sshd.port} ${pub[0]} ${pub[1]}\n`,
    );
    await using _d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));
    const r = await call(c, "session_create", { target: "box" }) as unknown as Err;
    assert.equal(r.error.code, "SERVER_UNREACHABLE", JSON.stringify(r));
    assert.match(r.error.message, /changed/);
    const hk = r.error.details?.host_key as { known: string; offered: string };
    assert.match(hk.known, /^SHA256:/);
    assert.notEqual(hk.known, hk.offered);
  },
});

Deno.test({
  name: "fleet_run over three servers with one down: per-target results, one decision, audited",
  ignore,
  async fn() {
    await using a = await TestSshd.start();
    await using b = await TestSshd.start({ dir: undefined });
    await using gone = await TestSshd.start();
    // b and gone must accept the same client key: give them a's.
    const authorized = Deno.readTextFileSync(`${a.clientKeyPath}.pub`);
    for (const s of [b, gone]) Deno.writeTextFileSync(`${s.dir}/authorized_keys`, authorized);
    await gone.stop();
    const home = sshHome(a);
    const state = await homeWithConfig(
      `servers:\n${serverYaml("web1", a.port, ["web"])}${serverYaml("web2", b.port, ["web"])}${
        serverYaml("web3", gone.port, ["web"])
      }`,
    );
    await using _d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));
    const r = await call(c, "fleet_run", {
      command: ["sh", "-c", "printf '%s\\n' \"$0\"; exit 5", "a b$c"],
      tags: ["web"],
    });
    const t = r.targets as { server: string; status: string; exit_code?: number; output: string }[];
    assert.deepEqual(t.map((x) => x.server), ["web1", "web2", "web3"], JSON.stringify(r));
    for (const x of t.slice(0, 2)) {
      assert.equal(x.status, "exited");
      assert.equal(x.exit_code, 5);
      assert.equal(x.output, "a b$c\n");
    }
    assert.equal(t[2]!.status, "unreachable");
    assert.deepEqual(r.summary, { total: 3, ok: 0, failed: 2, unreachable: 1 });
    const tooMany = await call(c, "fleet_run", {
      command: ["true"],
      servers: Array.from({ length: 257 }, (_, i) => `s${i}`),
    }) as unknown as Err;
    assert.equal(tooMany.error.code, "INVALID_ARGUMENT");
    // The audit has one intent and three per-target records for the call.
    const log = await auditText(state);
    assert.equal(count(log, `"action.requested"`), 1);
    assert.equal(count(log, `"fleet.target"`), 3);
  },
});

Deno.test({
  name:
    "port_forward reaches a loopback HTTP server behind sshd; other agents cannot see or close it",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const state = await homeWithConfig(`servers:\n${serverYaml("box", sshd.port)}`);
    const ac = new AbortController();
    const http = Deno.serve(
      { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
      () => new Response("behind sshd"),
    );
    try {
      await using d = await startDaemon(state, { env: env(home) });
      await using c = await stdioClient(state, ["--agent", "dev"], env(home));
      await using other = await stdioClient(state, ["--agent", "other"], env(home));
      const f = await call(c, "port_forward", {
        server: "box",
        remote_host: "127.0.0.1",
        remote_port: http.addr.port,
      });
      const res = await fetch(`http://127.0.0.1:${f.local_port}/`);
      assert.equal(await res.text(), "behind sshd");
      const theirs = await call(other, "port_forward_list", {});
      assert.deepEqual(theirs.forwards, []);
      const steal = await call(other, "port_forward_close", {
        forward_id: f.forward_id,
      }) as unknown as Err;
      assert.equal(steal.error.code, "NOT_FOUND");
      const closed = await call(c, "port_forward_close", { forward_id: f.forward_id });
      assert.equal(closed.state, "closed");
      await assert.rejects(fetch(`http://127.0.0.1:${f.local_port}/`));
      // An operator closes any agent's forward (and sees every owner's).
      const g = await call(c, "port_forward", {
        server: "box",
        remote_host: "127.0.0.1",
        remote_port: http.addr.port,
      });
      const op = operatorFetch(d);
      const all = await (await op("/forwards")).json() as {
        forwards: { forward_id: string; owner: string }[];
      };
      assert.deepEqual(all.forwards.map((x) => [x.forward_id, x.owner]), [[g.forward_id, "dev"]]);
      const shut = await op(`/forwards/${g.forward_id}/close`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      assert.equal(shut.status, 200, await shut.text());
      assert.deepEqual((await call(c, "port_forward_list", {})).forwards, []);
    } finally {
      ac.abort();
      await http.finished;
    }
  },
});

Deno.test({
  name: "file_read and file_write in a session on a server go over SFTP, relative to its cwd",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const dir = await Deno.makeTempDir({ prefix: "termada-remote-files-" });
    const state = await homeWithConfig(`servers:\n${serverYaml("box", sshd.port)}`);
    try {
      await using _d = await startDaemon(state, { env: env(home) });
      await using c = await stdioClient(state, ["--agent", "dev"], env(home));
      const sid = (await call(c, "session_create", { target: "box", cwd: dir })).session_id;
      const w = await call(c, "file_write", {
        session_id: sid,
        path: "note.txt",
        content: "über\n",
      });
      assert.equal(w.target, "box", JSON.stringify(w));
      assert.equal(w.path, `${dir}/note.txt`);
      // The server's disk (here the same machine) holds it.
      assert.equal(Deno.readTextFileSync(`${dir}/note.txt`), "über\n");
      const r = await call(c, "file_read", { session_id: sid, path: "note.txt" });
      assert.equal(r.content, "über\n");
      assert.equal(r.sha256, w.sha256);
      const cat = await call(c, "exec_run", { session_id: sid, command: ["cat", "note.txt"] });
      assert.equal(cat.output, "über\n");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "policy on each remote path: deny refuses, confirm waits for an operator naming the targets",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const state = await homeWithConfig(`servers:
${serverYaml("prod", sshd.port, ["prod"])}${serverYaml("staging", sshd.port)}
policies:
  default:
    deny: ["shutdown *"]
    servers:
      confirm: ["tag:prod"]
    forwards:
      deny: ["*:*:22"]
      allow: ["staging:127.0.0.1:*"]
    files:
      read:
        allow: ["/tmp/**"]
      write:
        deny: ["/etc/**"]
        allow: ["/tmp/**"]
approvals:
  confirm_timeout_ms: 30000
`);
    await using d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));
    const code = async (tool: string, args: Record<string, unknown>) =>
      ((await call(c, tool, args)) as unknown as Err).error?.code;
    assert.equal(
      await code("fleet_run", { command: ["shutdown", "now"], servers: ["staging"] }),
      "DENIED_BY_POLICY",
    );
    assert.equal(
      await code("port_forward", { server: "staging", remote_host: "127.0.0.1", remote_port: 22 }),
      "DENIED_BY_POLICY",
    );
    assert.equal(
      await code("port_forward", { server: "staging", remote_host: "10.1.1.1", remote_port: 80 }),
      "DENIED_BY_POLICY",
    );
    assert.equal(
      await code("file_write", { path: "/etc/termada-x", content: "x" }),
      "DENIED_BY_POLICY",
    );
    assert.equal(await code("file_read", { path: "/etc/hostname" }), "DENIED_BY_POLICY");

    // A session on prod needs an operator: the call waits; the approval names the server.
    const op = operatorFetch(d);
    const pendingSession = call(c, "session_create", { target: "prod" });
    const apr = await pollUntil(
      async () => {
        const list = await (await op("/approvals")).json() as {
          approvals: { approval_id: string; command: string[]; action?: { kind: string } }[];
        };
        return list.approvals.find((x) => x.action?.kind === "session");
      },
      "the session approval is pending",
      15_000,
    );
    assert.ok(apr.command.includes("prod"), JSON.stringify(apr));
    const ok = await op(`/approvals/${apr.approval_id}/approve`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(ok.status, 200, await ok.text());
    const s = await pendingSession;
    assert.equal(s.target, "prod", JSON.stringify(s));

    // A fleet call over prod asks once for the whole call; denied, nothing runs.
    const pendingFleet = call(c, "fleet_run", {
      command: ["touch", "/tmp/termada-fleet-x"],
      tags: ["prod"],
    });
    const apr2 = await pollUntil(
      async () => {
        const list = await (await op("/approvals")).json() as {
          approvals: { approval_id: string; command: string[]; action?: { kind: string } }[];
        };
        return list.approvals.find((x) => x.action?.kind === "fleet");
      },
      "the fleet approval is pending",
      15_000,
    );
    assert.ok(apr2.command.includes("prod"));
    const no = await op(`/approvals/${apr2.approval_id}/deny`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ reason: "not now" }),
    });
    assert.equal(no.status, 200, await no.text());
    const denied = await pendingFleet as unknown as Err;
    assert.equal(denied.error.code, "DENIED_BY_POLICY");
    assert.match(denied.error.message, /not now/);
  },
});

async function auditText(state: string): Promise<string> {
  let out = "";
  for await (const e of Deno.readDir(`${state}/audit`)) {
    if (e.isFile) out += await Deno.readTextFile(`${state}/audit/${e.name}`);
  }
  return out;
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

Deno.test("file policy decides where a path really leads: a symlink cannot carry a write out of an allowed directory", async () => {
  const allowed = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-allowed-" }));
  const other = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-other-" }));
  try {
    Deno.symlinkSync(other, `${allowed}/link`);
    Deno.writeTextFileSync(`${other}/secret.txt`, "s3cret");
    const state = await homeWithConfig(`policies:
  default:
    deny: ["shutdown *"]
    files:
      read:
        allow: ["${allowed}/**"]
      write:
        allow: ["${allowed}/**"]
`);
    await using _d = await startDaemon(state, { env: { DENO_DIR } });
    await using c = await stdioClient(state, ["--agent", "dev"], { DENO_DIR });
    const w = await call(c, "file_write", {
      path: `${allowed}/link/x.txt`,
      content: "x",
    }) as unknown as Err;
    assert.equal(w.error?.code, "DENIED_BY_POLICY", JSON.stringify(w));
    assert.throws(() => Deno.statSync(`${other}/x.txt`), Deno.errors.NotFound);
    const r = await call(c, "file_read", { path: `${allowed}/link/secret.txt` }) as unknown as Err;
    assert.equal(r.error?.code, "DENIED_BY_POLICY", JSON.stringify(r));
    const ok = await call(c, "file_write", { path: `${allowed}/y.txt`, content: "y" });
    assert.equal(ok.size, 1, JSON.stringify(ok));
  } finally {
    await Deno.remove(allowed, { recursive: true });
    await Deno.remove(other, { recursive: true });
  }
});

Deno.test("file tools never reach Termada's own control plane, even with a policy that allows everything", async () => {
  const state = await homeWithConfig("");
  await using _d = await startDaemon(state, { env: { DENO_DIR } });
  await using c = await stdioClient(state, ["--agent", "dev"], { DENO_DIR });
  for (const path of [`${state}/token`, `${state}/config.yaml`, `${state}/termada.db`]) {
    const r = await call(c, "file_read", { path }) as unknown as Err;
    assert.equal(r.error?.code, "DENIED_BY_POLICY", `${path}: ${JSON.stringify(r)}`);
    assert.match(r.error.message, /control plane/);
  }
  const w = await call(c, "file_write", {
    path: `${state}/config.yaml`,
    content: "x: 1\n",
  }) as unknown as Err;
  assert.equal(w.error?.code, "DENIED_BY_POLICY");
  assert.notEqual(Deno.readTextFileSync(`${state}/config.yaml`), "x: 1\n");
  // Through a symlink placed elsewhere, too.
  const dir = await Deno.makeTempDir();
  try {
    Deno.symlinkSync(`${state}/token`, `${dir}/t`);
    const l = await call(c, "file_read", { path: `${dir}/t` }) as unknown as Err;
    assert.equal(l.error?.code, "DENIED_BY_POLICY");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "an operator takes over a session on a server: agents are held off, typed commands run there",
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = sshHome(sshd);
    const state = await homeWithConfig(`servers:\n${serverYaml("box", sshd.port)}`);
    await using d = await startDaemon(state, { env: env(home) });
    await using c = await stdioClient(state, ["--agent", "dev"], env(home));
    const sid = (await call(c, "session_create", { target: "box" })).session_id as string;
    const op = operatorFetch(d);
    const post = async (path: string, body: unknown) => {
      const r = await op(path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await r.text();
      assert.equal(r.status, 200, `${path}: ${text}`);
      return JSON.parse(text);
    };
    await post(`/sessions/${sid}/takeover`, {});
    const busy = await call(c, "exec_run", {
      session_id: sid,
      command: ["echo", "agent"],
    }) as unknown as Err;
    assert.equal(busy.error.code, "SESSION_BUSY", JSON.stringify(busy));
    await post(`/sessions/${sid}/input`, { data: "echo typed-by-$((40+2))\r" });
    // The operator's command becomes a job of the session, with its output.
    const job = await pollUntil(
      async () => {
        const jobs = (await (await op("/jobs")).json()) as {
          jobs: { job_id: string; session_id: string; status: string; owner: string }[];
        };
        return jobs.jobs.find((j) =>
          j.session_id === sid && j.owner.startsWith("operator:") && j.status === "exited"
        );
      },
      "the operator's command ran on the server",
      15_000,
    );
    const out = await (await op(`/jobs/${job.job_id}/output`)).json() as { output: string };
    assert.match(out.output, /typed-by-42/);
    await post(`/sessions/${sid}/release`, {});
    const back = await call(c, "exec_run", { session_id: sid, command: ["echo", "agent"] });
    assert.equal(back.output, "agent\n", JSON.stringify(back));
  },
});
