/**
 * What an operator can do (the dashboard, the CLI, later the TUI and MCP elicitation share
 * these): see every agent's sessions and jobs, take over a terminal and type into it, kill a job,
 * stop everything (the kill switch), decide approvals, resume an audit log after a fault. Each
 * use case is audited before it takes effect. Agents never reach this class: the edges hand it
 * only to operator-authenticated routes.
 */
import type { RemoteOps } from "./remote.ts";
import type { VaultOps } from "./vault.ts";
import type { SnapshotOps } from "./snapshots.ts";
import type { RecordingOps } from "./recordings.ts";
import {
  type Engine,
  type LeaseAction,
  type Session,
  sessionInfo,
  summarize,
} from "../engine/mod.ts";
import { encodeCursor } from "../output/mod.ts";
import { notFound, TermadaError } from "../shared/mod.ts";
import type {
  Boundary,
  ForwardList,
  ForwardView,
  JobOutputPage,
  OperatorJob,
  OperatorServerList,
  OperatorSession,
  PendingApproval,
  ServerAddInput,
  SessionInfo,
  StopInput,
} from "../wire/mod.ts";
import type { ApprovalBook, DecideResult } from "./approvals.ts";
import type { BudgetLedger, BudgetRule, BudgetUsage } from "../governance/mod.ts";
import type { ActionRow, ActionState, Store } from "../store/mod.ts";
import type { Gateway } from "./gateway.ts";
import type { Actor, Recorder } from "./recorder.ts";
import type { Trail } from "./trail.ts";

export interface OperatorOpsOptions {
  engine: Engine;
  gateway: Gateway;
  approvals: ApprovalBook;
  trail: Trail;
  recorder: Recorder;
  /** Servers: stop-all also cancels fleet runs and closes forwards. */
  remote?: RemoteOps;
  /** The vault: status, unlock/lock and entries (names only out, values only in). */
  vault?: VaultOps;
  /** Budgets and the actions table (reconcile). */
  ledger?: BudgetLedger;
  store?: Pick<Store, "actions">;
  /** Every budget of every policy (for the usage view). */
  budgetRules?: () => readonly BudgetRule[];
  /** Snapshots: list, show, take, restore, remove. */
  snapshots?: SnapshotOps;
  /** Session recordings: list, read back as one cast (src/control/recordings.ts). */
  recordings?: RecordingOps;
}

export interface StopAllResult {
  barrier_until: string;
  stopped_jobs: string[];
  cancelled_approvals: string[];
}

export class OperatorOps {
  readonly #o: OperatorOpsOptions;

  constructor(o: OperatorOpsOptions) {
    this.#o = o;
  }

  /** The snapshot use cases; NOT_SUPPORTED when this daemon keeps none. */
  snapshots(): SnapshotOps {
    if (this.#o.snapshots) return this.#o.snapshots;
    throw new TermadaError("NOT_SUPPORTED", "This daemon keeps no snapshots");
  }

  /** Session recordings (list, read); NOT_SUPPORTED when this daemon has none. */
  recordings(): RecordingOps {
    if (this.#o.recordings) return this.#o.recordings;
    throw new TermadaError("NOT_SUPPORTED", "This daemon keeps no session recordings");
  }

  /** The vault's operator use cases; NOT_SUPPORTED when this daemon has none. */
  vault(): VaultOps {
    if (this.#o.vault) return this.#o.vault;
    throw new TermadaError("NOT_SUPPORTED", "This daemon has no vault");
  }

  // ── views ─────────────────────────────────────────────────────────────────

  sessions(): OperatorSession[] {
    return this.#o.engine.registry.allSessions().map((s) => ({
      ...sessionInfo(s),
      owner: s.owner,
    }));
  }

  sessionCount(): number {
    return this.#o.engine.registry.countSessions();
  }

  /** A live session of any agent (for its terminal stream). */
  session(id: string): Session {
    return this.#o.engine.registry.anySession(id);
  }

  jobs(limit: number): OperatorJob[] {
    return this.#o.engine.registry.allJobs(limit);
  }

  job(id: string): OperatorJob {
    const j = this.#o.engine.registry.anyJob(id);
    return { owner: j.owner, ...summarize(j) };
  }

  /** One page of any agent's job output: the page its exec_poll would get. */
  jobOutput(id: string, cursor?: string, maxBytes?: number): JobOutputPage {
    const job = this.#o.engine.registry.findAnyJob(id);
    if (!job) throw notFound("job", id);
    const page = this.#o.engine.reads.page(job, cursor ?? encodeCursor(0), maxBytes);
    return {
      job_id: job.id,
      owner: job.owner,
      status: job.status,
      output: page.output,
      next_cursor: page.nextCursor,
      has_more: page.hasMore,
      ...(page.gap === undefined ? {} : {
        gap: {
          from_offset: page.gap.fromOffset,
          to_offset: page.gap.toOffset,
          dropped_bytes: page.gap.droppedBytes,
        },
      }),
    };
  }

  pendingApprovals(): PendingApproval[] {
    return this.#o.approvals.pending();
  }

