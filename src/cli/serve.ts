/**
 * `termada serve`: run the daemon in the foreground (Ctrl-C / SIGTERM stop it gracefully).
 * `termada serve --stdio`: the MCP stdio bridge a client launches; starts the daemon if needed.
 */
import { parseArgs } from "node:util";
import { setLogFile, setLogLevel } from "../shared/mod.ts";

export interface ServeContext {
  version: string;
  /** Writes user-facing text (the set-up banner) to stderr. */
  print(text: string): void;
}

/** The command that starts this same program as a daemon (compiled binary or `deno run`). */
export function selfCommand(extra: string[]): { program: string; args: string[] } {
  const exe = Deno.execPath();
  const main = Deno.mainModule;
  const isDeno = /(^|\/)deno(\.exe)?$/.test(exe);
  if (!isDeno) return { program: exe, args: extra };
  const config = new URL("../../deno.json", import.meta.url).pathname;
  return {
    program: exe,
    args: ["run", "--config", config, "-P=daemon", "--no-prompt", "--quiet", main, ...extra],
  };
}

export async function serveCommand(args: string[], ctx: ServeContext): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      stdio: { type: "boolean" },
      bind: { type: "string" },
      config: { type: "string" },
      agent: { type: "string" },
      token: { type: "string" },
      "log-file": { type: "string" },
      "log-level": { type: "string" },
    },
  });
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
    const { runShim } = await import("../client/mod.ts");
    return await runShim({
      env,
      configFile: values.config,
      agent: values.agent,
      token: values.token ?? env.TERMADA_AGENT_TOKEN,
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
