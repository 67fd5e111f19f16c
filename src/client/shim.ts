/**
 * `termada serve --stdio`: the bridge an MCP client launches. It connects to the daemon's MCP
 * socket (starting the daemon, detached, when none answers), sends one hello line naming the
 * agent (`--token`, or in development mode `--agent <id>`; else the daemon uses the MCP client's
 * name), then relays bytes both ways unchanged in a blocking poll loop (src/ipc): MCP's stdio
 * framing and the socket's are the same newline-delimited JSON-RPC, so nothing is parsed here;
 * the daemon answers malformed or oversized lines itself. It never runs a tool.
 *
 * Start-up cost matters (a client starts one shim per session): the fast path loads no config
 * schema and no daemon code — only path arithmetic and the relay. The config is read only when
 * no daemon answers at the default socket (it may name another socket) and one must be started.
 */
import { connectUnix, relayStdio } from "../ipc/mod.ts";
import { resolvePaths } from "../paths/mod.ts";
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

/** A connection to the daemon's MCP socket (async, for in-process clients), or undefined. */
export async function connectMcp(path: string): Promise<Deno.UnixConn | undefined> {
  try {
    return await Deno.connect({ transport: "unix", path });
  } catch {
    return undefined;
  }
}

/** The hello line that opens an MCP socket connection. */
export function helloLine(
  who: { agent?: string; token?: string; key?: string },
): Uint8Array {
  return encoder.encode(
    JSON.stringify({
      termada: "hello",
      v: 1,
      ...(who.token ? { token: who.token } : who.agent ? { agent: who.agent } : {}),
      ...(who.key && !who.token ? { key: who.key } : {}),
    }) + "\n",
  );
}

/** The socket key beside a daemon socket (`<socket>.key`), or undefined when unreadable. */
export function readSocketKey(socketPath: string): string | undefined {
  try {
    const k = Deno.readTextFileSync(`${socketPath}.key`).trim();
    return /^[0-9a-f]{64}$/.test(k) ? k : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts the daemon (detached) and waits until `connect` succeeds. A daemon that cannot start is
 * reported at once with its own words (its stderr until it is ready), not after a timeout.
 */
export async function startDaemon<T>(
  connect: () => T | undefined | Promise<T | undefined>,
  logPath: string,
  command: { program: string; args: string[] },
  timeoutMs = 10_000,
): Promise<T> {
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
  const left = () => timeoutMs - (performance.now() - t0);
  try {
    while (left() > 0) {
      const conn = await connect();
      if (conn !== undefined) {
        log.debug("daemon started", { ms: Math.round(performance.now() - t0), pid: child.pid });
        return conn;
      }
      if (exited) {
        await pump;
        const text = stderr.trim();
        // Another client started one at the same moment: use that one.
        if (/already running/.test(text)) {
          while (left() > 0) {
            const other = await connect();
            if (other !== undefined) return other;
            await new Promise((r) => setTimeout(r, 15));
          }
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

/**
 * The daemon's MCP socket for these options, found (or the daemon started) the cheap way first:
 * the default socket path needs no config; only when nothing answers there is the config read.
 * Returns the connection and the socket's path (its key sits beside it).
 */
export async function daemonSocket<T>(
  options: Pick<ShimOptions, "env" | "home" | "configFile" | "daemonCommand" | "startTimeoutMs">,
  connect: (path: string) => T | undefined | Promise<T | undefined>,
): Promise<{ conn: T; path: string }> {
  let used = "";
  const conn = await findDaemon(options, async (path) => {
    const c = await connect(path);
    if (c !== undefined) used = path;
    return c;
  });
  return { conn, path: used };
}

async function findDaemon<T>(
  options: Pick<ShimOptions, "env" | "home" | "configFile" | "daemonCommand" | "startTimeoutMs">,
  connect: (path: string) => T | undefined | Promise<T | undefined>,
): Promise<T> {
  const base = resolvePaths({
    env: options.env,
    home: options.home,
    configFile: options.configFile,
  });
  if (options.configFile === undefined) {
    const fast = await connect(base.mcpSocketPath);
    if (fast !== undefined) return fast;
  }
  const { effectivePaths, loadConfig } = await import("../config/mod.ts");
  const { config } = await loadConfig(base.configFile, options.env, {
    required: options.configFile !== undefined,
  });
  const paths = effectivePaths(base, config);
  const running = await connect(paths.mcpSocketPath);
  if (running !== undefined) return running;
  return await startDaemon(
    () => connect(paths.mcpSocketPath),
    paths.logPath,
    options.daemonCommand,
    options.startTimeoutMs,
  );
}

/** Runs the bridge until the client closes stdin (or the daemon goes away). */
export async function runShim(options: ShimOptions): Promise<number> {
  const { conn: fd, path } = await daemonSocket(options, connectUnix);
  const end = relayStdio(
    fd,
    helloLine({ agent: options.agent, token: options.token, key: readSocketKey(path) }),
  );
  if (end === "daemon") {
    // The daemon closed first (it stopped or crashed): the client must learn it at once.
    await Deno.stderr.write(encoder.encode("termada: the connection to the daemon was lost\n"))
      .catch(() => {});
    return 1;
  }
  return 0;
}
