/**
 * The connection to the daemon's one SQLite file (`node:sqlite`, WAL): opening and migrating it,
 * transactions, the error mapping every repository shares, and `recover`, which spans tables.
 * Each table's statements live in its repository (agents.ts, sessions.ts, jobs.ts, approvals.ts,
 * missions.ts, governance.ts), prepared once on this connection.
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { dirname } from "node:path";
import { type Clock, logger, systemClock, TermadaError } from "../shared/mod.ts";
import { ACTIVE_JOB_STATUSES } from "../wire/mod.ts";
import { checkText, type Params, type Row, storeError, type StoreRunners, str } from "./_checks.ts";
import { AgentRepo } from "./agents.ts";
import { ApprovalRepo } from "./approvals.ts";
import { ActionRepo, BudgetRepo, GOVERNANCE_MIGRATION, GrantRepo } from "./governance.ts";
import { JobRepo } from "./jobs.ts";
import { MISSIONS_MIGRATION, MissionStore } from "./missions.ts";
import { SessionRepo } from "./sessions.ts";

export interface StoreOptions {
  /** Source of every timestamp the store writes itself (default: the system clock). */
  clock?: Clock;
}

/** What `recover` changed, by id. */
export interface Recovery {
  /** Approvals that were pending: now `expired`. */
  expiredApprovals: string[];
  /** Jobs parked for approval: now `denied` (they never ran). */
  deniedJobs: string[];
  /** Jobs that were running or awaiting input: now `orphaned`. */
  orphanedJobs: string[];
  /** Sessions that were open: now closed. */
  closedSessions: string[];
  /**
   * Actions that were still admitted: now `outcome_unknown` (their reservations stay held until
   * an operator reconciles them).
   */
  unknownActions: string[];
}

/**
 * Schema migrations: entry i brings user_version from i to i + 1, in one transaction. Append only;
 * never edit a released entry. Exported for the migration tests only (not part of mod.ts).
 *
 * jobs.session_id has no foreign key: background jobs carry the pseudo session "background".
 */
export const MIGRATIONS: readonly string[] = [
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
  // v4: a job's whole cleaned output, kept with its row when the caller found it small.
  `ALTER TABLE jobs ADD COLUMN output BLOB;`,
  // v5: no index on jobs.status — every job's start and end paid for it, and only the start-up
  // recovery (a scan of at most finished_per_agent rows per agent) read it.
  `DROP INDEX IF EXISTS jobs_status;`,
  // v6: governance — actions, the budget ledger, grants; approvals' votes and requirements.
  GOVERNANCE_MIGRATION,
];

/** The schema version this build writes. */
export const SCHEMA_VERSION: number = MIGRATIONS.length;

const log = logger("store");

const ACTIVE_SQL = ACTIVE_JOB_STATUSES.map((s) => `'${s}'`).join(", ");
const EXPIRY_REASON = "approval expired: the daemon restarted before an operator decided";

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

/** Page size of a new database (see Store.open). */
export const PAGE_BYTES = 1024;

