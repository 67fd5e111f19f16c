/**
 * Mission Control's commands: what agents (owner-scoped) and operators (every mission) ask of a
 * mission, and the recovery at daemon start. A mission owns session attempts in the engine;
 * everything run in them passes the normal admission gate. The service owns every write of a
 * mission and its audit record; the audit projector (projector.ts) keeps the mission's anchors and
 * timeline from the bus, and the evidence checks (evidence.ts) stand behind each step it accepts.
 */
import { createHash } from "node:crypto";
import type { Job } from "../control/mod.ts";
import type { Actor, Recorder } from "../control/mod.ts";
import type {
  AdapterRunView,
  ExecListInput,
  JobList,
  MissionCancelInput,
  MissionCreateInput,
  MissionIdInput,
  MissionList,
  MissionListInput,
  MissionReportInput,
  MissionReportResult,
  MissionUpdateInput,
  PendingApproval,
  SessionClosed,
  SessionCreateInput,
  SessionIdInput,
  SessionInfo,
} from "../wire/mod.ts";
import { MISSION_LIMITS, MissionIdInput as MissionIdSchema, parseInput } from "../wire/mod.ts";
import {
  type Clock,
  type EventBus,
  invalidArgument,
  logger,
  newId,
  notFound,
  systemClock,
  TermadaError,
} from "../shared/mod.ts";
import type { MissionRow, MissionStatus, Store } from "../store/mod.ts";
import { TERMINAL_MISSION_STATUSES } from "../store/mod.ts";
import type { AuditEvents } from "../audit/mod.ts";
import { EvidenceChecks, missionSessionIds } from "./evidence.ts";
import { MissionProjector } from "./projector.ts";
import { buildEvidence, renderMarkdown } from "./report.ts";
import {
  type AdapterEvidence,
  isAdapterEvidence,
  type JobEvidence,
  missionSummary,
  type MissionView,
  missionView,
  type PendingView,
} from "./view.ts";

const log = logger("mission");

/**
 * What a mission needs of the runtime: an agent's session and job operations (src/control's
 * AgentOps, through the same gateway as every other call) and the pending approvals.
 */
export interface MissionRuntime {
  createSession(agent: string, req: SessionCreateInput): Promise<SessionInfo>;
  closeSession(agent: string, req: SessionIdInput): Promise<SessionClosed>;
  job(agent: string, jobId: string): Job;
  listJobs(agent: string, req: ExecListInput): JobList;
  pendingApprovals(): PendingApproval[];
  /** One of the agent's adapter runs (a step's proof); absent: no adapters on this daemon. */
  adapterRun?(agent: string, runId: string): AdapterRunView;
}

export interface MissionServiceOptions {
  runtime: MissionRuntime;
  store: Pick<Store, "missions" | "jobs" | "approvals">;
  /** The audit log (src/control's Recorder): records first; refuses when it cannot write. */
  audit: Recorder;
  bus: EventBus;
  clock?: Clock;
  /**
   * Masks secrets in what agents write (goal, plan, notes, summary) before it is stored or
   * shown: the same redaction the audit log applies (default: none).
   */
  redact?: (text: string) => string;
}

export type MissionReport = Omit<MissionReportResult, "format">;

const TERMINAL = new Set<MissionStatus>(TERMINAL_MISSION_STATUSES);

export class MissionService {
  readonly #runtime: MissionRuntime;
  readonly #store: Pick<Store, "missions" | "jobs" | "approvals">;
  readonly #audit: Recorder;
  readonly #clock: Clock;
  readonly #redact: (text: string) => string;
  readonly #checks: EvidenceChecks;
  readonly #projector: MissionProjector;
  /** Missions whose resume is opening a session (an update meanwhile is SESSION_BUSY). */
  readonly #busy = new Set<string>();

