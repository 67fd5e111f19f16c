/**
 * The `approvals` table: a command held for an operator's decision, the votes cast on it (v6) and
 * that decision. Whether the votes meet the requirements is the approvals book's call
 * (src/control); this table only keeps them, in order, while the approval is pending. Expiring the
 * pending ones at a restart is `Store.recover`'s job (it spans tables).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { type Clock, invalidArgument, TermadaError } from "../shared/mod.ts";
import { APPROVAL_STATUSES, type ApprovalStatus } from "../wire/mod.ts";
import {
  checkCommand,
  checkId,
  checkInt,
  checkJson,
  checkOneOf,
  checkStrings,
  checkText,
  checkTime,
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
  /** The votes cast while it was pending, oldest first (v6; older rows: none). */
  votes: Vote[];
  /** What the decision needs (v6); null: a single operator decides (older rows, simple rules). */
  requirements: Requirements | null;
}

/** One approver's vote, with the identity facts the book checked the requirements against. */
export interface Vote {
  /** Who voted (the operator identity). */
  by: string;
  principal: string;
  roles: string[];
  /** Authentication methods of the voter's session ("pwd", "mfa", "hwk", …). */
  amr: string[];
  approve: boolean;
  at: number;
  reason?: string;
}

/** What an approval needs before it is decided. */
export interface Requirements {
  /** Approving votes needed, 1 to MAX_VOTES. */
  quorum: number;
  /** Roles of which a voter must hold one (empty: any). */
  roles: string[];
  /** Voters must have authenticated with a second factor. */
  mfa: boolean;
  /** The requester's own principal may not vote. */
  exclude_requester: boolean;
  /** When several rules' requirements combine: a voter holds a role of each set. */
  role_sets?: string[][];
}

/** Most votes one approval holds. */
export const MAX_VOTES = 16;
const MAX_ROLES = 32;
const MAX_AMR = 16;
const MAX_NAME = 256;

/** An approval request as `insert` takes it: it starts pending, without votes. */
export type NewApproval =
  & Omit<
    ApprovalRow,
    "status" | "decided_by" | "decision_reason" | "decided_at" | "votes" | "requirements"
  >
  & { requirements?: Requirements | null };

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
    votes: JSON.parse(str(r.votes)) as Vote[],
    requirements: r.requirements === null ? null : JSON.parse(str(r.requirements)) as Requirements,
  };
}

function checkBool(what: string, value: unknown): boolean {
  if (typeof value !== "boolean") {
    throw invalidArgument(`Cannot store ${what}: it must be a boolean`);
  }
  return value;
}

function checkName(what: string, value: unknown): string {
  const s = checkText(what, value, MAX_NAME);
  if (s === "") throw invalidArgument(`Cannot store ${what}: it is empty`);
  return s;
}

/** The vote as stored: its known fields only, each bounded. */
function checkVote(v: Vote): string {
  const vote: Vote = {
    by: checkName("the voter", v.by),
    principal: checkName("the voter's principal", v.principal),
    roles: checkStrings("the voter's roles", v.roles, MAX_ROLES, MAX_NAME),
    amr: checkStrings("the voter's authentication methods", v.amr, MAX_AMR, 64),
    approve: checkBool("a vote", v.approve),
    at: checkTime("the time of a vote", v.at),
  };
  if (v.reason !== undefined) vote.reason = checkText("the reason of a vote", v.reason);
  return checkJson("a vote", vote, 16 * 1024);
}

function checkRequirements(r: Requirements | null | undefined): string | null {
  if (r === undefined || r === null) return null;
  const req: Requirements = {
    quorum: checkInt("the quorum of an approval", r.quorum, 1, MAX_VOTES),
    roles: checkStrings("the roles of an approval", r.roles, MAX_ROLES, MAX_NAME),
    mfa: checkBool("the mfa requirement", r.mfa),
    exclude_requester: checkBool("the exclude_requester requirement", r.exclude_requester),
    ...(r.role_sets === undefined ? {} : {
      role_sets: r.role_sets.slice(0, MAX_ROLES).map((s) =>
        checkStrings("a role set of an approval", s, MAX_ROLES, MAX_NAME)
      ),
    }),
  };
  return checkJson("the requirements of an approval", req, 16 * 1024);
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
  readonly #addVote: StatementSync;

  constructor(db: DatabaseSync, clock: Clock, runners: StoreRunners) {
    this.#clock = clock;
    this.#run = runners.run;
    const p = (sql: string) => db.prepare(sql);
    this.#insert = p(
      `INSERT INTO approvals (id, job_id, owner, session_id, command, rule, reason, status,
         requested_at, expires_at, requirements)
       VALUES (:id, :job_id, :owner, :session_id, :command, :rule, :reason, 'pending',
         :requested_at, :expires_at, :requirements)`,
    );
    // The check (pending, room left) and the append in one statement.
    this.#addVote = p(
      `UPDATE approvals SET votes = json_insert(votes, '$[#]', json(:vote))
       WHERE id = :id AND status = 'pending' AND json_array_length(votes) < ${MAX_VOTES}
       RETURNING votes`,
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
      requirements: checkRequirements(a.requirements),
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

  /**
   * Appends a vote to a pending approval and returns all its votes, oldest first. An unknown
   * approval is NOT_FOUND; one already decided is INVALID_ARGUMENT (details.state says how); one
   * that holds MAX_VOTES votes is QUOTA_EXCEEDED (not retriable). Nothing is written then.
   */
  addVote(id: string, vote: Vote): Vote[] {
    const params: Params = { id: checkId("approval id", id), vote: checkVote(vote) };
    return this.#run(`add a vote to approval "${id}"`, () => {
      const row = this.#addVote.get(params) as Row | undefined;
      if (row !== undefined) return JSON.parse(str(row.votes)) as Vote[];
      const current = this.#get.get({ id }) as Row | undefined;
      if (current === undefined) {
        throw new TermadaError("NOT_FOUND", `No approval "${id}"`, {
          hint: "List the pending approvals",
        });
      }
      const status = str(current.status);
      if (status !== "pending") {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          `Cannot vote on approval "${id}": it is already ${status}`,
          { details: { approval_id: id, state: status } },
        );
      }
      throw new TermadaError(
        "QUOTA_EXCEEDED",
        `Cannot vote on approval "${id}": it already holds ${MAX_VOTES} votes`,
        {
          details: { approval_id: id, state: status },
          retriable: false,
          hint: "Decide it, or deny it and request again",
        },
      );
    });
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
