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
import {
  type ApprovalRequirement,
  holdsRoles,
  ONE_OPERATOR,
  requirementCovered,
  roleSets,
} from "../policy/mod.ts";
import { createHash } from "node:crypto";
import { APPROVED_WITH } from "./_approved.ts";

const log = logger("control");

export interface ApprovalBookOptions {
  store: Pick<Store, "approvals" | "grants">;
  engine: Engine;
  trail: Trail;
  /** Unanswered approvals are denied after this long (default 120 s). */
  timeoutMs?: number;
  clock?: Clock;
  /** Who is behind an agent (for `exclude_requester`). */
  whoIs?: (agent: string) => { principal: string; principals?: readonly string[] };
  /** Pending approvals at most per owner and in all (defaults 32 / 128). */
  quotas?: { perOwner: number; total: number };
}

/** What a confirm asks for: the decision, and who must approve (default one operator). */
export interface ConfirmRequest {
  decision: DecisionRecord;
  rule?: string;
  reason: string;
  approval?: ApprovalRequirement;
  /**
   * Asked once approved, just before it runs: the policy as it is now. A reason refuses it
   * (the policy changed: now denied, or it needs more than the approval it got).
   */
  recheck?: () => {
    action: "allow" | "deny" | "confirm";
    reason: string;
    approval?: ApprovalRequirement;
  };
  /** Admits it once approved (budgets, its durable action row); throws to refuse. */
  admit?: () => void;
}

/** How many distinct approvers said yes, and how many are needed. */
export interface DecideResult {
  status: "approved" | "denied" | "pending";
  votes: number;
  quorum: number;
}

