/**
 * Termada entry point: parses argv, dispatches to src/cli, and is the only place that sets the
 * process exit code.
 */
import { main } from "./src/cli/mod.ts";

export { Engine, type EngineOptions } from "./src/engine/mod.ts";

if (import.meta.main) {
  Deno.exitCode = await main(Deno.args);
}
