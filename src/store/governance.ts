/**
 * The durable governance tables: `actions` (one row per admitted action, from its admission to
 * its outcome or an operator's reconcile), the budget ledger's `budget_usage` and
 * `budget_reservations`, and `grants` (single-use permissions an approval issues for one exact
 * action). These repositories only store and check bounds; what is admitted, what a budget counts
 * and when a grant is issued is decided in src/governance. Marking the actions that were still
 * admitted at a restart as `outcome_unknown` is `Store.recover`'s job (it spans tables).
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import {
  ACTION_KINDS,
  type ActionKind,
  type Clock,
  invalidArgument,
  newId,
} from "../shared/mod.ts";
import {
  checkId,
  checkJson,
  checkLimit,
  checkOneOf,
  checkStrings,
  checkText,
  checkTime,
  MAX_ID_LENGTH,
  MAX_TEXT_LENGTH,
  num,
  numOrNull,
  type Params,
  type Row,
  type StoreRunner,
  type StoreRunners,
  str,
  strOrNull,
} from "./_checks.ts";

/**
 * v6. Kinds and metrics are checked by the repositories, not by a CHECK: a new kind or metric
 * then needs no table rebuild (SQLite cannot alter a CHECK). The approvals columns of the same
 * version are read and written by approvals.ts.
 */
export const GOVERNANCE_MIGRATION = `
  CREATE TABLE actions (
    id             TEXT PRIMARY KEY,
    kind           TEXT NOT NULL,
    owner          TEXT NOT NULL,
    principal      TEXT NOT NULL,
    tenant         TEXT,
    recipient      TEXT NOT NULL,
    summary        TEXT NOT NULL CHECK (json_valid(summary)),
    state          TEXT NOT NULL
      CHECK (state IN ('admitted', 'succeeded', 'failed', 'released', 'outcome_unknown')),
    admitted_at    INTEGER NOT NULL,
    ended_at       INTEGER,
    outcome        TEXT CHECK (outcome IS NULL OR json_valid(outcome)),
    reconciled_by  TEXT,
    reconciled_at  INTEGER,
    reconcile_note TEXT
  ) STRICT;
  CREATE INDEX actions_state ON actions (state, admitted_at);
  CREATE INDEX actions_owner ON actions (owner, admitted_at);
  CREATE TABLE budget_usage (
    budget       TEXT NOT NULL,
    scope_key    TEXT NOT NULL,
    window_start INTEGER NOT NULL CHECK (window_start >= 0),
    used         REAL NOT NULL CHECK (used >= 0),
    PRIMARY KEY (budget, scope_key, window_start)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX budget_usage_window ON budget_usage (budget, window_start);
  CREATE TABLE budget_reservations (
    action_id    TEXT NOT NULL,
    budget       TEXT NOT NULL,
    scope_key    TEXT NOT NULL,
    window_start INTEGER NOT NULL CHECK (window_start >= 0),
    metric       TEXT NOT NULL,
    amount       REAL NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (action_id, budget, scope_key)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX budget_reservations_key ON budget_reservations (budget, window_start, scope_key);
  CREATE TABLE grants (
    id          TEXT PRIMARY KEY,
    approval_id TEXT NOT NULL,
    action_id   TEXT NOT NULL,
    action_hash TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    consumed_at INTEGER
  ) STRICT;
  CREATE INDEX grants_action ON grants (action_id);
  ALTER TABLE approvals ADD COLUMN votes TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(votes));
  ALTER TABLE approvals ADD COLUMN requirements TEXT
    CHECK (requirements IS NULL OR json_valid(requirements));
`;

/** What an action does; its admission row says which (the one list: src/shared/actions.ts). */
export { ACTION_KINDS, type ActionKind };

/**
 * An action's life: `admitted` until its outcome (`succeeded`, `failed`), or `released` when it
 * was refused after admission (nothing ran). One still admitted at a restart is
 * `outcome_unknown` until an operator reconciles it as succeeded or failed.
 */
export const ACTION_STATES = [
  "admitted",
  "succeeded",
  "failed",
  "released",
  "outcome_unknown",
] as const;
export type ActionState = typeof ACTION_STATES[number];

