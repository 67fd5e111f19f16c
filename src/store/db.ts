/**
 * The daemon's durable state in one SQLite file (`node:sqlite`, WAL): agents, sessions and jobs.
 * Every write is one statement or one transaction, so a crash never leaves half a change behind;
 * every statement is prepared once when the store opens.
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { dirname } from "node:path";
import { type Clock, logger, notFound, systemClock, TermadaError } from "../shared/mod.ts";
import {
  checkCommand,
  checkId,
  checkInt,
  checkLimit,
  checkNullableInt,
  checkNullableSha256,
  checkNullableText,
  checkOneOf,
  checkStatus,
  checkText,
  checkTime,
  num,
  numOrNull,
  type Params,
  patchParams,
  patchSql,
  type Row,
  storeError,
  str,
  strOrNull,
} from "./_checks.ts";
import { MISSIONS_MIGRATION, MissionStore } from "./missions.ts";

export {
  MAX_COMMAND_JSON_BYTES,
  MAX_ID_LENGTH,
  MAX_LIST_LIMIT,
  MAX_TEXT_LENGTH,
} from "./_checks.ts";

export interface AgentRow {
  id: string;
  name: string | null;
  via: string;
  first_seen: number;
  last_seen: number;
}

export interface SessionRow {
  id: string;
  owner: string;
  shell: string;
  target: string;
  cwd: string;
  workspace: string | null;
  cols: number;
  rows: number;
  state: "open" | "closed";
  created_at: number;
  closed_at: number | null;
  close_reason: string | null;
}

export interface ApprovalRow {
  id: string;
  job_id: string;
  owner: string;
  session_id: string;
  command: string[];
  rule: string | null;
  reason: string | null;
  status: "pending" | "approved" | "denied" | "expired";
  requested_at: number;
  expires_at: number;
  decided_by: string | null;
  decision_reason: string | null;
  decided_at: number | null;
}

export interface JobRow {
  id: string;
  owner: string;
  session_id: string;
  command: string[];
  mode: "foreground" | "background";
  status: string;
  exit_code: number | null;
  signal: string | null;
  reason: string | null;
  cwd: string | null;
  started_at: number;
  ended_at: number | null;
  output_bytes: number;
  /** SHA-256 (hex) of the job's whole recorded output, set when it ends; null before. */
  output_sha256: string | null;
}

export interface StoreOptions {
  /** Source of every timestamp the store writes itself (default: the system clock). */
  clock?: Clock;
}

/** Statuses of a job that has not ended yet; `recover` orphans them. */
export const ACTIVE_JOB_STATUSES: readonly string[] = Object.freeze([
  "running",
  "awaiting_input",
  "pending_approval",
]);

/**
 * Schema migrations: entry i brings user_version from i to i + 1, in one transaction. Append only;
 * never edit a released entry.
 *
 * jobs.session_id has no foreign key: background jobs carry the pseudo session "background".
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE agents (
    id         TEXT PRIMARY KEY,
    name       TEXT,
    via        TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
  ) STRICT;
  CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    shell        TEXT NOT NULL,
    target       TEXT NOT NULL,
    cwd          TEXT NOT NULL,
    workspace    TEXT,
    cols         INTEGER NOT NULL,
    rows         INTEGER NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('open', 'closed')),
    created_at   INTEGER NOT NULL,
    closed_at    INTEGER,
    close_reason TEXT
  ) STRICT;
  CREATE INDEX sessions_owner_created ON sessions (owner, created_at);
  CREATE INDEX sessions_state ON sessions (state);
  CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    command      TEXT NOT NULL CHECK (json_valid(command)),
    mode         TEXT NOT NULL CHECK (mode IN ('foreground', 'background')),
    status       TEXT NOT NULL,
    exit_code    INTEGER,
    signal       TEXT,
    reason       TEXT,
    cwd          TEXT,
    started_at   INTEGER NOT NULL,
    ended_at     INTEGER,
    output_bytes INTEGER NOT NULL DEFAULT 0
  ) STRICT;
  CREATE INDEX jobs_owner_started ON jobs (owner, started_at);
  CREATE INDEX jobs_status ON jobs (status);
  `,
  `
  CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    job_id       TEXT NOT NULL,
    owner        TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    command      TEXT NOT NULL CHECK (json_valid(command)),
    rule         TEXT,
    reason       TEXT,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    requested_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_by   TEXT,
    decision_reason TEXT,
    decided_at   INTEGER
  ) STRICT;
  CREATE INDEX approvals_status ON approvals (status, requested_at);
  `,
  MISSIONS_MIGRATION,
];

/** The schema version this build writes. */
export const SCHEMA_VERSION: number = MIGRATIONS.length;

