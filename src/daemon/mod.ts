/**
 * Daemon lifecycle: lock, store and recovery, engine, listeners (Unix socket + loopback TCP),
 * graceful shutdown; and the stdio shim that bridges an MCP client to the daemon (starting it
 * when absent) without ever running anything itself.
 */
export { Daemon, type DaemonOptions, type SetupInfo } from "./daemon.ts";
export { auditHooks, combineHooks, storeHooks } from "./persist.ts";
export { daemonAlive, ensureDaemon, runShim, type ShimOptions, socketFetch } from "./shim.ts";