/** What a budget counts. */
export const BUDGET_METRICS = [
  "operations",
  "runtime_s",
  "cost",
  "prod_changes",
  "failures",
] as const;
export type BudgetMetric = typeof BUDGET_METRICS[number];

/** Longest principal, tenant, recipient, voter or budget name the store accepts. */
export const MAX_NAME_LENGTH = 256;
/** Longest budget scope key ("principal:<p>" and the like). */
export const MAX_SCOPE_KEY_LENGTH = MAX_NAME_LENGTH + 16;
/** Most lines of an action's summary, and its size as UTF-8 JSON. */
export const MAX_SUMMARY_LINES = 64;
export const MAX_SUMMARY_JSON_BYTES = 16 * 1024;
/** Largest outcome (facts) of an action, as UTF-8 JSON. */
export const MAX_OUTCOME_JSON_BYTES = 64 * 1024;
/** Longest action hash a grant binds (a digest in hex or base64url). */
export const MAX_ACTION_HASH_LENGTH = 128;

export interface ActionRow {
  /** `act_…` or `job_…`. */
  id: string;
  kind: ActionKind;
  /** The agent id. */
  owner: string;
  principal: string;
  tenant: string | null;
  /** The target: "local" or a server name. */
  recipient: string;
  /** What the action does, a few lines for people. */
  summary: string[];
  state: ActionState;
  admitted_at: number;
  ended_at: number | null;
  /** Facts of the outcome (or, when released, why). */
  outcome: Record<string, unknown> | null;
  reconciled_by: string | null;
  reconciled_at: number | null;
  reconcile_note: string | null;
}

/** An action as `insert` takes it: it starts admitted. */
export type NewAction = Pick<
  ActionRow,
  "id" | "kind" | "owner" | "principal" | "tenant" | "recipient" | "summary" | "admitted_at"
>;

/** The end of an admitted action. */
export interface ActionFinal {
  /** `outcome_unknown`: the daemon cannot know (a link dropped mid-action); an operator reconciles. */
  state: "succeeded" | "failed" | "released" | "outcome_unknown";
  outcome?: Record<string, unknown> | null;
}

/** An operator's settling of an action whose outcome was lost with a restart. */
export interface ActionReconcile {
  state: "succeeded" | "failed";
  by: string;
  note: string;
}

export interface ActionFilter {
  state?: ActionState;
  owner?: string;
  limit: number;
}

function checkName(what: string, value: unknown): string {
  if (typeof value === "string" && value.length === 0) {
    throw invalidArgument(`Cannot store ${what}: it is empty`);
  }
  return checkText(what, value, MAX_NAME_LENGTH);
}

function checkOutcome(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw invalidArgument("Cannot store the outcome of an action: it must be an object");
  }
  return checkJson("the outcome of an action", value, MAX_OUTCOME_JSON_BYTES);
}

function toAction(r: Row): ActionRow {
  return {
    id: str(r.id),
    kind: str(r.kind) as ActionKind,
    owner: str(r.owner),
    principal: str(r.principal),
    tenant: strOrNull(r.tenant),
    recipient: str(r.recipient),
    summary: JSON.parse(str(r.summary)) as string[],
    state: str(r.state) as ActionState,
    admitted_at: num(r.admitted_at),
    ended_at: numOrNull(r.ended_at),
    outcome: r.outcome === null ? null : JSON.parse(str(r.outcome)) as Record<string, unknown>,
    reconciled_by: strOrNull(r.reconciled_by),
    reconciled_at: numOrNull(r.reconciled_at),
    reconcile_note: strOrNull(r.reconcile_note),
  };
}

/** The actions table. Built by `Store` on its connection; reach it as `store.actions`. */
export class ActionRepo {
  readonly #clock: Clock;
  readonly #run: StoreRunner;
  readonly #insert: StatementSync;
  readonly #finish: StatementSync;
  readonly #reconcile: StatementSync;
  readonly #get: StatementSync;
  /** By filter: [none, state, owner, both] — one statement each, so each can use its index. */
  readonly #lists: readonly StatementSync[];
  readonly #prune: StatementSync;