  get stopped(): boolean {
    return this.#o.gateway.stopped;
  }

  get barrierUntil(): number {
    return this.#o.gateway.barrierUntil;
  }

  /** What the kernel boundary around sessions holds here (the dashboard's header). */
  boundary(): Boundary {
    return this.#o.engine.boundary();
  }

  get auditHealthy(): boolean {
    return this.#o.recorder.healthy;
  }

  // ── takeover ──────────────────────────────────────────────────────────────

  takeover(by: Actor, sessionId: string): SessionInfo {
    const s = this.#allowed(by, sessionId, "take");
    this.#o.recorder.record(by, "session.takeover", { session_id: s.id });
    this.#o.engine.leases.take(s, by.id);
    return sessionInfo(s);
  }

  release(by: Actor, sessionId: string): SessionInfo {
    const s = this.#allowed(by, sessionId, "release");
    this.#o.recorder.record(by, "session.release", { session_id: s.id });
    this.#o.engine.leases.release(s, by.id);
    return sessionInfo(s);
  }

  pauseOutput(by: Actor, sessionId: string): SessionInfo {
    const s = this.#allowed(by, sessionId, "pause");
    this.#o.recorder.record(by, "session.output_paused", { session_id: s.id });
    this.#o.engine.leases.pauseOutput(s, by.id);
    return sessionInfo(s);
  }

  resumeOutput(by: Actor, sessionId: string): SessionInfo {
    const s = this.#allowed(by, sessionId, "resume");
    this.#o.recorder.record(by, "session.output_resumed", { session_id: s.id });
    this.#o.engine.leases.resumeOutput(s, by.id);
    return sessionInfo(s);
  }

  /** Keys from the operator who holds the keyboard (audited as a count, not the text). */
  async type(by: Actor, sessionId: string, data: string): Promise<void> {
    const s = this.#allowed(by, sessionId, "type", data);
    this.#o.recorder.record(by, "operator.input", { session_id: s.id, bytes: data.length });
    await this.#o.engine.leases.type(s, by.id, data);
  }

