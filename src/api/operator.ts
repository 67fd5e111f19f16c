/**
 * Operator routes (`/api/*`): thin adapters over the control layer's operator use cases — the
 * approval queue, the kill switch, every agent's sessions and jobs, takeover, the audit trail,
 * missions. Every request needs the operator token (`Authorization: Bearer`), on the socket and
 * on TCP alike; agent credentials never reach these routes. Handlers throw; the app maps errors.
 */
import { Hono } from "hono";
import type { AdapterOps, OperatorOps, PluginOps } from "../control/mod.ts";
import type { MissionService } from "../mission/mod.ts";
import { type EventBus, TermadaError } from "../shared/mod.ts";
import {
  type ApprovalList,
  ASCIICAST_MEDIA_TYPE,
  type AuditResumeResult,
  type DaemonStatus,
  type Decision,
  DecisionInput,
  type ForwardList,
  JobOutputQuery,
  KillInput,
  MissionCancelInput,
  MissionListInput,
  type OperatorJobList,
  type OperatorKillResult,
  type OperatorServerList,
  type OperatorSessionList,
  OperatorSnapshotCreateInput,
  OperatorTypeInput,
  RECORDING_HEADERS,
  type RecordingInfo,
  type RecordingList,
  RecordingsQuery,
  ResizeInput,
  ServerAddInput,
  type SnapshotCreateResult,
  type SnapshotDetail,
  SnapshotIdParam,
  type SnapshotList,
  SnapshotRestoreInput,
  type SnapshotRestoreResult,
  StopInput,
  type StopResult,
  VaultEntryName,
  VaultSetInput,
  VaultUnlockInput,
} from "../wire/mod.ts";
import { parseIdentityFile } from "../vault/mod.ts";
import { decodeBase64 } from "../shared/mod.ts";
import {
  type AppEnv,
  body,
  type OperatorCredentials,
  operatorGuard,
  operatorOf,
  query,
} from "./http.ts";
import { eventsStream, terminalStream } from "./streams.ts";
import { z } from "zod";

export interface OperatorOptions {
  operators: OperatorOps;
  /** The config's plugins (their state; docs/PLUGINS.md). */
  plugins?: PluginOps;
  /** Adapter runs of every agent (docs/PLUGINS.md "Adapters"). */
  adapters?: AdapterOps;
  operatorToken: string;
  operatorAuth?: Omit<OperatorCredentials, "token">;
  version: string;
  /** Recent audit records (oldest first). */
  auditTail?: (n: number) => unknown[];
  /** Full verification of the audit chain. */
  auditVerify?: () => unknown;
  /** Signed anchors of the audit chain: status, and one made now (docs/AUDIT.md). */
  anchors?: { status(): unknown; anchorNow(): Promise<unknown> };
  /** Live events (the audit records as they are written). */
  bus?: EventBus;
  /** Mission Control (every agent's missions, reports, cancel). */
  missions?: MissionService;
  /** The effective policies (read-only view; never tokens). */
  policy?: () => Record<string, unknown>;
  /** Re-reads the config file and applies its policies and identities (all or nothing). */
  reloadPolicy?: () => Promise<unknown>;
  /** The loopback TCP port, when there is a TCP listener (for links such as `termada dashboard`). */
  port?: number;
  /** SSE keep-alive period (default 15 s). */
  keepAliveMs?: number;
  /**
   * Stops the daemon (`termada daemon stop`); called after the answer is on its way. The
   * daemon's own stop record is the audit trail of it.
   */
  stopDaemon?: () => void;
}

const ActionsQuery = z.strictObject({
  state: z.enum(["admitted", "succeeded", "failed", "released", "outcome_unknown"]).optional(),
  owner: z.string().max(64).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
});
const ReconcileInput = z.strictObject({
  state: z.enum(["succeeded", "failed"]),
  note: z.string().min(1).max(1000),
});
const SnapshotsQuery = z.strictObject({ dir: z.string().min(1).max(4096).optional() });
const JobsQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(1000).optional() });
const AuditQuery = z.strictObject({ n: z.coerce.number().int().min(1).max(10_000).optional() });
const ReportQuery = z.strictObject({ format: z.enum(["markdown", "json"]).optional() });
const MissionsQuery = z.strictObject({
  status: MissionListInput.shape.status,
  limit: z.coerce.number().int().min(1).max(200).optional(),
});

