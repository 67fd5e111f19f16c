/**
 * One MCP server per connected agent, built on the official SDK's low-level `Server`: tools/list
 * publishes each tool's JSON Schema (input and output), tools/call validates with the same zod
 * schemas the engine uses and turns every failure into a tool result with
 * `structuredContent.error = {code, message, retriable, hint}` (JSON-RPC errors are left for
 * malformed protocol messages). Long waits send progress notifications when the client gave a
 * progress token.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { Protocol, type RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { AgentOps, PluginOps } from "../control/mod.ts";
import type { MissionService } from "../mission/mod.ts";
import { type ErrorBody, logger, toTermadaError } from "../shared/mod.ts";
import { parseInput, ToolError } from "../wire/mod.ts";
import { portableSchema } from "./json_schema.ts";
import { type ToolContext, type ToolDef, TOOLS } from "./tools.ts";
import { registerResources, resourceLinks } from "./resources.ts";
import { askApprovalInClient, openAnswerPageInClient } from "./elicitation.ts";

const log = logger("mcp");

export const INSTRUCTIONS =
  `Termada runs your commands in real, persistent terminal sessions and reports exact results.

- exec_run {command: [...]} runs a command and waits up to timeout_ms (default 30 s). Several words are an exact argv; ONE word is a shell line ("npm test 2>&1 | tail -5", "cd app && make"). cd, export, functions and venv activation persist in the session.
- If the result says status "running", the job is still going: continue with exec_wait (until: exit | pattern | prompt | idle_ms) or exec_poll, always passing next_cursor to read only new output. A wait deadline never kills anything; use exec_kill to stop a job.
- Long output comes as output (head) + tail with omitted_bytes; page through the middle with exec_poll from next_cursor.
- status "awaiting_input" means the program waits at a prompt (shown in prompt): answer with exec_write {job_id, input}; use secret: true for passwords.
- One command runs per session at a time (SESSION_BUSY otherwise): start servers and watchers with exec_start (or mode "background"), open more sessions with session_create.
- For full-screen programs (top, vim, less) drive them with exec_write {job_id, keys: ["Escape", ":wq", "Enter"]} (named like tmux send-keys) and read session_screen {session_id, since: next_cursor} for the rows that changed; prefer non-interactive flags when they exist.
- exec_run {command, parse: "auto"} also returns the output as typed JSON (parsed) for ls -l, ps, df, du, free, curl -I, git status/log, ip -j, ss, systemctl status, docker ps; parser names which one.
- A password nobody gave you: exec_write {job_id, human: {message}} gives a one-time url where a person types it; you never see it. A secret from the vault: vault_list, then env {"NAME": {"vault": "entry"}} or exec_write {vault}.
- Before risky changes to a directory take snapshot_create {path: "."}; an operator can restore it.
- A change Termada can prove (a unified diff under the operator's roots, a call to a configured HTTP endpoint): adapter_run {adapter, input} prepares it, the policy decides, then it is executed once and verified; adapter_undo reverses it. Tools named <plugin>.<tool> come from the operator's plugins.
- For a concrete operational goal (fix a service, migrate, deploy), start with mission_create {goal, plan}: run each step in the mission's session_id, then mission_update {step_id, step_status: "passed", job_id} — the runtime verifies the job exited 0 in that session (or pass adapter_run_id of a verified adapter run). End with mission_update {status: "succeeded", summary} and mission_report.
- Errors are results with error.code (INVALID_ARGUMENT, NOT_FOUND, SESSION_BUSY, NOT_AWAITING_INPUT, QUOTA_EXCEEDED, …) and a hint.`;

export interface McpServerOptions {
  agents: AgentOps;
  missions?: MissionService;
  /** Bounds reported by `capabilities`. */
  limits: Record<string, number>;
  /** Owner id of every session and job this server touches. */
  agent: string;
  version: string;
  /** Ask approvals in the agent's own client too, when it supports elicitation. */
  elicitApprovals?: boolean;
  /** The config's plugins: their tools are listed as `<plugin>.<tool>` and called through it. */
  plugins?: PluginOps;
}

const toolsByName = new Map<string, ToolDef>(TOOLS.map((t) => [t.name, t]));

