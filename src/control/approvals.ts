/**
 * The approval book: the one owner of every approval — its durable row, the parked job it
 * holds (a reservation of the engine), its expiry timer and its records. An approval nobody can
 * see must not exist: the row is written first, then the request is audited, then the job
 * parks. A decision is stored, then audited, then acted on (the job runs exactly once, or ends
 * `denied`). Operators decide here; agents have no path to it.
 */
import type { DecisionRecord } from "../audit/mod.ts";
import type { Engine, Job, Reservation } from "../engine/mod.ts";
import {
  type Clock,
  isId,
  logger,
  newId,
  notFound,
  systemClock,
  TermadaError,
} from "../shared/mod.ts";
import type { Store } from "../store/mod.ts";
import type { PendingApproval } from "../wire/mod.ts";
import type { Actor } from "./recorder.ts";
import { SYSTEM } from "./recorder.ts";
import type { Trail } from "./trail.ts";
import type { ProgramConfirm } from "./gateway.ts";

const log = logger("control");

export interface ApprovalBookOptions {
  store: Pick<Store, "approvals">;
  engine: Engine;
  trail: Trail;
  /** Unanswered approvals are denied after this long (default 120 s). */
  timeoutMs?: number;
  clock?: Clock;
}

/** What an approval holds: a job (its id, owner, session) or another action (act_…). */
interface Subject {
  id: string;
  owner: string;
  sessionId: string;
  mode: "foreground" | "background";
}

interface Parked {
  id: string;
  /** The job it holds; undefined for an action that is not a job (fleet, forward, file…). */
  job: Job | undefined;
  subject: Subject;
  /** For actions: what kind, as the pending list shows it. */
  action?: { kind: string };
  /** What waits: the job's command, or the argv of the program blocked in execve. */
  command: string[];
  exec: { pid: number; path: string } | undefined;
  requestedAt: number;
  expiresAt: number;
  rule: string | undefined;
  timer: ReturnType<typeof setTimeout>;
  /** Acts on the outcome, after it is stored and audited (runs the job, or frees the exec). */
  settle(approved: boolean, reason: string): Promise<void>;
}

/** A program of a running job that waits in execve for a person (the exec gate's confirm). */
export type ExecConfirm = ProgramConfirm;

export class ApprovalBook {
  readonly #o: ApprovalBookOptions;
  readonly #clock: Clock;
  readonly #parked = new Map<string, Parked>();
  /** Most approvals waiting at once (each parks a job): beyond, requests are QUOTA_EXCEEDED. */
  static readonly MAX_PENDING = 1000;

  constructor(options: ApprovalBookOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Parks a reserved job until an operator decides; resolves with the approval id. */
  async park(
    res: Reservation,
    confirm: { decision: DecisionRecord; rule?: string; reason: string },
  ): Promise<string> {
    if (this.#parked.size >= ApprovalBook.MAX_PENDING) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many commands wait for approval (${ApprovalBook.MAX_PENDING})`,
        { hint: "Ask an operator to decide the pending approvals (termada pending)" },
      );
    }
    const { job } = res;
    const { id, now, timeout } = this.#insertRow(subjectOf(job), job.command, confirm);
    try {
      await this.#o.trail.approvalRequested(job, id, confirm.decision);
    } catch (err) {
      this.#closeRow(id, "denied", "system", "the audit log could not record the request");
      throw err;
    }
    if (job.final) {
      // Its session closed while the request was being recorded.
      this.#closeRow(id, "denied", "system", job.reason ?? "the job ended before a decision");
      return id;
    }
    job.park(id);
    this.#o.trail.statusChanged(job);
    const timer = setTimeout(() => this.#expire(id), timeout);
    const jobs = this.#o.engine.jobs;
    this.#parked.set(id, {
      id,
      job,
      subject: subjectOf(job),
      command: [...job.command],
      exec: undefined,
      requestedAt: now,
      expiresAt: now + timeout,
      rule: confirm.rule,
      timer,
      settle: async (approved, reason) => {
        if (!approved) return jobs.abandon(res, "denied", reason);
        job.approved = true;
        try {
          await jobs.start(res);
        } catch (err) {
          // The job ended `failed` with the reason; the decision stands.
          log.warn("an approved job could not start", { job: job.id, error: err });
        }
      },
    });
    // A parked job that ends another way (session closed, shutdown) leaves nothing pending.
    job.done.then(() => this.#jobEnded(id, job));
    return id;
  }

