/**
 * Daemon lifecycle: directories, lock, store and recovery, the control layer, listeners (loopback
 * TCP, the HTTP Unix socket, the MCP socket), graceful shutdown. The client side of those sockets
 * (the stdio shim among them) is src/client.
 */
export { Daemon, type DaemonOptions, type SetupInfo } from "./daemon.ts";
export { type DaemonInfo, readDaemonInfo } from "./lock.ts";
export { policyPort } from "./policy_port.ts";
