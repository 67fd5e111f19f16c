/**
 * Daemon lifecycle: directories, lock, store and recovery, the control layer, listeners (loopback
 * TCP, the HTTP Unix socket, the MCP socket), graceful shutdown; and the stdio shim that bridges
 * an MCP client to the daemon (starting it when absent) without ever running anything itself.
 */
export { Daemon, type DaemonOptions, type SetupInfo } from "./daemon.ts";
export {
  connectMcp,
  daemonAlive,
  ensureDaemon,
  helloLine,
  runShim,
  type ShimOptions,
  socketFetch,
} from "./shim.ts";
export { type DaemonInfo, readDaemonInfo } from "./lock.ts";
export { MAX_LINE_BYTES, readLines } from "./mcp_socket.ts";
export { SocketClientTransport } from "./socket_transport.ts";
