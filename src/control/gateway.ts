/**
 * The admission gateway: the one gate every side effect passes, in this order — kill-switch
 * barrier → policy decision → (confirm: durable approval request, the job parks) → audit
 * intent record, written and fsynced before anything runs. If the audit cannot be written,
 * nothing runs (AUDIT_UNAVAILABLE). Operators decide approvals here; agents have no path to it.
 */
import type {
  AdmissionHook,
  AdmissionRequest,
  AdmissionVerdict,
  Engine,
  InputAdmissionRequest,
  PendingApproval,
} from "../engine/mod.ts";
import {
  type Clock,
  type EventBus,
  logger,
  newId,
  notFound,
  systemClock,
  TermadaError,
} from "../shared/mod.ts";

const log = logger("control");

export type ActorKind = "agent" | "operator" | "system";
export interface Actor {
  kind: ActorKind;
  id: string;
}

/** What the policy says (src/policy's Decision satisfies it). */
export interface PolicyVerdict {
  action: "allow" | "deny" | "confirm";
  reason: string;
  rule?: { list: string; pattern: string };
  opaque?: boolean;
}

export interface PolicyPort {
  /** The policy's standing answer for a prompt (`auto_answer`), if any. */
  autoAnswer?(agent: string, prompt: string): string | undefined;
  /** `env`: variables the command gets (LD_PRELOAD and friends are part of what runs). */
  decide(agent: string, command: readonly string[], env?: Record<string, string>): PolicyVerdict;
  decideLine(agent: string, line: string): PolicyVerdict;
}

/** What the audit log returns for a written record (src/audit's AuditRecord satisfies it). */
export interface AuditWritten {
  seq: number;
  hash: string;
  /** The data as written (redacted). */
  data: Record<string, unknown>;
}

export interface AuditPort {
  append(actor: Actor, event: string, data?: Record<string, unknown>): AuditWritten | void;
}

export interface ApprovalRecord {
  id: string;
  job_id: string;
  owner: string;
  session_id: string;
  command: string[];
  rule: string | null;
  reason: string | null;
  requested_at: number;
  expires_at: number;
}

export interface ApprovalStorePort {
  insertApproval(a: ApprovalRecord): void;
  decideApproval(
    id: string,
    d: {
      status: "approved" | "denied" | "expired";
      decided_by: string;
      decision_reason: string | null;
    },
  ): boolean;
}

export interface GatewayOptions {
  policy: PolicyPort;
  audit: AuditPort;
  approvals: ApprovalStorePort;
  /** Live mirror of every audit record, for the dashboard's activity feed. */
  bus?: EventBus;
  /** Unanswered approvals are denied after this long (default 120 s). */
  confirmTimeoutMs?: number;
  clock?: Clock;
}

export interface StopResult {
  barrier_until: string;
  stopped_jobs: string[];
  cancelled_approvals: string[];
}

export class Gateway implements AdmissionHook {
  #opts: GatewayOptions;
  #clock: Clock;
  #engine: Engine | undefined;
  #timers = new Map<string, ReturnType<typeof setTimeout>>();
  #barrierUntil = 0;

  constructor(options: GatewayOptions) {
    this.#opts = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** The engine whose jobs this gate parks and releases (set once, after both exist). */
  attach(engine: Engine): void {
    this.#engine = engine;
  }

  /**
   * Writes an audit record or refuses: nothing may happen that the log does not show. The bus
   * gets the record as written (redacted) with its `audit_seq` and `audit_hash`. Returns the
   * record's seq and hash (undefined with an audit port that does not report them).
   */
  record(
    actor: Actor,
    event: string,
    data: Record<string, unknown> = {},
  ): { seq: number; hash: string } | undefined {
    try {
      const written = this.#opts.audit.append(actor, event, data);
      this.#opts.bus?.publish(
        event,
        written
          ? { actor, ...written.data, audit_seq: written.seq, audit_hash: written.hash }
          : { actor, ...data },
      );
      return written ? { seq: written.seq, hash: written.hash } : undefined;
    } catch (err) {
      if (err instanceof TermadaError && err.code === "AUDIT_UNAVAILABLE") throw err;
      throw new TermadaError("AUDIT_UNAVAILABLE", "The audit log cannot be written: nothing runs", {
        cause: err,
        retriable: false,
        hint: "An operator must repair the audit log (termada audit verify) and restart the daemon",
      });
    }
  }

