/**
 * What an agent sees: the official MCP SDK `Client` over stdio, Termada side by side with a peer.
 *   (1) `exec_run echo hi` through `termada serve --stdio` (shim → daemon over the Unix socket)
 *   (2) the same through `mcp-server-commands` (dev-only peer: a fresh shell per call)
 *   (3) cold start: spawn the shim in a fresh TERMADA_HOME with no daemon → first result
 *   (4) load: 50 agents (one shim each) × 100 commands at once, twice; the daemon's RSS before,
 *       after, 2 s after every client has closed, and the lowest over the following seconds
 * Standalone: `deno run -P=bench --no-prompt bench/mcp_peer.ts`; BENCH_QUICK=1 for a smoke run.
 * Prints plain lines; no thresholds fail here (targets are printed beside the figures). Every
 * process and temp dir it makes is removed in `finally`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { readProcFile } from "../src/pty/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const PEER_BIN = `${ROOT}.tools/node_modules/.bin/mcp-server-commands`;

/**
 * Deno's module cache as this process sees it. The shim runs with HOME set to a temp dir, and
 * Deno would otherwise look for (and download into) `$HOME/.cache/deno`.
 */
function denoDir(): string {
  const env = Deno.env.toObject();
  if (env.DENO_DIR) return env.DENO_DIR;
  if (env.XDG_CACHE_HOME) return `${env.XDG_CACHE_HOME}/deno`;
  return `${env.HOME ?? "/root"}/.cache/deno`;
}

export interface McpPeerOptions {
  /** Shrink every count for a smoke run (< 60 s). */
  quick: boolean;
  /** Receives each result line as soon as it is known. */
  out: (line: string) => void;
}

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const mean = (s: number[]) => s.reduce((a, b) => a + b, 0) / s.length;
const ms = (n: number) => `${n.toFixed(2)} ms`;
const sleep = (t: number) => new Promise((r) => setTimeout(r, t));

/** A process's state letter and resident set (KiB) from /proc, undefined once it is gone. */
function procStatus(pid: number): { state: string; rssKiB: number } | undefined {
  const text = readProcFile(`/proc/${pid}/status`);
  if (text === undefined) return undefined;
  return {
    state: /^State:\s+(\S)/m.exec(text)?.[1] ?? "?",
    rssKiB: Number(/^VmRSS:\s+(\d+)/m.exec(text)?.[1] ?? NaN),
  };
}
const alive = (pid: number) => {
  const s = procStatus(pid);
  return s !== undefined && s.state !== "Z" && s.state !== "X";
};

/** The daemon's pid, from `<home>/termada.lock` (empty when none holds it). */
async function daemonPid(home: string): Promise<number | undefined> {
  const text = await Deno.readTextFile(`${home}/termada.lock`).catch(() => "");
  const pid = Number(text.trim());
  return Number.isSafeInteger(pid) && pid > 0 && alive(pid) ? pid : undefined;
}

/** SIGTERM the daemon of `home` and wait until it is gone (SIGKILL after 10 s). */
async function stopDaemon(home: string): Promise<void> {
  const pid = await daemonPid(home);
  if (pid === undefined) return;
  try {
    Deno.kill(pid, "SIGTERM");
  } catch {
    return; // already gone
  }
  const deadline = performance.now() + 10_000;
  while (alive(pid) && performance.now() < deadline) await sleep(20);
  if (alive(pid)) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch {
      // exited between the check and the kill
    }
    while (alive(pid)) await sleep(20);
  }
}

interface Spawned {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** Owns every client and temp dir this run creates, so `finally` can remove them all. */
class Resources {
  readonly clients = new Set<Client>();
  readonly homes: string[] = [];
  readonly dirs: string[] = [];

  async tempDir(prefix: string): Promise<string> {
    const d = await Deno.makeTempDir({ prefix });
    this.dirs.push(d);
    return d;
  }

  /** A fresh TERMADA_HOME (its daemon is stopped on cleanup) and a HOME for its shells. */
  async termadaHome(): Promise<{ home: string; userHome: string }> {
    const home = await this.tempDir("termada-peer-home-");
    this.homes.push(home);
    return { home, userHome: await this.tempDir("termada-peer-user-") };
  }

  async connect(spec: Spawned, name = "termada-peer-bench"): Promise<Client> {
    const client = new Client({ name, version: "1" });
    const transport = new StdioClientTransport({ ...spec, stderr: "ignore" });
    this.clients.add(client);
    await client.connect(transport);
    return client;
  }

  async close(client: Client): Promise<void> {
    this.clients.delete(client);
    await client.close();
  }

