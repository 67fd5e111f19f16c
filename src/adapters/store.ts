/**
 * The `adapter_runs` table on a connection the caller owns (the daemon passes its own; the caller
 * closes it). One row per run from `prepared` to its last phase. Every phase change is a
 * compare-and-set on the phase and a `version` the row bumps on each write, so two resumers (or a
 * resumer and a late runner) cannot both move a run out of `executing`.
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import {
  checkJson,
  type Clock,
  invalidArgument,
  newId,
  systemClock,
  TermadaError,
} from "../shared/mod.ts";
import { ADAPTER_RUN_PHASES, type AdapterRunPhase } from "../wire/mod.ts";
import { AdapterError, type JsonValue, type Risk } from "./sdk.ts";

export { ADAPTER_RUN_PHASES, type AdapterRunPhase };

/** Every bound of the table. */
export const ADAPTER_STORE_LIMITS = {
  /** Each JSON column (input, plan, receipt, verification, compensation, error), UTF-8 bytes. */
  jsonBytes: 1024 * 1024,
  /** Adapter and agent names, idempotency keys. */
  nameChars: 128,
  /** Resource and summary. */
  textChars: 4096,
  /** Rows one `list` returns (and its default). */
  listMax: 500,
  listDefault: 100,
} as const;

const L = ADAPTER_STORE_LIMITS;

/** The error stored with a run (no stack, no cause: it is shown to agents). */
export interface RunError {
  code: string;
  message: string;
  reason?: string;
  status?: number;
}

export interface AdapterRunRow {
  id: string;
  adapter: string;
  agent: string;
  resource: string;
  input: JsonValue;
  plan: JsonValue;
  summary: string;
  risk: Risk;
  reversible: boolean;
  cost: number | null;
  idempotency_key: string;
  phase: AdapterRunPhase;
  /** Bumped by every write; the compare-and-set token. */
  version: number;
  receipt: JsonValue | null;
  verification: JsonValue | null;
  compensation: JsonValue | null;
  error: RunError | null;
  created_at: number;
  updated_at: number;
}

export interface NewAdapterRun {
  adapter: string;
  agent: string;
  resource: string;
  input: unknown;
  plan: unknown;
  summary: string;
  risk: Risk;
  reversible: boolean;
  cost?: number | null;
  idempotency_key: string;
}

/** What a phase change writes besides the phase; absent keys keep the stored value. */
export interface PhasePatch {
  receipt?: unknown;
  verification?: unknown;
  compensation?: unknown;
  error?: RunError | null;
}

export interface ListRunsOptions {
  agent?: string;
  phases?: readonly AdapterRunPhase[];
  /** 1 to ADAPTER_STORE_LIMITS.listMax (default listDefault). Oldest first. */
  limit?: number;
  /** The newest `limit` runs instead (still returned oldest first). */
  newest?: boolean;
}

/**
 * v1 of the table. No CHECK on `phase` (a new phase then needs no table rebuild: SQLite cannot
 * alter a CHECK); `transition` checks it.
 */
export const ADAPTER_RUNS_SCHEMA = `
  CREATE TABLE IF NOT EXISTS adapter_runs (
    id              TEXT PRIMARY KEY,
    adapter         TEXT NOT NULL,
    agent           TEXT NOT NULL,
    resource        TEXT NOT NULL,
    input_json      TEXT NOT NULL CHECK (json_valid(input_json)),
    plan_json       TEXT NOT NULL CHECK (json_valid(plan_json)),
    summary         TEXT NOT NULL,
    risk            TEXT NOT NULL CHECK (risk IN ('low', 'medium', 'high')),
    reversible      INTEGER NOT NULL CHECK (reversible IN (0, 1)),
    cost            REAL,
    idempotency_key TEXT NOT NULL UNIQUE,
    phase           TEXT NOT NULL,
    version         INTEGER NOT NULL,
    receipt_json    TEXT CHECK (receipt_json IS NULL OR json_valid(receipt_json)),
    verify_json     TEXT CHECK (verify_json IS NULL OR json_valid(verify_json)),
    compensate_json TEXT CHECK (compensate_json IS NULL OR json_valid(compensate_json)),
    error           TEXT CHECK (error IS NULL OR json_valid(error)),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX IF NOT EXISTS adapter_runs_phase ON adapter_runs (phase, created_at);
  CREATE INDEX IF NOT EXISTS adapter_runs_agent ON adapter_runs (agent, created_at);
`;