  /**
   * Holds a program of a running job in `execve` until an operator decides (confirm at exec
   * time); resolves true to let it run (once), false when denied, expired or the job ended.
   */
  async askExec(job: Job, exec: ExecConfirm): Promise<boolean> {
    if (this.#parked.size >= ApprovalBook.MAX_PENDING) return false;
    const { id, now, timeout } = this.#insertRow(subjectOf(job), exec.argv, exec);
    try {
      await this.#o.trail.execApprovalRequested(job, id, exec);
    } catch (err) {
      this.#closeRow(id, "denied", "system", "the audit log could not record the request");
      log.warn("an exec approval could not be recorded: denied", { job: job.id, error: err });
      return false;
    }
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const timer = setTimeout(() => this.#expire(id), timeout);
    this.#parked.set(id, {
      id,
      job,
      subject: subjectOf(job),
      command: [...exec.argv],
      exec: { pid: exec.pid, path: exec.path },
      requestedAt: now,
      expiresAt: now + timeout,
      rule: exec.rule,
      timer,
      settle: (approved) => {
        resolve(approved);
        return Promise.resolve();
      },
    });
    job.done.then(() => this.#jobEnded(id, job));
    return promise;
  }

  /**
   * Holds an action that is not a job (a remote session, a fleet run, a forward, a file write)
   * until an operator decides; resolves true to let it happen (once), false when denied or
   * expired. `signal` withdraws the request (the caller went away).
   */
  async askAction(
    action: { id: string; owner: string; kind: string; sessionId?: string; summary: string[] },
    confirm: { decision: DecisionRecord; rule?: string; reason: string },
    signal?: AbortSignal,
  ): Promise<{ approved: boolean; approvalId: string; reason: string }> {
    if (this.#parked.size >= ApprovalBook.MAX_PENDING) {
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Too many requests wait for approval (${ApprovalBook.MAX_PENDING})`,
        { hint: "Ask an operator to decide the pending approvals (termada pending)" },
      );
    }
    const subject: Subject = {
      id: action.id,
      owner: action.owner,
      // "-": the action is not in a session (a fleet run, a forward, a session being opened).
      sessionId: action.sessionId ?? "-",
      mode: "foreground",
    };
    const { id, now, timeout } = this.#insertRow(subject, action.summary, confirm);
    try {
      await this.#o.trail.actionApprovalRequested(action, id, confirm.decision);
    } catch (err) {
      this.#closeRow(id, "denied", "system", "the audit log could not record the request");
      throw err;
    }
    const { promise, resolve } = Promise.withResolvers<
      { approved: boolean; approvalId: string; reason: string }
    >();
    const timer = setTimeout(() => this.#expire(id), timeout);
    this.#parked.set(id, {
      id,
      job: undefined,
      subject,
      action: { kind: action.kind },
      command: [...action.summary],
      exec: undefined,
      requestedAt: now,
      expiresAt: now + timeout,
      rule: confirm.rule,
      timer,
      settle: (approved, reason) => {
        resolve({ approved, approvalId: id, reason });
        return Promise.resolve();
      },
    });
    signal?.addEventListener("abort", () => {
      if (!this.#parked.has(id)) return;
      this.decide(id, false, { kind: "agent", id: action.owner }, "withdrawn: the caller left")
        .catch(() => {/* decided meanwhile */});
    }, { once: true });
    return await promise;
  }

  /** An operator's decision: approved, the parked job runs exactly once; denied, it ends. */
  async decide(id: string, approve: boolean, by: Actor, reason?: string): Promise<void> {
    const p = this.#parked.get(id);
    if (!p) {
      const row = isId("apr", id) ? this.#o.store.approvals.get(id) : undefined;
      if (row && row.status !== "pending") {
        throw new TermadaError("INVALID_ARGUMENT", `Approval "${id}" was already ${row.status}`);
      }
      throw notFound("approval", id);
    }
    this.#take(p);
    const decidedBy = `${by.kind}:${by.id}`;
    if (!this.#closeRow(id, approve ? "approved" : "denied", decidedBy, reason ?? null)) {
      throw new TermadaError("INVALID_ARGUMENT", `Approval "${id}" was already decided`);
    }
    try {
      await this.#o.trail.approvalResolved(by, p.subject, id, approve, reason, p.command);
    } catch (err) {
      // Not recorded, so not acted on: it does not run.
      await p.settle(false, "the audit log could not record the decision");
      throw err;
    }
    await p.settle(approve, `denied by ${decidedBy}${reason ? `: ${reason}` : ""}`);
  }

  /** Every waiting approval cancelled (stop-all); returns their ids. */
  async cancelAll(by: Actor, reason: string): Promise<string[]> {
    const ids: string[] = [];
    for (const p of [...this.#parked.values()]) {
      this.#take(p);
      ids.push(p.id);
      this.#closeRow(p.id, "denied", `${by.kind}:${by.id}`, reason);
      try {
        await this.#o.trail.approvalResolved(by, p.subject, p.id, false, reason, p.command);
      } catch (err) {
        log.error("could not audit a cancelled approval", { approval: p.id, error: err });
      }
      await p.settle(false, reason);
    }
    return ids;
  }

  /** Jobs waiting for an operator, oldest first. */
  pending(): PendingApproval[] {
    return [...this.#parked.values()].map((p) => {
      const s = p.subject;
      return {
        approval_id: p.id,
        job_id: s.id,
        owner: s.owner,
        session_id: s.sessionId,
        command: [...p.command],
        mode: s.mode,
        ...(p.action ? { action: { ...p.action } } : {}),
        requested_at: new Date(p.requestedAt).toISOString(),
        expires_at: new Date(p.expiresAt).toISOString(),
        ...(p.rule === undefined ? {} : { rule: p.rule }),
        ...(p.exec ? { exec: { ...p.exec } } : {}),
      };
    });
  }

  get size(): number {
    return this.#parked.size;
  }

  /** Stops the timers (shutdown; the engine ends the parked jobs as denied). */
  close(): void {
    for (const p of this.#parked.values()) clearTimeout(p.timer);
  }

  /** The approval's row, written before anything else: an approval nobody can see must not exist. */
  #insertRow(
    subject: Subject,
    command: readonly string[],
    confirm: { rule?: string; reason: string },
  ): { id: string; now: number; timeout: number } {
    const id = newId("apr");
    const now = this.#clock.now();
    const timeout = this.#o.timeoutMs ?? 120_000;
    this.#o.store.approvals.insert({
      id,
      job_id: subject.id,
      owner: subject.owner,
      session_id: subject.sessionId,
      command: [...command],
      rule: confirm.rule ?? null,
      reason: confirm.reason,
      requested_at: now,
      expires_at: now + timeout,
    });
    return { id, now, timeout };
  }

  #take(p: Parked): void {
    clearTimeout(p.timer);
    this.#parked.delete(p.id);
  }

  async #expire(id: string): Promise<void> {
    const p = this.#parked.get(id);
    if (!p) return;
    this.#take(p);
    this.#closeRow(id, "expired", "system", "no operator decided in time");
    try {
      await this.#o.trail.approvalResolved(SYSTEM, p.subject, id, false, "expired", p.command);
    } catch (err) {
      log.error("could not record an expired approval", { approval: id, error: err });
    }
    await p.settle(false, "approval expired: no operator decided in time");
  }

  /** The parked job ended before anyone decided (its session closed, shutdown). */
  #jobEnded(id: string, job: Job): void {
    const p = this.#parked.get(id);
    if (!p || p.job !== job) return; // decided: the decision took it
    this.#take(p);
    const reason = job.reason ?? `the job ended ${job.status} before a decision`;
    void p.settle(false, reason);
    if (!this.#closeRow(id, "denied", "system", reason)) return;
    this.#o.trail.approvalResolved(SYSTEM, p.subject, id, false, reason, p.command).catch((err) =>
      log.error("could not close an abandoned approval", { approval: id, error: err })
    );
  }

  #closeRow(
    id: string,
    status: "approved" | "denied" | "expired",
    by: string,
    reason: string | null,
  ): boolean {
    try {
      return this.#o.store.approvals.decide(id, {
        status,
        decided_by: by,
        decision_reason: reason,
      });
    } catch (err) {
      log.error("could not store an approval's decision", { approval: id, error: err });
      return status !== "approved";
    }
  }
}

function subjectOf(job: Job): Subject {
  return { id: job.id, owner: job.owner, sessionId: job.sessionId, mode: job.mode };
}
