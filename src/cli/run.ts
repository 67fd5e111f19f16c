/**
 * `termada run -- <argv…>`: runs one command through the daemon — the same gateway, policy,
 * approvals and audit as any agent's command, visible on the dashboard — in a fresh session
 * that is closed afterwards, and prints the structured result as JSON on stdout (the shape
 * `exec_run` returns). The exit code mirrors the command's. The daemon is started when none
 * runs. It acts as agent `cli` (development mode) or as the agent of `--token` /
 * `TERMADA_AGENT_TOKEN`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, daemonSocket, readSocketKey, SocketClientTransport } from "../client/mod.ts";
import { type ErrorCode, TermadaError } from "../shared/mod.ts";
import { selfCommand } from "./serve.ts";
import { strictArgs } from "./_args.ts";

const USAGE =
  "Usage: termada run [--shell bash|zsh|sh] [--cwd DIR] [--timeout MS] [--background]\n" +
  "                   [--config FILE] [--agent ID] -- COMMAND [ARGS…]\n" +
  "Runs one command through the daemon (the same gate, policy, approvals and audit as an\n" +
  "agent's) in a fresh session, prints the exec_run result as JSON and exits with the\n" +
  'command\'s code. One word is a shell command line ("ls | wc -l"); more are passed exactly.\n' +
  "Put the command after -- when it has options of its own.\n";

export async function runCommand(args: string[]): Promise<number> {
  const { values, positionals } = strictArgs("run", args, {
    shell: { type: "string" },
    cwd: { type: "string" },
    timeout: { type: "string" },
    background: { type: "boolean" },
    config: { type: "string" },
    agent: { type: "string" },
    token: { type: "string" },
    help: { type: "boolean", short: "h" },
  }, Number.MAX_SAFE_INTEGER);
  if (values.help) {
    await Deno.stdout.write(new TextEncoder().encode(USAGE));
    return 0;
  }
  if (positionals.length === 0) {
    throw new TermadaError("INVALID_ARGUMENT", "Nothing to run", {
      hint: "termada run [--shell bash|zsh|sh] [--cwd DIR] [--timeout MS] -- COMMAND [ARGS…]",
    });
  }
  const timeout = values.timeout === undefined ? 600_000 : Number(values.timeout);
  if (!Number.isInteger(timeout) || timeout < 0 || timeout > 600_000) {
    throw new TermadaError("INVALID_ARGUMENT", `"--timeout" must be 0 to 600000 ms`);
  }
  const env = Deno.env.toObject();
  const forward = ["serve", ...(values.config ? ["--config", values.config] : [])];
  const { conn, path } = await daemonSocket(
    { env, configFile: values.config, daemonCommand: selfCommand(forward) },
    connectMcp,
  );
  const token = values.token ?? env.TERMADA_AGENT_TOKEN;
  const client = new Client({ name: "termada-cli", version: "1" });
  await client.connect(
    new SocketClientTransport(
      conn,
      token ? { token } : { agent: values.agent ?? "cli", key: readSocketKey(path) },
    ),
  );
  let session: string | undefined;
  try {
    const created = await call(client, "session_create", {
      ...(values.shell === undefined ? {} : { shell: values.shell }),
      ...(values.cwd === undefined ? {} : { cwd: values.cwd }),
    });
    session = created.session_id as string;
    const result = await call(client, "exec_run", {
      command: positionals,
      session_id: session,
      timeout_ms: timeout,
      ...(values.background ? { mode: "background" } : {}),
    });
    await Deno.stdout.write(new TextEncoder().encode(JSON.stringify(result, null, 2) + "\n"));
    return typeof result.exit_code === "number" ? result.exit_code : 1;
  } finally {
    if (session) await call(client, "session_close", { session_id: session }).catch(() => {});
    await client.close();
  }
}

async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const r = await client.callTool({ name, arguments: args });
  const sc = (r.structuredContent ?? {}) as Record<string, unknown>;
  if (r.isError) {
    const e = sc.error as { code?: string; message?: string; hint?: string } | undefined;
    throw new TermadaError((e?.code ?? "INTERNAL") as ErrorCode, e?.message ?? "failed", {
      hint: e?.hint,
    });
  }
  return sc;
}