  async dispose(): Promise<void> {
    await Promise.allSettled([...this.clients].map((c) => this.close(c)));
    for (const h of this.homes) await stopDaemon(h);
    for (const d of this.dirs) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
}

/** `termada serve --stdio [extra]` from this source tree, with the daemon permission set. */
function termadaSpec(home: string, userHome: string, extra: string[] = []): Spawned {
  return {
    command: Deno.execPath(),
    args: [
      "run",
      "--config",
      `${ROOT}deno.json`,
      "-P=daemon",
      "--no-prompt",
      "--quiet",
      `${ROOT}mod.ts`,
      "serve",
      "--stdio",
      // Forwarded to the daemon the shim starts: a free loopback port, not the shared 7717.
      "--bind",
      "127.0.0.1:0",
      ...extra,
    ],
    env: {
      TERMADA_HOME: home,
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      HOME: userHome,
      DENO_DIR: denoDir(),
    },
  };
}

async function termadaEcho(client: Client): Promise<void> {
  const r = await client.callTool({ name: "exec_run", arguments: { command: ["echo", "hi"] } });
  const output = (r.structuredContent as { output?: string } | undefined)?.output;
  if (r.isError || output !== "hi\n") {
    throw new Error(`exec_run echo hi: ${JSON.stringify(r.structuredContent)}`);
  }
}

async function peerEcho(client: Client): Promise<void> {
  const r = await client.callTool({ name: "run_command", arguments: { command: "echo hi" } });
  const text = (r.content as { text?: string }[]).map((c) => c.text ?? "").join("");
  if (r.isError || !text.includes("hi")) throw new Error(`run_command: ${text}`);
}

/** Sequential round trips after a warm-up; per-call latency around `callTool`. */
async function roundTrips(call: () => Promise<void>, n: number): Promise<number[]> {
  for (let i = 0; i < 50; i++) await call();
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await call();
    lat.push(performance.now() - t0);
  }
  return lat;
}

function describe(lat: number[]): string {
  const total = lat.reduce((a, b) => a + b, 0) / 1000;
  return `p50 ${ms(pct(lat, 50))}, p99 ${ms(pct(lat, 99))}, mean ${ms(mean(lat))}, ${
    (lat.length / total).toFixed(0)
  } calls/s (n=${lat.length})`;
}

const mib = (kib: number | undefined) =>
  kib === undefined || Number.isNaN(kib) ? "?" : `${(kib / 1024).toFixed(1)} MiB`;

/** Runs the four measurements, printing as it goes. */
export async function mcpPeerBench(options: McpPeerOptions): Promise<void> {
  const { quick, out } = options;
  const ROUND_TRIPS = quick ? 200 : 2000;
  const COLD_RUNS = quick ? 2 : 5;
  const AGENTS = quick ? 10 : 50;
  const PER_AGENT = quick ? 20 : 100;
  const ROUNDS = 2;
  const SETTLE_MS = quick ? 5000 : 15000;
  const res = new Resources();
  try {
    // ── (1) Termada through its stdio shim ─────────────────────────────────
    let termadaP50 = NaN;
    {
      const { home, userHome } = await res.termadaHome();
      const client = await res.connect(termadaSpec(home, userHome));
      await client.listTools(); // as an agent does: the SDK then validates structuredContent
      const lat = await roundTrips(() => termadaEcho(client), ROUND_TRIPS);
      termadaP50 = pct(lat, 50);
      out(
        `(1) termada serve --stdio, exec_run ["echo","hi"]: ${describe(lat)} ` +
          `(target p50 <= 1.2 ms, p99 <= 5 ms)`,
      );
      await res.close(client);
      await stopDaemon(home);
    }

    // ── (2) the peer: a fresh shell per call ───────────────────────────────
    {
      let installed = true;
      try {
        await Deno.stat(PEER_BIN);
      } catch {
        installed = false;
      }
      if (!installed) {
        out(`(2) mcp-server-commands: not installed at ${PEER_BIN} (skipped)`);
      } else {
        const userHome = await res.tempDir("termada-peer-user-");
        const client = await res.connect({
          command: PEER_BIN,
          args: [],
          env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: userHome },
        });
        await client.listTools();
        const lat = await roundTrips(() => peerEcho(client), ROUND_TRIPS);
        out(`(2) mcp-server-commands, run_command "echo hi":   ${describe(lat)}`);
        const ratio = pct(lat, 50) / termadaP50;
        out(
          `    peer p50 / termada p50 = ${ratio.toFixed(2)} → Termada is ${
            ratio >= 1 ? `${ratio.toFixed(1)}× faster` : `${(1 / ratio).toFixed(1)}× slower`
          } per call (target >= 1.5× faster)`,
        );
        await res.close(client);
      }
    }

    // ── (3) cold start ─────────────────────────────────────────────────────
    {
      const init: number[] = [];
      const first: number[] = [];
      const warmInit: number[] = [];
      for (let i = 0; i < COLD_RUNS; i++) {
        const { home, userHome } = await res.termadaHome();
        const t0 = performance.now();
        const client = await res.connect(termadaSpec(home, userHome));
        init.push(performance.now() - t0);
        await termadaEcho(client);
        first.push(performance.now() - t0);
        await res.close(client);
        // The same with the daemon still running: what every later agent pays for its shim.
        const t1 = performance.now();
        const again = await res.connect(termadaSpec(home, userHome));
        warmInit.push(performance.now() - t1);
        await res.close(again);
        await stopDaemon(home);
      }
      const list = (s: number[]) => s.map((x) => x.toFixed(0)).join(", ");
      out(`(3) cold start (fresh TERMADA_HOME, no daemon), ${COLD_RUNS} runs:`);
      out(`    spawn → connect+initialize: p50 ${ms(pct(init, 50))} [${list(init)}] ms`);
      out(
        `    spawn → first exec_run result: p50 ${ms(pct(first, 50))} [${
          list(first)
        }] ms (target <= 500 ms)`,
      );
      out(`    (daemon already running: connect+initialize p50 ${ms(pct(warmInit, 50))})`);
    }

    // ── (4) many agents at once ────────────────────────────────────────────
    {
      const { home, userHome } = await res.termadaHome();
      // Start the daemon with one client that only initializes, so no agent's state is in it yet.
      await res.close(await res.connect(termadaSpec(home, userHome)));
      const pid = await daemonPid(home);
      if (pid === undefined) throw new Error("The daemon did not start");
      const rss = () => procStatus(pid)?.rssKiB;
      out(
        `(4) load: ${AGENTS} agents (one shim each) × ${PER_AGENT} echo, concurrently; daemon pid ${pid}, RSS ${
          mib(rss())
        } at start`,
      );
      for (let round = 1; round <= ROUNDS; round++) {
        const rssBefore = rss();
        const tc = performance.now();
        const clients: Client[] = await Promise.all(
          Array.from(
            { length: AGENTS },
            (_, i) => res.connect(termadaSpec(home, userHome, ["--agent", `a${i}`])),
          ),
        );
        const connectS = (performance.now() - tc) / 1000;
        const ts = performance.now();
        await Promise.all(clients.map((c) => termadaEcho(c))); // each agent's session is made
        const sessionS = (performance.now() - ts) / 1000;
        const lat: number[] = [];
        const t0 = performance.now();
        await Promise.all(clients.map(async (c) => {
          for (let k = 0; k < PER_AGENT; k++) {
            const a = performance.now();
            await termadaEcho(c);
            lat.push(performance.now() - a);
          }
        }));
        const loadS = (performance.now() - t0) / 1000;
        const rssAfter = rss();
        await Promise.all(clients.map((c) => res.close(c)));
        await sleep(2000);
        const rssClosed = rss();
        // V8 gives the load's garbage back only when its memory reducer runs on an idle heap
        // (seconds later, not on a schedule): watch for a while and keep the lowest reading.
        const settle = performance.now();
        let rssSettled = rssClosed ?? NaN;
        let settledAt = 2;
        while (performance.now() - settle < SETTLE_MS) {
          await sleep(500);
          const now = rss() ?? NaN;
          if (now < rssSettled - 1024) {
            rssSettled = now;
            settledAt = 2 + (performance.now() - settle) / 1000;
          }
        }
        out(
          `    round ${round}: ${AGENTS} shims connected in ${
            connectS.toFixed(2)
          } s, first calls (sessions) ${sessionS.toFixed(2)} s`,
        );
        out(
          `      ${lat.length} calls in ${loadS.toFixed(2)} s = ${
            (lat.length / loadS).toFixed(0)
          } calls/s; p50 ${ms(pct(lat, 50))}, p99 ${ms(pct(lat, 99))}`,
        );
        out(
          `      daemon RSS: ${mib(rssBefore)} before → ${mib(rssAfter)} after the load → ${
            mib(rssClosed)
          } 2 s after every client closed → lowest ${mib(rssSettled)} (at ${
            settledAt.toFixed(0)
          } s) over the next ${SETTLE_MS / 1000} s${
            round === ROUNDS ? " (target <= 150 MiB)" : ""
          }`,
        );
      }
      await stopDaemon(home);
    }
  } finally {
    await res.dispose();
  }
}

if (import.meta.main) {
  const encoder = new TextEncoder();
  const quick = Deno.env.get("BENCH_QUICK") === "1";
  const out = (line: string) => Deno.stdout.writeSync(encoder.encode(line + "\n"));
  out(
    `termada mcp peer bench — ${Deno.build.target}, deno ${Deno.version.deno}${
      quick ? " (quick)" : ""
    }`,
  );
  await mcpPeerBench({ quick, out });
}
