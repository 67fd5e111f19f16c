/**
 * MCP resources (being built, issue 16): `termada://jobs/{id}/output`,
 * `termada://sessions/{id}/screen`, `termada://sessions/{id}/recording`, and the resource links
 * tool results carry to them.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { McpServerOptions } from "./server.ts";

/** Registers the resource handlers on `server` (the caller's own jobs and sessions only). */
export function registerResources(_server: Server, _options: McpServerOptions): void {}

/** `resource_link` content items for a tool's result (none yet). */
export function resourceLinks(
  _tool: string,
  _result: unknown,
): { type: "resource_link"; uri: string; name: string; mimeType?: string }[] {
  return [];
}
