/**
 * `deno task bench`: the engine's figures, side by side with their baselines.
 *   (a) `echo hi` round trip in a warm session vs spawning /bin/true with Deno.Command
 *   (b) `yes | head -c 200000000` through the full job pipeline vs raw PTY reading
 *   (c) 300 concurrent sessions: creation, a command's p99 under load, threads, memory
 *   (d) an MCP exec_run round trip through the daemon over its Unix socket
 *   (e) policy decision time, typical commands and a 10 KB script
 *   (f) audit appends per second, with and without fsync
 *   (g) dashboard keystroke-to-echo latency in headless Chromium, and the bundle size
 *   (h) missions through the daemon: step verification, mission_get, and the evidence report of
 *       a mission with a full timeline; a 50 MB job through the daemon's spool + output hash
 *   (i) what an agent sees (bench/mcp_peer.ts): the SDK client → `termada serve --stdio` → daemon
 *       → warm bash, side by side with the peer `mcp-server-commands`; cold start; 50 agents ×
 *       100 commands, twice, with the daemon's RSS after every client closed
 *   (k) remote servers over loopback sshd (bench/remote_bench.ts): echo round trip vs ssh
 *       ControlMaster and fresh ssh, fleet 3 × 100, forward throughput vs ssh -L
 *   (l) the vault (bench/vault_bench.ts): raw-stream redaction MB/s with 0, 16 and 256 vault
 *       secrets, plain and coloured output; unlock and set, passphrase and identity, vs `age -d`
 *   (m) governance (bench/governance_bench.ts): agent JWT verification, the policy port with 0 and
 *       20 structured rules vs glob lists, budget admit + settle, one-time grants
 * Prints plain lines (median, p99, MB/s, RSS). No thresholds fail here: targets are printed next
 * to the figures. Set BENCH_QUICK=1 for a short smoke run.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { AuditLog } from "../src/audit/mod.ts";
import {
  connectMcp,
  readSocketKey,
  SocketClientTransport,
  socketFetch,
} from "../src/client/mod.ts";
import { Daemon } from "../src/daemon/mod.ts";
import { compilePolicy, decide } from "../src/policy/mod.ts";
import { testRuntime } from "../src/control/_test_util.ts";
import { preloadNative, Pty, readProcFile, sharedPoller } from "../src/pty/mod.ts";
import { dashboardLatency } from "./dashboard_latency.ts";
import { mcpPeerBench } from "./mcp_peer.ts";
import { remoteBench } from "./remote_bench.ts";
import { vaultBench } from "./vault_bench.ts";
import { governanceBench } from "./governance_bench.ts";
import { execGateBench } from "./exec_gate_bench.ts";

preloadNative();
const QUICK = Deno.env.get("BENCH_QUICK") === "1";
const YES_BYTES = QUICK ? 20_000_000 : 200_000_000;
const ROUND_TRIPS = QUICK ? 200 : 2000;
const SESSIONS = QUICK ? 50 : 300;

const out = (line: string) => Deno.stdout.writeSync(new TextEncoder().encode(line + "\n"));

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (n: number) => `${n.toFixed(3)} ms`;

function threads(): number {
  const m = readProcFile("/proc/self/status")?.match(/^Threads:\s+(\d+)/m);
  return m ? Number(m[1]) : NaN;
}
function rssMiB(): number {
  return Deno.memoryUsage().rss / 1048576;
}
function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * A daemon in a throwaway home and an MCP client (agent "bench") over its MCP socket (what the
 * stdio shim relays to), or over its HTTP socket (Streamable HTTP) with `http`.
 */
async function benchDaemon(http = false): Promise<{ client: Client } & AsyncDisposable> {
  const home = await Deno.makeTempDir({ prefix: "termada-bench-home-" });
  const daemon = await Daemon.start({
    env: { ...Deno.env.toObject(), HOME: home },
    home,
    version: "bench",
    bind: "127.0.0.1:0",
  });
  const sock = socketFetch(daemon.paths.socketPath);
  const key = readSocketKey(daemon.paths.mcpSocketPath) ?? "";
  const client = new Client({ name: "bench", version: "1" });
  if (http) {
    await client.connect(
      new StreamableHTTPClientTransport(new URL("http://termada/mcp"), {
        fetch: sock.fetch,
        requestInit: { headers: { "x-termada-agent": "bench", "x-termada-key": key } },
      }),
    );
  } else {
    const conn = await connectMcp(daemon.paths.mcpSocketPath);
    if (!conn) throw new Error("no MCP socket");
    await client.connect(new SocketClientTransport(conn, { agent: "bench", key }));
  }
  return {
    client,
    async [Symbol.asyncDispose]() {
      await client.close();
      sock.close();
      await daemon.stop("bench done");
      await Deno.remove(home, { recursive: true }).catch(() => {});
    },
  };
}

