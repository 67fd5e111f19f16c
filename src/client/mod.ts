/**
 * The client side of the daemon's sockets: the stdio shim (`termada serve --stdio`, which finds
 * or starts the daemon and relays bytes), the MCP socket client transport (`termada run`,
 * benchmarks, tests), and a fetch over the HTTP socket (operator commands). Loads neither the
 * daemon nor, on the fast path, the config schema.
 */
export {
  connectMcp,
  daemonSocket,
  helloLine,
  readSocketKey,
  runShim,
  type ShimOptions,
  startDaemon,
} from "./shim.ts";
export { SocketClientTransport } from "./socket_transport.ts";
export { daemonAlive, socketFetch } from "./http.ts";
