/**
 * `termada run -- <argv…>`: runs one command through the engine in a fresh local session and
 * prints the structured result as JSON on stdout (the same shape `exec_run` returns). The exit
 * code mirrors the command's. Until the daemon exists this is how a person tries the engine.
 */
import { parseArgs } from "node:util";
import { Engine } from "../engine/mod.ts";
import { TermadaError } from "../shared/mod.ts";

export async function runCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      shell: { type: "string" },
      cwd: { type: "string" },
      timeout: { type: "string" },
      background: { type: "boolean" },
    },
  });
  if (positionals.length === 0) {
    throw new TermadaError("INVALID_ARGUMENT", "Nothing to run", {
      hint: "termada run [--shell bash|zsh|sh] [--cwd DIR] [--timeout MS] -- COMMAND [ARGS…]",
    });
  }
  const runtimeDir = await Deno.makeTempDir({ prefix: "termada-run-" });
  const engine = new Engine({ runtimeDir, record: false });
  try {
    if (values.shell !== undefined) {
      await engine.createSession("cli", { shell: values.shell, cwd: values.cwd });
    }
    const session = engine.listSessions("cli")[0]?.session_id;
    const result = await engine.run("cli", {
      command: positionals,
      session,
      cwd: session ? undefined : values.cwd,
      timeout_ms: values.timeout === undefined ? 600_000 : Number(values.timeout),
      mode: values.background ? "background" : undefined,
    });
    const out = new TextEncoder().encode(JSON.stringify(result, null, 2) + "\n");
    await Deno.stdout.write(out);
    return result.exit_code ?? 1;
  } finally {
    await engine.shutdown();
    await Deno.remove(runtimeDir, { recursive: true }).catch(() => {});
  }
}
