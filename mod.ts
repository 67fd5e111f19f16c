/**
 * Termada entry point: parses argv, dispatches to src/cli, and is the only place that sets the
 * process exit code. It loads only what the command needs (the stdio shim starts in tens of
 * milliseconds), so it re-exports types only: the wire contract's. No engine is exported — a
 * command runs only through a daemon, behind its gateway.
 */
import { main } from "./src/cli/mod.ts";

export type { JobResult, SessionInfo } from "./src/wire/mod.ts";

if (import.meta.main) {
  Deno.exitCode = await main(Deno.args);
}
