/**
 * MCP: the tools agents call (TOOLS.md "Commands and jobs", "Sessions", `capabilities`) as thin
 * adapters over the engine, and the per-agent SDK server that serves them. Knows nothing about
 * transports or HTTP (src/api) nor about who the agent is (the caller passes its id).
 */
export { createMcpServer, INSTRUCTIONS, type McpServerOptions } from "./server.ts";
export { jobHeader, renderJob, type ToolContext, type ToolDef, TOOLS } from "./tools.ts";