type Row = Record<string, unknown>;

/** JSON text of `value`, refused (TOO_LARGE) over the column bound. */
function toJson(what: string, value: unknown): string {
  return checkJson(what, value, L.jsonBytes, (m) => new AdapterError("TOO_LARGE", m));
}

function checkText(what: string, value: unknown, max: number, allowEmpty = false): string {
  if (typeof value !== "string" || value.length > max || (!allowEmpty && value === "")) {
    throw invalidArgument(`Cannot store ${what}: it must be a string of 1 to ${max} characters`);
  }
  return value;
}

function checkPhase(value: string): AdapterRunPhase {
  if (!(ADAPTER_RUN_PHASES as readonly string[]).includes(value)) {
    throw invalidArgument(`Cannot store the phase "${value.slice(0, 40)}": it is not a phase`);
  }
  return value as AdapterRunPhase;
}

const parse = (v: unknown): JsonValue | null => v === null ? null : JSON.parse(v as string);

function toRow(r: Row): AdapterRunRow {
  return {
    id: r.id as string,
    adapter: r.adapter as string,
    agent: r.agent as string,
    resource: r.resource as string,
    input: parse(r.input_json) as JsonValue,
    plan: parse(r.plan_json) as JsonValue,
    summary: r.summary as string,
    risk: r.risk as Risk,
    reversible: r.reversible === 1,
    cost: r.cost === null ? null : Number(r.cost),
    idempotency_key: r.idempotency_key as string,
    phase: r.phase as AdapterRunPhase,
    version: Number(r.version),
    receipt: parse(r.receipt_json),
    verification: parse(r.verify_json),
    compensation: parse(r.compensate_json),
    error: parse(r.error) as RunError | null,
    created_at: Number(r.created_at),
    updated_at: Number(r.updated_at),
  };
}