const runtimeDir = await Deno.makeTempDir({ prefix: "termada-bench-" });
const env = { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: runtimeDir, LANG: "C.UTF-8" };
// The real path of a command: control (allow-all policy) → gateway → store row, audit intent
// (fsynced) → engine → warm bash → outcome in one transaction.
const runtime = await testRuntime({
  fsync: true,
  engine: {
    env,
    record: false,
    limits: { sessionsPerOwner: SESSIONS + 8, sessionsTotal: SESSIONS + 16 },
  },
});
const engine = runtime.engine;

out(`termada bench — ${Deno.build.target}, deno ${Deno.version.deno}${QUICK ? " (quick)" : ""}`);

// ── (a) round trip ─────────────────────────────────────────────────────────
{
  await engine.run("bench", { command: ["true"] }); // create and warm the default session
  for (let i = 0; i < 50; i++) await engine.run("bench", { command: ["echo", "hi"] });
  const rt: number[] = [];
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const t0 = performance.now();
    const r = await engine.run("bench", { command: ["echo", "hi"] });
    rt.push(performance.now() - t0);
    if (r.output !== "hi\n") throw new Error(`unexpected output ${JSON.stringify(r.output)}`);
  }
  const sp: number[] = [];
  for (let i = 0; i < Math.min(ROUND_TRIPS, 500); i++) {
    const t0 = performance.now();
    await new Deno.Command("/bin/true", { stdout: "null", stderr: "null" }).output();
    sp.push(performance.now() - t0);
  }
  out(
    `(a) echo hi in a warm session (control + gate + store + fsynced intent): p50 ${
      ms(pct(rt, 50))
    }, p99 ${ms(pct(rt, 99))} (n=${rt.length}; target p50 <= 1 ms)`,
  );
  out(
    `    Deno.Command /bin/true:     p50 ${ms(pct(sp, 50))}, p99 ${
      ms(pct(sp, 99))
    } (n=${sp.length})`,
  );
}

