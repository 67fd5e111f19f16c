/**
 * Operator routes (`/api/*`): the approval queue, the kill switch and the audit trail. Every
 * request needs the operator token (`Authorization: Bearer`), on the socket and on TCP alike;
 * agent credentials — tokens or dev-mode identities — never reach these routes.
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { encodeBase64 } from "./_base64.ts";
import type { Context } from "hono";
import type { Actor, Gateway } from "../control/mod.ts";
import type { Engine } from "../engine/mod.ts";
import type { MissionService } from "../mission/mod.ts";
import { type EventBus, TermadaError, toTermadaError } from "../shared/mod.ts";
import type { AppEnv } from "./app.ts";

export interface OperatorOptions {
  gateway: Gateway;
  engine: Engine;
  operatorToken: string;
  version: string;
  /** Recent audit records (oldest first). */
  auditTail?: (n: number) => unknown[];
  /** Full verification of the audit chain. */
  auditVerify?: () => unknown;
  /** Live events (the audit records as they are written). */
  bus?: EventBus;
  /** Mission Control (every agent's missions, reports, cancel). */
  missions?: MissionService;
  /** The effective policies (read-only view; never tokens). */
  policy?: () => Record<string, unknown>;
  /** The loopback TCP port (for links such as `termada dashboard`). */
  port?: number;
  /** SSE keep-alive period (default 15 s). */
  keepAliveMs?: number;
}

/** Bytes queued for one slow stream client before it is cut off (it resumes by cursor). */
const MAX_STREAM_BACKLOG = 4 * 1024 * 1024;
/** Raw bytes per SSE message of a terminal stream (base64 makes it 4/3 larger). */
const STREAM_CHUNK = 48 * 1024;

const STATUS: Record<string, 400 | 401 | 403 | 404 | 409 | 500 | 503> = {
  INVALID_ARGUMENT: 400,
  SESSION_BUSY: 409,
  NOT_FOUND: 404,
  STOPPED: 409,
  AUDIT_UNAVAILABLE: 503,
};

function fail(c: Context<AppEnv>, err: unknown): Response {
  const e = toTermadaError(err);
  return c.json({ error: e.toJSON() }, STATUS[e.code] ?? 500);
}

function operatorOf(c: Context<AppEnv>): Actor {
  const raw = c.req.header("x-termada-operator") ?? "operator";
  const id = raw.toLowerCase().replace(/[^a-z0-9_.@-]+/g, "-").slice(0, 64) || "operator";
  return { kind: "operator", id };
}

async function body(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (text.length > 64 * 1024) throw new TermadaError("INVALID_ARGUMENT", "Body over 64 KiB");
  if (text.trim() === "") return {};
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) return v;
  } catch {
    // reported below
  }
  throw new TermadaError("INVALID_ARGUMENT", "Body must be a JSON object");
}

function optReason(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v.length > 1000) {
    throw new TermadaError("INVALID_ARGUMENT", '"reason" must be a string of at most 1000 chars');
  }
  return v;
}

function optMs(v: unknown, name: string, max: number): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > max) {
    throw new TermadaError("INVALID_ARGUMENT", `"${name}" must be an integer from 0 to ${max}`);
  }
  return v;
}

