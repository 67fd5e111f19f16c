/**
 * `termada serve`: run the daemon in the foreground (Ctrl-C / SIGTERM stop it gracefully).
 * `termada serve --stdio`: the MCP stdio bridge a client launches; starts the daemon if needed.
 */
import { setLogFile, setLogLevel, TermadaError } from "../shared/mod.ts";
import { strictArgs } from "./_args.ts";

const USAGE = "Usage: termada serve [--bind 127.0.0.1:PORT] [--config FILE] [--log-file FILE]\n" +
  "                     [--log-level debug|info|warn|error]\n" +
  "       termada serve --stdio [--agent ID | --token-file FILE] [--config FILE]\n" +
  "The daemon in the foreground (Ctrl-C or SIGTERM stop it), or with --stdio the MCP bridge an\n" +
  "agent's client launches: it relays to the running daemon and starts one when none runs.\n" +
  "Agent tokens: TERMADA_AGENT_TOKEN or --token-file (never --token: argv is visible to all).\n";

export interface ServeContext {
  version: string;
  /** Writes user-facing text (the set-up banner) to stderr. */
  print(text: string): void;
}

/** The command that starts this same program as a daemon (compiled binary or `deno run`). */
export function selfCommand(extra: string[]): { program: string; args: string[] } {
  const exe = Deno.execPath();
  // A path, not a file:// URL: it ends up in clients' configs and service units.
  const main = Deno.mainModule.startsWith("file://")
    ? decodeURIComponent(new URL(Deno.mainModule).pathname)
    : Deno.mainModule;
  const isDeno = /(^|\/)deno(\.exe)?$/.test(exe);
  if (!isDeno) return { program: exe, args: extra };
  const config = new URL("../../deno.json", import.meta.url).pathname;
  return {
    program: exe,
    args: ["run", "--config", config, "-P=daemon", "--no-prompt", "--quiet", main, ...extra],
  };
}

/** The first line of an agent token file (refused when others may read it). */
async function tokenFile(path: string): Promise<string> {
  let text: string;
  let mode = 0;
  try {
    mode = ((await Deno.stat(path)).mode ?? 0) & 0o777;
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new TermadaError("INVALID_ARGUMENT", `Cannot read the token file "${path}"`, {
      cause: err,
    });
  }
  if ((mode & 0o077) !== 0) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `The token file "${path}" is readable by other users (mode 0${mode.toString(8)})`,
      { hint: `chmod 600 ${path}` },
    );
  }
  const token = text.split(/\r?\n/)[0]!.trim();
  if (token === "") throw new TermadaError("INVALID_ARGUMENT", `The token file "${path}" is empty`);
  return token;
}

export async function serveCommand(args: string[], ctx: ServeContext): Promise<number> {
  const { values } = strictArgs("serve", args, {
    stdio: { type: "boolean" },
    bind: { type: "string" },
    config: { type: "string" },
    agent: { type: "string" },
    token: { type: "string" },
    "token-file": { type: "string" },
    "log-file": { type: "string" },
    "log-level": { type: "string" },
    help: { type: "boolean", short: "h" },
  }, 0);
  if (values.help) {
    await Deno.stdout.write(new TextEncoder().encode(USAGE));
    return 0;
  }
  const env = Deno.env.toObject();
  const level = values["log-level"] ?? env.TERMADA_LOG_LEVEL;
  if (level === "debug" || level === "info" || level === "warn" || level === "error") {
    setLogLevel(level);
  }
  if (values.stdio) {
    const forward = [
      "serve",
      ...(values.config ? ["--config", values.config] : []),
      ...(values.bind ? ["--bind", values.bind] : []),
    ];
    if (values["log-file"]) setLogFile(values["log-file"]);
    // Only the shim's own modules: it starts once per agent session, so it loads no daemon.
    if (values.token !== undefined) {
      // Argv is world-readable (`ps`, /proc/<pid>/cmdline), sessions included.
      ctx.print(
        "termada: warning: --token is visible to every process on this machine (ps); " +
          "pass TERMADA_AGENT_TOKEN in the environment or --token-file FILE instead\n",
      );
    }
    const { runShim } = await import("../client/mod.ts");
    return await runShim({
      env,
      configFile: values.config,
      agent: values.agent,
      token: values.token ??
        (values["token-file"] !== undefined ? await tokenFile(values["token-file"]) : undefined) ??
        env.TERMADA_AGENT_TOKEN,
      daemonCommand: selfCommand(forward),
    });
  }
  const { Daemon } = await import("../daemon/mod.ts");
  const daemon = await Daemon.start({
    env,
    version: ctx.version,
    configFile: values.config,
    bind: values.bind,
    logLevelSet: level !== undefined,
    logFile: values["log-file"],
  });
  const stop = () => daemon.stop("signal");
  Deno.addSignalListener("SIGINT", stop);
  Deno.addSignalListener("SIGTERM", stop);
  const s = daemon.setup;
  ctx.print(`Termada ${ctx.version} is running (pid ${s.pid}).

  Unix socket  ${s.socketPath}
  MCP socket   ${s.mcpSocketPath}   (termada serve --stdio relays to it)
  MCP (HTTP)   ${s.url}/mcp   (agent token required)
  Dashboard    ${s.dashboardUrl}
  Boundary     ${s.boundary}

Add it to Claude Code:
  claude mcp add --scope user termada -- termada serve --stdio

Or to any MCP client (JSON):
  {"mcpServers": {"termada": {"command": "termada", "args": ["serve", "--stdio"]}}}

Stop with Ctrl-C.
`);
  await daemon.done;
  Deno.removeSignalListener("SIGINT", stop);
  Deno.removeSignalListener("SIGTERM", stop);
  return 0;
}
