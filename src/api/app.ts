/**
 * The one Hono app served on both listeners (Unix socket and loopback TCP): `/mcp` for agents,
 * `/api/*` and `/metrics` for the operator, the dashboard's static files, `/healthz`. Guards: on
 * TCP the Host and Origin must be loopback (DNS rebinding); `/api` and `/metrics` need the
 * operator token everywhere. Handlers throw typed errors; `onError` is the one mapper.
 */
import { Hono } from "hono";
import type { Control } from "../control/mod.ts";
import type { MissionService } from "../mission/mod.ts";
import { logger } from "../shared/mod.ts";
import { type DashboardFiles, dashboardRoutes } from "./dashboard.ts";
import { secretRoutes } from "./secret.ts";
import {
  type AppEnv,
  errorResponse,
  loopbackOnly,
  type OperatorCredentials,
  operatorGuard,
  problem,
} from "./http.ts";
import { type AgentDirectory, mountMcp } from "./mcp_http.ts";
import { type OperatorOptions, operatorRoutes } from "./operator.ts";

const log = logger("api");

export interface AppOptions {
  control: Control;
  /** Ask approvals in agents' own MCP clients too (`approvals.elicitation`). */
  elicitApprovals?: boolean;
  /** Mission Control (MCP mission tools and /api/missions); absent → NOT_SUPPORTED / 404. */
  missions?: MissionService;
  version: string;
  agents: AgentDirectory;
  /** TCP port, for the Host check (0 when there is no TCP listener). */
  port: number;
  /** Called when an agent connects (for the agents table). */
  onAgent?: (id: string, via: string) => void;
  /** The operator (dashboard) token; `/api` answers only with it. */
  operatorToken?: string;
  /** Roles of the static token, operator JWTs, refusals (docs/GOVERNANCE.md). */
  operatorAuth?: Omit<OperatorCredentials, "token">;
  /** Dashboard files (tests); default: read from `dashboard/` once. */
  dashboardFiles?: DashboardFiles;
  /** Operator routes under /api (approvals, stop-all, audit); absent → 404. */
  operator?: Omit<OperatorOptions, "operatorToken" | "operators" | "version" | "missions">;
  /** Most MCP sessions kept at once; the least recently used one is closed beyond it. */
  maxMcpSessions?: number;
}

export interface TermadaApp {
  app: Hono<AppEnv>;
  /** Closes every MCP session (shutdown). */
  close(): Promise<void>;
  readonly mcpSessions: number;
}

/** Bounds reported by `capabilities` (from the control layer's limits). */
export function reportedLimits(control: Control): Record<string, number> {
  return {
    sessions_per_agent: control.limits.sessionsPerOwner,
    sessions_total: control.limits.sessionsTotal,
    background_jobs_per_agent: control.limits.backgroundPerOwner,
    output_retention_bytes: control.output.retentionBytes,
  };
}

export function createApp(options: AppOptions): TermadaApp {
  const app = new Hono<AppEnv>();
  const { control } = options;
  app.use("*", loopbackOnly(options.port));
  app.get("/healthz", (c) => c.json({ ok: true, version: options.version, pid: Deno.pid }));
  // Dashboard (static page + bundle, public; its data comes from the token-protected /api).
  app.route("/", dashboardRoutes(options.dashboardFiles));
  // One-time answer pages (exec_write {human}): the token in the path is the capability.
  app.route("/", secretRoutes(control.agents));

  const mcp = mountMcp(app, {
    agents: options.agents,
    server: {
      agents: control.agents,
      plugins: control.plugins,
      ...(options.missions ? { missions: options.missions } : {}),
      version: options.version,
      limits: reportedLimits(control),
      ...(options.elicitApprovals ? { elicitApprovals: true } : {}),
    },
    attach: (agent, via) => control.presence.attach(agent, via),
    onAgent: options.onAgent,
    maxSessions: options.maxMcpSessions,
  });

  if (options.operator && options.operatorToken) {
    app.route(
      "/api",
      operatorRoutes({
        ...options.operator,
        operators: control.operators,
        plugins: control.plugins,
        ...(control.adapters ? { adapters: control.adapters } : {}),
        ...(options.missions ? { missions: options.missions } : {}),
        operatorToken: options.operatorToken,
        operatorAuth: options.operatorAuth,
        version: options.version,
      }),
    );
  }

  // Prometheus text metrics for the operator's monitoring (operator token, like /api).
  const started = Date.now();
  if (options.operatorToken) {
    app.use(
      "/metrics",
      operatorGuard({ ...options.operatorAuth, token: options.operatorToken }, "Metrics"),
    );
  }
  app.get("/metrics", (c) => {
    if (!options.operatorToken) {
      return problem(c, 401, "UNAUTHORIZED", "Metrics need the operator token");
    }
    const ops = control.operators;
    const active = ops.jobs(1000).filter((j) =>
      j.status === "running" || j.status === "awaiting_input" || j.status === "pending_approval"
    );
    const lines = [
      ["termada_sessions_open", "gauge", "Open terminal sessions", ops.sessionCount()],
      ["termada_jobs_active", "gauge", "Jobs running, awaiting input or approval", active.length],
      [
        "termada_approvals_pending",
        "gauge",
        "Jobs waiting for an operator",
        ops.pendingApprovals().length,
      ],
      ["termada_mcp_sessions", "gauge", "Open MCP sessions", mcp.sessions],
      [
        "termada_stopped",
        "gauge",
        "1 while the stop-all barrier refuses new commands",
        ops.stopped ? 1 : 0,
      ],
      [
        "termada_audit_healthy",
        "gauge",
        "1 while the audit log can be written",
        ops.auditHealthy ? 1 : 0,
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
    const r = errorResponse(c, err);
    if (r.status >= 500 && r.status !== 501 && r.status !== 503) {
      log.error("request failed", { path: c.req.path, error: err });
    }
    return r;
  });

  return {
    app,
    close: () => mcp.close(),
    get mcpSessions() {
      return mcp.sessions;
    },
  };
}