/**
 * The durable state. Open one per daemon (the daemon's lock guarantees a single writer); the
 * caller must close it. Not safe to share across workers. Its tables are reached through one
 * repository each, all on this connection: `agents`, `sessions`, `jobs`, `approvals`, `missions`,
 * `actions`, `budgets`, `grants`.
 *
 * Locking: exclusive. The daemon's connection holds the database until it closes; any other
 * process that opens the file gets SQLITE_BUSY.
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
  #writeBehind: (() => void) | undefined;

  readonly #begin: StatementSync;
  readonly #commit: StatementSync;
  readonly #rollback: StatementSync;
  readonly #savepoint: StatementSync;
  readonly #release: StatementSync;
  readonly #rollbackTo: StatementSync;
  readonly #expireApprovals: StatementSync;
  readonly #denyParkedJobs: StatementSync;
  readonly #orphanJobs: StatementSync;
  readonly #closeSessions: StatementSync;
  readonly #unknownActions: StatementSync;

  readonly agents: AgentRepo;
  readonly sessions: SessionRepo;
  readonly jobs: JobRepo;
  readonly approvals: ApprovalRepo;
  /** Missions, their steps, session attempts and audit anchors. */
  readonly missions: MissionStore;
  /** Admitted actions and their outcomes. */
  readonly actions: ActionRepo;
  /** The budget ledger's usage and reservations. */
  readonly budgets: BudgetRepo;
  /** Single-use grants approvals issue. */
  readonly grants: GrantRepo;

  private constructor(db: DatabaseSync, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
    const p = (sql: string) => db.prepare(sql);
    this.#begin = p("BEGIN IMMEDIATE");
    this.#commit = p("COMMIT");
    this.#rollback = p("ROLLBACK");
    // A transaction inside another (a repository's own, in `transaction(fn)`) is a savepoint.
    this.#savepoint = p("SAVEPOINT store_tx");
    this.#release = p("RELEASE store_tx");
    this.#rollbackTo = p("ROLLBACK TO store_tx");
    this.#expireApprovals = p(
      `UPDATE approvals SET status = 'expired', decided_by = 'system',
         decision_reason = :reason, decided_at = :now
       WHERE status = 'pending' RETURNING id`,
    );
    this.#denyParkedJobs = p(
      `UPDATE jobs SET status = 'denied', reason = :reason, ended_at = :now
       WHERE status = 'pending_approval' RETURNING id`,
    );
    this.#orphanJobs = p(
      `UPDATE jobs SET status = 'orphaned', reason = :reason, ended_at = :now
       WHERE status IN (${ACTIVE_SQL}) RETURNING id`,
    );
    this.#closeSessions = p(
      `UPDATE sessions SET state = 'closed', closed_at = :now, close_reason = :reason
       WHERE state = 'open' RETURNING id`,
    );
    this.#unknownActions = p(
      `UPDATE actions SET state = 'outcome_unknown', ended_at = :now
       WHERE state = 'admitted' RETURNING id`,
    );
    const runners: StoreRunners = {
      run: (action, fn) => this.#run(action, fn),
      tx: (action, fn) => this.#run(action, () => this.#transaction(action, fn)),
    };
    this.agents = new AgentRepo(db, clock, runners);
    this.sessions = new SessionRepo(db, runners);
    this.jobs = new JobRepo(db, runners);
    this.approvals = new ApprovalRepo(db, clock, runners);
    this.missions = new MissionStore(db, clock, runners);
    this.actions = new ActionRepo(db, clock, runners);
    this.budgets = new BudgetRepo(db, runners);
    this.grants = new GrantRepo(db, clock, runners);
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
      // Exclusive, before the first WAL access: this connection keeps the lock until it closes,
      // so no other process (an agent's `sqlite3 state.db` among them) can read or write the
      // database behind the daemon; and without a shared-memory WAL index each commit costs
      // ~25% less (measured).
      db.exec("PRAGMA locking_mode = EXCLUSIVE");
      // A new database gets 1 KiB pages (set before WAL: afterwards it cannot change). A command's
      // row changes touch about ten pages in three commits; each changed page is a WAL frame, so
      // 4 KiB pages wrote ~50 KB per `echo hi` and made the periodic checkpoint a 110 ms stall
      // of the daemon's thread (1 KiB: ~16 KB, 35–45 ms; measured, docs/STORE.md). An existing
      // database keeps its page size (this is then a no-op).
      db.exec(`PRAGMA page_size = ${PAGE_BYTES}`);
      const mode = db.prepare("PRAGMA journal_mode = WAL").get() as Row | undefined;
      if (mode?.journal_mode !== "wal") {
        throw new TermadaError("INTERNAL", `Cannot open the database "${path}": WAL mode refused`, {
          hint: "Put the state directory on a local file system",
        });
      }
      db.exec("PRAGMA synchronous = NORMAL");
      // Checkpoints run when the daemon calls checkpoint() (off the path of any call), not inside
      // whichever commit happens to cross 1000 pages.
      db.exec("PRAGMA wal_autocheckpoint = 0");
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

  /**
   * Copies the WAL into the database file as far as no reader needs it (PASSIVE: never waits)
   * and fsyncs it. The daemon calls it off the path of any call; also when closing.
   */
  checkpoint(): void {
    this.#run("checkpoint the database", () => this.#db.exec("PRAGMA wal_checkpoint(PASSIVE)"));
  }

  /** Closes the database; later calls do nothing. */
  close(): void {
    if (!this.#open) return;
    this.#open = false;
    try {
      this.#db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } catch {
      // closing anyway: SQLite checkpoints on close of the last connection too
    }
    this.#db.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * A writer that holds rows back (the trail stores a job's end just after its reply went out)
   * registers its flush: every store operation runs it first, so no reader or writer ever sees
   * the tables behind what the runtime already reported.
   */
  setWriteBehind(flush: (() => void) | undefined): void {
    this.#writeBehind = flush;
  }

  /**
   * Runs `fn` in one transaction, for a write that spans repositories: it commits when `fn`
   * returns and rolls back everything when `fn` throws (the error is rethrown as it is). `fn` must
   * be synchronous. Repository methods called inside join it; each still writes all or nothing
   * (a savepoint), so one that fails and is caught leaves the others' writes in place.
   */
  transaction<T>(fn: () => T): T {
    if (typeof fn !== "function") throw new TypeError("Store.transaction needs a function");
    this.#assertOpen("run a transaction");
    this.#flushBehind();
    return this.#transaction("run a transaction", fn);
  }

  /**
   * At daemon start, in one transaction: every pending approval expires and the job parked for
   * it is denied (it never ran); every job still running or awaiting input becomes "orphaned"
   * with `reason`, ended_at now; every open session is closed with close_reason `reason`; every
   * action still admitted becomes "outcome_unknown" (ended_at now) and keeps its reservations: an
   * operator's reconcile settles them.
   */
  recover(reason: string): Recovery {
    const now = this.#clock.now();
    const params: Params = { reason: checkText("recovery reason", reason), now };
    const expiry: Params = { reason: EXPIRY_REASON, now };
    const ids = (stmt: StatementSync, p: Params) => stmt.all(p).map((r) => str((r as Row).id));
    return this.#run(
      "recover jobs and sessions",
      () =>
        this.#transaction("recover jobs and sessions", () => {
          // In this order: parked jobs are denied before the rest of the active ones are orphaned.
          const expiredApprovals = ids(this.#expireApprovals, expiry);
          const deniedJobs = ids(this.#denyParkedJobs, expiry);
          const orphanedJobs = ids(this.#orphanJobs, params);
          const closedSessions = ids(this.#closeSessions, params);
          const unknownActions = ids(this.#unknownActions, { now });
          return { expiredApprovals, deniedJobs, orphanedJobs, closedSessions, unknownActions };
        }),
    );
  }

  // ── internals ─────────────────────────────────────────────────────────────

  /**
   * BEGIN IMMEDIATE … COMMIT, or a savepoint inside an open transaction. Errors of `fn` pass
   * through unchanged after the rollback; the store's own BEGIN/COMMIT failures become INTERNAL
   * naming `action`.
   */
  #transaction<T>(action: string, fn: () => T): T {
    const nested = this.#db.isTransaction;
    try {
      (nested ? this.#savepoint : this.#begin).run();
    } catch (err) {
      throw storeError(action, err);
    }
    let result: T;
    try {
      result = fn();
      if (typeof (result as { then?: unknown } | null)?.then === "function") {
        throw new TypeError(
          `Cannot ${action}: its function returned a promise; a store transaction is synchronous`,
        );
      }
    } catch (err) {
      this.#undo(nested);
      throw err;
    }
    try {
      (nested ? this.#release : this.#commit).run();
    } catch (err) {
      this.#undo(nested);
      throw storeError(action, err);
    }
    return result;
  }

  #undo(nested: boolean): void {
    // SQLite may have rolled back on its own (a full disk, an interrupt): nothing left to undo.
    if (!this.#db.isTransaction) return;
    try {
      if (nested) {
        this.#rollbackTo.run();
        this.#release.run();
      } else {
        this.#rollback.run();
      }
    } catch (err) {
      // Already failing: the original error is the one worth reporting.
      log.warn("cannot roll back a transaction", { error: String(err) });
    }
  }

  #assertOpen(action: string): void {
    if (!this.#open) {
      throw new TermadaError("INTERNAL", `Cannot ${action}: the store is closed`);
    }
  }

  /** Runs one statement or transaction; SQLite errors become INTERNAL naming the action. */
  /**
   * The write-behind's flush, outside a transaction only: one that is open already ran it, and
   * nothing can end between its statements (they are synchronous), while a flush inside it would
   * share its rollback.
   */
  #flushBehind(): void {
    if (this.#writeBehind !== undefined && !this.#db.isTransaction) this.#writeBehind();
  }

  #run<T>(action: string, fn: () => T): T {
    this.#assertOpen(action);
    this.#flushBehind();
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