  constructor(db: DatabaseSync, clock: Clock, runners: StoreRunners) {
    this.#clock = clock;
    this.#run = runners.run;
    const p = (sql: string) => db.prepare(sql);
    this.#prune = p(
      `DELETE FROM actions WHERE rowid IN (
         SELECT rowid FROM actions
         WHERE state IN ('succeeded', 'failed', 'released') AND ended_at < :before
         LIMIT :limit)`,
    );
    this.#insert = p(
      `INSERT INTO actions (id, kind, owner, principal, tenant, recipient, summary, state,
         admitted_at)
       VALUES (:id, :kind, :owner, :principal, :tenant, :recipient, :summary, 'admitted',
         :admitted_at)`,
    );
    this.#finish = p(
      `UPDATE actions SET state = :state, ended_at = :now, outcome = :outcome
       WHERE id = :id AND state = 'admitted' RETURNING id`,
    );
    this.#reconcile = p(
      `UPDATE actions SET state = :state, reconciled_by = :by, reconciled_at = :now,
         reconcile_note = :note
       WHERE id = :id AND state = 'outcome_unknown' RETURNING id`,
    );
    this.#get = p(`SELECT * FROM actions WHERE id = :id`);
    const order = "ORDER BY admitted_at DESC, rowid DESC LIMIT :limit";
    this.#lists = [
      p(`SELECT * FROM actions ${order}`),
      p(`SELECT * FROM actions WHERE state = :state ${order}`),
      p(`SELECT * FROM actions WHERE owner = :owner ${order}`),
      p(`SELECT * FROM actions WHERE state = :state AND owner = :owner ${order}`),
    ];
  }

  /** Records an admitted action (the ledger does it with its reservations, in one transaction). */
  insert(a: NewAction): void {
    const summary = checkStrings(
      "an action summary",
      a.summary,
      MAX_SUMMARY_LINES,
      MAX_TEXT_LENGTH,
    );
    const params: Params = {
      id: checkId("action id", a.id),
      kind: checkOneOf("action kind", a.kind, ACTION_KINDS),
      owner: checkId("action owner", a.owner),
      principal: checkName("action principal", a.principal),
      tenant: a.tenant === null ? null : checkName("action tenant", a.tenant),
      recipient: checkName("action recipient", a.recipient),
      summary: checkJson("an action summary", summary, MAX_SUMMARY_JSON_BYTES),
      admitted_at: checkTime("admitted_at", a.admitted_at),
    };
    this.#run(`record action "${a.id}"`, () => this.#insert.run(params));
  }

  /** Ends an admitted action (ended_at now); false when it is unknown or no longer admitted. */
  finish(id: string, final: ActionFinal): boolean {
    const params: Params = {
      id: checkId("action id", id),
      state: checkOneOf(
        "action end",
        final.state,
        ["succeeded", "failed", "released", "outcome_unknown"] as const,
      ),
      outcome: checkOutcome(final.outcome),
      now: this.#clock.now(),
    };
    return this.#run(`finish action "${id}"`, () => this.#finish.all(params).length === 1);
  }

  /**
   * Settles an `outcome_unknown` action as an operator decided (reconciled_at now; ended_at stays
   * the restart's); false when it is unknown or not `outcome_unknown`.
   */
  reconcile(id: string, r: ActionReconcile): boolean {
    const params: Params = {
      id: checkId("action id", id),
      state: checkOneOf("reconciled state", r.state, ["succeeded", "failed"] as const),
      by: checkName("reconciled_by", r.by),
      note: checkText("reconcile note", r.note),
      now: this.#clock.now(),
    };
    return this.#run(`reconcile action "${id}"`, () => this.#reconcile.all(params).length === 1);
  }

  /**
   * Deletes at most `limit` actions that ended before `before` (an outcome_unknown or admitted
   * one is kept until it is settled); returns how many.
   */
  prune(before: number, limit = 10_000): number {
    return this.#run("prune actions", () => Number(this.#prune.run({ before, limit }).changes));
  }

  get(id: string): ActionRow | undefined {
    const row = this.#run(`read action "${id}"`, () => this.#get.get({ id }));
    return row ? toAction(row as Row) : undefined;
  }

  /** Newest first (admitted_at, then insertion order). */
  list(filter: ActionFilter): ActionRow[] {
    const params: Params = { limit: checkLimit(filter.limit) };
    let which = 0;
    if (filter.state !== undefined) {
      params.state = checkOneOf("action state", filter.state, ACTION_STATES);
      which += 1;
    }
    if (filter.owner !== undefined) {
      params.owner = checkId("action owner", filter.owner);
      which += 2;
    }
    const stmt = this.#lists[which]!;
    return this.#run("list actions", () => stmt.all(params).map((r) => toAction(r as Row)));
  }
}