  admit(req: AdmissionRequest): AdmissionVerdict {
    const agent: Actor = { kind: "agent", id: req.owner };
    const base = {
      job_id: req.jobId,
      session_id: req.sessionId,
      command: [...req.command],
      mode: req.mode,
      ...(req.cwd === undefined ? {} : { cwd: req.cwd }),
    };
    if (this.stopped) {
      this.record(agent, "admission.refused", { ...base, reason: "stop-all barrier" });
      throw new TermadaError("STOPPED", "Termada is stopped: an operator ran stop-all", {
        retriable: true,
        hint: `New commands are refused until ${new Date(this.#barrierUntil).toISOString()}`,
      });
    }
    const d = this.#opts.policy.decide(req.owner, req.command, req.env);
    const decision = { action: d.action, reason: d.reason, ...(d.rule ? { rule: d.rule } : {}) };
    if (d.action === "deny") {
      this.record(agent, "policy.denied", { ...base, decision });
      throw new TermadaError("DENIED_BY_POLICY", d.reason, {
        retriable: false,
        hint: "Choose a command the policy allows, or ask the operator to change the policy",
        details: d.rule ? { rule: d.rule.pattern } : undefined,
      });
    }
    if (d.action === "confirm") {
      const approvalId = newId("apr");
      const now = this.#clock.now();
      const timeout = this.#opts.confirmTimeoutMs ?? 120_000;
      // Durable first, then audited, then parked: an approval nobody can see must not exist.
      this.#opts.approvals.insertApproval({
        id: approvalId,
        job_id: req.jobId,
        owner: req.owner,
        session_id: req.sessionId,
        command: [...req.command],
        rule: d.rule?.pattern ?? null,
        reason: d.reason,
        requested_at: now,
        expires_at: now + timeout,
      });
      this.record(agent, "approval.requested", { ...base, approval_id: approvalId, decision });
      this.#timers.set(
        approvalId,
        setTimeout(() => this.#expire(approvalId), timeout),
      );
      return { verdict: "confirm", approvalId };
    }
    this.record(agent, "job.requested", { ...base, decision });
    return { verdict: "run" };
  }

  admitInput(req: InputAdmissionRequest): void {
    const agent: Actor = { kind: "agent", id: req.owner };
    const base = {
      job_id: req.jobId,
      session_id: req.sessionId,
      line: req.secret ? "[secret]" : req.line,
      reader: req.reader,
    };
    if (this.stopped) {
      this.record(agent, "admission.refused", { ...base, reason: "stop-all barrier" });
      throw new TermadaError("STOPPED", "Termada is stopped: an operator ran stop-all", {
        retriable: true,
      });
    }
    if (req.echoOff) {
      // The terminal does not echo: a password for su/ssh/sudo, not a command. Only the fact
      // is recorded, never the text.
      this.record(agent, "input.written", { ...base, line: "[not echoed]" });
      return;
    }
    const d = this.#opts.policy.decideLine(req.owner, req.line);
    // For a secret line the reason (which quotes it) stays out of the audit log.
    const decision = {
      action: d.action,
      ...(req.secret ? {} : { reason: d.reason }),
      ...(d.rule ? { rule: d.rule } : {}),
    };
    if (d.action !== "allow") {
      this.record(agent, "policy.denied", { ...base, decision });
      throw new TermadaError(
        "DENIED_BY_POLICY",
        d.action === "confirm"
          ? `${d.reason}: a line typed into ${req.reader} cannot wait for approval`
          : d.reason,
        {
          retriable: false,
          hint: d.action === "confirm"
            ? "Run it as a command with exec_run, so an operator can approve it"
            : "Choose input the policy allows",
        },
      );
    }
    this.record(agent, "input.written", { ...base, decision });
  }

  /** A standing answer from the agent's policy, recorded before the engine types it. */
  autoAnswer(
    req: { owner: string; jobId: string; sessionId: string; prompt: string },
  ): string | undefined {
    const answer = this.#opts.policy.autoAnswer?.(req.owner, req.prompt);
    if (answer === undefined) return undefined;
    this.record({ kind: "system", id: "auto_answer" }, "input.auto_answered", {
      job_id: req.jobId,
      session_id: req.sessionId,
      owner: req.owner,
      prompt: req.prompt,
      answer,
    });
    return answer;
  }

  /**
   * The parked job of an approval ended before anyone decided (its session closed, shutdown): the
   * approval is closed as denied and audited, so no queue or report shows it pending.
   */
  parkedEnded(
    req: { approvalId: string; jobId: string; owner: string; sessionId: string; reason: string },
  ): void {
    this.#clearTimer(req.approvalId);
    try {
      const closed = this.#opts.approvals.decideApproval(req.approvalId, {
        status: "denied",
        decided_by: "system",
        decision_reason: req.reason,
      });
      if (!closed) return; // already decided (stop-all, expiry)
      this.record({ kind: "system", id: "termada" }, "approval.resolved", {
        approval_id: req.approvalId,
        job_id: req.jobId,
        owner: req.owner,
        session_id: req.sessionId,
        approved: false,
        reason: req.reason,
      });
    } catch (err) {
      log.error("could not close an abandoned approval", { approval: req.approvalId, error: err });
    }
  }

  /** An operator approves: the parked job runs exactly once. */
  async approve(id: string, by: Actor, reason?: string): Promise<void> {
    await this.#decide(id, true, by, reason);
  }

  async deny(id: string, by: Actor, reason?: string): Promise<void> {
    await this.#decide(id, false, by, reason);
  }

  pending(): PendingApproval[] {
    return this.#engine?.pendingApprovals() ?? [];
  }

  /** When the stop-all barrier lifts (epoch ms; 0 when none was set). */
  get barrierUntil(): number {
    return this.#barrierUntil;
  }

  get stopped(): boolean {
    return this.#clock.now() < this.#barrierUntil;
  }

  /**
   * The kill switch: a barrier refusing new admissions (STOPPED) for `barrierMs`, every pending
   * approval cancelled, every active job stopped INT → TERM → KILL. Audited before it acts.
   */
  async stopAll(
    by: Actor,
    options: { barrierMs?: number; graceMs?: number } = {},
  ): Promise<StopResult> {
    const barrierMs = options.barrierMs ?? 30_000;
    this.#barrierUntil = this.#clock.now() + barrierMs;
    this.record(by, "stop_all", { barrier_ms: barrierMs });
    const engine = this.#requireEngine();
    const pendingIds = engine.pendingApprovals().map((p) => p.approval_id);
    for (const id of pendingIds) {
      this.#clearTimer(id);
      this.#opts.approvals.decideApproval(id, {
        status: "denied",
        decided_by: `${by.kind}:${by.id}`,
        decision_reason: "cancelled by stop-all",
      });
    }
    const r = await engine.stopAll(options.graceMs ?? 2000, `stopped by ${by.kind} ${by.id}`);
    this.record(by, "stop_all.done", { stopped_jobs: r.stopped, cancelled_approvals: r.cancelled });
    return {
      barrier_until: new Date(this.#barrierUntil).toISOString(),
      stopped_jobs: r.stopped,
      cancelled_approvals: r.cancelled,
    };
  }

  /** Lifts the barrier early (operator). */
  resume(by: Actor): void {
    this.#barrierUntil = 0;
    this.record(by, "stop_all.lifted", {});
  }

  close(): void {
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }

  async #decide(id: string, approve: boolean, by: Actor, reason?: string): Promise<void> {
    const engine = this.#requireEngine();
    const entry = engine.pendingApprovals().find((p) => p.approval_id === id);
    if (!entry) throw notFound("approval", id);
    this.#clearTimer(id);
    const decidedBy = `${by.kind}:${by.id}`;
    if (
      !this.#opts.approvals.decideApproval(id, {
        status: approve ? "approved" : "denied",
        decided_by: decidedBy,
        decision_reason: reason ?? null,
      })
    ) {
      throw new TermadaError("INVALID_ARGUMENT", `Approval "${id}" was already decided`);
    }
    this.record(by, "approval.resolved", {
      approval_id: id,
      job_id: entry.job_id,
      owner: entry.owner,
      command: entry.command,
      approved: approve,
      ...(reason === undefined ? {} : { reason }),
    });
    await engine.resolveApproval(id, {
      approve,
      by: decidedBy,
      reason: approve ? reason : `denied by ${decidedBy}${reason ? `: ${reason}` : ""}`,
    });
  }

  #expire(id: string): void {
    this.#timers.delete(id);
    const engine = this.#engine;
    if (!engine?.pendingApprovals().some((p) => p.approval_id === id)) return;
    try {
      this.#opts.approvals.decideApproval(id, {
        status: "expired",
        decided_by: "system",
        decision_reason: "no operator decided in time",
      });
      this.record({ kind: "system", id: "termada" }, "approval.resolved", {
        approval_id: id,
        approved: false,
        reason: "expired",
      });
    } catch (err) {
      log.error("could not record an expired approval", { approval: id, error: err });
    }
    engine.resolveApproval(id, {
      approve: false,
      by: "system",
      reason: "approval expired: no operator decided in time",
    }).catch((err) => log.error("could not expire an approval", { approval: id, error: err }));
  }

  #clearTimer(id: string): void {
    const t = this.#timers.get(id);
    if (t !== undefined) clearTimeout(t);
    this.#timers.delete(id);
  }

  #requireEngine(): Engine {
    if (!this.#engine) throw new TermadaError("INTERNAL", "The gateway has no engine attached");
    return this.#engine;
  }
}