// ── (b) throughput ─────────────────────────────────────────────────────────
{
  const cmd = `yes | head -c ${YES_BYTES}`;
  const t0 = performance.now();
  let rawBytes = 0;
  {
    await using pty = Pty.spawn({ argv: ["bash", "-c", cmd], env });
    const done = Promise.withResolvers<void>();
    pty.setSink((c) => {
      rawBytes += c.length;
    }, () => done.resolve());
    await done.promise;
    await pty.exited;
  }
  const rawS = (performance.now() - t0) / 1000;
  const rawMBs = YES_BYTES / 1e6 / rawS;

  const t1 = performance.now();
  const r = await engine.run("bench", { command: [cmd], timeout_ms: 600_000 });
  const pipeS = (performance.now() - t1) / 1000;
  const job = engine.jobOf("bench", r.job_id);
  if (job.buffer.totalBytes !== YES_BYTES) {
    throw new Error(`pipeline kept ${job.buffer.totalBytes} bytes, expected ${YES_BYTES}`);
  }
  const pipeMBs = YES_BYTES / 1e6 / pipeS;
  out(`(b) ${cmd}`);
  out(
    `    raw PTY read:        ${rawMBs.toFixed(1)} MB/s (${rawBytes} bytes with CRLF, ${
      rawS.toFixed(2)
    } s)`,
  );
  out(
    `    full job pipeline:   ${pipeMBs.toFixed(1)} MB/s (${pipeS.toFixed(2)} s) = ${
      (100 * pipeMBs / rawMBs).toFixed(0)
    } % of raw (target >= 80 %)`,
  );
  // Same with output post-processing off in the tty (no \n -> \r\n): the kernel's cap lifted.
  const cmd2 = `stty -onlcr; ${cmd}`;
  const t2 = performance.now();
  let raw2 = 0;
  {
    await using pty = Pty.spawn({ argv: ["bash", "-c", cmd2], env });
    const done = Promise.withResolvers<void>();
    pty.setSink((c) => {
      raw2 += c.length;
    }, () => done.resolve());
    await done.promise;
  }
  const raw2S = (performance.now() - t2) / 1000;
  const t3 = performance.now();
  await engine.run("bench", { command: [cmd2], timeout_ms: 600_000 });
  const pipe2S = (performance.now() - t3) / 1000;
  out(
    `    with stty -onlcr:    raw ${
      (YES_BYTES / 1e6 / raw2S).toFixed(1)
    } MB/s (${raw2} bytes), pipeline ${(YES_BYTES / 1e6 / pipe2S).toFixed(1)} MB/s = ${
      (100 * raw2S / pipe2S).toFixed(0)
    } % of raw (target >= 80 %)`,
  );
  // The daemon records sessions by default: the same job with the asciicast recording on (`y\n`
  // is its worst case, a JSON escape every other byte; it drops output past 4 MiB behind).
  {
    await using rec = await testRuntime({ fsync: true, engine: { env, record: true } });
    await rec.engine.run("bench", { command: ["true"] });
    const t = performance.now();
    await rec.engine.run("bench", { command: [cmd2], timeout_ms: 600_000 });
    const recS = (performance.now() - t) / 1000;
    out(
      `    … recording on:      pipeline ${(YES_BYTES / 1e6 / recS).toFixed(1)} MB/s = ${
        (100 * raw2S / recS).toFixed(0)
      } % of raw (the daemon's default)`,
    );
  }
  // `yes` is the worst case for the recording (a JSON escape every other byte); log-like lines
  // (~60 bytes, one newline each) are what builds and servers print.
  const lines = Math.round(YES_BYTES / 60);
  const cmd3 =
    `stty -onlcr; seq -f '%09.0f INFO request handled path=/api/v1/items status=200' ${lines}`;
  const t4 = performance.now();
  let raw3 = 0;
  {
    await using pty = Pty.spawn({ argv: ["bash", "-c", cmd3], env });
    const done = Promise.withResolvers<void>();
    pty.setSink((c) => {
      raw3 += c.length;
    }, () => done.resolve());
    await done.promise;
  }
  const raw3S = (performance.now() - t4) / 1000;
  const t5 = performance.now();
  await engine.run("bench", { command: [cmd3], timeout_ms: 600_000 });
  const pipe3S = (performance.now() - t5) / 1000;
  out(
    `    log-like lines:      raw ${
      (raw3 / 1e6 / raw3S).toFixed(1)
    } MB/s (${raw3} bytes), pipeline ${(raw3 / 1e6 / pipe3S).toFixed(1)} MB/s = ${
      (100 * raw3S / pipe3S).toFixed(0)
    } % of raw`,
  );
}

// ── (c) many sessions ──────────────────────────────────────────────────────
{
  gc();
  const threadsBefore = threads();
  const rssBefore = rssMiB();
  const t0 = performance.now();
  const sessions = [];
  for (let i = 0; i < SESSIONS; i += 20) {
    sessions.push(
      ...await Promise.all(
        Array.from({ length: Math.min(20, SESSIONS - i) }, () => engine.createSession("load")),
      ),
    );
  }
  const createS = (performance.now() - t0) / 1000;
  const threadsAfterCreate = threads();
  const lat: number[] = [];
  const t1 = performance.now();
  await Promise.all(sessions.map(async (s) => {
    for (let k = 0; k < 5; k++) {
      const a = performance.now();
      await engine.run("load", { command: ["echo", "hi"], session: s.session_id });
      lat.push(performance.now() - a);
    }
  }));
  const loadS = (performance.now() - t1) / 1000;
  gc();
  const rssAfter = rssMiB();
  const threadsUnderLoad = threads();
  out(
    `(c) ${SESSIONS} sessions created in ${createS.toFixed(2)} s (${
      (createS * 1000 / SESSIONS).toFixed(1)
    } ms each, 20 at a time)`,
  );
  out(
    `    ${lat.length} commands concurrently in ${loadS.toFixed(2)} s: p50 ${
      ms(pct(lat, 50))
    }, p99 ${ms(pct(lat, 99))}`,
  );
  out(
    `    threads: ${threadsBefore} before, ${threadsAfterCreate} after creating, ${threadsUnderLoad} under load (must stay constant)`,
  );
  out(
    `    daemon RSS: ${rssBefore.toFixed(1)} MiB -> ${rssAfter.toFixed(1)} MiB = ${
      ((rssAfter - rssBefore) * 1024 / SESSIONS).toFixed(0)
    } KiB per session (target <= 512 KiB)`,
  );
  out(`    poller cycles so far: ${sharedPoller().cycles}`);
}

