/**
 * `/mcp`: MCP Streamable HTTP for agents. One SDK server per MCP session, bound to the agent
 * identified when it initialized: by token (Authorization: Bearer), or in development mode on
 * the Unix socket (0600, same user only) by the shim's header or the MCP client's name. Bodies
 * are bounded before anything is buffered; a body that is not a JSON-RPC message or batch is an
 * Invalid Request. Sessions are bounded (least recently used closed first), and each one counts
 * as a connection of its agent for reaping.
 */
import type { Context, Hono } from "hono";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { createMcpServer, jsonRpcShapeError, type McpServerOptions } from "../mcp/mod.ts";
import { bearerToken, concatBytes, logger } from "../shared/mod.ts";
import { type AppEnv, problem } from "./http.ts";

const log = logger("api");

/** Who a caller proved to be. */
export interface CallerIdentity {
  agent: string;
  /** The person or team behind it (a JWT's subject; a configured agent's `principal`). */
  principal: string;
  tenant?: string;
  via: "token" | "jwt" | "dev";
  /** A JWT's expiry (epoch ms): its MCP session ends then. */
  expiresAt?: number;
}

export interface AgentDirectory {
  /**
   * A credential (static token or agent JWT) → who it proves, or why it is refused (the
   * refusal is audited by the directory; never the credential). Tokens compared in constant time.
   */
  authenticate(
    credential: string,
    transport: string,
  ): Promise<CallerIdentity | { error: string }>;
  /** A dev-mode agent that named itself (the directory remembers it). */
  devIdentity(agent: string): CallerIdentity;
  /** A caller with no credential where one is required (audited). */
  noCredential(transport: string): void;
  /** True when the id belongs to a configured agent: dev mode may not claim it. */
  isConfigured(id: string): boolean;
  /** Development mode: agents on the Unix socket may identify themselves without a token. */
  devMode: boolean;
  /** Strict identity mode (docs/GOVERNANCE.md). */
  strict: boolean;
  /**
   * Whether `key` is the socket key (`<mcp socket>.key`, 0600, in a directory no session can
   * reach): naming oneself in development mode needs it, so a process inside a session — which
   * can connect to the socket but not read the key — gains no identity.
   */
  devKey(key: string | undefined): boolean;
}

export interface McpEndpointOptions {
  agents: AgentDirectory;
  /** Everything a per-agent MCP server needs but the agent's id. */
  server: Omit<McpServerOptions, "agent">;
  /** A connection of `agent` opened; the returned function is called when it closes. */
  attach?: (agent: string, via: CallerIdentity["via"]) => () => void;
  /** Called when an agent connects (for the agents table). */
  onAgent?: (id: string, via: CallerIdentity["via"]) => void;
  maxSessions?: number;
}

interface McpSession {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  agent: string;
  detach: () => void;
  /** A JWT session ends when its token expires (epoch ms). */
  expiresAt?: number;
}

const AGENT_ID = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
/** Largest request body (the stdio shim enforces the same bound on a line). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** Turns an MCP client name into an agent id ("Claude Code" → "claude-code"). */
export function agentIdFromName(name: string): string | undefined {
  const id = name.toLowerCase().replace(/[^a-z0-9_.-]+/g, "-").replace(/^[-_.]+|-+$/g, "")
    .slice(0, 64);
  return AGENT_ID.test(id) ? id : undefined;
}

export interface McpEndpoint {
  /** Closes every MCP session (shutdown). */
  close(): Promise<void>;
  readonly sessions: number;
}

export function mountMcp(app: Hono<AppEnv>, options: McpEndpointOptions): McpEndpoint {
  const sessions = new Map<string, McpSession>();
  const maxSessions = options.maxSessions ?? 256;

  const drop = (id: string) => {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    s.detach();
  };

  app.all("/mcp", async (c) => {
    const identity = await identify(c, options.agents);
    if ("error" in identity) return identity.error;
    const sid = c.req.header("mcp-session-id");
    if (sid !== undefined) {
      const s = sessions.get(sid);
      if (!s) {
        return problem(c, 404, "NOT_FOUND", "Unknown or expired MCP session; initialize again");
      }
      // A dev-mode caller that names nobody continues as the session's agent (the session id is
      // an unguessable secret on a same-user socket); anyone who names an agent must match it.
      if (identity.named && s.agent !== identity.agent) {
        return problem(c, 403, "FORBIDDEN", "This MCP session belongs to another agent");
      }
      if (s.expiresAt !== undefined && Date.now() >= s.expiresAt) {
        drop(sid);
        s.transport.close().catch(() => {/* closing drops streams; nothing to report */});
        return problem(c, 401, "UNAUTHORIZED", "The agent JWT of this MCP session expired");
      }
      // Map order is recency order (least recently used first): move the session to the end.
      sessions.delete(sid);
      sessions.set(sid, s);
      if (c.req.method === "DELETE") {
        const r = await s.transport.handleRequest(c.req.raw);
        drop(sid);
        return r;
      }
      return await s.transport.handleRequest(c.req.raw, { parsedBody: identity.body });
    }
    if (c.req.method !== "POST") {
      return problem(c, 400, "INVALID_ARGUMENT", "Missing mcp-session-id header");
    }
    const agent = identity.agent;
    const server = createMcpServer({ ...options.server, agent });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (id: string) => {
        // Evict only once a session really opens: a POST that is not a valid initialize must
        // not cost another agent its session.
        evictIfFull();
        const detach = options.attach?.(agent, identity.via) ?? (() => {});
        sessions.set(id, {
          transport,
          server,
          agent,
          detach,
          ...(identity.expiresAt ? { expiresAt: identity.expiresAt } : {}),
        });
        options.onAgent?.(agent, identity.via);
        log.info("agent connected", { agent, via: identity.via, listener: c.env?.listener });
      },
      onsessionclosed: (id: string) => drop(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) drop(transport.sessionId);
    };
    await server.connect(transport);
    const res = await transport.handleRequest(c.req.raw, { parsedBody: identity.body });
    // Not an initialize (a stateless call, a bad Accept, "not initialized"): no session opened,
    // so nothing would ever close this server, and what it registered (its plugins listener)
    // would stay for the daemon's life. Its answer is already made.
    if (transport.sessionId === undefined) await server.close().catch(() => {});
    return res;
  });

  function evictIfFull(): void {
    if (sessions.size < maxSessions) return;
    // The first entry is the least recently used (see the touch above).
    const oldest = sessions.entries().next().value;
    if (!oldest) return;
    drop(oldest[0]);
    oldest[1].transport.close().catch(() => {/* closing drops streams; nothing to report */});
  }

  return {
    async close() {
      const all = [...sessions.keys()];
      const transports = all.map((id) => sessions.get(id)!.transport);
      for (const id of all) drop(id);
      await Promise.all(transports.map((t) => t.close().catch(() => {})));
    },
    get sessions() {
      return sessions.size;
    },
  };
}

