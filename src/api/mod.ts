/**
 * HTTP surface: the Hono app shared by the Unix socket and the loopback TCP listener, with its
 * guards (loopback Host/Origin, agent and operator tokens), the MCP Streamable HTTP endpoint,
 * the operator routes and live streams, and the dashboard's static files. Routes are thin: they
 * parse with the wire schemas and call the control layer. Listening, locking and lifecycle
 * belong to src/daemon.
 */
export { type AppOptions, createApp, reportedLimits, type TermadaApp } from "./app.ts";
export { type AppEnv, type Listener } from "./http.ts";
export {
  type AgentDirectory,
  agentIdFromName,
  type CallerIdentity,
  MAX_BODY_BYTES,
} from "./mcp_http.ts";