await runtime[Symbol.asyncDispose]();

// ── (d) MCP round trip through the daemon ───────────────────────────────────
for (const http of [false, true]) {
  await using b = await benchDaemon(http);
  const client = b.client;
  for (let i = 0; i < 50; i++) {
    await client.callTool({ name: "exec_run", arguments: { command: ["echo", "hi"] } });
  }
  const lat: number[] = [];
  for (let i = 0; i < (QUICK ? 200 : 1000); i++) {
    const t0 = performance.now();
    const r = await client.callTool({ name: "exec_run", arguments: { command: ["echo", "hi"] } });
    lat.push(performance.now() - t0);
    if ((r.structuredContent as { output?: string }).output !== "hi\n") {
      throw new Error("bad output");
    }
  }
  out(
    `(d) MCP exec_run "echo hi", SDK client → daemon over its ${
      http ? "HTTP socket (Streamable HTTP)" : "MCP socket (newline JSON-RPC)"
    }: p50 ${ms(pct(lat, 50))}, p99 ${ms(pct(lat, 99))} (n=${lat.length})`,
  );
}

// ── (e) policy decisions ────────────────────────────────────────────────────
{
  const rules = compilePolicy({
    allow: ["git *", "ls *", "cat *", "grep *", "npm *", "deno *", "make *", "echo *"],
    deny: ["rm -rf *", "git push --force*", "curl * | *sh"],
    confirm: ["git push *", "npm publish*", "sudo *"],
  });
  const time = (label: string, f: () => void, n: number) => {
    const t: number[] = [];
    for (let i = 0; i < n; i++) {
      const a = performance.now();
      f();
      t.push((performance.now() - a) * 1000);
    }
    out(`    ${label.padEnd(44)} p50 ${pct(t, 50).toFixed(1)} µs, p99 ${pct(t, 99).toFixed(1)} µs`);
  };
  const script = Array.from(
    { length: 300 },
    (_, i) => `if [ -f f${i} ]; then grep -n "x${i}" f${i} | head -3 && echo ok${i}; fi`,
  ).join("\n");
  out(`(e) policy decisions (${(script.length / 1024).toFixed(1)} KB script for the last line)`);
  time('argv ["git", "status"]', () => decide(["git", "status"], rules), QUICK ? 500 : 5000);
  time(
    'line "ls -la | grep foo | head -5"',
    () => decide(["ls -la | grep foo | head -5"], rules),
    QUICK ? 500 : 5000,
  );
  time(
    'line "sudo env X=1 nice -n 5 rm -rf /tmp/x"',
    () => decide(["sudo env X=1 nice -n 5 rm -rf /tmp/x"], rules),
    QUICK ? 500 : 3000,
  );
  time(
    `${(script.length / 1024).toFixed(0)} KB shell script`,
    () => decide([script], rules),
    QUICK ? 20 : 100,
  );
}

// ── (f) audit appends ───────────────────────────────────────────────────────
{
  const dir = await Deno.makeTempDir({ prefix: "termada-bench-audit-" });
  const actor = { kind: "agent" as const, id: "bench" };
  const data = {
    job_id: "job_0123456789ab",
    command: ["npm", "test"],
    decision: { action: "allow" },
  };
  for (const fsync of [true, false]) {
    const log = AuditLog.open(`${dir}/${fsync}`, { fsync });
    const n = QUICK ? 500 : 3000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) log.append(actor, "job.requested", data);
    const s = (performance.now() - t0) / 1000;
    log.close();
    out(
      `(f) audit appends ${fsync ? "with fsync   " : "without fsync"}: ${(n / s).toFixed(0)}/s (${
        (s * 1e6 / n).toFixed(0)
      } µs each)`,
    );
  }
  await Deno.remove(dir, { recursive: true });
}