  constructor(options: MissionServiceOptions) {
    this.#runtime = options.runtime;
    this.#store = options.store;
    this.#audit = options.audit;
    this.#clock = options.clock ?? systemClock;
    this.#redact = options.redact ?? ((t) => t);
    this.#checks = new EvidenceChecks({
      runtime: this.#runtime,
      store: this.#store,
      clock: this.#clock,
    });
    this.#projector = new MissionProjector({
      store: this.#store,
      bus: options.bus,
      pending: (missionId) => this.#pending(missionId),
      setStatus: (id, to, actor, reason) => this.#setStatus(id, to, actor, reason),
    });
  }

  /**
   * At daemon start, before anything runs: missions that were live lose their PTY with the
   * daemon and become `interrupted` (audited). Returns their ids.
   */
  recover(reason: string): string[] {
    const changed = this.#store.missions.interruptAll(reason);
    for (const c of changed) {
      this.#audit.record({ kind: "system", id: "termada" }, "mission.status", {
        mission_id: c.id,
        from: c.from,
        to: "interrupted",
        reason,
      });
    }
    return changed.map((c) => c.id);
  }

  close(): void {
    this.#projector.close();
  }

  // ── agent operations (owner-scoped) ───────────────────────────────────────

  async create(agent: string, input: MissionCreateInput): Promise<MissionView> {
    const req = this.#masked(input);
    const target = req.target ?? "local";
    if (target !== "local") {
      throw new TermadaError("NOT_SUPPORTED", `Target "${target}" is not available`, {
        hint: "Missions run on target local; remote servers arrive with remote sessions",
      });
    }
    const active = this.#store.missions.countActive(agent);
    if (active >= MISSION_LIMITS.activePerAgent) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many open missions: ${active} of ${MISSION_LIMITS.activePerAgent}`,
        { hint: "Finish, fail or cancel a mission first (mission_update status)" },
      );
    }
    const id = newId("msn");
    const workspace = req.workspace ?? id;
    const title = req.title ?? firstLine(req.goal, MISSION_LIMITS.title);
    const session = await this.#runtime.createSession(agent, {
      workspace,
      ...(req.cwd === undefined ? {} : { cwd: req.cwd }),
      ...(req.shell === undefined ? {} : { shell: req.shell }),
    });
    try {
      this.#store.missions.create(
        { id, owner: agent, title, goal: req.goal, target, workspace },
        req.plan,
        session.session_id,
      );
    } catch (err) {
      await this.#runtime.closeSession(agent, { session_id: session.session_id }).catch(() => {});
      throw err;
    }
    this.#projector.adoptSessionRecord(id, session.session_id);
    this.#audit.record({ kind: "agent", id: agent }, "mission.created", {
      mission_id: id,
      session_id: session.session_id,
      title,
      goal: req.goal,
      plan: req.plan,
      target,
      workspace,
    });
    return this.#view(this.#own(agent, id), MISSION_LIMITS.timelineInView);
  }

  get(agent: string, input: MissionIdInput): MissionView {
    const { mission_id } = input;
    return this.#view(this.#own(agent, mission_id), MISSION_LIMITS.timelineInView);
  }

  list(agent: string, input: MissionListInput = {}): MissionList {
    return this.#list(agent, input);
  }

  update(agent: string, input: MissionUpdateInput): Promise<MissionView> {
    const req = this.#masked(input);
    const m = this.#own(agent, req.mission_id);
    return this.#update({ kind: "agent", id: agent }, m, req);
  }

  async resume(agent: string, input: MissionIdInput): Promise<MissionView> {
    const { mission_id } = input;
    const m = this.#own(agent, mission_id);
    if (m.status !== "interrupted") {
      throw invalidArgument(
        `Mission ${m.id} is ${m.status}: only an interrupted mission can be resumed`,
        m.session_id ? `Keep working in its session ${m.session_id}` : undefined,
      );
    }
    const attempts = this.#store.missions.sessions(m.id).length;
    if (attempts >= MISSION_LIMITS.attempts) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Mission ${m.id} already had ${attempts} session attempts`,
        { hint: "Fail or cancel it and create a new mission" },
      );
    }
    this.#assertIdle(m.id);
    this.#busy.add(m.id);
    try {
      const session = await this.#runtime.createSession(agent, { workspace: m.workspace });
      let attempt: number;
      try {
        attempt = this.#store.missions.addSession(m.id, session.session_id);
      } catch (err) {
        await this.#runtime.closeSession(agent, { session_id: session.session_id }).catch(
          () => {},
        );
        throw err;
      }
      this.#projector.adoptSessionRecord(m.id, session.session_id);
      this.#audit.record({ kind: "agent", id: agent }, "mission.resumed", {
        mission_id: m.id,
        session_id: session.session_id,
        attempt,
      });
      this.#setStatus(m.id, "running", { kind: "agent", id: agent }, "resumed in a fresh session");
      return this.#view(this.#own(agent, m.id), MISSION_LIMITS.timelineInView);
    } finally {
      this.#busy.delete(m.id);
    }
  }

  report(agent: string, input: MissionReportInput): MissionReport {
    const { mission_id } = input;
    return this.#report({ kind: "agent", id: agent }, this.#own(agent, mission_id));
  }

  // ── operator operations (every agent's missions) ──────────────────────────

  listAll(input: MissionListInput = {}): MissionList {
    return this.#list(undefined, input);
  }

  getAny(id: string): MissionView {
    return this.#view(this.#any(id), MISSION_LIMITS.timeline);
  }

  reportAny(operator: Actor, id: string): MissionReport {
    return this.#report(operator, this.#any(id));
  }

  cancelAny(operator: Actor, id: string, input: MissionCancelInput = {}): Promise<MissionView> {
    const req = this.#masked(input);
    const m = this.#any(id);
    return this.#update(operator, m, {
      mission_id: m.id,
      status: "cancelled",
      ...(req.reason === undefined ? {} : { note: req.reason }),
    });
  }

  // ── internals ─────────────────────────────────────────────────────────────

  /** The input with its free text (goal, title, plan, note, summary, reason) redacted. */
  #masked<T extends Record<string, unknown>>(req: T): T {
    const out: Record<string, unknown> = { ...req };
    for (const k of ["goal", "title", "note", "summary", "reason"]) {
      if (typeof out[k] === "string") out[k] = this.#redact(out[k] as string);
    }
    if (Array.isArray(out.plan)) out.plan = (out.plan as string[]).map(this.#redact);
    return out as T;
  }

  #own(agent: string, id: string): MissionRow {
    const m = this.#store.missions.get(id);
    if (!m || m.owner !== agent) throw notFound("mission", id);
    return m;
  }

  #any(id: string): MissionRow {
    const { mission_id } = parseInput(MissionIdSchema, { mission_id: id });
    const m = this.#store.missions.get(mission_id);
    if (!m) throw notFound("mission", id);
    return m;
  }

  /** SESSION_BUSY while a resume of the mission is opening its new session. */
  #assertIdle(id: string): void {
    if (this.#busy.has(id)) {
      throw new TermadaError("SESSION_BUSY", `Mission ${id} is being changed by another call`, {
        retriable: true,
        hint: "Retry in a moment",
      });
    }
  }

  #list(owner: string | undefined, req: MissionListInput): MissionList {
    const rows = this.#store.missions.list({
      ...(owner === undefined ? {} : { owner }),
      ...(req.status === undefined ? {} : { status: req.status }),
      limit: req.limit ?? 50,
    });
    // Pending approvals are few (bounded by the engine): map them to missions once.
    const waiting = new Map<string, number>();
    for (const p of this.#runtime.pendingApprovals()) {
      const mission = this.#store.missions.sessionRow(p.session_id)?.mission_id;
      if (mission !== undefined) waiting.set(mission, (waiting.get(mission) ?? 0) + 1);
    }
    return {
      missions: rows.map((m) =>
        missionSummary(m, this.#store.missions.steps(m.id), waiting.get(m.id) ?? 0)
      ),
    };
  }

  #pending(missionId: string): PendingApproval[] {
    const sessions = missionSessionIds(this.#store, missionId);
    return this.#runtime.pendingApprovals().filter((p) => sessions.has(p.session_id));
  }

  #view(m: MissionRow, timeline: number): MissionView {
    const pending: PendingView[] = this.#pending(m.id).map((p) => ({
      approval_id: p.approval_id,
      job_id: p.job_id,
      command: p.command,
      requested_at: p.requested_at,
    }));
    return missionView(m, {
      steps: this.#store.missions.steps(m.id),
      sessions: this.#store.missions.sessions(m.id),
      pending,
      timeline: this.#store.missions.timeline(m.id, timeline),
    });
  }

  async #update(actor: Actor, m: MissionRow, req: MissionUpdateInput): Promise<MissionView> {
    if (TERMINAL.has(m.status)) {
      throw invalidArgument(
        `Mission ${m.id} is ${m.status}: a finished mission cannot change`,
        "Create a new mission for more work",
      );
    }
    const hasStepChange = req.step_status !== undefined || req.job_id !== undefined ||
      req.adapter_run_id !== undefined;
    if (
      !hasStepChange && req.note === undefined && req.status === undefined &&
      req.summary === undefined
    ) {
      throw invalidArgument(
        "Nothing to update: give step_id with step_status, a note, a summary or a status",
      );
    }
    if (hasStepChange && req.step_id === undefined) {
      throw invalidArgument("step_status, job_id and adapter_run_id need a step_id (s1, s2, …)");
    }
    if (req.job_id !== undefined && req.adapter_run_id !== undefined) {
      throw invalidArgument("A step is proven by a job_id or an adapter_run_id, not both");
    }
    const proof = req.job_id ?? req.adapter_run_id;
    if (proof !== undefined && req.step_status === undefined) {
      throw invalidArgument(
        `${
          req.job_id ? "job_id" : "adapter_run_id"
        } needs a step_status (passed, failed or running)`,
      );
    }
    this.#assertIdle(m.id);
    const steps = this.#store.missions.steps(m.id);
    const idx = req.step_id === undefined ? undefined : Number(req.step_id.slice(1));
    const step = idx === undefined ? undefined : steps.find((s) => s.idx === idx);
    if (idx !== undefined && !step) {
      throw invalidArgument(
        `Mission ${m.id} has no step ${req.step_id}: its plan has ${steps.length} steps`,
      );
    }
    // Step change, checked against the runtime before anything is written.
    let evidence: JobEvidence | AdapterEvidence | null | undefined;
    if (step && req.step_status !== undefined) {
      const s = req.step_status;
      if (s === "passed" && proof === undefined) {
        throw invalidArgument(
          `Step ${req.step_id} can only pass with the job_id of the job that proves it (or the ` +
            "adapter_run_id of a verified adapter run)",
          "Run the step's check in the mission's session, then pass its job_id",
        );
      }
      if ((s === "skipped" || s === "pending") && proof !== undefined) {
        throw invalidArgument(`A ${s} step takes no job_id or adapter_run_id`);
      }
      evidence = req.adapter_run_id !== undefined
        ? this.#checks.adapterSnapshot(m, req.adapter_run_id, { mustPass: s === "passed" })
        : req.job_id === undefined
        ? (s === "pending" ? null : undefined)
        : this.#checks.snapshot(m, req.job_id, { mustPass: s === "passed" });
    }
    // Status change, checked on the plan as it will be.
    if (req.status === "succeeded") {
      const after = steps.map((s) =>
        s.idx === idx && req.step_status !== undefined ? { ...s, status: req.step_status } : s
      );
      this.#checks.checkSuccess(m, after);
    }
    // Audited before it is written: the log never misses a change.
    const data: AuditEvents["mission.updated"] = { mission_id: m.id };
    if (req.step_id !== undefined) data.step_id = req.step_id;
    if (req.step_status !== undefined) data.step_status = req.step_status;
    if (req.job_id !== undefined) data.job_id = req.job_id;
    if (req.adapter_run_id !== undefined) data.adapter_run_id = req.adapter_run_id;
    if (evidence && isAdapterEvidence(evidence)) {
      data.evidence = {
        adapter: evidence.adapter,
        phase: evidence.phase,
        receipt_sha256: evidence.receipt_sha256,
      };
    } else if (evidence) {
      data.evidence = {
        status: evidence.status,
        exit_code: evidence.exit_code,
        output_sha256: evidence.output_sha256,
      };
    }
    if (req.note !== undefined) data.note = req.note;
    if (req.summary !== undefined) data.summary = req.summary;
    if (req.status !== undefined) data.status = req.status;
    this.#audit.record(actor, "mission.updated", data);
    if (step && (req.step_status !== undefined || req.note !== undefined)) {
      this.#store.missions.updateStep(m.id, step.idx, {
        ...(req.step_status === undefined ? {} : { status: req.step_status }),
        ...(req.step_status === undefined ? {} : {
          job_id: evidence && !isAdapterEvidence(evidence) ? evidence.job_id : null,
          evidence: evidence ? { ...evidence } : null,
        }),
        ...(req.note === undefined ? {} : { note: req.note }),
      });
      if (req.step_status === "running" && m.status === "planned") {
        this.#setStatus(m.id, "running", actor, `step ${req.step_id} started`);
      }
    }
    if (req.summary !== undefined) this.#store.missions.update(m.id, { summary: req.summary });
    if (req.status !== undefined) {
      await this.#finish(actor, m, req.status, req.note);
    }
    return this.#view(this.#any(m.id), MISSION_LIMITS.timelineInView);
  }

  async #finish(
    actor: Actor,
    m: MissionRow,
    status: "succeeded" | "failed" | "cancelled",
    reason?: string,
  ): Promise<void> {
    const current = this.#any(m.id);
    this.#setStatus(m.id, status, actor, reason ?? `${actor.kind} ${actor.id} set it`);
    this.#store.missions.update(m.id, { ended_at: this.#clock.now() });
    // The mission's terminal is closed: its work is over (a job still running ends killed).
    if (current.session_id !== null) {
      try {
        await this.#runtime.closeSession(m.owner, { session_id: current.session_id });
      } catch (err) {
        // The mission has ended either way; a session that cannot close now (gone already, or
        // held by an operator) stays the agent's to close.
        if (!(err instanceof TermadaError && err.code === "NOT_FOUND")) {
          log.warn("could not close the session of an ended mission", {
            mission: m.id,
            session: current.session_id,
            error: err,
          });
        }
      }
    }
  }

  /** Changes the status (audited first); no-op when it is already `to`. */
  #setStatus(id: string, to: MissionStatus, actor: Actor, reason: string): void {
    const m = this.#store.missions.get(id);
    if (!m || m.status === to) return;
    this.#audit.record(actor, "mission.status", { mission_id: id, from: m.status, to, reason });
    this.#store.missions.update(id, { status: to });
  }

  #report(actor: Actor, m: MissionRow): MissionReport {
    const evidence = buildEvidence(m, {
      steps: this.#store.missions.steps(m.id),
      sessions: this.#store.missions.sessions(m.id),
      records: this.#store.missions.records(m.id),
    }, this.#clock.now());
    const markdown = renderMarkdown(evidence);
    const sha256 = sha256Hex(markdown);
    const evidenceSha = sha256Hex(JSON.stringify(evidence));
    const written = this.#audit.record(actor, "mission.reported", {
      mission_id: m.id,
      sha256,
      evidence_sha256: evidenceSha,
      bytes: new TextEncoder().encode(markdown).length,
    });
    this.#store.missions.update(m.id, { report_sha256: sha256 });
    return {
      mission_id: m.id,
      sha256,
      evidence_sha256: evidenceSha,
      audit_seq: written ? written.seq : null,
      markdown,
      evidence,
    };
  }
}

function firstLine(text: string, max: number): string {
  const line = text.trim().split(/\r?\n/)[0]!.trim();
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
