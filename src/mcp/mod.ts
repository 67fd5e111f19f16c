/**
 * MCP: the tools agents call (TOOLS.md "Commands and jobs", "Sessions", missions, `capabilities`)
 * as thin adapters over the control layer, the per-agent SDK server that serves them, portable
 * JSON Schema for their contract, and JSON-RPC shape checks. Knows nothing about transports or
 * HTTP (src/api, src/daemon) nor about who the agent is (the caller passes its id).
 */
export {
  callParams,
  createMcpServer,
  INSTRUCTIONS,
  listTools,
  type McpServerOptions,
} from "./server.ts";
export { jobHeader, renderJob, type ToolContext, type ToolDef, TOOLS } from "./tools.ts";
export { portableSchema } from "./json_schema.ts";
export {
  INVALID_PARAMS,
  INVALID_REQUEST,
  jsonRpcShapeError,
  PARSE_ERROR,
  requestId,
} from "./jsonrpc.ts";