let toolList: {
  name: string;
  title: string;
  description: string;
  inputSchema: unknown;
  outputSchema: unknown;
  annotations?: unknown;
}[] | undefined;

/** tools/list payload, computed once (portable JSON Schema from the wire schemas). */
export function listTools(): NonNullable<typeof toolList> {
  return toolList ??= TOOLS.map((t) => ({
    name: t.name,
    title: t.title,
    description: t.description,
    inputSchema: portableSchema(z.toJSONSchema(t.input, { io: "input" })),
    outputSchema: withErrorShape(portableSchema(z.toJSONSchema(t.output, { io: "output" }))),
    ...(t.annotations ? { annotations: { title: t.title, ...t.annotations } } : {}),
  }));
}

/**
 * The plugins' tools as tools/list shows them: marked as plugin tools (title, description and
 * `_meta["termada/plugin"]`), their output schema (when they declare one) widened by the error
 * shape as ours are.
 */
export function listPluginTools(plugins: PluginOps | undefined): unknown[] {
  if (!plugins) return [];
  return plugins.tools().map((t) => ({
    name: t.name,
    title: `${t.tool} (plugin ${t.plugin})`,
    description: `[plugin ${t.plugin}] ${t.description}`,
    inputSchema: t.inputSchema,
    ...(t.outputSchema ? { outputSchema: withErrorShape(t.outputSchema) } : {}),
    annotations: { title: `${t.tool} (plugin ${t.plugin})` },
    _meta: { "termada/plugin": t.plugin },
  }));
}

/** `structuredContent` of every failed call: `{error: {code, message, retriable, hint?, details?}}`. */
const ERROR_SHAPE = (() => {
  const { $schema: _drop, ...shape } = portableSchema(
    z.toJSONSchema(ToolError, { io: "output" }),
  );
  return shape;
})();

/**
 * A tool's declared output: its result OR the error shape. Clients (the official SDK among
 * them) validate `structuredContent` against `outputSchema` even on `isError` results, so a
 * schema of the success shape alone would turn every tool error into a client-side exception.
 */
function withErrorShape(result: Record<string, unknown>): Record<string, unknown> {
  const { $schema, ...shape } = result;
  return {
    ...($schema === undefined ? {} : { $schema }),
    type: "object",
    anyOf: [shape, ERROR_SHAPE],
  };
}

/**
 * tools/call as the protocol layer sees it: only the method. `callParams` checks the rest (a
 * malformed request is JSON-RPC -32602, not -32603), and the tool's own schema parses the
 * arguments: one parse per request.
 */
const ToolsCallRequest = z.object({
  method: z.literal("tools/call"),
  params: z.unknown().optional(),
});

