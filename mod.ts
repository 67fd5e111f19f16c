/**
 * Termada entry point: parses argv, dispatches to src/cli, and is the only place that sets the
 * process exit code. For embedding, the daemon (every command it runs passes its gateway) and
 * the wire contract's types are exported; no engine that could run a command ungated is.
 */
import { main } from "./src/cli/mod.ts";

export { Daemon, type DaemonOptions } from "./src/daemon/mod.ts";
export type { JobResult, SessionInfo } from "./src/wire/mod.ts";

if (import.meta.main) {
  Deno.exitCode = await main(Deno.args);
}
