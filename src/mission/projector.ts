/**
 * The audit projector: listens to the audit mirror on the bus and keeps every record that
 * concerns a mission (by mission id, session, the job's stored session or the approval's session)
 * with it as an anchor, the runtime ones also as its timeline. Job, approval and session records
 * then move the mission's status (planned → running, needs_attention and back, interrupted) in a
 * microtask; the status change itself is the service's, which audits it as `mission.status`.
 * The service creates the projector and closes it.
 */
import type { Actor } from "../control/mod.ts";
import type { PendingApproval } from "../wire/mod.ts";
import { MISSION_LIMITS } from "../wire/mod.ts";
import { type BusEvent, type EventBus, isId, logger } from "../shared/mod.ts";
import type { MissionStatus, Store } from "../store/mod.ts";
import { TERMINAL_MISSION_STATUSES } from "../store/mod.ts";

const log = logger("mission");

/** Runtime events of a mission: what its timeline shows. */
const TIMELINE_EVENTS = new Set([
  "job.requested",
  "job.finished",
  "approval.requested",
  "approval.resolved",
  "exec.approval_requested",
  "exec.denied",
  "policy.denied",
  "admission.refused",
  "input.written",
  "input.auto_answered",
  "session.created",
  "session.closed",
  "session.takeover",
  "session.release",
  "operator.input",
  "job.killed_by_operator",
  "mission.status",
  "mission.resumed",
]);

/** Records that may change a mission's status. */
const REACTS_TO = new Set([
  "job.requested",
  "approval.requested",
  "exec.approval_requested",
  "approval.resolved",
  "session.closed",
]);

const TERMINAL = new Set<MissionStatus>(TERMINAL_MISSION_STATUSES);
/** session.created records kept in memory until the mission that opened the session exists. */
const RECENT_SESSION_EVENTS = 64;

export interface MissionProjectorOptions {
  store: Pick<Store, "missions" | "jobs" | "approvals">;
  bus: EventBus;
  /** The approvals of the mission still pending in the engine. */
  pending(missionId: string): PendingApproval[];
  /** The service's status change: audited first, a no-op when the status is already `to`. */
  setStatus(id: string, to: MissionStatus, actor: Actor, reason: string): void;
}

export class MissionProjector {
  readonly #store: Pick<Store, "missions" | "jobs" | "approvals">;
  readonly #pending: (missionId: string) => PendingApproval[];
  readonly #setStatus: MissionProjectorOptions["setStatus"];
  readonly #unsubscribe: () => void;
  readonly #recentSessions = new Map<string, BusEvent>();

  constructor(options: MissionProjectorOptions) {
    this.#store = options.store;
    this.#pending = options.pending;
    this.#setStatus = options.setStatus;
    this.#unsubscribe = options.bus.subscribe((e) => this.#observe(e));
  }

  close(): void {
    this.#unsubscribe();
  }

  /**
   * Keeps the session.created record of a mission's new session: it was written before the
   * mission row (or its new attempt) existed, so nothing matched it then.
   */
  adoptSessionRecord(missionId: string, sessionId: string): void {
    const e = this.#recentSessions.get(sessionId);
    this.#recentSessions.delete(sessionId);
    if (e) this.#keep(missionId, e);
  }

  #missionOf(e: BusEvent): string | undefined {
    const d = e.data;
    if (typeof d.mission_id === "string") return d.mission_id;
    const m = this.#store.missions;
    // A record that names its session (every job and approval record does) belongs to that
    // session's mission: no lookup of the job or approval.
    if (typeof d.session_id === "string") return m.missionOfSession(d.session_id);
    if (typeof d.job_id === "string" && isId("job", d.job_id)) {
      const job = this.#store.jobs.get(d.job_id);
      if (job) return m.missionOfSession(job.session_id);
    }
    if (typeof d.approval_id === "string" && isId("apr", d.approval_id)) {
      const a = this.#store.approvals.get(d.approval_id);
      if (a) return m.missionOfSession(a.session_id);
    }
    return undefined;
  }

  #keep(missionId: string, e: BusEvent): void {
    const { actor, audit_seq, audit_hash, ...data } = e.data;
    if (typeof audit_seq !== "number" || typeof audit_hash !== "string") return;
    this.#store.missions.addRecord({
      mission_id: missionId,
      seq: audit_seq,
      hash: audit_hash,
      event: e.type,
      at: Date.parse(e.time),
      actor: (actor ?? { kind: "system", id: "termada" }) as { kind: string; id: string },
      data,
      timeline: TIMELINE_EVENTS.has(e.type),
    }, { timeline: MISSION_LIMITS.timeline, anchors: MISSION_LIMITS.anchors });
  }

  /** Every audit record, as the bus mirrors it (synchronously, in order). */
  #observe(e: BusEvent): void {
    try {
      if (e.type === "session.created" && typeof e.data.session_id === "string") {
        this.#recentSessions.set(e.data.session_id, e);
        if (this.#recentSessions.size > RECENT_SESSION_EVENTS) {
          this.#recentSessions.delete(this.#recentSessions.keys().next().value!);
        }
      }
      const missionId = this.#missionOf(e);
      if (missionId === undefined) return;
      this.#keep(missionId, e);
      // Derived changes are audited too: after this record has reached every listener.
      if (REACTS_TO.has(e.type)) queueMicrotask(() => this.#react(missionId, e));
    } catch (err) {
      log.error("could not keep a mission record", { event: e.type, error: err });
    }
  }

  #react(missionId: string, e: BusEvent): void {
    try {
      const m = this.#store.missions.get(missionId);
      if (!m) return;
      const system: Actor = { kind: "system", id: "termada" };
      switch (e.type) {
        case "job.requested":
          if (m.status === "planned") this.#setStatus(m.id, "running", system, "a job started");
          break;
        case "approval.requested":
        case "exec.approval_requested":
          if (m.status === "planned" || m.status === "running") {
            this.#setStatus(
              m.id,
              "needs_attention",
              system,
              `approval ${e.data.approval_id} waits`,
            );
          }
          break;
        case "approval.resolved":
          if (m.status === "needs_attention" && this.#pending(m.id).length === 0) {
            this.#setStatus(m.id, "running", system, `approval ${e.data.approval_id} decided`);
          }
          break;
        case "session.closed": {
          const sid = String(e.data.session_id);
          this.#store.missions.endSession(sid, String(e.data.reason ?? "closed"));
          if (m.session_id !== sid) break;
          this.#store.missions.update(m.id, { session_id: null });
          if (!TERMINAL.has(m.status) && m.status !== "interrupted") {
            this.#setStatus(
              m.id,
              "interrupted",
              system,
              `its session closed: ${e.data.reason ?? "closed"}`,
            );
          }
          break;
        }
      }
    } catch (err) {
      log.error("could not update a mission", { mission: missionId, event: e.type, error: err });
    }
  }
}