  /**
   * The session, once its lease allows `action`; else it throws before anything is recorded (a
   * refused takeover leaves no `session.takeover` in the audit log).
   */
  #allowed(by: Actor, sessionId: string, action: LeaseAction, text?: string): Session {
    const s = this.#o.engine.registry.anySession(sessionId);
    this.#o.engine.leases.check(s, by.id, action, text);
    return s;
  }

  resize(
    by: Actor,
    sessionId: string,
    cols: number,
    rows: number,
  ): { ok: true; cols: number; rows: number } {
    const s = this.#o.engine.registry.anySession(sessionId);
    this.#o.recorder.record(by, "session.resized", { session_id: s.id, cols, rows });
    this.#o.engine.resize(s, cols, rows);
    return { ok: true, cols, rows };
  }

  // ── stopping ──────────────────────────────────────────────────────────────

  /** Stops one job of any agent (INT → TERM → KILL); audited before it acts. */
  async killJob(by: Actor, jobId: string, graceMs?: number): Promise<OperatorJob> {
    const job = this.#o.engine.registry.anyJob(jobId);
    this.#o.trail.killedByOperator(by, job, graceMs);
    if (job.status === "pending_approval" && job.approvalId) {
      await this.#o.approvals.decide(job.approvalId, false, by, "killed by an operator")
        .catch(() => {/* decided meanwhile */});
    }
    await this.#o.engine.jobs.stop(job, graceMs, "killed");
    return { owner: job.owner, ...summarize(job) };
  }

  /**
   * The kill switch: a barrier refusing new admissions (STOPPED) for `barrier_ms`, every pending
   * approval cancelled, every running job of every agent stopped. Audited before it acts.
   */
  async stopAll(by: Actor, input: StopInput = {}): Promise<StopAllResult> {
    const barrierMs = input.barrier_ms ?? 30_000;
    this.#o.gateway.raiseBarrier(barrierMs);
    this.#o.recorder.record(by, "stop_all", { barrier_ms: barrierMs });
    const reason = `stopped by ${by.kind} ${by.id}`;
    const cancelled = await this.#o.approvals.cancelAll(by, "cancelled by stop-all");
    const stopped = await this.#o.engine.jobs.stopRunning(input.grace_ms ?? 2000, reason);
    await this.#o.remote?.stopAll(reason);
    this.#o.recorder.record(by, "stop_all.done", {
      stopped_jobs: stopped,
      cancelled_approvals: cancelled,
    });
    return {
      barrier_until: new Date(this.#o.gateway.barrierUntil).toISOString(),
      stopped_jobs: stopped,
      cancelled_approvals: cancelled,
    };
  }

  /** Lifts the barrier early. */
  resumeAdmissions(by: Actor): void {
    this.#o.gateway.lowerBarrier();
    this.#o.recorder.record(by, "stop_all.lifted", {});
  }

  // ── actions and budgets (docs/GOVERNANCE.md) ─────────────────────────────

  /** Admitted actions, newest first; `state: "outcome_unknown"` lists what needs reconciling. */
  actions(filter: { state?: ActionState; owner?: string; limit?: number }): ActionRow[] {
    if (!this.#o.store) throw new TermadaError("NOT_SUPPORTED", "This daemon keeps no actions");
    return this.#o.store.actions.list({ ...filter, limit: filter.limit ?? 100 });
  }

  /**
   * An operator settles an action whose outcome the daemon could not know (it restarted, or a
   * link was lost mid-action): its budgets count it as said, and the audit keeps who and why.
   */
  async reconcile(
    by: Actor,
    id: string,
    state: "succeeded" | "failed",
    note: string,
  ): Promise<ActionRow> {
    const ledger = this.#o.ledger;
    const store = this.#o.store;
    if (!ledger || !store) throw new TermadaError("NOT_SUPPORTED", "This daemon keeps no actions");
    const row = store.actions.get(id);
    if (!row) throw notFound("action", id);
    if (row.state !== "outcome_unknown") {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot reconcile action "${id}": its outcome is known (${row.state})`,
        { details: { state: row.state } },
      );
    }
    // Recorded first: a reconcile nobody can see must not count.
    await this.#o.recorder.intent(by, "action.reconciled", { action_id: id, state, note });
    ledger.reconcile(id, state, `${by.kind}:${by.id}`, note);
    return store.actions.get(id)!;
  }

  /** Every budget's standing in its current window. */
  budgets(): BudgetUsage[] {
    const ledger = this.#o.ledger;
    if (!ledger) return [];
    return ledger.usage(this.#o.budgetRules?.() ?? []);
  }

  // ── approvals ─────────────────────────────────────────────────────────────

  /** One operator's approval (a vote, when the rule needs a quorum). */
  approve(by: Actor, id: string, reason?: string): Promise<DecideResult> {
    return this.#o.approvals.decide(id, true, by, reason);
  }

  deny(by: Actor, id: string, reason?: string): Promise<DecideResult> {
    return this.#o.approvals.decide(id, false, by, reason);
  }

  // ── servers ───────────────────────────────────────────────────────────────

  /** The inventory with addresses and sources (never keys); NOT_SUPPORTED without one. */
  servers(): OperatorServerList {
    const inv = this.#remote().inventory;
    return {
      servers: inv.list().map(({ entry, source, status }) => ({
        name: entry.name,
        host: entry.host,
        port: entry.port,
        user: entry.user,
        tags: [...entry.tags],
        source,
        ...(entry.auth ? { auth: entry.auth } : {}),
        ...(entry.host_key ? { host_key: entry.host_key } : {}),
        ...(status.reachable === undefined ? {} : { reachable: status.reachable }),
        ...(status.last_error ? { last_error: status.last_error } : {}),
        ...(status.checked_at ? { checked_at: status.checked_at } : {}),
      })),
    };
  }

  /** Adds a server (kept in the state dir); recorded. Running sessions keep their bindings. */
  async addServer(by: Actor, input: ServerAddInput): Promise<OperatorServerList> {
    const inv = this.#remote().inventory;
    const entry = inv.check(input);
    // Recorded first: a change the audit log cannot show does not happen.
    this.#o.recorder.record(by, "server.added", {
      server: entry.name,
      host: entry.host,
      port: entry.port,
      user: entry.user,
      tags: [...entry.tags],
    });
    await inv.add(entry);
    return this.servers();
  }

  /** Removes a live server: its forwards close and idle connections drop; sessions keep running. */
  async removeServer(by: Actor, name: string): Promise<OperatorServerList> {
    const r = this.#remote();
    r.inventory.checkRemovable(name);
    this.#o.recorder.record(by, "server.removed", { server: name });
    await r.removeServer(name);
    return this.servers();
  }

  /** Forgets the recorded host keys of a server (after a real re-key); returns how many. */
  async forgetHostKey(by: Actor, name: string): Promise<number> {
    const r = this.#remote();
    const b = r.inventory.bind(name);
    this.#o.recorder.record(by, "host_key.forgotten", { server: name, host: b.host, port: b.port });
    return await r.knownHosts.forget(b.host, b.port);
  }

  /** Closes one agent's forward; recorded first (then `forward.closed` with the reason). */
  async closeForward(by: Actor, id: string): Promise<ForwardView> {
    const r = this.#remote();
    this.#o.recorder.record(by, "forward.closed_by_operator", { forward_id: id });
    return await r.closeForwardAsOperator(id, `closed by ${by.kind} ${by.id}`);
  }

  /** Every open port forward of every agent. */
  forwards(): ForwardList {
    return { forwards: this.#remote().forwardViews() };
  }

  #remote(): RemoteOps {
    const r = this.#o.remote;
    if (!r) throw new TermadaError("NOT_SUPPORTED", "This daemon has no server inventory");
    return r;
  }

  // ── audit ─────────────────────────────────────────────────────────────────

  /** Reopens an audit log latched by a fault, once the chain verifies. */
  resumeAudit(by: Actor): { resumed: boolean; failure: string; verified_records: number } {
    const r = this.#o.recorder.resume(by);
    return { resumed: r.failure !== "", ...r };
  }
}
