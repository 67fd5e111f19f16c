/**
 * `termada serve --stdio`: the bridge an MCP client launches. It speaks MCP on stdio and relays
 * every message, unchanged, to the daemon's `/mcp` endpoint over the Unix socket (the daemon is
 * started, detached, when none answers). It never runs a tool itself: one engine, one policy,
 * one audit trail for every agent. Identity: `--token` (Authorization: Bearer) or, in
 * development mode, `--agent <id>` (else the daemon uses the MCP client's name).
 */
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { effectivePaths, loadConfig, resolvePaths } from "../config/mod.ts";
import process from "node:process";
import { logger, TermadaError } from "../shared/mod.ts";

const log = logger("shim");

export interface ShimOptions {
  env: Record<string, string | undefined>;
  home?: string;
  configFile?: string;
  agent?: string;
  token?: string;
  /** How to start the daemon: program and arguments (without the log file flag). */
  daemonCommand: { program: string; args: string[] };
  /** How long to wait for a daemon that was just started (default 5000 ms). */
  startTimeoutMs?: number;
}

/** A fetch bound to the daemon's Unix socket. */
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

/** True when a daemon answers on the socket. */
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

/** Makes sure a daemon runs for these paths; starts one (detached) when none answers. */
export async function ensureDaemon(
  socketPath: string,
  logPath: string,
  command: { program: string; args: string[] },
  timeoutMs = 5000,
): Promise<"running" | "started"> {
  if (await daemonAlive(socketPath)) return "running";
  const child = new Deno.Command(command.program, {
    args: [...command.args, "--log-file", logPath],
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
  child.unref();
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if (await daemonAlive(socketPath)) {
      log.info("daemon started", { ms: Math.round(performance.now() - t0), pid: child.pid });
      return "started";
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new TermadaError("INTERNAL", `The Termada daemon did not start within ${timeoutMs} ms`, {
    hint: `See its log: ${logPath}`,
  });
}

/** Runs the bridge until stdin closes. */
export async function runShim(options: ShimOptions): Promise<number> {
  const home = options.home ?? options.env.TERMADA_HOME;
  const base = resolvePaths({ env: options.env, home, configFile: options.configFile });
  const { config } = await loadConfig(base.configFile, options.env, {
    required: options.configFile !== undefined,
  });
  const paths = effectivePaths(base, config);
  await ensureDaemon(
    paths.socketPath,
    paths.logPath,
    options.daemonCommand,
    options.startTimeoutMs,
  );

  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  else if (options.agent) headers["x-termada-agent"] = options.agent;
  const sock = socketFetch(paths.socketPath);
  const http = new StreamableHTTPClientTransport(new URL("http://termada/mcp"), {
    fetch: sock.fetch,
    requestInit: { headers },
  });
  const stdio = new StdioServerTransport();
  const closed = Promise.withResolvers<void>();

  // Until the daemon has answered `initialize` (and so assigned the MCP session id), messages
  // wait their turn; after that they flow concurrently (a long exec_wait must not block others).
  let established: Promise<unknown> | undefined;
  stdio.onmessage = (msg: JSONRPCMessage) => {
    let send: Promise<unknown>;
    if (established) send = established.then(() => http.send(msg));
    else {
      send = http.send(msg);
      established = send.catch(() => {});
    }
    send.catch((err: Error) => {
      log.error("relay to daemon failed", { error: err });
      const id = (msg as { id?: string | number }).id;
      if (id !== undefined && "method" in msg) {
        stdio.send({
          jsonrpc: "2.0",
          id,
          error: { code: -32000, message: `Termada daemon unreachable: ${err.message}` },
        }).catch(() => {});
      }
    });
  };
  http.onmessage = (msg: JSONRPCMessage) => {
    stdio.send(msg).catch((err: Error) => log.error("write to client failed", { error: err }));
  };
  http.onerror = (err: Error) => log.warn("daemon stream error", { error: err });
  stdio.onclose = () => closed.resolve();
  stdio.onerror = (err: Error) => log.warn("stdio error", { error: err });

  // A client that closes our stdout ends the bridge instead of crashing it; the end of stdin
  // (the client went away) ends it too — the SDK's stdio transport does not report that.
  process.stdout.on("error", () => closed.resolve());
  process.stdin.on("end", () => closed.resolve());
  await http.start();
  await stdio.start();
  await closed.promise;
  try {
    await http.terminateSession();
  } catch {
    // the daemon may be gone already
  }
  await http.close();
  sock.close();
  return 0;
}
