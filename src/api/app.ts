/**
 * The one Hono app served on both listeners (Unix socket and loopback TCP). Today it carries
 * the MCP endpoint (`/mcp`, Streamable HTTP) and a health check; the control plane and the
 * dashboard join it later. Guards: on TCP the Host and Origin must be loopback (DNS rebinding)
 * and every `/mcp` request needs an agent token; on the Unix socket (0600, same user only)
 * development mode may identify an agent by the shim's header or the MCP client's name.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Engine } from "../engine/mod.ts";
import type { MissionService } from "../mission/mod.ts";
import { createMcpServer } from "../mcp/mod.ts";
import { logger } from "../shared/mod.ts";
import { type OperatorOptions, operatorRoutes } from "./operator.ts";
import { type DashboardFiles, dashboardRoutes } from "./dashboard.ts";

const log = logger("api");

export type Listener = "unix" | "tcp";
export type AppEnv = { Bindings: { listener: Listener } };

export interface AgentDirectory {
  /** Agent id for a configured token, or undefined. Compare in constant time. */
  agentForToken(token: string): string | undefined;
  /** True when the id belongs to a configured (token) agent: dev mode may not claim it. */
  isConfigured(id: string): boolean;
  /** Development mode: agents on the Unix socket may identify themselves without a token. */
  devMode: boolean;
}

export interface AppOptions {
  engine: Engine;
  /** Mission Control (MCP mission tools and /api/missions); absent → NOT_SUPPORTED / 404. */
  missions?: MissionService;
  version: string;
  agents: AgentDirectory;
  /** TCP port, for the Host check. */
  port: number;
  /** Called when an agent connects (for the agents table). */
  onAgent?: (id: string, via: "token" | "dev") => void;
  /** The operator (dashboard) token; `/api` answers only with it. */
  operatorToken?: string;
  /** Dashboard files (tests); default: read from `dashboard/` once. */
  dashboardFiles?: DashboardFiles;
  /** Operator routes under /api (approvals, stop-all, audit); absent → 404. */
  operator?: Omit<OperatorOptions, "operatorToken" | "engine" | "version">;
  /** Most MCP sessions kept at once; the least recently used one is closed beyond it. */
  maxMcpSessions?: number;
}

interface McpSession {
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  agent: string;
}

const AGENT_ID = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** Turns an MCP client name into an agent id ("Claude Code" → "claude-code"). */
export function agentIdFromName(name: string): string | undefined {
  const id = name.toLowerCase().replace(/[^a-z0-9_.-]+/g, "-").replace(/^[-_.]+|-+$/g, "")
    .slice(0, 64);
  return AGENT_ID.test(id) ? id : undefined;
}

export interface TermadaApp {
  app: Hono<AppEnv>;
  /** Closes every MCP session (shutdown). */
  close(): Promise<void>;
  readonly mcpSessions: number;
}