// ── budgets ────────────────────────────────────────────────────────────────

/** One rule's hold on an admitted action, until it settles (usage) or is released. */
export interface ReservationRow {
  action_id: string;
  /** Policy-qualified: "<policy>/<budget>". */
  budget: string;
  /** "global", "tenant:<t>", "principal:<p>" or "recipient:<r>". */
  scope_key: string;
  window_start: number;
  metric: BudgetMetric;
  amount: number;
}

/** One scope key of a budget in one window. */
export interface WindowUsage {
  scope_key: string;
  used: number;
  reserved: number;
}

function checkAmount(what: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw invalidArgument(`Cannot store ${what} ${String(value)}: it must be finite and ≥ 0`);
  }
  return value;
}

function keyParams(budget: string, scopeKey: string, windowStart: number): Params {
  return {
    budget: checkName("budget name", budget),
    scope_key: checkText("budget scope key", scopeKey, MAX_SCOPE_KEY_LENGTH),
    window_start: checkTime("budget window start", windowStart),
  };
}

function toReservation(r: Row): ReservationRow {
  return {
    action_id: str(r.action_id),
    budget: str(r.budget),
    scope_key: str(r.scope_key),
    window_start: num(r.window_start),
    metric: str(r.metric) as BudgetMetric,
    amount: num(r.amount),
  };
}

/**
 * The budget ledger's two tables, as low-level statements: the checks and the arithmetic are
 * `BudgetLedger`'s (src/governance), which runs them in one transaction. Reach it as
 * `store.budgets`.
 */
export class BudgetRepo {
  readonly #run: StoreRunner;
  readonly #used: StatementSync;
  readonly #addUsage: StatementSync;
  readonly #reserve: StatementSync;
  readonly #reserved: StatementSync;
  readonly #reservationsOf: StatementSync;
  readonly #dropReservations: StatementSync;
  readonly #window: StatementSync;
  readonly #prune: StatementSync;