export function operatorRoutes(
  options: OperatorOptions,
  checkToken: (c: Context<AppEnv>) => boolean,
): Hono<AppEnv> {
  const api = new Hono<AppEnv>();
  api.use("*", async (c, next): Promise<Response | void> => {
    if (!checkToken(c)) {
      return c.json({
        error: {
          code: "UNAUTHORIZED",
          message: "Operator routes need the operator token",
          retriable: false,
          hint: "termada CLI commands send it for you (it lives in the state directory)",
        },
      }, 401);
    }
    await next();
  });
  const { gateway, engine } = options;

  api.get("/status", (c) =>
    c.json({
      version: options.version,
      pid: Deno.pid,
      ...(options.port === undefined ? {} : { port: options.port }),
      sessions: engine.sessionCount(),
      pending_approvals: gateway.pending().length,
      stopped: gateway.stopped,
      ...(gateway.stopped ? { barrier_until: new Date(gateway.barrierUntil).toISOString() } : {}),
    }));
  api.get("/approvals", (c) => c.json({ approvals: gateway.pending() }));
  api.get(
    "/policy",
    (c) =>
      options.policy
        ? c.json(options.policy())
        : fail(c, new TermadaError("NOT_SUPPORTED", "No policy")),
  );
  api.post("/approvals/:id/approve", async (c) => {
    try {
      const b = await body(c);
      await gateway.approve(c.req.param("id"), operatorOf(c), optReason(b.reason));
      return c.json({ ok: true, approval_id: c.req.param("id"), approved: true });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/approvals/:id/deny", async (c) => {
    try {
      const b = await body(c);
      await gateway.deny(c.req.param("id"), operatorOf(c), optReason(b.reason));
      return c.json({ ok: true, approval_id: c.req.param("id"), approved: false });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/stop", async (c) => {
    try {
      const b = await body(c);
      const r = await gateway.stopAll(operatorOf(c), {
        barrierMs: optMs(b.barrier_ms, "barrier_ms", 86_400_000),
        graceMs: optMs(b.grace_ms, "grace_ms", 60_000),
      });
      return c.json({ ok: true, ...r });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/resume", (c) => {
    try {
      gateway.resume(operatorOf(c));
      return c.json({ ok: true });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.get("/sessions", (c) => c.json({ sessions: engine.allSessions() }));

  // Takeover: an explicit keyboard lease. Every handoff and every keystroke batch is audited
  // before it takes effect.
  api.post("/sessions/:id/takeover", (c) => {
    try {
      const op = operatorOf(c);
      gateway.record(op, "session.takeover", { session_id: c.req.param("id") });
      return c.json({ ok: true, session: engine.takeover(c.req.param("id"), op.id) });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/sessions/:id/release", (c) => {
    try {
      const op = operatorOf(c);
      gateway.record(op, "session.release", { session_id: c.req.param("id") });
      return c.json({ ok: true, session: engine.releaseSession(c.req.param("id"), op.id) });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/sessions/:id/pause", (c) => {
    try {
      const op = operatorOf(c);
      gateway.record(op, "session.output_paused", { session_id: c.req.param("id") });
      return c.json({ ok: true, session: engine.pauseOutput(c.req.param("id"), op.id) });
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/sessions/:id/resume-output", (c) => {
    try {
      const op = operatorOf(c);
      gateway.record(op, "session.output_resumed", { session_id: c.req.param("id") });
      return c.json({ ok: true, session: engine.resumeOutput(c.req.param("id"), op.id) });
    } catch (err) {
      return fail(c, err);
    }
  });
  // Resize: the session's PTY (and so the agent's `stty size`) follows; audited first.
  api.post("/sessions/:id/resize", async (c) => {
    try {
      const op = operatorOf(c);
      const b = await body(c);
      const { cols, rows } = b;
      if (typeof cols !== "number" || !Number.isInteger(cols) || cols < 10 || cols > 1000) {
        throw new TermadaError("INVALID_ARGUMENT", '"cols" must be an integer from 10 to 1000');
      }
      if (typeof rows !== "number" || !Number.isInteger(rows) || rows < 2 || rows > 500) {
        throw new TermadaError("INVALID_ARGUMENT", '"rows" must be an integer from 2 to 500');
      }
      const id = c.req.param("id");
      const s = engine.anySession(id);
      gateway.record(op, "session.resized", { session_id: id, cols, rows });
      return c.json(engine.resizeSession(s.owner, { session_id: id, cols, rows }));
    } catch (err) {
      return fail(c, err);
    }
  });
  api.post("/sessions/:id/input", async (c) => {
    try {
      const op = operatorOf(c);
      const b = await body(c);
      if (typeof b.data !== "string" || b.data.length > 65_536) {
        throw new TermadaError("INVALID_ARGUMENT", '"data" must be a string of at most 64 KiB');
      }
      gateway.record(op, "operator.input", { session_id: c.req.param("id"), bytes: b.data.length });
      await engine.operatorInput(c.req.param("id"), op.id, b.data);
      return c.json({ ok: true });
    } catch (err) {
      return fail(c, err);
    }
  });

  api.get("/jobs", (c) => {
    const limit = Number(c.req.query("limit") ?? "100");
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      return fail(
        c,
        new TermadaError("INVALID_ARGUMENT", '"limit" must be an integer from 1 to 1000'),
      );
    }
    return c.json({ jobs: engine.allJobs(limit) });
  });

  // One job's output (any agent's), a page at a time: the same page an agent's exec_poll gets
  // (`output`, `next_cursor`, `has_more`, `gap` when bytes were dropped, `status`). Read-only.
  api.get("/jobs/:id/output", async (c) => {
    try {
      const job = engine.anyJob(c.req.param("id"));
      const cursor = c.req.query("cursor");
      const rawMax = c.req.query("max_bytes");
      const maxBytes = rawMax === undefined || rawMax === "" ? undefined : Number(rawMax);
      const v = await engine.poll(job.owner, {
        job_id: job.job_id,
        ...(cursor === undefined || cursor === "" ? {} : { cursor }),
        ...(maxBytes === undefined ? {} : { max_bytes: maxBytes }),
      });
      return c.json({
        job_id: v.job_id,
        owner: job.owner,
        status: v.status,
        output: v.output,
        next_cursor: v.next_cursor,
        has_more: v.has_more,
        ...(v.gap === undefined ? {} : { gap: v.gap }),
      });
    } catch (err) {
      return fail(c, err);
    }
  });

  // An operator stops one job of any agent: audited before it acts, then the engine's stop path.
  api.post("/jobs/:id/kill", async (c) => {
    try {
      const b = await body(c);
      const graceMs = optMs(b.grace_ms, "grace_ms", 60_000);
      const id = c.req.param("id");
      const job = engine.anyJob(id);
      gateway.record(operatorOf(c), "job.killed_by_operator", {
        job_id: id,
        owner: job.owner,
        session_id: job.session_id,
        status: job.status,
        ...(graceMs === undefined ? {} : { grace_ms: graceMs }),
      });
      const r = await engine.killAny(id, graceMs);
      return c.json({ ok: true, job: r });
    } catch (err) {
      return fail(c, err);
    }
  });

  // Live events: SSE with Last-Event-ID resume over a bounded replay window; `resync` when the
  // client's id fell out of it (reload state, then follow).
  api.get("/events", (c) => {
    const bus = options.bus;
    if (!bus) return fail(c, new TermadaError("NOT_SUPPORTED", "No event bus"));
    const raw = c.req.header("last-event-id") ?? c.req.query("since");
    const since = raw === undefined || raw === "" ? undefined : Number(raw);
    if (since !== undefined && (!Number.isInteger(since) || since < 0)) {
      return fail(c, new TermadaError("INVALID_ARGUMENT", "Last-Event-ID must be an event id"));
    }
    return streamSSE(c, async (stream) => {
      const done = Promise.withResolvers<void>();
      let chain: Promise<void> = Promise.resolve();
      const send = (id: number, event: string, data: unknown) => {
        chain = chain.then(() =>
          stream.writeSSE({ id: String(id), event, data: JSON.stringify(data) })
        );
      };
      const replay = bus.since(since);
      if (replay.kind === "resync") send(bus.lastId, "resync", { last_id: bus.lastId });
      let last = since ?? 0;
      for (const e of replay.events) {
        send(e.id, e.type, e);
        last = e.id;
      }
      const off = bus.subscribe((e) => {
        if (e.id > last) {
          last = e.id;
          send(e.id, e.type, e);
        }
      });
      const ka = setInterval(() => {
        chain = chain.then(() => stream.write(": keep-alive\n\n")).then(() => {});
      }, options.keepAliveMs ?? 15_000);
      stream.onAbort(() => done.resolve());
      await done.promise;
      clearInterval(ka);
      off();
      await chain.catch(() => {});
    });
  });

  // A session's raw terminal bytes (redacted, markers removed): replay from `cursor` (a ring
  // offset; default: all that is kept), then live. Binary-safe: each message is base64, its id
  // the offset after it; `gap` says bytes before the replay were dropped; `end` when it closes.
  api.get("/sessions/:id/stream", (c) => {
    let session;
    try {
      session = engine.anySession(c.req.param("id"));
    } catch (err) {
      return fail(c, err);
    }
    const raw = c.req.header("last-event-id") ?? c.req.query("cursor");
    const from = raw === undefined || raw === "" ? 0 : Number(raw);
    if (!Number.isInteger(from) || from < 0 || from > session.ring.totalBytes) {
      return fail(
        c,
        new TermadaError("INVALID_ARGUMENT", "cursor must be an offset of this stream"),
      );
    }
    const s = session;
    return streamSSE(c, async (stream) => {
      const done = Promise.withResolvers<void>();
      let chain: Promise<void> = Promise.resolve();
      let backlog = 0;
      const sendBytes = (bytes: Uint8Array, endOffset: number) => {
        for (let off = 0; off < bytes.length; off += STREAM_CHUNK) {
          const part = bytes.subarray(off, Math.min(bytes.length, off + STREAM_CHUNK));
          const id = endOffset - bytes.length + off + part.length;
          backlog += part.length;
          if (backlog > MAX_STREAM_BACKLOG) {
            // The client does not keep up: cut it off; it resumes from its last id.
            done.resolve();
            return;
          }
          const data = encodeBase64(part);
          chain = chain.then(() => stream.writeSSE({ id: String(id), event: "data", data }))
            .then(() => {
              backlog -= part.length;
            });
        }
      };
      const { bytes, from: start, truncated } = s.ring.since(from);
      if (truncated) {
        chain = chain.then(() =>
          stream.writeSSE({ event: "gap", data: JSON.stringify({ from: from, to: start }) })
        );
      }
      if (bytes.length > 0) sendBytes(bytes, start + bytes.length);
      const off = s.onRaw((b, end) => sendBytes(b, end));
      s.closed.then(() => {
        chain = chain.then(() => stream.writeSSE({ event: "end", data: "{}" }));
        done.resolve();
      });
      const ka = setInterval(() => {
        chain = chain.then(() => stream.write(": keep-alive\n\n")).then(() => {});
      }, options.keepAliveMs ?? 15_000);
      stream.onAbort(() => done.resolve());
      await done.promise;
      off();
      clearInterval(ka);
      await chain.catch(() => {});
    });
  });

  api.get("/audit", (c) => {
    if (!options.auditTail) return fail(c, new TermadaError("NOT_SUPPORTED", "No audit log"));
    const n = Number(c.req.query("n") ?? "50");
    if (!Number.isInteger(n) || n < 1 || n > 10_000) {
      return fail(
        c,
        new TermadaError("INVALID_ARGUMENT", '"n" must be an integer from 1 to 10000'),
      );
    }
    try {
      return c.json({ records: options.auditTail(n) });
    } catch (err) {
      return fail(c, err);
    }
  });
  mountMissionRoutes(api, options.missions);
  api.get("/audit/verify", (c) => {
    if (!options.auditVerify) return fail(c, new TermadaError("NOT_SUPPORTED", "No audit log"));
    return c.json(options.auditVerify() as Record<string, unknown>);
  });
  return api;
}

/** `/api/missions…`: every agent's missions for the dashboard and `termada mission`. */
function mountMissionRoutes(api: Hono<AppEnv>, missions: MissionService | undefined): void {
  const guard = (
    f: (c: Context<AppEnv>, m: MissionService) => Response | Promise<Response>,
  ) =>
  async (c: Context<AppEnv>): Promise<Response> => {
    if (!missions) return fail(c, new TermadaError("NOT_FOUND", "Missions are not available"));
    try {
      return await f(c, missions);
    } catch (err) {
      return fail(c, err);
    }
  };
  api.get(
    "/missions",
    guard((c, m) => {
      const status = c.req.query("status");
      const limit = c.req.query("limit");
      return c.json(m.listAll({
        ...(status ? { status } : {}),
        ...(limit ? { limit: Number(limit) } : {}),
      }));
    }),
  );
  api.get("/missions/:id", guard((c, m) => c.json(m.getAny(c.req.param("id") ?? ""))));
  api.get(
    "/missions/:id/report",
    guard((c, m) => {
      const format = c.req.query("format") ?? "markdown";
      if (format !== "markdown" && format !== "json") {
        throw new TermadaError("INVALID_ARGUMENT", '"format" must be markdown or json');
      }
      const r = m.reportAny(operatorOf(c), c.req.param("id") ?? "");
      if (format === "json") {
        return c.json({
          mission_id: r.mission_id,
          sha256: r.sha256,
          evidence_sha256: r.evidence_sha256,
          audit_seq: r.audit_seq,
          evidence: r.evidence,
        });
      }
      return c.body(r.markdown, 200, {
        "content-type": "text/markdown; charset=utf-8",
        "content-disposition": `attachment; filename="${r.mission_id}-report.md"`,
        "x-termada-report-sha256": r.sha256,
        ...(r.audit_seq === null ? {} : { "x-termada-audit-seq": String(r.audit_seq) }),
      });
    }),
  );
  api.post(
    "/missions/:id/cancel",
    guard(async (c, m) => {
      const b = await body(c);
      return c.json(await m.cancelAny(operatorOf(c), c.req.param("id") ?? "", b));
    }),
  );
}