const log = logger("store");

const ACTIVE_SQL = ACTIVE_JOB_STATUSES.map((s) => `'${s}'`).join(", ");
const SESSION_COLUMNS =
  "id, owner, shell, target, cwd, workspace, cols, rows, state, created_at, closed_at, close_reason";
const JOB_COLUMNS =
  "id, owner, session_id, command, mode, status, exit_code, signal, reason, cwd, started_at, ended_at, output_bytes, output_sha256";

function toAgent(r: Row): AgentRow {
  return {
    id: str(r.id),
    name: strOrNull(r.name),
    via: str(r.via),
    first_seen: num(r.first_seen),
    last_seen: num(r.last_seen),
  };
}

function toSession(r: Row): SessionRow {
  return {
    id: str(r.id),
    owner: str(r.owner),
    shell: str(r.shell),
    target: str(r.target),
    cwd: str(r.cwd),
    workspace: strOrNull(r.workspace),
    cols: num(r.cols),
    rows: num(r.rows),
    state: str(r.state) as SessionRow["state"],
    created_at: num(r.created_at),
    closed_at: numOrNull(r.closed_at),
    close_reason: strOrNull(r.close_reason),
  };
}

function toApproval(r: Row): ApprovalRow {
  return {
    id: str(r.id),
    job_id: str(r.job_id),
    owner: str(r.owner),
    session_id: str(r.session_id),
    command: JSON.parse(str(r.command)) as string[],
    rule: strOrNull(r.rule),
    reason: strOrNull(r.reason),
    status: str(r.status) as ApprovalRow["status"],
    requested_at: num(r.requested_at),
    expires_at: num(r.expires_at),
    decided_by: strOrNull(r.decided_by),
    decision_reason: strOrNull(r.decision_reason),
    decided_at: numOrNull(r.decided_at),
  };
}

function toJob(r: Row): JobRow {
  return {
    id: str(r.id),
    owner: str(r.owner),
    session_id: str(r.session_id),
    command: JSON.parse(str(r.command)) as string[],
    mode: str(r.mode) as JobRow["mode"],
    status: str(r.status),
    exit_code: numOrNull(r.exit_code),
    signal: strOrNull(r.signal),
    reason: strOrNull(r.reason),
    cwd: strOrNull(r.cwd),
    started_at: num(r.started_at),
    ended_at: numOrNull(r.ended_at),
    output_bytes: num(r.output_bytes),
    output_sha256: strOrNull(r.output_sha256),
  };
}

/** `SET col = CASE WHEN :set_col THEN :col ELSE col END` for each column: one statement, any patch. */

const SESSION_PATCH = ["cwd", "cols", "rows", "state", "closed_at", "close_reason"] as const;
const JOB_PATCH = [
  "status",
  "exit_code",
  "signal",
  "reason",
  "cwd",
  "ended_at",
  "output_bytes",
  "output_sha256",
] as const;

