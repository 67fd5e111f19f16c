/**
 * HTTP surface: the Hono app shared by the Unix socket and the loopback TCP listener, with its
 * guards (loopback Host/Origin, agent tokens) and the MCP Streamable HTTP endpoint. Listening,
 * locking and lifecycle belong to src/daemon.
 */
export {
  type AgentDirectory,
  agentIdFromName,
  type AppEnv,
  type AppOptions,
  createApp,
  type Listener,
  type TermadaApp,
} from "./app.ts";