export function createApp(options: AppOptions): TermadaApp {
  const app = new Hono<AppEnv>();
  const sessions = new Map<string, McpSession>();
  const maxSessions = options.maxMcpSessions ?? 256;
  const loopbackHosts = new Set([
    `127.0.0.1:${options.port}`,
    `localhost:${options.port}`,
    `[::1]:${options.port}`,
  ]);

  app.use("*", async (c, next): Promise<Response | void> => {
    if (c.env?.listener === "tcp") {
      const host = c.req.header("host") ?? "";
      if (!loopbackHosts.has(host)) {
        return problem(c, 403, "FORBIDDEN", `Host "${host}" is not allowed`);
      }
      const origin = c.req.header("origin");
      if (origin !== undefined && !loopbackHosts.has(origin.replace(/^http:\/\//, ""))) {
        return problem(c, 403, "FORBIDDEN", `Origin "${origin}" is not allowed`);
      }
    }
    await next();
  });

  app.get("/healthz", (c) => c.json({ ok: true, version: options.version, pid: Deno.pid }));

  // Dashboard (static page + bundle, public; its data comes from the token-protected /api).
  app.route("/", dashboardRoutes(options.dashboardFiles));

  app.all("/mcp", async (c) => {
    const identity = await identify(c);
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
      // Map order is recency order (least recently used first): move the session to the end.
      sessions.delete(sid);
      sessions.set(sid, s);
      return await s.transport.handleRequest(c.req.raw, { parsedBody: identity.body });
    }
    if (c.req.method !== "POST") {
      return problem(c, 400, "INVALID_ARGUMENT", "Missing mcp-session-id header");
    }
    const agent = identity.agent;
    const server = createMcpServer({
      engine: options.engine,
      ...(options.missions ? { missions: options.missions } : {}),
      agent,
      version: options.version,
    });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (id: string) => {
        // Evict only once a session really opens: a POST that is not a valid initialize must
        // not cost another agent its session.
        evictIfFull();
        sessions.set(id, { transport, server, agent });
        options.onAgent?.(agent, identity.via);
        log.info("agent connected", { agent, via: identity.via, listener: c.env?.listener });
      },
      onsessionclosed: (id: string) => {
        sessions.delete(id);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    return await transport.handleRequest(c.req.raw, { parsedBody: identity.body });
  });

  if (options.operator && options.operatorToken) {
    const token = options.operatorToken;
    app.route(
      "/api",
      operatorRoutes(
        {
          ...options.operator,
          engine: options.engine,
          ...(options.missions ? { missions: options.missions } : {}),
          operatorToken: token,
          version: options.version,
          port: options.port,
        },
        (c) => {
          const m = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "");
          return m !== null && sameSecret(m[1]!, token);
        },
      ),
    );
  }

  // Prometheus text metrics for the operator's monitoring (operator token, like /api).
  const started = Date.now();
  app.get("/metrics", (c) => {
    const m = /^Bearer\s+(\S+)$/i.exec(c.req.header("authorization") ?? "");
    if (!options.operatorToken || m === null || !sameSecret(m[1]!, options.operatorToken)) {
      return problem(c, 401, "UNAUTHORIZED", "Metrics need the operator token");
    }
    const jobs = options.engine.allJobs(1000);
    const active = jobs.filter((j) =>
      ["running", "awaiting_input", "pending_approval"].includes(j.status)
    );
    const lines = [
      ["termada_sessions_open", "gauge", "Open terminal sessions", options.engine.sessionCount()],
      ["termada_jobs_active", "gauge", "Jobs running, awaiting input or approval", active.length],
      [
        "termada_approvals_pending",
        "gauge",
        "Jobs waiting for an operator",
        options.engine.pendingApprovals().length,
      ],
      ["termada_mcp_sessions", "gauge", "Open MCP sessions", sessions.size],
      [
        "termada_stopped",
        "gauge",
        "1 while the stop-all barrier refuses new commands",
        options.operator?.gateway.stopped ? 1 : 0,
      ],
      [
        "termada_uptime_seconds",
        "gauge",
        "Seconds since the daemon started",
        Math.round((Date.now() - started) / 1000),
      ],
      [
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory of the daemon",
        Deno.memoryUsage().rss,
      ],
    ] as const;
    const text = lines.map(([name, type, help, value]) =>
      `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`
    ).join("");
    return c.text(text, 200, { "content-type": "text/plain; version=0.0.4" });
  });

  app.notFound((c) => problem(c, 404, "NOT_FOUND", `No route ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    log.error("request failed", { path: c.req.path, error: err });
    return problem(c, 500, "INTERNAL", "Internal error");
  });

  function evictIfFull(): void {
    if (sessions.size < maxSessions) return;
    // The first entry is the least recently used (see the touch in /mcp). Insertion order
    // cannot tie, unlike millisecond timestamps.
    const oldest = sessions.entries().next().value;
    if (!oldest) return;
    sessions.delete(oldest[0]);
    oldest[1].transport.close().catch(() => {/* closing drops streams; nothing to report */});
  }

  /** Who is calling: token first; in dev mode on the socket, the shim's header or client name. */
  async function identify(
    c: Context<AppEnv>,
  ): Promise<
    { agent: string; via: "token" | "dev"; named: boolean; body: unknown } | { error: Response }
  > {
    let body: unknown = undefined;
    if (c.req.method === "POST") {
      // Bounded before anything is buffered: the limit is in bytes, and it holds before the
      // caller is authenticated (any local process can reach the TCP port).
      const bytes = await readBounded(c.req.raw, MAX_BODY_BYTES);
      if (!bytes) {
        return { error: problem(c, 413, "INVALID_ARGUMENT", "Request body over 4 MiB") };
      }
      try {
        body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
      } catch {
        return { error: problem(c, 400, "INVALID_ARGUMENT", "Body is not JSON") };
      }
    }
    const auth = c.req.header("authorization");
    if (auth !== undefined) {
      const m = /^Bearer\s+(\S+)$/i.exec(auth);
      const agent = m ? options.agents.agentForToken(m[1]!) : undefined;
      if (!agent) return { error: problem(c, 401, "UNAUTHORIZED", "Unknown agent token") };
      return { agent, via: "token", named: true, body };
    }
    if (c.env?.listener !== "unix" || !options.agents.devMode) {
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
    const header = c.req.header("x-termada-agent");
    const claimed = header ?? clientName(body) ?? "agent";
    const agent = agentIdFromName(claimed);
    if (!agent) return { error: problem(c, 400, "INVALID_ARGUMENT", `Bad agent id "${claimed}"`) };
    if (options.agents.isConfigured(agent)) {
      return {
        error: problem(c, 401, "UNAUTHORIZED", `Agent "${agent}" has a token: present it`),
      };
    }
    return { agent, via: "dev", named: header !== undefined, body };
  }

  return {
    app,
    async close() {
      const all = [...sessions.values()];
      sessions.clear();
      await Promise.all(all.map((s) => s.transport.close().catch(() => {})));
    },
    get mcpSessions() {
      return sessions.size;
    },
  };
}

/** Constant-time comparison of two secrets. */
export function sameSecret(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  if (x.length !== y.length) return false;
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i]! ^ y[i]!;
  return diff === 0;
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
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
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

function problem(
  c: Context<AppEnv>,
  status: 400 | 401 | 403 | 404 | 413 | 500,
  code: string,
  message: string,
  hint?: string,
): Response {
  return c.json({ error: { code, message, retriable: false, ...(hint ? { hint } : {}) } }, status);
}