/** Creates the database file 0600 (and its directory 0700) before SQLite opens it. */
function prepareFile(path: string): void {
  Deno.mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let info: Deno.FileInfo | undefined;
  try {
    info = Deno.lstatSync(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  if (info === undefined) {
    // createNew: never write through a link planted between the check and the open.
    Deno.openSync(path, { write: true, createNew: true, mode: 0o600 }).close();
    return;
  }
  if (!info.isFile) {
    throw new TermadaError("INTERNAL", `Cannot open the database "${path}": it is not a file`, {
      hint: "Remove or move whatever is at that path (a link or a directory) and start again",
    });
  }
  // SQLite gives the -wal and -shm files the mode of the database, so tightening it here covers
  // all three.
  if (info.mode !== null && (info.mode & 0o077) !== 0) Deno.chmodSync(path, 0o600);
}

/**
 * The durable state. Open one per daemon (the daemon's lock guarantees a single writer); the
 * caller must close it. Not safe to share across workers.
 *
 * Durability: WAL with synchronous=NORMAL. A commit survives a crash of the process (the WAL is in
 * the OS page cache); on power loss the last transactions before the next checkpoint may be lost,
 * but the database is never corrupted. A full fsync per commit (synchronous=FULL) would cost
 * milliseconds on every job update.
 */
export class Store {
  readonly #db: DatabaseSync;
  readonly #clock: Clock;
  #open = true;

  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  readonly #rollback: StatementSync;
  readonly #upsertAgent: StatementSync;
  readonly #listAgents: StatementSync;
  readonly #insertSession: StatementSync;
  readonly #updateSession: StatementSync;
  readonly #getSession: StatementSync;
  /** Indexed by (owner given ? 1 : 0) + (state given ? 2 : 0): each variant can use an index. */
  readonly #listSessions: StatementSync[];
  readonly #insertJob: StatementSync;
  readonly #updateJob: StatementSync;
  readonly #getJob: StatementSync;
  /** Indexed by active filter: all, active only, finished only. */
  readonly #listJobs: { all: StatementSync; active: StatementSync; finished: StatementSync };
  readonly #orphanJobs: StatementSync;
  readonly #closeSessions: StatementSync;
  readonly #pruneJobs: StatementSync;
  readonly #insertApproval: StatementSync;
  readonly #decideApproval: StatementSync;
  readonly #getApproval: StatementSync;
  readonly #listApprovals: StatementSync;
  readonly #listPendingApprovals: StatementSync;
  readonly #expireApprovals: StatementSync;
  readonly #denyParkedJobs: StatementSync;
  readonly #approvalOfJob: StatementSync;
  /** Missions, their steps, session attempts and audit anchors (same database). */
  readonly missions: MissionStore;

  private constructor(db: DatabaseSync, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
    const p = (sql: string) => db.prepare(sql);
    this.#begin = p("BEGIN IMMEDIATE");
    this.#commit = p("COMMIT");
    this.#rollback = p("ROLLBACK");
    this.missions = new MissionStore(db, clock, {
      run: (action, fn) => this.#run(action, fn),
      tx: (action, fn) => this.#run(action, () => this.#transaction(fn)),
    });
    this.#upsertAgent = p(
      `INSERT INTO agents (id, name, via, first_seen, last_seen)
       VALUES (:id, :name, :via, :now, :now)
       ON CONFLICT (id) DO UPDATE SET
         name = COALESCE(excluded.name, agents.name),
         via = excluded.via,
         last_seen = excluded.last_seen`,
    );
    this.#listAgents = p(
      "SELECT id, name, via, first_seen, last_seen FROM agents ORDER BY last_seen DESC, id",
    );
    this.#insertSession = p(
      `INSERT INTO sessions (${SESSION_COLUMNS})
       VALUES (:id, :owner, :shell, :target, :cwd, :workspace, :cols, :rows, 'open', :created_at,
               NULL, NULL)`,
    );
    this.#updateSession = p(patchSql("sessions", SESSION_PATCH));
    this.#getSession = p(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`);
    this.#listSessions = [0, 1, 2, 3].map((k) => {
      const where = [k & 1 ? "owner = :owner" : "", k & 2 ? "state = :state" : ""]
        .filter(Boolean);
      return p(
        `SELECT ${SESSION_COLUMNS} FROM sessions
         ${where.length ? "WHERE " + where.join(" AND ") : ""}
         ORDER BY created_at DESC, rowid DESC LIMIT :limit`,
      );
    });
    this.#insertJob = p(
      `INSERT INTO jobs (id, owner, session_id, command, mode, status, cwd, started_at)
       VALUES (:id, :owner, :session_id, :command, :mode, :status, :cwd, :started_at)`,
    );
    this.#updateJob = p(patchSql("jobs", JOB_PATCH));
    this.#getJob = p(`SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ?`);
    const listJobs = (extra: string) =>
      p(
        `SELECT ${JOB_COLUMNS} FROM jobs
         WHERE owner = :owner AND started_at > :after ${extra}
         ORDER BY started_at DESC, rowid DESC LIMIT :limit`,
      );
    this.#listJobs = {
      all: listJobs(""),
      active: listJobs(`AND status IN (${ACTIVE_SQL})`),
      finished: listJobs(`AND status NOT IN (${ACTIVE_SQL})`),
    };
    this.#orphanJobs = p(
      `UPDATE jobs SET status = 'orphaned', reason = :reason, ended_at = :now
       WHERE status IN (${ACTIVE_SQL}) RETURNING id`,
    );
    this.#closeSessions = p(
      `UPDATE sessions SET state = 'closed', closed_at = :now, close_reason = :reason
       WHERE state = 'open' RETURNING id`,
    );
    this.#pruneJobs = p(
      `DELETE FROM jobs WHERE id IN (
         SELECT id FROM jobs WHERE owner = :owner AND status NOT IN (${ACTIVE_SQL})
         ORDER BY started_at DESC, rowid DESC LIMIT -1 OFFSET :keep
       ) RETURNING id`,
    );
    this.#insertApproval = p(
      `INSERT INTO approvals (id, job_id, owner, session_id, command, rule, reason, status,
         requested_at, expires_at)
       VALUES (:id, :job_id, :owner, :session_id, :command, :rule, :reason, 'pending',
         :requested_at, :expires_at)`,
    );
    this.#decideApproval = p(
      `UPDATE approvals SET status = :status, decided_by = :decided_by,
         decision_reason = :decision_reason, decided_at = :decided_at
       WHERE id = :id AND status = 'pending' RETURNING id`,
    );
    this.#getApproval = p(`SELECT * FROM approvals WHERE id = :id`);
    this.#approvalOfJob = p(
      `SELECT * FROM approvals WHERE job_id = :job_id ORDER BY requested_at DESC LIMIT 1`,
    );
    this.#listApprovals = p(`SELECT * FROM approvals ORDER BY requested_at DESC LIMIT :limit`);
    this.#listPendingApprovals = p(
      `SELECT * FROM approvals WHERE status = 'pending' ORDER BY requested_at LIMIT :limit`,
    );
    this.#expireApprovals = p(
      `UPDATE approvals SET status = 'expired', decided_by = 'system',
         decision_reason = :reason, decided_at = :now
       WHERE status = 'pending' RETURNING id`,
    );
    this.#denyParkedJobs = p(
      `UPDATE jobs SET status = 'denied', reason = :reason, ended_at = :now
       WHERE status = 'pending_approval' RETURNING id`,
    );
  }

  /** Records an approval request (the job waits as pending_approval). */
  insertApproval(
    a: Omit<ApprovalRow, "status" | "decided_by" | "decision_reason" | "decided_at">,
  ): void {
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
    this.#run(`record approval "${a.id}"`, () => this.#insertApproval.run(params));
  }

  /** Decides a pending approval; false when it was not pending (already decided or unknown). */
  decideApproval(
    id: string,
    d: {
      status: "approved" | "denied" | "expired";
      decided_by: string;
      decision_reason: string | null;
    },
  ): boolean {
    const params: Params = {
      id: checkId("approval id", id),
      status: d.status,
      decided_by: checkText("decided_by", d.decided_by),
      decision_reason: d.decision_reason === null
        ? null
        : checkText("decision reason", d.decision_reason),
      decided_at: this.#clock.now(),
    };
    return this.#run(
      `decide approval "${id}"`,
      () => this.#decideApproval.all(params).length === 1,
    );
  }

  getApproval(id: string): ApprovalRow | undefined {
    const row = this.#run(`read approval "${id}"`, () => this.#getApproval.get({ id }));
    return row ? toApproval(row as Row) : undefined;
  }

  /** The (latest) approval a job went through, if it needed one. */
  approvalOfJob(jobId: string): ApprovalRow | undefined {
    const row = this.#run(
      `read the approval of job "${jobId}"`,
      () => this.#approvalOfJob.get({ job_id: checkId("job id", jobId) }),
    );
    return row ? toApproval(row as Row) : undefined;
  }

  listApprovals(filter: { pending?: boolean; limit: number }): ApprovalRow[] {
    const params: Params = { limit: checkInt("limit", filter.limit, 1, 10_000) };
    const stmt = filter.pending ? this.#listPendingApprovals : this.#listApprovals;
    return this.#run("list approvals", () => stmt.all(params).map((r) => toApproval(r as Row)));
  }

  /**
   * Opens (creating it 0600 if needed) and migrates the database at `path`. A database written by
   * a newer Termada is refused rather than misread.
   */
  static open(path: string, options: StoreOptions = {}): Store {
    if (typeof path !== "string" || path === "") {
      throw new TypeError("Store.open needs a database path");
    }
    let db: DatabaseSync | undefined;
    try {
      prepareFile(path);
      db = new DatabaseSync(path);
      // busy_timeout first: switching to WAL itself may wait for another connection's lock.
      db.exec("PRAGMA busy_timeout = 5000");
      const mode = db.prepare("PRAGMA journal_mode = WAL").get() as Row | undefined;
      if (mode?.journal_mode !== "wal") {
        throw new TermadaError("INTERNAL", `Cannot open the database "${path}": WAL mode refused`, {
          hint: "Put the state directory on a local file system",
        });
      }
      db.exec("PRAGMA synchronous = NORMAL");
      db.exec("PRAGMA foreign_keys = ON");
      migrate(db, path);
      return new Store(db, options.clock ?? systemClock);
    } catch (err) {
      try {
        db?.close();
      } catch {
        // Already failing: the original error is the one worth reporting.
      }
      if (err instanceof TermadaError) throw err;
      throw new TermadaError(
        "INTERNAL",
        `Cannot open the database "${path}": ${err instanceof Error ? err.message : String(err)}`,
        {
          cause: err,
          hint:
            "Check that the state directory is writable and the file is a Termada database; move a damaged file aside to start fresh",
        },
      );
    }
  }

  /** Closes the database; later calls do nothing. */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.#db.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  // ── agents ────────────────────────────────────────────────────────────────

  /** Records that an agent was seen now: first_seen is kept, last_seen updated, name kept if omitted. */
  upsertAgent(a: { id: string; name?: string; via: string }): void {
    const params: Params = {
      id: checkId("agent id", a.id),
      name: a.name === undefined ? null : checkText("agent name", a.name),
      via: checkText("agent via", a.via),
      now: this.#clock.now(),
    };
    this.#run("record an agent", () => this.#upsertAgent.run(params));
  }

  /** Every agent, most recently seen first. */
  listAgents(): AgentRow[] {
    return this.#run("list agents", () => this.#listAgents.all().map((r) => toAgent(r as Row)));
  }

  // ── sessions ──────────────────────────────────────────────────────────────

  /** Records a new open session. */
  insertSession(s: Omit<SessionRow, "state" | "closed_at" | "close_reason">): void {
    const params: Params = {
      id: checkId("session id", s.id),
      owner: checkId("session owner", s.owner),
      shell: checkText("session shell", s.shell),
      target: checkText("session target", s.target),
      cwd: checkText("session cwd", s.cwd),
      workspace: checkNullableText("session workspace", s.workspace ?? null),
      cols: checkInt("session cols", s.cols, 1, 65535),
      rows: checkInt("session rows", s.rows, 1, 65535),
      created_at: checkTime("session created_at", s.created_at),
    };
    this.#run(`record session "${s.id}"`, () => this.#insertSession.run(params));
  }

  /** Changes the given fields of a session (absent fields are kept). NOT_FOUND if unknown. */
  updateSession(
    id: string,
    patch: Partial<
      Pick<SessionRow, "cwd" | "cols" | "rows" | "state" | "closed_at" | "close_reason">
    >,
  ): void {
    checkId("session id", id);
    const v = {
      cwd: patch.cwd === undefined ? undefined : checkText("session cwd", patch.cwd),
      cols: patch.cols === undefined ? undefined : checkInt("session cols", patch.cols, 1, 65535),
      rows: patch.rows === undefined ? undefined : checkInt("session rows", patch.rows, 1, 65535),
      state: patch.state === undefined
        ? undefined
        : checkOneOf("session state", patch.state, ["open", "closed"] as const),
      closed_at: patch.closed_at === undefined
        ? undefined
        : checkNullableInt("session closed_at", patch.closed_at, 0),
      close_reason: patch.close_reason === undefined
        ? undefined
        : checkNullableText("session close_reason", patch.close_reason),
    };
    const params = patchParams(id, SESSION_PATCH, v);
    const result = this.#run(`update session "${id}"`, () => this.#updateSession.run(params));
    if (Number(result.changes) === 0) throw notFound("session", id);
  }

  getSession(id: string): SessionRow | undefined {
    checkId("session id", id);
    const row = this.#run(`read session "${id}"`, () => this.#getSession.get(id));
    return row === undefined ? undefined : toSession(row as Row);
  }

  /** Sessions, newest first. */
  listSessions(
    filter: { owner?: string; state?: "open" | "closed"; limit?: number } = {},
  ): SessionRow[] {
    const params: Params = { limit: filter.limit === undefined ? -1 : checkLimit(filter.limit) };
    let k = 0;
    if (filter.owner !== undefined) {
      params.owner = checkId("session owner", filter.owner);
      k |= 1;
    }
    if (filter.state !== undefined) {
      params.state = checkOneOf("session state", filter.state, ["open", "closed"] as const);
      k |= 2;
    }
    const stmt = this.#listSessions[k]!;
    return this.#run("list sessions", () => stmt.all(params).map((r) => toSession(r as Row)));
  }

  // ── jobs ──────────────────────────────────────────────────────────────────

  /** Records a new job (output_bytes 0, not ended). */
  insertJob(
    j: Omit<
      JobRow,
      "exit_code" | "signal" | "reason" | "ended_at" | "output_bytes" | "output_sha256"
    >,
  ): void {
    const params: Params = {
      id: checkId("job id", j.id),
      owner: checkId("job owner", j.owner),
      session_id: checkId("job session id", j.session_id),
      command: checkCommand(j.command),
      mode: checkOneOf("job mode", j.mode, ["foreground", "background"] as const),
      status: checkStatus(j.status),
      cwd: checkNullableText("job cwd", j.cwd ?? null),
      started_at: checkTime("job started_at", j.started_at),
    };
    this.#run(`record job "${j.id}"`, () => this.#insertJob.run(params));
  }

  /** Changes the given fields of a job (absent fields are kept). NOT_FOUND if unknown. */
  updateJob(
    id: string,
    patch: Partial<
      Pick<
        JobRow,
        | "status"
        | "exit_code"
        | "signal"
        | "reason"
        | "cwd"
        | "ended_at"
        | "output_bytes"
        | "output_sha256"
      >
    >,
  ): void {
    checkId("job id", id);
    const v = {
      status: patch.status === undefined ? undefined : checkStatus(patch.status),
      exit_code: patch.exit_code === undefined
        ? undefined
        : checkNullableInt("job exit_code", patch.exit_code, -(2 ** 31)),
      signal: patch.signal === undefined
        ? undefined
        : checkNullableText("job signal", patch.signal),
      reason: patch.reason === undefined
        ? undefined
        : checkNullableText("job reason", patch.reason),
      cwd: patch.cwd === undefined ? undefined : checkNullableText("job cwd", patch.cwd),
      ended_at: patch.ended_at === undefined
        ? undefined
        : checkNullableInt("job ended_at", patch.ended_at, 0),
      output_bytes: patch.output_bytes === undefined
        ? undefined
        : checkInt("job output_bytes", patch.output_bytes, 0),
      output_sha256: patch.output_sha256 === undefined
        ? undefined
        : checkNullableSha256("job output_sha256", patch.output_sha256),
    };
    const params = patchParams(id, JOB_PATCH, v);
    const result = this.#run(`update job "${id}"`, () => this.#updateJob.run(params));
    if (Number(result.changes) === 0) throw notFound("job", id);
  }

  getJob(id: string): JobRow | undefined {
    checkId("job id", id);
    const row = this.#run(`read job "${id}"`, () => this.#getJob.get(id));
    return row === undefined ? undefined : toJob(row as Row);
  }

  /**
   * An owner's jobs, newest first. `active: true` keeps running/awaiting_input/pending_approval
   * jobs, `active: false` only the others; `startedAfter` is exclusive.
   */
  listJobs(
    filter: { owner: string; active?: boolean; startedAfter?: number; limit: number },
  ): JobRow[] {
    const params: Params = {
      owner: checkId("job owner", filter.owner),
      after: filter.startedAfter === undefined
        ? Number.MIN_SAFE_INTEGER
        : checkInt("startedAfter", filter.startedAfter, Number.MIN_SAFE_INTEGER),
      limit: checkLimit(filter.limit),
    };
    const stmt = filter.active === undefined
      ? this.#listJobs.all
      : filter.active
      ? this.#listJobs.active
      : this.#listJobs.finished;
    return this.#run("list jobs", () => stmt.all(params).map((r) => toJob(r as Row)));
  }

  // ── recovery and retention ────────────────────────────────────────────────

  /**
   * At daemon start: every job still running/awaiting_input/pending_approval becomes "orphaned"
   * with `reason`, ended_at now; every open session becomes closed with close_reason. One
   * transaction.
   */
  recover(reason: string): {
    orphanedJobs: string[];
    closedSessions: string[];
    expiredApprovals: string[];
    deniedJobs: string[];
  } {
    const now = this.#clock.now();
    const params: Params = { reason: checkText("recovery reason", reason), now };
    const expiry: Params = {
      reason: "approval expired: the daemon restarted before an operator decided",
      now,
    };
    return this.#run("recover jobs and sessions", () =>
      this.#transaction(() => ({
        // Jobs parked for approval never ran: they are denied (their session is gone), not orphaned.
        expiredApprovals: this.#expireApprovals.all(expiry).map((r) => str((r as Row).id)),
        deniedJobs: this.#denyParkedJobs.all(expiry).map((r) => str((r as Row).id)),
        orphanedJobs: this.#orphanJobs.all(params).map((r) => str((r as Row).id)),
        closedSessions: this.#closeSessions.all(params).map((r) => str((r as Row).id)),
      })));
  }

  /**
   * Deletes the owner's oldest finished jobs beyond the newest `keep`; returns their ids (the
   * caller deletes their spools). Active jobs are never deleted nor counted.
   */
  pruneJobs(owner: string, keep: number): string[] {
    const params: Params = {
      owner: checkId("job owner", owner),
      keep: checkInt("keep", keep, 0),
    };
    return this.#run(
      `prune jobs of "${owner}"`,
      () => this.#pruneJobs.all(params).map((r) => str((r as Row).id)),
    );
  }

  // ── internals ─────────────────────────────────────────────────────────────

  #transaction<T>(fn: () => T): T {
    this.#begin.run();
    try {
      const result = fn();
      this.#commit.run();
      return result;
    } catch (err) {
      if (this.#db.isTransaction) this.#rollback.run();
      throw err;
    }
  }

  /** Runs one statement or transaction; SQLite errors become INTERNAL naming the action. */
  #run<T>(action: string, fn: () => T): T {
    if (!this.#open) {
      throw new TermadaError("INTERNAL", `Cannot ${action}: the store is closed`);
    }
    try {
      return fn();
    } catch (err) {
      throw storeError(action, err);
    }
  }
}

function migrate(db: DatabaseSync, path: string): void {
  const version = (): number => {
    const row = db.prepare("PRAGMA user_version").get() as Row | undefined;
    return Number(row?.user_version ?? 0);
  };
  const from = version();
  if (from > SCHEMA_VERSION) {
    throw new TermadaError(
      "INTERNAL",
      `Cannot open the database "${path}": its schema version ${from} is newer than this build's ${SCHEMA_VERSION}`,
      {
        hint:
          "A newer Termada wrote it: run that version, or move the state directory aside to start fresh",
      },
    );
  }
  for (let v = from; v < SCHEMA_VERSION; v++) {
    db.exec("BEGIN IMMEDIATE");
    try {
      // Re-read under the write lock: another process may have migrated meanwhile.
      if (version() === v) {
        db.exec(MIGRATIONS[v]!);
        db.exec(`PRAGMA user_version = ${v + 1}`);
      }
      db.exec("COMMIT");
    } catch (err) {
      if (db.isTransaction) db.exec("ROLLBACK");
      throw err;
    }
  }
  if (from < SCHEMA_VERSION) {
    const fields = { path, from, to: SCHEMA_VERSION };
    if (from === 0) log.debug("created database", fields);
    else log.info("migrated database", fields);
  }
}
