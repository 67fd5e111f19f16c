/**
 * The `jobs` table: every command a session or the background ran, its final state, and (since
 * schema v4) its whole cleaned output inline when the caller found it small. Orphaning the
 * unfinished ones at a restart is `Store.recover`'s job (it spans tables).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { invalidArgument, notFound } from "../shared/mod.ts";
import { ACTIVE_JOB_STATUSES, FINAL_JOB_STATUSES, type JobStatus } from "../wire/mod.ts";
import {
  checkCommand,
  checkId,
  checkInt,
  checkLimit,
  checkNullableInt,
  checkNullableOutput,
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
  type StoreRunner,
  type StoreRunners,
  str,
  strOrNull,
} from "./_checks.ts";

export interface JobRow {
  id: string;
  owner: string;
  session_id: string;
  command: string[];
  mode: "foreground" | "background";
  status: JobStatus;
  exit_code: number | null;
  signal: string | null;
  reason: string | null;
  cwd: string | null;
  started_at: number;
  ended_at: number | null;
  output_bytes: number;
  /** SHA-256 (hex) of the job's whole recorded output, set when it ends; null before. */
  output_sha256: string | null;
  /**
   * The job's whole cleaned output when it was small enough to keep with the row (set by
   * `finish`, at most MAX_INLINE_OUTPUT_BYTES); null otherwise. Only `get` reads it: rows from
   * `list` always carry null.
   */
  output: Uint8Array | null;
}

/** A job as `insert` takes it: not ended, no output yet. */
export type NewJob = Omit<
  JobRow,
  "exit_code" | "signal" | "reason" | "ended_at" | "output_bytes" | "output_sha256" | "output"
>;

/** The fields `update` may change: absent (or undefined) keeps the stored value, null clears. */
export type JobPatch = Partial<
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
>;

/**
 * Everything `finish` writes at a job's end; every field is set (null clears). `status` must be
 * final, and `output`, when not null, is the whole output: `output_bytes` bytes.
 */
export interface JobFinal {
  status: JobStatus;
  exit_code: number | null;
  signal: string | null;
  reason: string | null;
  cwd: string | null;
  ended_at: number;
  output_bytes: number;
  output_sha256: string | null;
  output: Uint8Array | null;
}

/** The filter of `list`: see JobRepo.list. */
export interface JobFilter {
  owner: string;
  active?: boolean;
  startedAfter?: number;
  limit: number;
}

const ACTIVE_SQL = ACTIVE_JOB_STATUSES.map((s) => `'${s}'`).join(", ");
/** Every column but the output blob: what `list` reads. */
const LIST_COLUMNS =
  "id, owner, session_id, command, mode, status, exit_code, signal, reason, cwd, started_at, ended_at, output_bytes, output_sha256";
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
const MIN_EXIT_CODE = -(2 ** 31);

function toJob(r: Row): JobRow {
  return {
    id: str(r.id),
    owner: str(r.owner),
    session_id: str(r.session_id),
    command: JSON.parse(str(r.command)) as string[],
    mode: str(r.mode) as JobRow["mode"],
    status: str(r.status) as JobStatus,
    exit_code: numOrNull(r.exit_code),
    signal: strOrNull(r.signal),
    reason: strOrNull(r.reason),
    cwd: strOrNull(r.cwd),
    started_at: num(r.started_at),
    ended_at: numOrNull(r.ended_at),
    output_bytes: num(r.output_bytes),
    output_sha256: strOrNull(r.output_sha256),
    // Absent from list rows (not selected); a zero-length blob reads back as empty bytes.
    output: r.output instanceof Uint8Array ? r.output : null,
  };
}

/** The jobs table. Built by `Store` on its connection; reach it as `store.jobs`. */
export class JobRepo {
  readonly #run: StoreRunner;
  readonly #tx: StoreRunner;
  readonly #insert: StatementSync;
  readonly #update: StatementSync;
  readonly #get: StatementSync;
  /** By active filter: all, active only, finished only. */
  readonly #list: { all: StatementSync; active: StatementSync; finished: StatementSync };
  readonly #prune: StatementSync;
  readonly #finish: StatementSync;
  readonly #sessionCwd: StatementSync;

