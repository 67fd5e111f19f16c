/**
 * `termada serve --stdio`: the bridge an MCP client launches. It connects to the daemon's MCP
 * socket (starting the daemon, detached, when none answers), sends one hello line naming the
 * agent (`--token`, or in development mode `--agent <id>`; else the daemon uses the MCP client's
 * name), then relays bytes both ways unchanged: stdin to the socket, the socket to stdout. MCP's
 * stdio framing and the socket's are the same newline-delimited JSON-RPC, so nothing is parsed
 * here; the daemon answers malformed or oversized lines itself. It never runs a tool: one engine,
 * one policy, one audit trail for every agent.
 */
import { effectivePaths, loadConfig, resolvePaths } from "../config/mod.ts";
import { logger, TermadaError } from "../shared/mod.ts";

const log = logger("shim");
const encoder = new TextEncoder();

export interface ShimOptions {
  env: Record<string, string | undefined>;
  home?: string;
  configFile?: string;
  agent?: string;
  token?: string;
  /** How to start the daemon: program and arguments (without the log file flag). */
  daemonCommand: { program: string; args: string[] };
  /** How long to wait for a daemon that was just started (default 10 000 ms). */
  startTimeoutMs?: number;
}

/** A fetch bound to the daemon's HTTP Unix socket (the CLI's operator requests). */
export function socketFetch(socketPath: string): {
  fetch: (url: string | URL, init?: RequestInit) => Promise<Response>;
  close: () => void;
} {
  const client = Deno.createHttpClient({ proxy: { transport: "unix", path: socketPath } });
  return {
    fetch: (url, init) => fetch(url, { ...init, client } as RequestInit),
    close: () => client.close(),
  };
}

/** True when a daemon answers on its HTTP socket. */
export async function daemonAlive(socketPath: string): Promise<boolean> {
  const s = socketFetch(socketPath);
  try {
    const r = await s.fetch("http://termada/healthz", { signal: AbortSignal.timeout(1000) });
    await r.body?.cancel();
    return r.ok;
  } catch {
    return false;
  } finally {
    s.close();
  }
}

/** A connection to the daemon's MCP socket, or undefined when nothing listens there. */
export async function connectMcp(path: string): Promise<Deno.UnixConn | undefined> {
  try {
    return await Deno.connect({ transport: "unix", path });
  } catch {
    return undefined;
  }
}

/**
 * Connects to the daemon's MCP socket, starting the daemon (detached) when none listens. A
 * daemon that cannot start is reported at once with its own words (its stderr until it is
 * ready), not after a timeout.
 */
export async function ensureDaemon(
  mcpSocketPath: string,
  logPath: string,
  command: { program: string; args: string[] },
  timeoutMs = 10_000,
): Promise<{ conn: Deno.UnixConn; started: boolean }> {
  const running = await connectMcp(mcpSocketPath);
  if (running) return { conn: running, started: false };
  const t0 = performance.now();
  const child = new Deno.Command(command.program, {
    args: [...command.args, "--log-file", logPath],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    detached: true,
  }).spawn();
  let stderr = "";
  const reader = child.stderr.getReader();
  const pump = (async () => {
    const dec = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        if (stderr.length < 16_384) stderr += dec.decode(value, { stream: true });
      }
    } catch {
      // released below once the daemon is up
    }
  })();
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  try {
    while (performance.now() - t0 < timeoutMs) {
      const conn = await connectMcp(mcpSocketPath);
      if (conn) {
        log.debug("daemon started", { ms: Math.round(performance.now() - t0), pid: child.pid });
        return { conn, started: true };
      }
      if (exited) {
        await pump;
        const text = stderr.trim();
        // Another shim started one at the same moment: use that one.
        if (/already running/.test(text)) {
          const other = await waitForSocket(mcpSocketPath, timeoutMs - (performance.now() - t0));
          if (other) return { conn: other, started: false };
        }
        const st = await status;
        throw new TermadaError(
          "INTERNAL",
          `The Termada daemon could not start (exit ${st.code}): ${
            text.replace(/^termada: /, "") || "no reason given"
          }`,
          { hint: `Its log: ${logPath}` },
        );
      }
      await new Promise((r) => setTimeout(r, 15));
    }
    throw new TermadaError(
      "INTERNAL",
      `The Termada daemon did not start within ${timeoutMs} ms${
        stderr.trim() ? `: ${stderr.trim()}` : ""
      }`,
      { hint: `See its log: ${logPath}` },
    );
  } finally {
    // From here on the daemon logs to its file: stop reading its stderr and let it go.
    await reader.cancel().catch(() => {});
    await pump;
    child.unref();
  }
}

async function waitForSocket(path: string, ms: number): Promise<Deno.UnixConn | undefined> {
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    const c = await connectMcp(path);
    if (c) return c;
    await new Promise((r) => setTimeout(r, 15));
  }
  return undefined;
}

/** The hello line that opens an MCP socket connection. */
export function helloLine(who: { agent?: string; token?: string }): Uint8Array {
  return encoder.encode(
    JSON.stringify({
      termada: "hello",
      v: 1,
      ...(who.token ? { token: who.token } : who.agent ? { agent: who.agent } : {}),
    }) + "\n",
  );
}

/** Runs the bridge until the client closes stdin (or the daemon goes away). */
export async function runShim(options: ShimOptions): Promise<number> {
  const base = resolvePaths({
    env: options.env,
    home: options.home,
    configFile: options.configFile,
  });
  const { config } = await loadConfig(base.configFile, options.env, {
    required: options.configFile !== undefined,
  });
  const paths = effectivePaths(base, config);
  const { conn } = await ensureDaemon(
    paths.mcpSocketPath,
    paths.logPath,
    options.daemonCommand,
    options.startTimeoutMs,
  );
  await conn.write(helloLine({ agent: options.agent, token: options.token }));
  // Client → daemon: when stdin ends, half-close so the daemon ends the MCP session.
  const stopUp = new AbortController();
  let stdinEnded = false;
  const up = Deno.stdin.readable.pipeTo(conn.writable, { signal: stopUp.signal }).then(
    () => {
      stdinEnded = true;
    },
    (err) => log.debug("stdin relay ended", { error: err }),
  );
  // Daemon → client: ends when the daemon closes the connection (session over or daemon gone).
  await conn.readable.pipeTo(Deno.stdout.writable, { preventClose: true }).catch((err) =>
    log.debug("stdout relay ended", { error: err })
  );
  // The daemon closed first (it stopped or crashed): the client must learn it at once.
  const lost = !stdinEnded;
  stopUp.abort();
  await up;
  try {
    conn.close();
  } catch {
    // closed by the daemon already
  }
  if (lost) {
    await Deno.stderr.write(encoder.encode("termada: the connection to the daemon was lost\n"))
      .catch(() => {});
    return 1;
  }
  return 0;
}
