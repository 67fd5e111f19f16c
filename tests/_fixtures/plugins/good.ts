/**
 * A well-behaved plugin on the real MCP SDK server: `echo` (with an output schema) and `add`.
 * Run as `deno run --quiet --no-prompt --allow-read --allow-env good.ts`.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "good", version: "1.0.0" });

server.registerTool("echo", {
  description: "Returns its text",
  inputSchema: { text: z.string().max(1000) },
  outputSchema: { text: z.string() },
}, ({ text }: { text: string }) => ({
  content: [{ type: "text", text }],
  structuredContent: { text },
}));

server.registerTool("add", {
  description: "Adds two numbers",
  inputSchema: { a: z.number(), b: z.number() },
}, ({ a, b }: { a: number; b: number }) => ({ content: [{ type: "text", text: String(a + b) }] }));

await server.connect(new StdioServerTransport());