type Identity =
  | {
    agent: string;
    via: CallerIdentity["via"];
    named: boolean;
    body: unknown;
    expiresAt?: number;
  }
  | { error: Response };

/**
 * Who is calling: the body is bounded first (before authentication: any local process can reach
 * the TCP port), then the caller is authenticated (token, or development mode on the socket),
 * and only then is the body read as JSON-RPC — an unauthenticated caller learns nothing more.
 */
async function identify(c: Context<AppEnv>, agents: AgentDirectory): Promise<Identity> {
  let bytes: Uint8Array | undefined;
  if (c.req.method === "POST") {
    bytes = await readBounded(c.req.raw, MAX_BODY_BYTES);
    if (!bytes) {
      return { error: rpcError(c, 413, -32600, `Request too large: over ${MAX_BODY_BYTES} bytes`) };
    }
  }
  const auth = c.req.header("authorization");
  const transport = `http/${c.env?.listener ?? "tcp"}`;
  let caller: CallerIdentity | undefined;
  if (auth !== undefined) {
    const token = bearerToken(auth);
    const who = token === undefined
      ? { error: "Malformed Authorization header" }
      : await agents.authenticate(token, transport);
    if ("error" in who) return { error: problem(c, 401, "UNAUTHORIZED", who.error) };
    caller = who;
  } else if (c.env?.listener !== "unix" || !agents.devMode) {
    agents.noCredential(transport);
    return {
      error: problem(
        c,
        401,
        "UNAUTHORIZED",
        "An agent token is required",
        "Send Authorization: Bearer <token> (agents: in config.yaml)",
      ),
    };
  }
  let body: unknown = undefined;
  if (bytes) {
    try {
      body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch {
      return { error: rpcError(c, 400, -32700, "Parse error: the body is not JSON") };
    }
    const shape = jsonRpcShapeError(body);
    if (shape !== undefined) {
      return { error: rpcError(c, 400, -32600, `Invalid Request: ${shape}`) };
    }
  }
  if (caller) {
    return {
      agent: caller.agent,
      via: caller.via,
      named: true,
      body,
      ...(caller.expiresAt ? { expiresAt: caller.expiresAt } : {}),
    };
  }
  if (!agents.devKey(c.req.header("x-termada-key"))) {
    agents.noCredential(transport);
    return {
      error: problem(
        c,
        401,
        "UNAUTHORIZED",
        "Development mode needs the socket key (x-termada-key) or an agent token",
        "The shim sends it; processes inside a Termada session cannot read it",
      ),
    };
  }
  const header = c.req.header("x-termada-agent");
  const claimed = header ?? clientName(body) ?? "agent";
  const agent = agentIdFromName(claimed);
  if (!agent) return { error: problem(c, 400, "INVALID_ARGUMENT", `Bad agent id "${claimed}"`) };
  if (agents.isConfigured(agent)) {
    return { error: problem(c, 401, "UNAUTHORIZED", `Agent "${agent}" has a token: present it`) };
  }
  agents.devIdentity(agent);
  return { agent, via: "dev", named: header !== undefined, body };
}

/** A JSON-RPC error response body (id null: the request could not be read). */
function rpcError(c: Context<AppEnv>, status: 400 | 413, code: number, message: string): Response {
  return c.json({ jsonrpc: "2.0", id: null, error: { code, message } }, status);
}

/** The body of `req`, or undefined when it is over `limit` bytes (the rest is never read). */
async function readBounded(req: Request, limit: number): Promise<Uint8Array | undefined> {
  const declared = Number(req.headers.get("content-length"));
  if (declared > limit || !req.body) {
    await req.body?.cancel().catch(() => {/* the client went away; nothing to release */});
    return declared > limit ? undefined : new Uint8Array(0);
  }
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {/* the client went away; nothing to release */});
      return undefined;
    }
    chunks.push(value);
  }
  return concatBytes(chunks, size);
}

function clientName(body: unknown): string | undefined {
  const msgs = Array.isArray(body) ? body : [body];
  for (const m of msgs) {
    const name =
      (m as { method?: string; params?: { clientInfo?: { name?: unknown } } })?.method ===
          "initialize"
        ? (m as { params?: { clientInfo?: { name?: unknown } } }).params?.clientInfo?.name
        : undefined;
    if (typeof name === "string") return name;
  }
  return undefined;
}