  constructor(db: DatabaseSync, runners: StoreRunners) {
    this.#run = runners.run;
    this.#tx = runners.tx;
    const p = (sql: string) => db.prepare(sql);
    this.#insert = p(
      `INSERT INTO jobs (id, owner, session_id, command, mode, status, cwd, started_at)
       VALUES (:id, :owner, :session_id, :command, :mode, :status, :cwd, :started_at)`,
    );
    this.#update = p(patchSql("jobs", JOB_PATCH));
    this.#get = p(`SELECT ${LIST_COLUMNS}, output FROM jobs WHERE id = ?`);
    const list = (extra: string) =>
      p(
        `SELECT ${LIST_COLUMNS} FROM jobs
         WHERE owner = :owner AND started_at > :after ${extra}
         ORDER BY started_at DESC, rowid DESC LIMIT :limit`,
      );
    this.#list = {
      all: list(""),
      active: list(`AND status IN (${ACTIVE_SQL})`),
      finished: list(`AND status NOT IN (${ACTIVE_SQL})`),
    };
    this.#prune = p(
      `DELETE FROM jobs WHERE id IN (
         SELECT id FROM jobs WHERE owner = :owner AND status NOT IN (${ACTIVE_SQL})
         ORDER BY started_at DESC, rowid DESC LIMIT -1 OFFSET :keep
       ) RETURNING id, (output IS NULL AND output_bytes > 0) AS spooled`,
    );
    this.#finish = p(
      `UPDATE jobs SET status = :status, exit_code = :exit_code, signal = :signal,
         reason = :reason, cwd = :cwd, ended_at = :ended_at, output_bytes = :output_bytes,
         output_sha256 = :output_sha256, output = :output
       WHERE id = :id`,
    );
    // The session's cwd is the jobs' business at a job's end: the shell reported it.
    this.#sessionCwd = p("UPDATE sessions SET cwd = :cwd WHERE id = :id");
  }

  /** Records a new job (output_bytes 0, not ended, no output). */
  insert(j: NewJob): void {
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
    this.#run(`record job "${j.id}"`, () => this.#insert.run(params));
  }

  /** Changes the given fields of a job (absent fields are kept). NOT_FOUND if unknown. */
  update(id: string, patch: JobPatch): void {
    checkId("job id", id);
    const v = {
      status: patch.status === undefined ? undefined : checkStatus(patch.status),
      exit_code: patch.exit_code === undefined
        ? undefined
        : checkNullableInt("job exit_code", patch.exit_code, MIN_EXIT_CODE),
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
    const result = this.#run(`update job "${id}"`, () => this.#update.run(params));
    if (Number(result.changes) === 0) throw notFound("job", id);
  }

  /**
   * Writes a job's final state, and, when `session` is given, that session's cwd, in one
   * transaction: NOT_FOUND (nothing written) when the job or the session is unknown. The one
   * write at a job's end: without a session it is a single statement.
   */
  finish(id: string, final: JobFinal, session?: { id: string; cwd: string }): void {
    checkId("job id", id);
    const output = checkNullableOutput(final.output);
    const outputBytes = checkInt("job output_bytes", final.output_bytes, 0);
    if (output !== null && output.byteLength !== outputBytes) {
      throw invalidArgument(
        `Cannot store the output of job "${id}": it is ${output.byteLength} bytes, not the whole ${outputBytes}`,
        "Store null when the whole output is not at hand",
      );
    }
    const params: Params = {
      id,
      status: checkOneOf("final job status", final.status, FINAL_JOB_STATUSES),
      exit_code: checkNullableInt("job exit_code", final.exit_code, MIN_EXIT_CODE),
      signal: checkNullableText("job signal", final.signal),
      reason: checkNullableText("job reason", final.reason),
      cwd: checkNullableText("job cwd", final.cwd),
      ended_at: checkTime("job ended_at", final.ended_at),
      output_bytes: outputBytes,
      output_sha256: checkNullableSha256("job output_sha256", final.output_sha256),
      output,
    };
    const action = `finish job "${id}"`;
    if (session === undefined) {
      const result = this.#run(action, () => this.#finish.run(params));
      if (Number(result.changes) === 0) throw notFound("job", id);
      return;
    }
    const cwd: Params = {
      id: checkId("session id", session.id),
      cwd: checkText("session cwd", session.cwd),
    };
    this.#tx(action, () => {
      if (Number(this.#finish.run(params).changes) === 0) throw notFound("job", id);
      if (Number(this.#sessionCwd.run(cwd).changes) === 0) throw notFound("session", session.id);
    });
  }

  /** One job with its inline output; undefined if unknown. */
  get(id: string): JobRow | undefined {
    checkId("job id", id);
    const row = this.#run(`read job "${id}"`, () => this.#get.get(id));
    return row === undefined ? undefined : toJob(row as Row);
  }

  /**
   * An owner's jobs, newest first. `active: true` keeps running/awaiting_input/pending_approval
   * jobs, `active: false` only the others; `startedAfter` is exclusive. The output blob is not
   * read: `output` is null in every row (read one job with `get` for it).
   */
  list(filter: JobFilter): JobRow[] {
    const params: Params = {
      owner: checkId("job owner", filter.owner),
      after: filter.startedAfter === undefined
        ? Number.MIN_SAFE_INTEGER
        : checkInt("startedAfter", filter.startedAfter, Number.MIN_SAFE_INTEGER),
      limit: checkLimit(filter.limit),
    };
    const stmt = filter.active === undefined
      ? this.#list.all
      : filter.active
      ? this.#list.active
      : this.#list.finished;
    return this.#run("list jobs", () => stmt.all(params).map((r) => toJob(r as Row)));
  }

  /**
   * Deletes the owner's oldest finished jobs beyond the newest `keep`; returns their ids and
   * whether their output was spooled (the caller deletes those spools; inline output went with
   * the row). Active jobs are never deleted nor counted.
   */
  prune(owner: string, keep: number): { id: string; spooled: boolean }[] {
    const params: Params = {
      owner: checkId("job owner", owner),
      keep: checkInt("keep", keep, 0),
    };
    return this.#run(
      `prune jobs of "${owner}"`,
      () =>
        this.#prune.all(params).map((r) => ({
          id: str((r as Row).id),
          spooled: Number((r as Row).spooled) === 1,
        })),
    );
  }
}