/** The parts of tools/call params we read; anything else in them is ignored, as MCP allows. */
interface CallParams {
  name: string;
  arguments: unknown;
  progressToken: string | number | undefined;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/** JSON-RPC -32602 unless `params` is `{name: string, arguments?: object, _meta?: object}`. */
export function callParams(params: unknown): CallParams {
  const bad = (why: string) => new McpError(ErrorCode.InvalidParams, `Invalid tools/call: ${why}`);
  if (!isRecord(params)) throw bad("params must be an object");
  if (typeof params.name !== "string") throw bad("params.name must be a string");
  const args = params.arguments;
  if (args !== undefined && !isRecord(args)) throw bad("params.arguments must be an object");
  const meta = params._meta;
  if (meta !== undefined && !isRecord(meta)) throw bad("params._meta must be an object");
  const token = meta?.progressToken;
  if (token !== undefined && typeof token !== "string" && typeof token !== "number") {
    throw bad("params._meta.progressToken must be a string or a number");
  }
  return { name: params.name, arguments: args ?? {}, progressToken: token };
}

export function createMcpServer(options: McpServerOptions): Server {
  const server = new Server(
    { name: "termada", title: "Termada", version: options.version },
    {
      capabilities: {
        // Plugin tools come and go with their plugins (start, restart, config reload).
        tools: { listChanged: options.plugins !== undefined },
        resources: { subscribe: true, listChanged: false },
      },
      instructions: INSTRUCTIONS,
    },
  );
  registerResources(server, options);
  server.setRequestHandler(ListToolsRequestSchema, () =>
    ({
      tools: options.plugins ? [...listTools(), ...listPluginTools(options.plugins)] : listTools(),
    }) as never);
  if (options.plugins) {
    const off = options.plugins.onChange(() => {
      server.sendToolListChanged().catch(() => {/* not connected (yet or any more) */});
    });
    const previous = server.onclose;
    server.onclose = () => {
      off();
      previous?.();
    };
  }
  // Registered with the protocol layer's own method: the SDK server's override would validate
  // each request and each result again with its zod schemas (≈ 40 µs a call, measured). The
  // request is checked by callParams, the arguments by the tool's schema, and every result is
  // built from the wire types (the conformance test drives each tool through the SDK client,
  // which validates it against the published outputSchema).
  Protocol.prototype.setRequestHandler.call(server, ToolsCallRequest, async (
    rawRequest: { params: unknown },
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
  ): Promise<CallToolResult> => {
    const params = callParams(rawRequest.params);
    const tool = toolsByName.get(params.name);
    if (!tool && options.plugins?.owns(params.name)) {
      return await callPlugin(options.plugins, options.agent, params, extra.signal);
    }
    if (!tool) {
      // MCP's answer for an unknown tool is a protocol error (-32602), not a tool result.
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown tool "${params.name}": tools/list names the tools (${
          TOOLS.map((t) => t.name).join(", ")
        })`,
      );
    }
    const token = params.progressToken;
    const ctx: ToolContext = {
      agents: options.agents,
      ...(options.missions ? { missions: options.missions } : {}),
      agent: options.agent,
      version: options.version,
      limits: options.limits,
      call: {
        signal: extra.signal,
        onProgress: token === undefined ? undefined : (elapsed, total) => {
          extra.sendNotification({
            method: "notifications/progress",
            params: {
              progressToken: token,
              progress: elapsed,
              total,
              message: `waiting ${Math.round(elapsed / 1000)} s of ${Math.round(total / 1000)} s`,
            },
          }).catch(() => {/* the client went away; the wait ends on its own */});
        },
      },
    };
    try {
      const args = parseInput(tool.input, params.arguments);
      const result = await tool.run(ctx, args);
      const waiting = result as { status?: string; approval_id?: string; url?: string };
      if (tool.name === "exec_write" && waiting.url) {
        const human = (args as { human?: { message?: string } }).human;
        openAnswerPageInClient(
          server,
          waiting.url,
          human?.message ?? "a program asks for a password",
        );
      }
      if (
        options.elicitApprovals && waiting.status === "pending_approval" && waiting.approval_id
      ) {
        askApprovalInClient(server, options.agents, options.agent, waiting.approval_id);
      }
      return {
        content: [{ type: "text", text: tool.render(result) }, ...resourceLinks(tool.name, result)],
        structuredContent: result as Record<string, unknown>,
      } satisfies CallToolResult;
    } catch (err) {
      const e = toTermadaError(err);
      if (e.code === "INTERNAL") {
        log.error("tool failed", { tool: tool.name, agent: options.agent, error: err });
      }
      return errorResult(e.toJSON());
    }
  });
  return server;
}

/** A plugin tool's call: the gateway and audit are PluginOps'; the result passes as it came. */
async function callPlugin(
  plugins: PluginOps,
  agent: string,
  params: CallParams,
  signal: AbortSignal,
): Promise<CallToolResult> {
  try {
    const r = await plugins.call(agent, params.name, params.arguments as Record<string, unknown>, {
      signal,
    });
    return {
      content: r.content,
      ...(r.structuredContent !== undefined ? { structuredContent: r.structuredContent } : {}),
      ...(r.isError ? { isError: true } : {}),
    } as CallToolResult;
  } catch (err) {
    const e = toTermadaError(err);
    if (e.code === "INTERNAL") {
      log.error("plugin tool failed", { tool: params.name, agent, error: err });
    }
    return errorResult(e.toJSON());
  }
}

function errorResult(error: ErrorBody): CallToolResult {
  const text = `error ${error.code}: ${error.message}${error.hint ? `\nhint: ${error.hint}` : ""}`;
  return { isError: true, content: [{ type: "text", text }], structuredContent: { error } };
}