const MFA_METHODS = new Set(["mfa", "otp", "hwk", "swk", "fpt", "face", "iris", "sc", "pop"]);
/** A grant lives this long between the last vote and its use. */
const GRANT_TTL_MS = 60_000;

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
  /** Who must approve it. */
  requirements: ApprovalRequirement;
  /** The principal behind the requesting agent (its latest authentication). */
  requester: string;
  /** Every principal seen behind that agent id: `exclude_requester` excludes them all. */
  requesters: string[];
  /** Approve votes so far, by principal. */
  approvers: string[];
  /** SHA-256 of what was asked for: a grant covers exactly this. */
  actionHash: string;
  recheck: ConfirmRequest["recheck"];
  admit: ConfirmRequest["admit"];
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
  async park(res: Reservation, confirm: ConfirmRequest): Promise<string> {
    const { job } = res;
    this.#assertRoom(job.owner);
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
    const requirements = confirm.approval ?? ONE_OPERATOR;
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
      ...this.#governance(job.owner, confirm, jobHash(job)),
      settle: async (approved, reason) => {
        if (!approved) return jobs.abandon(res, "denied", reason);
        job.approved = true;
        APPROVED_WITH.set(job, requirements);
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
  async askExec(
    job: Job,
    exec: ExecConfirm & Pick<ConfirmRequest, "approval" | "recheck">,
  ): Promise<boolean> {
    if (this.#full(job.owner)) return false;
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
      ...this.#governance(job.owner, exec, hashOf({ job: job.id, pid: exec.pid, argv: exec.argv })),
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
    confirm: ConfirmRequest,
    signal?: AbortSignal,
  ): Promise<{ approved: boolean; approvalId: string; reason: string }> {
    this.#assertRoom(action.owner);
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
      ...this.#governance(action.owner, confirm, hashOf(action)),
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

  /**
   * What the human at the agent's own MCP client may be asked to decide (elicitation): only an
   * approval of that agent's job under the default requirement — one approval, no roles, no MFA,
   * no requester exclusion — since nothing proves who answers there. Undefined otherwise.
   */
  elicitable(owner: string, id: string): { command: string[]; expiresAt: number } | undefined {
    const p = this.#parked.get(id);
    if (!p || p.subject.owner !== owner || !p.job) return undefined;
    const r = p.requirements;
    if (r.quorum !== 1 || r.roles.length > 0 || r.mfa || r.exclude_requester) return undefined;
    return { command: [...p.command], expiresAt: p.expiresAt };
  }

  /**
   * A decision. An operator's deny (or an agent withdrawing its own request) ends it at once.
   * An operator's approve is one vote: it counts when the operator meets the requirements
   * (roles, MFA, not the requester) and has not voted yet; once the quorum of distinct
   * principals is reached the request is approved, a one-time grant for exactly this action is
   * issued, the policy is asked again, and only then does it run (exactly once).
   */
  async decide(id: string, approve: boolean, by: Actor, reason?: string): Promise<DecideResult> {
    const p = this.#parked.get(id);
    if (!p) {
      const row = isId("apr", id) ? this.#o.store.approvals.get(id) : undefined;
      if (row && row.status !== "pending") {
        throw new TermadaError("INVALID_ARGUMENT", `Approval "${id}" was already ${row.status}`);
      }
      throw notFound("approval", id);
    }
    const quorum = p.requirements.quorum;
    if (by.kind === "operator") {
      const auth = by.auth ?? { via: "token" as const, principal: "operator", roles: [], amr: [] };
      if (approve) this.#assertEligible(p, auth);
      const votes = await this.#vote(p, by, auth, approve, reason);
      if (approve && votes < quorum) return { status: "pending", votes, quorum };
    }
    this.#take(p);
    const decidedBy = `${by.kind}:${by.id}`;
    if (!this.#closeRow(id, approve ? "approved" : "denied", decidedBy, reason ?? null)) {
      throw new TermadaError("INVALID_ARGUMENT", `Approval "${id}" was already decided`);
    }
    try {
      await this.#o.trail.approvalResolved(
        by,
        p.subject,
        id,
        approve,
        reason,
        p.command,
        approve ? p.approvers : undefined,
      );
    } catch (err) {
      // Not recorded, so not acted on: it does not run.
      await p.settle(false, "the audit log could not record the decision");
      throw err;
    }
    if (!approve) {
      await p.settle(false, `denied by ${decidedBy}${reason ? `: ${reason}` : ""}`);
      return { status: "denied", votes: p.approvers.length, quorum };
    }
    const refused = this.#consume(p);
    if (refused) {
      try {
        await this.#o.trail.recorder.intent(SYSTEM, "approval.consume_refused", {
          approval_id: id,
          job_id: p.subject.id,
          reason: refused,
        });
      } catch (err) {
        log.error("could not record a refused approval", { approval: id, error: err });
      }
      await p.settle(false, refused);
      throw new TermadaError(
        "DENIED_BY_POLICY",
        `Approved, but refused when it was to run: ${refused}`,
        {
          retriable: false,
          details: { approval_id: id },
          hint: "The policy changed after the request, or the grant was already used",
        },
      );
    }
    await p.settle(true, "");
    return { status: "approved", votes: p.approvers.length, quorum };
  }

  /** Throws unless `auth` may approve `p` (roles, MFA, requester excluded, one vote each). */
  #assertEligible(p: Parked, auth: NonNullable<Actor["auth"]>): void {
    const r = p.requirements;
    const refuse = (why: string, hint: string) => {
      throw new TermadaError("DENIED_BY_POLICY", `Cannot approve "${p.id}": ${why}`, {
        retriable: false,
        hint,
        details: { approval_id: p.id, quorum: r.quorum, votes: p.approvers.length },
      });
    };
    if (p.approvers.includes(auth.principal)) {
      refuse(`${auth.principal} already approved it`, "Another approver must add their vote");
    }
    if (r.exclude_requester && p.requesters.includes(auth.principal)) {
      refuse(
        `it was requested on behalf of ${auth.principal}, and the rule excludes the requester`,
        "Ask another operator to approve it",
      );
    }
    if (!holdsRoles(r, auth.roles)) {
      const need = roleSets(r).map((s) => s.map((x) => `"${x}"`).join(" or ")).join(", and ");
      refuse(
        `it needs an approver with the role ${need}`,
        "Sign in with an operator JWT that carries those roles",
      );
    }
    if (r.mfa && !auth.amr.some((m) => MFA_METHODS.has(m))) {
      refuse(
        "it needs an approver who signed in with a second factor (amr)",
        "Sign in with MFA and use the operator JWT you get",
      );
    }
  }

  async #vote(
    p: Parked,
    by: Actor,
    auth: NonNullable<Actor["auth"]>,
    approve: boolean,
    reason: string | undefined,
  ): Promise<number> {
    const vote = {
      by: `${by.kind}:${by.id}`,
      principal: auth.principal,
      roles: [...auth.roles],
      amr: [...auth.amr],
      approve,
      at: this.#clock.now(),
      ...(reason ? { reason } : {}),
    };
    this.#o.store.approvals.addVote(p.id, vote);
    if (approve) p.approvers.push(auth.principal);
    await this.#o.trail.recorder.intent(by, "approval.vote", {
      approval_id: p.id,
      job_id: p.subject.id,
      approve,
      principal: auth.principal,
      via: auth.via,
      roles: [...auth.roles],
      amr: [...auth.amr],
      ...(auth.delegation?.length ? { delegation: [...auth.delegation] } : {}),
      votes: p.approvers.length,
      quorum: p.requirements.quorum,
      ...(reason ? { reason } : {}),
    });
    return p.approvers.length;
  }

  /**
   * Just before an approved request runs: the policy now, and a one-time grant bound to exactly
   * this action. Returns why it is refused, or undefined.
   */
  #consume(p: Parked): string | undefined {
    const now = this.#clock.now();
    const grants = this.#o.store.grants;
    const grant = grants.issue({
      approval_id: p.id,
      action_id: p.subject.id,
      action_hash: p.actionHash,
      expires_at: now + GRANT_TTL_MS,
    });
    const current = p.recheck?.();
    if (current?.action === "deny") return `the policy now denies it (${current.reason})`;
    if (current?.action === "confirm" && !requirementCovered(current.approval, p.requirements)) {
      return "the policy now requires more approval than it was given";
    }
    // A parked job is hashed again as it is now; a program in execve and an action are what
    // was asked for (held, unchanged, by the kernel or the waiting call).
    const hash = p.job && !p.exec ? jobHash(p.job) : p.actionHash;
    const used = grants.consume(grant, p.subject.id, hash, now);
    if (used !== "ok") return `its grant could not be used (${used})`;
    try {
      p.admit?.();
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
    return undefined;
  }

  /** The governance fields of a new parked request. */
  #governance(
    owner: string,
    confirm: Pick<ConfirmRequest, "approval" | "recheck" | "admit">,
    actionHash: string,
  ): Pick<
    Parked,
    | "requirements"
    | "requester"
    | "requesters"
    | "approvers"
    | "actionHash"
    | "recheck"
    | "admit"
  > {
    const who = this.#o.whoIs?.(owner);
    return {
      requirements: confirm.approval ?? ONE_OPERATOR,
      requester: who?.principal ?? `agent:${owner}`,
      requesters: [...new Set([...(who?.principals ?? []), who?.principal ?? `agent:${owner}`])],
      approvers: [],
      actionHash,
      recheck: confirm.recheck,
      admit: confirm.admit,
    };
  }

  #full(owner: string): boolean {
    const q = this.#o.quotas ?? { perOwner: 32, total: 128 };
    if (this.#parked.size >= Math.min(q.total, ApprovalBook.MAX_PENDING)) return true;
    let mine = 0;
    for (const p of this.#parked.values()) if (p.subject.owner === owner) mine++;
    return mine >= q.perOwner;
  }

  #assertRoom(owner: string): void {
    if (!this.#full(owner)) return;
    const q = this.#o.quotas ?? { perOwner: 32, total: 128 };
    throw new TermadaError(
      "QUOTA_EXCEEDED",
      `Too many requests wait for approval (at most ${q.perOwner} per agent, ${q.total} in all)`,
      {
        hint: "Ask an operator to decide the pending approvals (termada pending)",
        details: { per_owner: q.perOwner, total: q.total },
      },
    );
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
        requirements: storedRequirements(p.requirements),
        requester: p.requester,
        approvers: [...p.approvers],
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
    confirm: { rule?: string; reason: string; approval?: ApprovalRequirement },
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
      requirements: storedRequirements(confirm.approval ?? ONE_OPERATOR),
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

function storedRequirements(r: ApprovalRequirement) {
  return {
    quorum: r.quorum,
    roles: [...r.roles],
    mfa: r.mfa,
    exclude_requester: r.exclude_requester,
    ...(r.role_sets ? { role_sets: r.role_sets.map((s) => [...s]) } : {}),
  };
}

function hashOf(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("hex");
}

/** What a job's approval covers: its id, owner, session and command. */
function jobHash(job: Job): string {
  return hashOf({ id: job.id, owner: job.owner, session: job.sessionId, command: job.command });
}

function subjectOf(job: Job): Subject {
  return { id: job.id, owner: job.owner, sessionId: job.sessionId, mode: job.mode };
}