function storeError(action: string, err: unknown): TermadaError {
  if (err instanceof TermadaError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TermadaError("INTERNAL", `Cannot ${action}: ${message}`, { cause: err });
}

export interface AdapterRunStoreOptions {
  clock?: Clock;
}

/** The repository of `adapter_runs`. Statements are prepared lazily, once, on `db`. */
export class AdapterRunStore {
  readonly #db: DatabaseSync;
  readonly #clock: Clock;
  #insert: StatementSync | undefined;
  #get: StatementSync | undefined;
  #update: StatementSync | undefined;

  constructor(db: DatabaseSync, options: AdapterRunStoreOptions = {}) {
    this.#db = db;
    this.#clock = options.clock ?? systemClock;
  }

  /** Creates the table and its indexes when missing (idempotent). */
  ensureSchema(): void {
    try {
      this.#db.exec(ADAPTER_RUNS_SCHEMA);
    } catch (err) {
      throw storeError("create the adapter_runs table", err);
    }
  }

  /** Stores a prepared run (phase `prepared`, version 1) under a new `run_…` id. */
  insert(run: NewAdapterRun): AdapterRunRow {
    const now = this.#clock.now();
    const cost = run.cost ?? null;
    if (cost !== null && (typeof cost !== "number" || !Number.isFinite(cost) || cost < 0)) {
      throw invalidArgument(`Cannot store the cost ${String(cost)}: it must be a number ≥ 0`);
    }
    if (!["low", "medium", "high"].includes(run.risk)) {
      throw invalidArgument(
        `Cannot store the risk "${String(run.risk)}": it must be low, medium or high`,
      );
    }
    const params: Record<string, SQLInputValue> = {
      id: newId("run"),
      adapter: checkText("the adapter name", run.adapter, L.nameChars),
      agent: checkText("the agent", run.agent, L.nameChars),
      resource: checkText("the resource", run.resource, L.textChars),
      input_json: toJson("the input of a run", run.input),
      plan_json: toJson("the plan of a run", run.plan),
      summary: checkText("the summary", run.summary, L.textChars),
      risk: run.risk,
      reversible: run.reversible ? 1 : 0,
      cost,
      idempotency_key: checkText("the idempotency key", run.idempotency_key, L.nameChars),
      now,
    };
    try {
      this.#insert ??= this.#db.prepare(
        `INSERT INTO adapter_runs (id, adapter, agent, resource, input_json, plan_json, summary,
           risk, reversible, cost, idempotency_key, phase, version, created_at, updated_at)
         VALUES (:id, :adapter, :agent, :resource, :input_json, :plan_json, :summary, :risk,
           :reversible, :cost, :idempotency_key, 'prepared', 1, :now, :now)`,
      );
      this.#insert.run(params);
    } catch (err) {
      throw storeError("store an adapter run", err);
    }
    return this.get(params.id as string)!;
  }

  get(id: string): AdapterRunRow | undefined {
    try {
      this.#get ??= this.#db.prepare(`SELECT * FROM adapter_runs WHERE id = ?`);
      const r = this.#get.get(id) as Row | undefined;
      return r === undefined ? undefined : toRow(r);
    } catch (err) {
      throw storeError(`read the adapter run "${id}"`, err);
    }
  }

  /**
   * Moves a run from `expect` (its phase and version as the caller last read them) to `to`,
   * writing `patch`. Returns the new row, or undefined when the row is gone or someone else moved
   * it first (the compare-and-set lost). Writing to the same phase is how a resumer claims a run.
   */
  transition(
    id: string,
    expect: { phase: AdapterRunPhase; version: number },
    to: AdapterRunPhase,
    patch: PhasePatch = {},
  ): AdapterRunRow | undefined {
    checkPhase(to);
    const col = (v: unknown, what: string): SQLInputValue =>
      v === undefined ? null : toJson(what, v);
    const params: Record<string, SQLInputValue> = {
      id,
      from: expect.phase,
      version: expect.version,
      to,
      now: this.#clock.now(),
      set_receipt: patch.receipt === undefined ? 0 : 1,
      receipt: col(patch.receipt, "the receipt of a run"),
      set_verify: patch.verification === undefined ? 0 : 1,
      verify: col(patch.verification, "the verification of a run"),
      set_comp: patch.compensation === undefined ? 0 : 1,
      comp: col(patch.compensation, "the compensation of a run"),
      set_error: patch.error === undefined ? 0 : 1,
      error: patch.error === undefined || patch.error === null
        ? null
        : toJson("the error of a run", patch.error),
    };
    try {
      this.#update ??= this.#db.prepare(
        `UPDATE adapter_runs SET phase = :to, version = version + 1, updated_at = :now,
           receipt_json = CASE WHEN :set_receipt THEN :receipt ELSE receipt_json END,
           verify_json = CASE WHEN :set_verify THEN :verify ELSE verify_json END,
           compensate_json = CASE WHEN :set_comp THEN :comp ELSE compensate_json END,
           error = CASE WHEN :set_error THEN :error ELSE error END
         WHERE id = :id AND phase = :from AND version = :version`,
      );
      const { changes } = this.#update.run(params);
      if (Number(changes) === 0) return undefined;
    } catch (err) {
      throw storeError(`move the adapter run "${id}" to ${to}`, err);
    }
    return this.get(id);
  }

  /** Runs oldest first, filtered by agent and phases, at most `limit` (≤ listMax). */
  list(options: ListRunsOptions = {}): AdapterRunRow[] {
    const limit = options.limit ?? L.listDefault;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > L.listMax) {
      throw invalidArgument(`Cannot list adapter runs: the limit must be 1 to ${L.listMax}`);
    }
    const where: string[] = [];
    const params: SQLInputValue[] = [];
    if (options.agent !== undefined) {
      where.push("agent = ?");
      params.push(options.agent);
    }
    if (options.phases !== undefined) {
      if (options.phases.length === 0) return [];
      where.push(`phase IN (${options.phases.map(() => "?").join(", ")})`);
      params.push(...options.phases.map(checkPhase));
    }
    params.push(limit);
    const order = options.newest ? "DESC" : "ASC";
    try {
      const rows = this.#db.prepare(
        `SELECT * FROM adapter_runs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
         ORDER BY created_at ${order}, id ${order} LIMIT ?`,
      ).all(...params) as Row[];
      const out = rows.map(toRow);
      return options.newest ? out.reverse() : out;
    } catch (err) {
      throw storeError("list adapter runs", err);
    }
  }
}