  constructor(db: DatabaseSync, runners: StoreRunners) {
    this.#run = runners.run;
    const p = (sql: string) => db.prepare(sql);
    // Window 0 is a budget that never resets: its one row stays.
    this.#prune = p(
      `DELETE FROM budget_usage WHERE window_start > 0 AND window_start < :before`,
    );
    const key = "budget = :budget AND scope_key = :scope_key AND window_start = :window_start";
    this.#used = p(`SELECT used FROM budget_usage WHERE ${key}`);
    this.#addUsage = p(
      `INSERT INTO budget_usage (budget, scope_key, window_start, used)
       VALUES (:budget, :scope_key, :window_start, :amount)
       ON CONFLICT (budget, scope_key, window_start) DO UPDATE SET used = used + excluded.used`,
    );
    this.#reserve = p(
      `INSERT INTO budget_reservations (action_id, budget, scope_key, window_start, metric, amount)
       VALUES (:action_id, :budget, :scope_key, :window_start, :metric, :amount)`,
    );
    this.#reserved = p(`SELECT total(amount) AS reserved FROM budget_reservations WHERE ${key}`);
    this.#reservationsOf = p(
      `SELECT * FROM budget_reservations WHERE action_id = :action_id ORDER BY budget, scope_key`,
    );
    this.#dropReservations = p(`DELETE FROM budget_reservations WHERE action_id = :action_id`);
    this.#window = p(
      `SELECT scope_key, total(used) AS used, total(reserved) AS reserved FROM (
         SELECT scope_key, used, 0.0 AS reserved FROM budget_usage
         WHERE budget = :budget AND window_start = :window_start
         UNION ALL
         SELECT scope_key, 0.0, amount FROM budget_reservations
         WHERE budget = :budget AND window_start = :window_start
       ) GROUP BY scope_key ORDER BY scope_key LIMIT :limit`,
    );
  }
  /** Deletes the usage of windows that started before `before` (never-resetting rows stay). */
  prune(before: number): number {
    return this.#run("prune budget usage", () => Number(this.#prune.run({ before }).changes));
  }

  /** What settled actions used of (budget, scope key) in the window starting at `windowStart`. */
  used(budget: string, scopeKey: string, windowStart: number): number {
    const params = keyParams(budget, scopeKey, windowStart);
    const row = this.#run(`read the usage of budget "${budget}"`, () => this.#used.get(params));
    return row ? num((row as Row).used) : 0;
  }

  /** Adds `amount` to the usage of (budget, scope key, window), creating the row if needed. */
  addUsage(budget: string, scopeKey: string, windowStart: number, amount: number): void {
    const params = keyParams(budget, scopeKey, windowStart);
    params.amount = checkAmount("a budget usage", amount);
    this.#run(`add to the usage of budget "${budget}"`, () => this.#addUsage.run(params));
  }

  /** Records one reservation; an action holds at most one per (budget, scope key). */
  reserve(r: ReservationRow): void {
    const params = keyParams(r.budget, r.scope_key, r.window_start);
    params.action_id = checkId("action id", r.action_id);
    params.metric = checkOneOf("budget metric", r.metric, BUDGET_METRICS);
    params.amount = checkAmount("a budget reservation", r.amount);
    this.#run(`reserve budget "${r.budget}" for "${r.action_id}"`, () => this.#reserve.run(params));
  }

  /** The sum of what admitted actions hold of (budget, scope key, window). */
  reserved(budget: string, scopeKey: string, windowStart: number): number {
    const params = keyParams(budget, scopeKey, windowStart);
    const row = this.#run(
      `read the reservations of budget "${budget}"`,
      () => this.#reserved.get(params),
    ) as Row;
    return num(row.reserved);
  }

  /** An action's reservations, by budget and scope key. */
  reservationsOf(actionId: string): ReservationRow[] {
    const params: Params = { action_id: checkId("action id", actionId) };
    return this.#run(
      `read the reservations of action "${actionId}"`,
      () => this.#reservationsOf.all(params).map((r) => toReservation(r as Row)),
    );
  }

  /** Deletes an action's reservations; returns how many there were. */
  dropReservations(actionId: string): number {
    const params: Params = { action_id: checkId("action id", actionId) };
    return this.#run(
      `drop the reservations of action "${actionId}"`,
      () => Number(this.#dropReservations.run(params).changes),
    );
  }

  /** Every scope key of a budget with usage or reservations in a window, by scope key. */
  window(budget: string, windowStart: number, limit: number): WindowUsage[] {
    const params: Params = {
      budget: checkName("budget name", budget),
      window_start: checkTime("budget window start", windowStart),
      limit: checkLimit(limit),
    };
    return this.#run(
      `list the usage of budget "${budget}"`,
      () =>
        this.#window.all(params).map((r) => {
          const row = r as Row;
          return {
            scope_key: str(row.scope_key),
            used: num(row.used),
            reserved: num(row.reserved),
          };
        }),
    );
  }
}

// ── grants ─────────────────────────────────────────────────────────────────

/** A single-use permission an approval issued for one exact action. */
export interface GrantRow {
  /** `grt_…`. */
  id: string;
  approval_id: string;
  action_id: string;
  /** The digest of the approved action; consuming it for anything else is a mismatch. */
  action_hash: string;
  created_at: number;
  /** Valid while now < expires_at. */
  expires_at: number;
  consumed_at: number | null;
}

export interface NewGrant {
  approval_id: string;
  action_id: string;
  action_hash: string;
  expires_at: number;
}

/**
 * What `consume` found: `ok` (consumed now), `replayed` (consumed before), `mismatch` (issued for
 * another action or hash), `expired`, `unknown` (no such grant). In that order of precedence.
 */
export type GrantConsumption = "ok" | "replayed" | "mismatch" | "expired" | "unknown";

function toGrant(r: Row): GrantRow {
  return {
    id: str(r.id),
    approval_id: str(r.approval_id),
    action_id: str(r.action_id),
    action_hash: str(r.action_hash),
    created_at: num(r.created_at),
    expires_at: num(r.expires_at),
    consumed_at: numOrNull(r.consumed_at),
  };
}

