/**
 * (k) Remote servers over loopback OpenSSH (a real sshd per server, src/remote/_test_sshd.ts):
 *   - `echo hi` round trip in a session on a server, through the daemon (SDK client over the
 *     MCP socket), vs raw `ssh` with a ControlMaster connection and vs a fresh `ssh host echo`;
 *   - fleet_run of `echo hi` over 3 servers, 100 calls;
 *   - a port forward's throughput (50 MiB download) vs `ssh -L`.
 * Skipped (and said so) when sshd is not installed.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, readSocketKey, SocketClientTransport } from "../src/client/mod.ts";
import { Daemon } from "../src/daemon/mod.ts";
import { clientHome, freePort, sshdAvailable, TestSshd } from "../src/remote/_test_sshd.ts";

type Out = (line: string) => void;

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (n: number) => `${n.toFixed(2)} ms`;

async function ssh(args: string[]): Promise<void> {
  const out = await new Deno.Command("ssh", { args, stdout: "null", stderr: "piped" }).output();
  if (out.code !== 0) {
    throw new Error(`ssh ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

export async function remoteBench(o: { quick: boolean; out: Out }): Promise<void> {
  const { out } = o;
  if (!sshdAvailable()) {
    out("(k) remote: skipped (no /usr/sbin/sshd: apt-get install openssh-server)");
    return;
  }
  const N = o.quick ? 50 : 300;
  const FLEET_CALLS = o.quick ? 20 : 100;
  const MIB = o.quick ? 10 : 50;
  const servers = await Promise.all([TestSshd.start(), TestSshd.start(), TestSshd.start()]);
  const [a, b, c] = servers as [TestSshd, TestSshd, TestSshd];
  const pub = Deno.readTextFileSync(`${a.clientKeyPath}.pub`);
  for (const s of [b, c]) Deno.writeTextFileSync(`${s.dir}/authorized_keys`, pub);
  const home = clientHome(a, "termada-bench-remote-");
  const user = a.user;
  Deno.writeTextFileSync(
    `${home}/config.yaml`,
    "servers:\n" +
      servers.map((s, i) =>
        `  - {name: s${i}, host: 127.0.0.1, port: ${s.port}, user: ${user}, tags: [bench]}\n`
      ).join(""),
  );
  // The peers first: the daemon below runs in this process as a child subreaper, and its reaper
  // would collect the exit of an ssh this process spawns before Deno.Command sees it.
  const http = new AbortController();
  // ── forward throughput ──
  const payload = new Uint8Array(MIB << 20).fill(0x61);
  const srv = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: http.signal, onListen() {} },
    () => new Response(payload),
  );
  const fetchAll = async (port: number) => {
    const t0 = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/`);
    let n = 0;
    for await (const chunk of res.body!) n += chunk.length;
    if (n !== payload.length) throw new Error(`short read ${n}`);
    return payload.length / 1048576 / ((performance.now() - t0) / 1000);
  };
  const base = [
    "-i",
    a.clientKeyPath,
    "-p",
    String(a.port),
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "BatchMode=yes",
  ];
  const cm = `${home}/cm-%p`;
  const master = [
    ...base,
    "-o",
    "ControlMaster=auto",
    "-o",
    `ControlPath=${cm}`,
    "-o",
    "ControlPersist=60",
  ];
  await ssh([...master, `${user}@127.0.0.1`, "true"]);
  const muxed: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await ssh([...master, `${user}@127.0.0.1`, "echo", "hi"]);
    muxed.push(performance.now() - t0);
  }
  await ssh([...master, "-O", "exit", `${user}@127.0.0.1`]).catch(() => {});
  const fresh: number[] = [];
  for (let i = 0; i < Math.max(10, N / 10); i++) {
    const t0 = performance.now();
    await ssh([...base, `${user}@127.0.0.1`, "echo", "hi"]);
    fresh.push(performance.now() - t0);
  }
  const lport = freePort();
  const tunnel = new Deno.Command("ssh", {
    args: [...base, "-N", "-L", `${lport}:127.0.0.1:${srv.addr.port}`, `${user}@127.0.0.1`],
    stdout: "null",
    stderr: "null",
  }).spawn();
  let sshMBs = NaN;
  try {
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        (await Deno.connect({ hostname: "127.0.0.1", port: lport })).close();
        break;
      } catch {
        if (Date.now() > deadline) throw new Error("ssh -L did not listen");
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await fetchAll(lport);
    sshMBs = await fetchAll(lport);
  } finally {
    tunnel.kill("SIGTERM");
    await tunnel.status;
  }
  const daemon = await Daemon.start({
    env: { ...Deno.env.toObject(), HOME: home, SSH_AUTH_SOCK: "" },
    home,
    version: "bench",
    bind: "127.0.0.1:0",
  });
  const client = new Client({ name: "bench-remote", version: "1" });
  try {
    const conn = await connectMcp(daemon.paths.mcpSocketPath);
    if (!conn) throw new Error("no MCP socket");
    const key = readSocketKey(daemon.paths.mcpSocketPath) ?? "";
    await client.connect(new SocketClientTransport(conn, { agent: "bench", key }));
    const call = async (name: string, args: Record<string, unknown>) => {
      const r = await client.callTool({ name, arguments: args });
      if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.structuredContent)}`);
      return r.structuredContent as Record<string, unknown>;
    };

    // ── round trip in a session on a server ──
    const s = await call("session_create", { target: "s0" });
    for (let i = 0; i < 20; i++) {
      await call("exec_run", { session: s.session_id, command: ["echo", "hi"] });
    }
    const ours: number[] = [];
    for (let i = 0; i < N; i++) {
      const t0 = performance.now();
      const r = await call("exec_run", { session: s.session_id, command: ["echo", "hi"] });
      ours.push(performance.now() - t0);
      if (r.output !== "hi\n") throw new Error(`unexpected ${JSON.stringify(r)}`);
    }
    out(
      `(k) remote echo round trip (SDK client → daemon → ssh2 → sshd → warm bash): p50 ${
        ms(pct(ours, 50))
      }, p99 ${ms(pct(ours, 99))} over ${N}`,
    );
    out(
      `    raw ssh with ControlMaster: p50 ${ms(pct(muxed, 50))}, p99 ${ms(pct(muxed, 99))}` +
        ` · fresh ssh per call: p50 ${ms(pct(fresh, 50))} (${
          (pct(muxed, 50) / pct(ours, 50)).toFixed(1)
        }× / ${(pct(fresh, 50) / pct(ours, 50)).toFixed(1)}× slower than ours)`,
    );

    // ── fleet ──
    await call("fleet_run", { command: ["echo", "hi"], tags: ["bench"] });
    const fleet: number[] = [];
    const f0 = performance.now();
    for (let i = 0; i < FLEET_CALLS; i++) {
      const t0 = performance.now();
      const r = await call("fleet_run", { command: ["echo", "hi"], tags: ["bench"] });
      fleet.push(performance.now() - t0);
      const sum = r.summary as { ok: number };
      if (sum.ok !== 3) throw new Error(`fleet: ${JSON.stringify(r).slice(0, 300)}`);
    }
    out(
      `(k) fleet_run echo over 3 servers × ${FLEET_CALLS} calls: ${
        ((performance.now() - f0) / 1000).toFixed(2)
      } s in all, per call p50 ${ms(pct(fleet, 50))}, p99 ${ms(pct(fleet, 99))}`,
    );

    const f = await call("port_forward", {
      server: "s0",
      remote_host: "127.0.0.1",
      remote_port: srv.addr.port,
    });
    await fetchAll(f.local_port as number); // warm-up
    const oursMBs = await fetchAll(f.local_port as number);
    await call("port_forward_close", { forward_id: f.forward_id });
    out(
      `(k) port forward, ${MIB} MiB download: ours ${oursMBs.toFixed(1)} MB/s, ssh -L ${
        sshMBs.toFixed(1)
      } MB/s (ssh2's pure-JS crypto is the gap)`,
    );
  } finally {
    http.abort();
    await client.close().catch(() => {});
    await daemon.stop("bench done");
    for (const s of servers) await s[Symbol.asyncDispose]();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}
