/**
 * Termada entry point: parses argv, dispatches to src/cli, and is the only place that sets the
 * process exit code. It loads only what the command needs (the stdio shim starts in tens of
 * milliseconds; `__launch`, the session launcher, loads the sandbox alone), so it re-exports
 * types only: the wire contract's and the adapter SDK's (docs/PLUGINS.md "Writing an adapter";
 * its values — AdapterError, the runner, the two adapters — are the `./adapters` export). No
 * engine is exported — a command runs only through a daemon, behind its gateway.
 */
export type { JobResult, SessionInfo } from "./src/wire/mod.ts";
export type {
  Adapter,
  AdapterErrorReason,
  AnyAdapter,
  Compensation,
  ExecuteContext,
  FailureOutcome,
  JsonValue,
  PhaseContext,
  PrepareContext,
  Prepared,
  Reconciled,
  Risk,
  Verification,
} from "./src/adapters/mod.ts";

if (import.meta.main) {
  if (Deno.args[0] === "__launch") {
    // The compiled binary re-invoked by the daemon to start a session's program inside the
    // boundary (src/sandbox/launcher_main.ts); it never returns: it execs the program.
    const { runLauncher } = await import("./src/sandbox/launcher_main.ts");
    runLauncher();
  }
  const { main } = await import("./src/cli/mod.ts");
  Deno.exitCode = await main(Deno.args);
}
