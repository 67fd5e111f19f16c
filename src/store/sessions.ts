/**
 * The `sessions` table: every shell session the daemon opened, open or closed. Closing them all
 * at a restart is `Store.recover`'s job (it spans tables).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { notFound } from "../shared/mod.ts";
import {
  checkId,
  checkInt,
  checkLimit,
  checkNullableInt,
  checkNullableText,
  checkOneOf,
  checkText,
  checkTime,
  num,
  numOrNull,
  type Params,
  patchParams,
  patchSql,
  type Row,
  type StoreRunner,
  type StoreRunners,
  str,
  strOrNull,
} from "./_checks.ts";

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

/** A session as `insert` takes it: it starts open. */
export type NewSession = Omit<SessionRow, "state" | "closed_at" | "close_reason">;

/** The fields `update` may change: absent (or undefined) keeps the stored value, null clears. */
export type SessionPatch = Partial<
  Pick<SessionRow, "cwd" | "cols" | "rows" | "state" | "closed_at" | "close_reason">
>;

const SESSION_COLUMNS =
  "id, owner, shell, target, cwd, workspace, cols, rows, state, created_at, closed_at, close_reason";
const SESSION_PATCH = ["cwd", "cols", "rows", "state", "closed_at", "close_reason"] as const;
const SESSION_STATES = ["open", "closed"] as const;

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

/** The sessions table. Built by `Store` on its connection; reach it as `store.sessions`. */
export class SessionRepo {
  readonly #run: StoreRunner;
  readonly #insert: StatementSync;
  readonly #update: StatementSync;
  readonly #get: StatementSync;
  /** Indexed by (owner given ? 1 : 0) + (state given ? 2 : 0): each variant can use an index. */
  readonly #list: StatementSync[];

  constructor(db: DatabaseSync, runners: StoreRunners) {
    this.#run = runners.run;
    const p = (sql: string) => db.prepare(sql);
    this.#insert = p(
      `INSERT INTO sessions (${SESSION_COLUMNS})
       VALUES (:id, :owner, :shell, :target, :cwd, :workspace, :cols, :rows, 'open', :created_at,
               NULL, NULL)`,
    );
    this.#update = p(patchSql("sessions", SESSION_PATCH));
    this.#get = p(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id = ?`);
    this.#list = [0, 1, 2, 3].map((k) => {
      const where = [k & 1 ? "owner = :owner" : "", k & 2 ? "state = :state" : ""]
        .filter(Boolean);
      return p(
        `SELECT ${SESSION_COLUMNS} FROM sessions
         ${where.length ? "WHERE " + where.join(" AND ") : ""}
         ORDER BY created_at DESC, rowid DESC LIMIT :limit`,
      );
    });
  }

  /** Records a new open session. */
  insert(s: NewSession): void {
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
    this.#run(`record session "${s.id}"`, () => this.#insert.run(params));
  }

  /** Changes the given fields of a session (absent fields are kept). NOT_FOUND if unknown. */
  update(id: string, patch: SessionPatch): void {
    checkId("session id", id);
    const v = {
      cwd: patch.cwd === undefined ? undefined : checkText("session cwd", patch.cwd),
      cols: patch.cols === undefined ? undefined : checkInt("session cols", patch.cols, 1, 65535),
      rows: patch.rows === undefined ? undefined : checkInt("session rows", patch.rows, 1, 65535),
      state: patch.state === undefined
        ? undefined
        : checkOneOf("session state", patch.state, SESSION_STATES),
      closed_at: patch.closed_at === undefined
        ? undefined
        : checkNullableInt("session closed_at", patch.closed_at, 0),
      close_reason: patch.close_reason === undefined
        ? undefined
        : checkNullableText("session close_reason", patch.close_reason),
    };
    const params = patchParams(id, SESSION_PATCH, v);
    const result = this.#run(`update session "${id}"`, () => this.#update.run(params));
    if (Number(result.changes) === 0) throw notFound("session", id);
  }

  get(id: string): SessionRow | undefined {
    checkId("session id", id);
    const row = this.#run(`read session "${id}"`, () => this.#get.get(id));
    return row === undefined ? undefined : toSession(row as Row);
  }

  /** Sessions, newest first (`created_at`, then insertion order). */
  list(filter: { owner?: string; state?: "open" | "closed"; limit?: number } = {}): SessionRow[] {
    const params: Params = { limit: filter.limit === undefined ? -1 : checkLimit(filter.limit) };
    let k = 0;
    if (filter.owner !== undefined) {
      params.owner = checkId("session owner", filter.owner);
      k |= 1;
    }
    if (filter.state !== undefined) {
      params.state = checkOneOf("session state", filter.state, SESSION_STATES);
      k |= 2;
    }
    const stmt = this.#list[k]!;
    return this.#run("list sessions", () => stmt.all(params).map((r) => toSession(r as Row)));
  }
}