const bounded = (v: unknown, max: number): v is string =>
  typeof v === "string" && v.length > 0 && v.length <= max;

/** The grants table. Built by `Store` on its connection; reach it as `store.grants`. */
export class GrantRepo {
  readonly #clock: Clock;
  readonly #run: StoreRunner;
  readonly #issue: StatementSync;
  readonly #consume: StatementSync;
  readonly #get: StatementSync;
  readonly #forAction: StatementSync;
  readonly #prune: StatementSync;

  constructor(db: DatabaseSync, clock: Clock, runners: StoreRunners) {
    this.#clock = clock;
    this.#run = runners.run;
    const p = (sql: string) => db.prepare(sql);
    this.#prune = p(`DELETE FROM grants WHERE expires_at < :before`);
    this.#issue = p(
      `INSERT INTO grants (id, approval_id, action_id, action_hash, created_at, expires_at)
       VALUES (:id, :approval_id, :action_id, :action_hash, :created_at, :expires_at)`,
    );
    // The whole check and the consumption in one statement: two callers can never both get "ok".
    this.#consume = p(
      `UPDATE grants SET consumed_at = :now
       WHERE id = :id AND consumed_at IS NULL AND action_id = :action_id
         AND action_hash = :action_hash AND :now < expires_at
       RETURNING id`,
    );
    this.#get = p(`SELECT * FROM grants WHERE id = :id`);
    this.#forAction = p(
      `SELECT * FROM grants WHERE action_id = :action_id ORDER BY created_at DESC, rowid DESC`,
    );
  }
  /** Deletes grants that expired before `before` (used or not: they can never be used now). */
  prune(before: number): number {
    return this.#run("prune grants", () => Number(this.#prune.run({ before }).changes));
  }

  /** Issues a grant (created_at now) and returns its id. */
  issue(g: NewGrant): string {
    const id = newId("grt");
    const params: Params = {
      id,
      approval_id: checkId("approval id", g.approval_id),
      action_id: checkId("action id", g.action_id),
      action_hash: checkText("action hash", g.action_hash, MAX_ACTION_HASH_LENGTH),
      created_at: this.#clock.now(),
      expires_at: checkTime("expires_at", g.expires_at),
    };
    if (params.action_hash === "") throw invalidArgument("Cannot store an empty action hash");
    this.#run(`issue a grant for action "${g.action_id}"`, () => this.#issue.run(params));
    return id;
  }

  /**
   * Consumes a grant for `actionId` with `actionHash` at `now`, atomically: of any number of
   * attempts exactly one gets "ok". A failure says why (see `GrantConsumption`) and changes
   * nothing. Malformed input is "unknown" (the id) or "mismatch", never an error.
   */
  consume(id: string, actionId: string, actionHash: string, now: number): GrantConsumption {
    checkTime("now", now);
    if (!bounded(id, MAX_ID_LENGTH)) return "unknown";
    return this.#run(`consume grant "${id}"`, () => {
      const matchable = bounded(actionId, MAX_ID_LENGTH) &&
        bounded(actionHash, MAX_ACTION_HASH_LENGTH);
      if (
        matchable &&
        this.#consume.all({ id, action_id: actionId, action_hash: actionHash, now }).length === 1
      ) {
        return "ok";
      }
      const row = this.#get.get({ id }) as Row | undefined;
      if (row === undefined) return "unknown";
      if (row.consumed_at !== null) return "replayed";
      if (!matchable || row.action_id !== actionId || row.action_hash !== actionHash) {
        return "mismatch";
      }
      return "expired";
    });
  }

  get(id: string): GrantRow | undefined {
    const row = this.#run(`read grant "${id}"`, () => this.#get.get({ id }));
    return row ? toGrant(row as Row) : undefined;
  }

  /** The grants issued for an action, newest first. */
  forAction(actionId: string): GrantRow[] {
    const params: Params = { action_id: checkId("action id", actionId) };
    return this.#run(
      `read the grants of action "${actionId}"`,
      () => this.#forAction.all(params).map((r) => toGrant(r as Row)),
    );
  }
}