export function operatorRoutes(options: OperatorOptions): Hono<AppEnv> {
  const api = new Hono<AppEnv>();
  api.use(
    "*",
    operatorGuard({ ...options.operatorAuth, token: options.operatorToken }, "Operator routes"),
  );
  const ops = options.operators;

  api.get("/status", (c) =>
    c.json(
      {
        version: options.version,
        pid: Deno.pid,
        ...(options.port === undefined ? {} : { port: options.port }),
        sessions: ops.sessionCount(),
        pending_approvals: ops.pendingApprovals().length,
        stopped: ops.stopped,
        ...(ops.stopped ? { barrier_until: new Date(ops.barrierUntil).toISOString() } : {}),
        audit_healthy: ops.auditHealthy,
        boundary: ops.boundary(),
      } satisfies DaemonStatus,
    ));
  api.get(
    "/approvals",
    (c) => c.json({ approvals: ops.pendingApprovals() } satisfies ApprovalList),
  );
  api.get("/policy", (c) => {
    if (!options.policy) throw new TermadaError("NOT_SUPPORTED", "No policy");
    return c.json(options.policy());
  });
  // ── governance: admitted actions, reconcile, budgets (docs/GOVERNANCE.md) ──
  api.get("/actions", (c) => {
    const q = query(c, ActionsQuery);
    return c.json({ actions: ops.actions(q) });
  });
  api.post("/actions/:id/reconcile", async (c) => {
    const b = await body(c, ReconcileInput);
    return c.json(await ops.reconcile(operatorOf(c), c.req.param("id"), b.state, b.note));
  });
  api.get("/budgets", (c) => c.json({ budgets: ops.budgets() }));
  api.post("/policy/reload", async (c) => {
    await body(c, z.strictObject({}));
    if (!options.reloadPolicy) throw new TermadaError("NOT_SUPPORTED", "No config file to reload");
    return c.json(await options.reloadPolicy());
  });
  api.post("/approvals/:id/approve", async (c) => {
    const b = await body(c, DecisionInput);
    const r = await ops.approve(operatorOf(c), c.req.param("id"), b.reason);
    return c.json(
      {
        ok: true,
        approval_id: c.req.param("id"),
        approved: r.status === "approved",
        status: r.status,
        votes: r.votes,
        quorum: r.quorum,
      } satisfies Decision,
    );
  });
  api.post("/approvals/:id/deny", async (c) => {
    const b = await body(c, DecisionInput);
    await ops.deny(operatorOf(c), c.req.param("id"), b.reason);
    return c.json(
      { ok: true, approval_id: c.req.param("id"), approved: false } satisfies Decision,
    );
  });
  // ── servers (src/remote through control) ──
  api.get("/servers", (c) => c.json(ops.servers() satisfies OperatorServerList));

  // ── plugins (src/control/plugins.ts; docs/PLUGINS.md): state, restarts, tools ──
  api.get("/plugins", (c) => c.json({ plugins: options.plugins?.list() ?? [] }));
  // ── adapter runs (src/control/adapters.ts): every agent's, oldest first ──
  api.get("/adapters", (c) => {
    const q = query(c, JobsQuery);
    return c.json(options.adapters?.listAll(q.limit ?? 100) ?? { runs: [], adapters: [] });
  });
  api.post("/servers", async (c) => {
    const b = await body(c, ServerAddInput);
    return c.json(await ops.addServer(operatorOf(c), b) satisfies OperatorServerList, 201);
  });
  api.delete(
    "/servers/:name",
    async (c) =>
      c.json(
        await ops.removeServer(operatorOf(c), c.req.param("name")) satisfies OperatorServerList,
      ),
  );
  api.post("/servers/:name/forget-host-key", async (c) => {
    const n = await ops.forgetHostKey(operatorOf(c), c.req.param("name"));
    return c.json({ ok: true, server: c.req.param("name"), removed: n });
  });
  api.get("/forwards", (c) => c.json(ops.forwards() satisfies ForwardList));
  api.post("/forwards/:id/close", async (c) => {
    await body(c, z.strictObject({}));
    return c.json(await ops.closeForward(operatorOf(c), c.req.param("id")));
  });
  // ── the vault (names and status out, values only in; src/control/vault.ts) ──
  api.get("/vault", async (c) => {
    const v = ops.vault();
    const status = await v.status();
    return c.json({ ...status, list: status.unlocked ? v.list() : [] });
  });
  api.post("/vault/unlock", async (c) => {
    const b = await body(c, VaultUnlockInput);
    const key = b.passphrase !== undefined
      ? { passphrase: b.passphrase }
      : { identity: parseIdentityFile(b.identity!) };
    return c.json(await ops.vault().unlock(operatorOf(c), key));
  });
  api.post("/vault/lock", async (c) => {
    await body(c, z.strictObject({}));
    return c.json(await ops.vault().lock(operatorOf(c)));
  });
  api.put("/vault/entries/:name", async (c) => {
    const name = VaultEntryName.safeParse(c.req.param("name"));
    if (!name.success) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `"${c.req.param("name")}" is not a vault entry name`,
      );
    }
    const b = await body(c, VaultSetInput);
    const value = decodeBase64(b.value_b64);
    const info = await ops.vault().set(operatorOf(c), name.data, value, {
      kind: b.kind ?? "secret",
      ...(b.description !== undefined ? { description: b.description } : {}),
    });
    value.fill(0);
    return c.json(info);
  });
  api.delete("/vault/entries/:name", async (c) => {
    const removed = await ops.vault().remove(operatorOf(c), c.req.param("name"));
    if (!removed) {
      throw new TermadaError("NOT_FOUND", `The vault has no entry "${c.req.param("name")}"`);
    }
    return c.json({ ok: true, name: c.req.param("name") });
  });
  // ── snapshots (src/control/snapshots.ts; docs/SNAPSHOTS.md) ──
  const snapshotId = (c: { req: { param(n: string): string } }) => {
    const id = SnapshotIdParam.safeParse(c.req.param("id"));
    if (!id.success) {
      throw new TermadaError("INVALID_ARGUMENT", `"${c.req.param("id")}" is not a snapshot id`);
    }
    return id.data;
  };
  api.get("/snapshots", async (c) => {
    const q = query(c, SnapshotsQuery);
    return c.json(await ops.snapshots().operatorList(q.dir) satisfies SnapshotList);
  });
  api.post("/snapshots", async (c) => {
    const b = await body(c, OperatorSnapshotCreateInput);
    return c.json(
      await ops.snapshots().operatorCreate(operatorOf(c), b) satisfies SnapshotCreateResult,
      201,
    );
  });
  api.get(
    "/snapshots/:id",
    async (c) => c.json(await ops.snapshots().show(snapshotId(c)) satisfies SnapshotDetail),
  );
  api.post("/snapshots/:id/restore", async (c) => {
    const b = await body(c, SnapshotRestoreInput);
    return c.json(
      await ops.snapshots().restore(
        operatorOf(c),
        snapshotId(c),
        b,
      ) satisfies SnapshotRestoreResult,
    );
  });
  api.delete(
    "/snapshots/:id",
    async (c) =>
      c.json({ ok: true, ...(await ops.snapshots().remove(operatorOf(c), snapshotId(c))) }),
  );
  // ── recordings (src/control/recordings.ts; docs/_draft_replay.md) ──
  api.get("/recordings", async (c) => {
    const q = query(c, RecordingsQuery);
    return c.json(await ops.recordings().list(q.limit) satisfies RecordingList);
  });
  api.get(
    "/recordings/:id",
    async (c) => c.json(await ops.recordings().info(c.req.param("id")) satisfies RecordingInfo),
  );
  // The asciicast itself, every part joined, streamed (the body closes the files it holds).
  api.get("/sessions/:id/recording", async (c) => {
    const cast = await ops.recordings().open(c.req.param("id"));
    return c.body(cast.body, 200, {
      "content-type": ASCIICAST_MEDIA_TYPE,
      "content-disposition": `attachment; filename="${cast.info.session_id}.cast"`,
      "cache-control": "no-store",
      [RECORDING_HEADERS.parts]: String(cast.parts),
      [RECORDING_HEADERS.omittedBytes]: String(cast.omittedBytes),
      [RECORDING_HEADERS.live]: String(cast.info.live),
    });
  });
  // ── end of recordings ──
  api.post("/stop", async (c) => {
    const r = await ops.stopAll(operatorOf(c), await body(c, StopInput));
    return c.json({ ok: true, ...r } satisfies StopResult);
  });
  api.post("/daemon/stop", async (c) => {
    await body(c, z.strictObject({}));
    const stop = options.stopDaemon;
    if (!stop) {
      throw new TermadaError("NOT_SUPPORTED", "This daemon cannot be stopped from the API");
    }
    // After this response has been written: the stop closes the listeners, this one included.
    setTimeout(stop, 0);
    return c.json({ ok: true });
  });
  api.post("/resume", (c) => {
    ops.resumeAdmissions(operatorOf(c));
    return c.json({ ok: true });
  });
  api.post(
    "/audit/resume",
    (c) => c.json({ ok: true, ...ops.resumeAudit(operatorOf(c)) } satisfies AuditResumeResult),
  );
  api.get("/sessions", (c) => c.json({ sessions: ops.sessions() } satisfies OperatorSessionList));

  // Takeover: an explicit keyboard lease. Every handoff and keystroke batch is audited first.
  const lease = (name: string, f: (op: ReturnType<typeof operatorOf>, id: string) => unknown) =>
    api.post(`/sessions/:id/${name}`, async (c) => {
      await body(c, z.strictObject({}));
      return c.json({ ok: true, session: f(operatorOf(c), c.req.param("id")) });
    });
  lease("takeover", (op, id) => ops.takeover(op, id));
  lease("release", (op, id) => ops.release(op, id));
  lease("pause", (op, id) => ops.pauseOutput(op, id));
  lease("resume-output", (op, id) => ops.resumeOutput(op, id));
  // Resize: the session's PTY (and so the agent's `stty size`) follows; audited first.
  api.post("/sessions/:id/resize", async (c) => {
    const b = await body(c, ResizeInput);
    return c.json(ops.resize(operatorOf(c), c.req.param("id"), b.cols, b.rows));
  });
  api.post("/sessions/:id/input", async (c) => {
    const b = await body(c, OperatorTypeInput);
    await ops.type(operatorOf(c), c.req.param("id"), b.data);
    return c.json({ ok: true });
  });

  api.get(
    "/jobs",
    (c) => c.json({ jobs: ops.jobs(query(c, JobsQuery).limit ?? 100) } satisfies OperatorJobList),
  );
  // One job's output (any agent's), a page at a time: the page an agent's exec_poll gets.
  api.get("/jobs/:id/output", (c) => {
    const q = query(c, JobOutputQuery);
    return c.json(ops.jobOutput(c.req.param("id"), q.cursor, q.max_bytes));
  });
  // An operator stops one job of any agent: audited before it acts, then the engine's stop path.
  api.post("/jobs/:id/kill", async (c) => {
    const b = await body(c, KillInput);
    const job = await ops.killJob(operatorOf(c), c.req.param("id"), b.grace_ms);
    return c.json({ ok: true, job } satisfies OperatorKillResult);
  });

  api.get("/events", (c) => {
    if (!options.bus) throw new TermadaError("NOT_SUPPORTED", "No event bus");
    return eventsStream(c, options.bus, options.keepAliveMs);
  });
  api.get("/sessions/:id/stream", (c) => {
    return terminalStream(c, ops.session(c.req.param("id")), options.keepAliveMs);
  });

  api.get("/audit", (c) => {
    if (!options.auditTail) throw new TermadaError("NOT_SUPPORTED", "No audit log");
    return c.json({ records: options.auditTail(query(c, AuditQuery).n ?? 50) });
  });
  api.get("/audit/anchors", (c) => {
    if (!options.anchors) throw new TermadaError("NOT_SUPPORTED", "No audit anchors");
    return c.json(options.anchors.status() as Record<string, unknown>);
  });
  api.post("/audit/anchor", async (c) => {
    await body(c, z.strictObject({}));
    if (!options.anchors) throw new TermadaError("NOT_SUPPORTED", "No audit anchors");
    return c.json((await options.anchors.anchorNow()) as Record<string, unknown>);
  });
  api.get("/audit/verify", (c) => {
    if (!options.auditVerify) throw new TermadaError("NOT_SUPPORTED", "No audit log");
    return c.json(options.auditVerify() as Record<string, unknown>);
  });
  mountMissionRoutes(api, options.missions);
  return api;
}

/** `/api/missions…`: every agent's missions for the dashboard and `termada mission`. */
function mountMissionRoutes(api: Hono<AppEnv>, missions: MissionService | undefined): void {
  const need = (): MissionService => {
    if (!missions) throw new TermadaError("NOT_FOUND", "Missions are not available");
    return missions;
  };
  api.get("/missions", (c) => c.json(need().listAll(query(c, MissionsQuery))));
  api.get("/missions/:id", (c) => c.json(need().getAny(c.req.param("id"))));
  api.get("/missions/:id/report", (c) => {
    const format = query(c, ReportQuery).format ?? "markdown";
    const r = need().reportAny(operatorOf(c), c.req.param("id"));
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
  });
  api.post("/missions/:id/cancel", async (c) => {
    const b = await body(c, MissionCancelInput);
    return c.json(await need().cancelAny(operatorOf(c), c.req.param("id"), b));
  });
}
