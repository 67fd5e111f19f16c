/**
 * The `approvals` table: a command held for an operator's decision, and that decision. Expiring
 * the pending ones at a restart is `Store.recover`'s job (it spans tables).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { Clock } from "../shared/mod.ts";
import { APPROVAL_STATUSES, type ApprovalStatus } from "../wire/mod.ts";
import {
  checkCommand,
  checkId,
  checkInt,
  checkOneOf,
  checkText,
  num,
  numOrNull,
  type Params,
  type Row,
  type StoreRunner,
  type StoreRunners,
  str,
  strOrNull,
} from "./_checks.ts";

export interface ApprovalRow {
  id: string;
  job_id: string;
  owner: string;
  session_id: string;
  command: string[];
  rule: string | null;
  reason: string | null;
  status: ApprovalStatus;
  requested_at: number;
  expires_at: number;
  decided_by: string | null;
  decision_reason: string | null;
  decided_at: number | null;
}

/** An approval request as `insert` takes it: it starts pending. */
export type NewApproval = Omit<
  ApprovalRow,
  "status" | "decided_by" | "decision_reason" | "decided_at"
>;

/** An operator's (or the system's) decision on a pending approval. */
export interface ApprovalDecision {
  status: Exclude<ApprovalStatus, "pending">;
  decided_by: string;
  decision_reason: string | null;
}

const DECISIONS = APPROVAL_STATUSES.filter((s) => s !== "pending");

function toApproval(r: Row): ApprovalRow {
  return {
    id: str(r.id),
    job_id: str(r.job_id),
    owner: str(r.owner),
    session_id: str(r.session_id),
    command: JSON.parse(str(r.command)) as string[],
    rule: strOrNull(r.rule),
    reason: strOrNull(r.reason),
    status: str(r.status) as ApprovalStatus,
    requested_at: num(r.requested_at),
    expires_at: num(r.expires_at),
    decided_by: strOrNull(r.decided_by),
    decision_reason: strOrNull(r.decision_reason),
    decided_at: numOrNull(r.decided_at),
  };
}

/** The approvals table. Built by `Store` on its connection; reach it as `store.approvals`. */
export class ApprovalRepo {
  readonly #clock: Clock;
  readonly #run: StoreRunner;
  readonly #insert: StatementSync;
  readonly #decide: StatementSync;
  readonly #get: StatementSync;
  readonly #ofJob: StatementSync;
  readonly #list: StatementSync;
  readonly #listPending: StatementSync;

  constructor(db: DatabaseSync, clock: Clock, runners: StoreRunners) {
    this.#clock = clock;
    this.#run = runners.run;
    const p = (sql: string) => db.prepare(sql);
    this.#insert = p(
      `INSERT INTO approvals (id, job_id, owner, session_id, command, rule, reason, status,
         requested_at, expires_at)
       VALUES (:id, :job_id, :owner, :session_id, :command, :rule, :reason, 'pending',
         :requested_at, :expires_at)`,
    );
    this.#decide = p(
      `UPDATE approvals SET status = :status, decided_by = :decided_by,
         decision_reason = :decision_reason, decided_at = :decided_at
       WHERE id = :id AND status = 'pending' RETURNING id`,
    );
    this.#get = p(`SELECT * FROM approvals WHERE id = :id`);
    this.#ofJob = p(
      `SELECT * FROM approvals WHERE job_id = :job_id ORDER BY requested_at DESC LIMIT 1`,
    );
    this.#list = p(`SELECT * FROM approvals ORDER BY requested_at DESC LIMIT :limit`);
    this.#listPending = p(
      `SELECT * FROM approvals WHERE status = 'pending' ORDER BY requested_at LIMIT :limit`,
    );
  }

  /** Records an approval request (the job waits as pending_approval). */
  insert(a: NewApproval): void {
    const params: Params = {
      id: checkId("approval id", a.id),
      job_id: checkId("job id", a.job_id),
      owner: checkId("approval owner", a.owner),
      session_id: checkId("session id", a.session_id),
      command: checkCommand(a.command),
      rule: a.rule === null ? null : checkText("approval rule", a.rule),
      reason: a.reason === null ? null : checkText("approval reason", a.reason),
      requested_at: checkInt("requested_at", a.requested_at, 0),
      expires_at: checkInt("expires_at", a.expires_at, 0),
    };
    this.#run(`record approval "${a.id}"`, () => this.#insert.run(params));
  }

  /** Decides a pending approval (decided_at now); false when it was not pending or is unknown. */
  decide(id: string, d: ApprovalDecision): boolean {
    const params: Params = {
      id: checkId("approval id", id),
      status: checkOneOf("approval decision", d.status, DECISIONS),
      decided_by: checkText("decided_by", d.decided_by),
      decision_reason: d.decision_reason === null
        ? null
        : checkText("decision reason", d.decision_reason),
      decided_at: this.#clock.now(),
    };
    return this.#run(`decide approval "${id}"`, () => this.#decide.all(params).length === 1);
  }

  get(id: string): ApprovalRow | undefined {
    const row = this.#run(`read approval "${id}"`, () => this.#get.get({ id }));
    return row ? toApproval(row as Row) : undefined;
  }

  /** The (latest) approval a job went through, if it needed one (mission evidence). */
  ofJob(jobId: string): ApprovalRow | undefined {
    const row = this.#run(
      `read the approval of job "${jobId}"`,
      () => this.#ofJob.get({ job_id: checkId("job id", jobId) }),
    );
    return row ? toApproval(row as Row) : undefined;
  }

  /** Newest first; `pending: true` lists only the pending ones, oldest first (the queue). */
  list(filter: { pending?: boolean; limit: number }): ApprovalRow[] {
    const params: Params = { limit: checkInt("limit", filter.limit, 1, 10_000) };
    const stmt = filter.pending ? this.#listPending : this.#list;
    return this.#run("list approvals", () => stmt.all(params).map((r) => toApproval(r as Row)));
  }
}