await Deno.remove(runtimeDir, { recursive: true }).catch(() => {});

// ── (h) missions ────────────────────────────────────────────────────────────
{
  await using b = await benchDaemon();
  const client = b.client;
  const tool = async (name: string, args: Record<string, unknown>) => {
    const r = await client.callTool({ name, arguments: args });
    if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.structuredContent)}`);
    return r.structuredContent as Record<string, unknown>;
  };
  const m = await tool("mission_create", {
    goal: "bench",
    plan: Array.from({ length: 24 }, (_, i) => `step ${i + 1}`),
  });
  const session = m.session_id as string;
  const upd: number[] = [];
  for (let i = 1; i <= 24; i++) {
    const j = await tool("exec_run", { command: ["true"], session });
    const t0 = performance.now();
    await tool("mission_update", {
      mission_id: m.mission_id,
      step_id: `s${i}`,
      step_status: "passed",
      job_id: j.job_id,
    });
    upd.push(performance.now() - t0);
  }
  // Fill the timeline past its bound: two records per job (requested, finished).
  const fill = QUICK ? 100 : 600;
  for (let i = 0; i < fill; i++) await tool("exec_run", { command: ["true"], session });
  const gets: number[] = [];
  for (let i = 0; i < 50; i++) {
    const t0 = performance.now();
    await tool("mission_get", { mission_id: m.mission_id });
    gets.push(performance.now() - t0);
  }
  const reps: number[] = [];
  let size = 0;
  let anchors = 0;
  for (let i = 0; i < (QUICK ? 5 : 20); i++) {
    const t0 = performance.now();
    const r = await tool("mission_report", { mission_id: m.mission_id });
    reps.push(performance.now() - t0);
    size = (r.markdown as string).length;
    anchors = (r.evidence as { anchors: unknown[] }).anchors.length;
  }
  out(
    `(h) mission_update step verified (exec job, audit fsync, SQLite): p50 ${
      ms(pct(upd, 50))
    }, p99 ${ms(pct(upd, 99))}`,
  );
  out(
    `    mission_get (24 steps, 50 timeline entries): p50 ${ms(pct(gets, 50))}, p99 ${
      ms(pct(gets, 99))
    }`,
  );
  out(
    `    mission_report (${anchors} anchors, ${
      (size / 1024).toFixed(0)
    } KiB Markdown + JSON): p50 ${ms(pct(reps, 50))}, p99 ${ms(pct(reps, 99))}`,
  );
  const big = QUICK ? 10_000_000 : 50_000_000;
  const t0 = performance.now();
  const y = await tool("exec_run", {
    command: [`yes | head -c ${big}`],
    session,
    timeout_ms: 300_000,
  });
  const s = (performance.now() - t0) / 1000;
  if (y.status !== "exited") throw new Error(`yes: ${y.status}`);
  out(
    `    ${big / 1e6} MB job through the daemon (clean, redact, spool, SHA-256): ${
      (big / 1e6 / s).toFixed(1)
    } MB/s`,
  );
}

// ── (j) the exec gate: exec-heavy work with the gate on and off ────────────────
// (bench/exec_gate_bench.ts; runs alone too)
await execGateBench({ quick: QUICK, out, env, hide: [runtimeDir] });

// ── (g) dashboard keystroke-to-echo latency ─────────────────────────────────
for (const line of await dashboardLatency(QUICK)) out(line);

// ── (i) the agent's view, side by side with a peer ──────────────────────────
await mcpPeerBench({ quick: QUICK, out });

// ── (k) remote servers over loopback sshd ───────────────────────────────────
await remoteBench({ quick: QUICK, out });

// ── (l) the vault: redaction cost with vault secrets, unlock and set ─────────
await vaultBench({ quick: QUICK, out });

// ── (m) governance: JWT verification, structured rules, budgets, grants ──────
await governanceBench({ quick: QUICK, out });
