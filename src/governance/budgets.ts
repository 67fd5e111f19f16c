/**
 * The budget ledger: what a policy's budgets allow, counted durably. An action is admitted
 * against every budget rule that applies to it in one store transaction together with its
 * `actions` row, so a refusal writes nothing and an admission can never overspend — JavaScript
 * runs the check and the reservation without an `await` between them, and the store's
 * transaction makes them one write. When no rule applies the row alone is written (one INSERT,
 * atomic by itself) and its end is one conditional UPDATE. At the outcome the reservations become usage; an action
 * refused after admission gives them back; one whose outcome a restart lost
 * (`outcome_unknown`) keeps holding them until an operator reconciles it.
 *
 * Windows are fixed and aligned to multiples of their length since the epoch, so every daemon
 * and every restart agrees on them: a 1 h window starts on the hour (UTC). An action counts in
 * the window it was admitted in, also when it settles in the next one.
 *
 * Rules come parsed and validated from the config (src/config); a malformed rule here is a
 * programmer mistake (RangeError).
 */
import { type Clock, type ErrorDetails, systemClock, TermadaError } from "../shared/mod.ts";
import {
  ACTION_KINDS,
  type ActionKind,
  type ActionRow,
  BUDGET_METRICS,
  type BudgetMetric,
  type ReservationRow,
  type Store,
} from "../store/mod.ts";

export type { BudgetMetric };
export { BUDGET_METRICS };

/** Whose consumption a budget counts: everyone's together, or each tenant's, principal's, target's. */
export type BudgetScope = "global" | "tenant" | "principal" | "recipient";
export const BUDGET_SCOPES: readonly BudgetScope[] = ["global", "tenant", "principal", "recipient"];

/** One budget of one policy, as the config parsed it. */
export interface BudgetRule {
  policy: string;
  name: string;
  scope: BudgetScope;
  metric: BudgetMetric;
  limit: number;
  /** Window length in ms; null: the budget never resets. */
  windowMs: number | null;
  /** Action kinds it counts; default all. */
  kinds?: readonly string[];
  /** The one scope value it applies to (e.g. tenant "acme"); default every value. */
  match?: string;
}

/** The action being admitted, as the budgets see it. */
export interface BudgetSubject {
  actionId: string;
  kind: string;
  principal: string;
  tenant?: string;
  /** "local" or a server name. */
  recipient: string;
  production: boolean;
  readOnly: boolean;
}

/** What the caller expects the action to cost; a cost or runtime budget reserves it. */
export interface CostEstimate {
  cost?: number;
  runtime_s?: number;
}

/** The facts of an action's end. */
export interface BudgetOutcome {
  ok: boolean;
  /** Actual runtime in seconds (default: the estimate). */
  runtime_s?: number;
  /** Actual cost (default: the estimate). */
  cost?: number;
  /** Stored with the action row as its outcome. */
  facts?: Record<string, unknown>;
}

/** One budget key's standing in its current window, for status views. */
export interface BudgetUsage {
  budget: string;
  scope_key: string;
  metric: BudgetMetric;
  used: number;
  reserved: number;
  limit: number;
  /** The end of the current window (ISO 8601), or null when the budget never resets. */
  reset_at: string | null;
}

/** `details` of BUDGET_EXCEEDED: the typed subset of `ErrorDetails` (src/shared/errors.ts). */
export interface BudgetExceededDetails {
  /** Policy-qualified: "<policy>/<budget>". */
  budget: string;
  scope: BudgetScope;
  scope_key: string;
  metric: BudgetMetric;
  limit: number;
  used: number;
  reserved: number;
  reset_at: string | null;
}

/** Ended actions are kept this long (then pruned; an outcome_unknown one stays until settled). */
export const ACTIONS_KEPT_MS = 30 * 86_400_000;
/** Budget usage rows of windows that started this long ago are pruned (windows are ≤ 366 d). */
export const USAGE_KEPT_MS = 400 * 86_400_000;

/** Most rules one admission evaluates; the config validator keeps policies below it. */
export const MAX_RULES_PER_ADMISSION = 64;
/** Most scope keys `usage` lists per budget. */
export const MAX_USAGE_KEYS_PER_BUDGET = 1000;

/** Most bare actions (admitted without reservations) a ledger remembers for its fast end. */
const MAX_BARE = 65_536;

/** Float sums (0.1 + 0.2) must not refuse what exactly fits. */
const EPSILON = 1e-9;

interface Applied {
  rule: BudgetRule;
  budget: string;
  scopeKey: string;
  windowStart: number;
  resetAt: string | null;
  amount: number;
}

export class BudgetLedger {
  readonly #store: Store;
  readonly #clock: Clock;
  /**
   * Actions this ledger admitted without a reservation and that are still admitted as far as it
   * knows: their end is one UPDATE. Oldest dropped beyond MAX_BARE (they then take the general
   * path, which is always correct); an action another ledger ended stays until its own end
   * finds the row no longer admitted.
   */
  readonly #bare = new Set<string>();

  /** The store is the caller's (it must outlive the ledger); `clock` places the windows. */
  constructor(store: Store, options: { clock?: Clock } = {}) {
    this.#store = store;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * Admits an action: in one store transaction, checks every rule that applies and records its
   * reservations and the action's row (state `admitted`). When a budget is exhausted it throws
   * BUDGET_EXCEEDED (details: the budget, scope, scope_key, metric, limit, used, reserved and
   * reset_at; retriable when the budget resets) and writes nothing.
   */
  admit(
    rules: readonly BudgetRule[],
    subject: BudgetSubject,
    action: { owner: string; summary: string[] },
    estimate: CostEstimate = {},
  ): void {
    checkRules(rules);
    checkAmount("estimate.cost", estimate.cost);
    checkAmount("estimate.runtime_s", estimate.runtime_s);
    if (!(ACTION_KINDS as readonly string[]).includes(subject.kind)) {
      throw new RangeError(`Unknown action kind "${subject.kind}"`);
    }
    const now = this.#clock.now();
    const row = {
      id: subject.actionId,
      kind: subject.kind as ActionKind,
      owner: action.owner,
      principal: subject.principal,
      tenant: subject.tenant ?? null,
      recipient: subject.recipient,
      summary: action.summary,
      admitted_at: now,
    };
    const applies: Applied[] = [];
    for (const rule of rules) {
      const applied = apply(rule, subject, estimate, now);
      if (applied !== undefined) applies.push(applied);
    }
    if (applies.length === 0) {
      // No budget applies: nothing to check or reserve, and one INSERT is already atomic (its
      // own implicit transaction), so the row is durable before the caller goes on.
      this.#store.actions.insert(row);
      this.#bare.add(subject.actionId);
      if (this.#bare.size > MAX_BARE) this.#bare.delete(this.#bare.values().next().value!);
      return;
    }
    const budgets = this.#store.budgets;
    this.#store.transaction(() => {
      for (const a of applies) {
        const used = budgets.used(a.budget, a.scopeKey, a.windowStart);
        const reserved = budgets.reserved(a.budget, a.scopeKey, a.windowStart);
        if (!fits(a.rule, used, reserved, a.amount)) throw exceeded(subject, a, used, reserved);
      }
      for (const a of applies) {
        budgets.reserve({
          action_id: subject.actionId,
          budget: a.budget,
          scope_key: a.scopeKey,
          window_start: a.windowStart,
          metric: a.rule.metric,
          amount: a.amount,
        });
      }
      this.#store.actions.insert(row);
    });
  }

  /**
   * Ends an admitted action, in one transaction: its reservations become usage (operations 1,
   * prod_changes 1, runtime_s and cost the actual values or else the estimate, failures 1 when
   * it failed) and its row becomes succeeded or failed with `facts` as its outcome. An unknown
   * action is NOT_FOUND; one no longer admitted is INVALID_ARGUMENT (details.state) and nothing
   * is counted twice.
   */
  settle(actionId: string, outcome: BudgetOutcome): void {
    checkAmount("outcome.runtime_s", outcome.runtime_s);
    checkAmount("outcome.cost", outcome.cost);
    const final = {
      state: outcome.ok ? "succeeded" as const : "failed" as const,
      outcome: outcome.facts ?? null,
    };
    if (this.#bare.delete(actionId)) {
      // Admitted here without reservations: nothing to count, and the one conditional UPDATE
      // is atomic on its own. It changes nothing unless the row is still admitted.
      if (!this.#store.actions.finish(actionId, final)) {
        this.#refuse(actionId, "admitted", "settle");
      }
      return;
    }
    this.#store.transaction(() => {
      this.#expect(actionId, "admitted", "settle");
      this.#count(actionId, outcome);
      this.#store.actions.finish(actionId, final);
    });
  }

  /**
   * Bounds the tables: ended actions older than ACTIONS_KEPT_MS, grants expired a day ago and
   * budget windows older than USAGE_KEPT_MS are deleted (at most 10 000 actions per call).
   */
  prune(): { actions: number; grants: number; usage: number } {
    const now = this.#clock.now();
    return {
      actions: this.#store.actions.prune(now - ACTIONS_KEPT_MS),
      grants: this.#store.grants.prune(now - 86_400_000),
      usage: this.#store.budgets.prune(now - USAGE_KEPT_MS),
    };
  }

  /**
   * The daemon cannot know what an admitted action did (the link to its server dropped while it
   * ran): its row becomes `outcome_unknown` with `facts`, its reservations stay held until an
   * operator reconciles it (`reconcile`). Errors as for `settle`.
   */
  unknown(actionId: string, facts: Record<string, unknown>): void {
    const final = { state: "outcome_unknown" as const, outcome: facts };
    if (this.#bare.delete(actionId)) {
      if (!this.#store.actions.finish(actionId, final)) {
        this.#refuse(actionId, "admitted", "mark unknown");
      }
      return;
    }
    this.#store.transaction(() => {
      this.#expect(actionId, "admitted", "mark unknown");
      this.#store.actions.finish(actionId, final);
    });
  }

  /**
   * Gives back what an admitted action held when it was refused after admission (approval
   * denied or expired, a start that failed before anything ran): its reservations are dropped
   * and its row becomes `released` with `{reason}` as its outcome. Errors as for `settle`.
   */
  release(actionId: string, reason: string): void {
    const final = { state: "released" as const, outcome: { reason } };
    if (this.#bare.delete(actionId)) {
      if (!this.#store.actions.finish(actionId, final)) {
        this.#refuse(actionId, "admitted", "release");
      }
      return;
    }
    this.#store.transaction(() => {
      this.#expect(actionId, "admitted", "release");
      this.#store.budgets.dropReservations(actionId);
      this.#store.actions.finish(actionId, final);
    });
  }

  /**
   * An operator's settling of an `outcome_unknown` action (its outcome was lost with a restart),
   * in one transaction: its reservations become usage as for `settle` with the estimates (a
   * failure also counts against failure budgets), and its row records the state, `by` and
   * `note`. An unknown action is NOT_FOUND; one whose outcome is known is INVALID_ARGUMENT.
   */
  reconcile(actionId: string, state: "succeeded" | "failed", by: string, note: string): void {
    if (state !== "succeeded" && state !== "failed") {
      throw new RangeError(`Cannot reconcile as "${String(state)}": succeeded or failed`);
    }
    this.#store.transaction(() => {
      this.#expect(actionId, "outcome_unknown", "reconcile");
      this.#count(actionId, { ok: state === "succeeded" });
      this.#store.actions.reconcile(actionId, { state, by, note });
    });
  }

  /**
   * Every budget key's standing in its current window: for a global budget or one with `match`,
   * its one key (zeros when unused); otherwise each key with usage or reservations, by key.
   */
  usage(rules: readonly BudgetRule[]): BudgetUsage[] {
    checkRules(rules);
    const now = this.#clock.now();
    const out: BudgetUsage[] = [];
    for (const rule of rules) {
      const budget = budgetName(rule);
      const { windowStart, resetAt } = windowOf(rule, now);
      const rows = this.#store.budgets.window(budget, windowStart, MAX_USAGE_KEYS_PER_BUDGET);
      const fixed = rule.scope === "global"
        ? "global"
        : rule.match !== undefined
        ? `${rule.scope}:${rule.match}`
        : undefined;
      const base = { budget, metric: rule.metric, limit: rule.limit, reset_at: resetAt };
      if (fixed !== undefined) {
        const row = rows.find((r) => r.scope_key === fixed);
        out.push({ ...base, scope_key: fixed, used: row?.used ?? 0, reserved: row?.reserved ?? 0 });
        continue;
      }
      for (const row of rows) {
        if (!row.scope_key.startsWith(`${rule.scope}:`)) continue;
        out.push({ ...base, scope_key: row.scope_key, used: row.used, reserved: row.reserved });
      }
    }
    return out;
  }

  // ── internals ─────────────────────────────────────────────────────────────

  /** The conditional UPDATE of a bare action changed nothing: says why (never returns). */
  #refuse(actionId: string, state: ActionRow["state"], verb: string): never {
    this.#expect(actionId, state, verb);
    // Only reachable if the row were still in `state`, which the UPDATE just ruled out.
    throw new TermadaError("INTERNAL", `Cannot ${verb} action "${actionId}"`);
  }

  #expect(actionId: string, state: ActionRow["state"], verb: string): void {
    const row = this.#store.actions.get(actionId);
    if (row === undefined) {
      throw new TermadaError("NOT_FOUND", `No action "${actionId}"`, {
        hint: "Only admitted actions are in the ledger",
      });
    }
    if (row.state !== state) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot ${verb} action "${actionId}": it is ${row.state.replace("_", " ")}`,
        { details: { state: row.state } },
      );
    }
  }

  /** Turns an action's reservations into usage, in their own windows, and drops them. */
  #count(actionId: string, outcome: BudgetOutcome): void {
    const budgets = this.#store.budgets;
    for (const r of budgets.reservationsOf(actionId)) {
      const amount = settledAmount(r, outcome);
      if (amount > 0) budgets.addUsage(r.budget, r.scope_key, r.window_start, amount);
    }
    budgets.dropReservations(actionId);
  }
}

// ── rules ──────────────────────────────────────────────────────────────────

function checkRules(rules: readonly BudgetRule[]): void {
  if (rules.length > MAX_RULES_PER_ADMISSION) {
    throw new RangeError(
      `Cannot evaluate ${rules.length} budget rules: at most ${MAX_RULES_PER_ADMISSION}`,
    );
  }
  const seen = new Set<string>();
  for (const rule of rules) {
    const budget = budgetName(rule);
    if (seen.has(budget)) throw new RangeError(`Budget "${budget}" is given twice`);
    seen.add(budget);
    if (!BUDGET_SCOPES.includes(rule.scope)) {
      throw new RangeError(`Budget "${budget}" has an unknown scope "${String(rule.scope)}"`);
    }
    if (!BUDGET_METRICS.includes(rule.metric)) {
      throw new RangeError(`Budget "${budget}" has an unknown metric "${String(rule.metric)}"`);
    }
    if (typeof rule.limit !== "number" || !Number.isFinite(rule.limit) || rule.limit < 0) {
      throw new RangeError(`Budget "${budget}" needs a finite limit ≥ 0`);
    }
    if (
      rule.windowMs !== null &&
      (!Number.isSafeInteger(rule.windowMs) || (rule.windowMs as number) <= 0)
    ) {
      throw new RangeError(
        `Budget "${budget}" needs a window of a positive integer of ms, or null`,
      );
    }
  }
}

function budgetName(rule: BudgetRule): string {
  if (typeof rule.policy !== "string" || rule.policy === "" || typeof rule.name !== "string") {
    throw new RangeError("A budget rule needs a policy and a name");
  }
  if (rule.name === "") throw new RangeError(`A budget of policy "${rule.policy}" has no name`);
  return `${rule.policy}/${rule.name}`;
}

function checkAmount(what: string, value: number | undefined): void {
  if (value === undefined) return;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new RangeError(`${what} must be a finite number ≥ 0, not ${String(value)}`);
  }
}

function windowOf(rule: BudgetRule, now: number): { windowStart: number; resetAt: string | null } {
  if (rule.windowMs === null) return { windowStart: 0, resetAt: null };
  const windowStart = now - (now % rule.windowMs);
  return { windowStart, resetAt: new Date(windowStart + rule.windowMs).toISOString() };
}

/** The scope value of the subject a rule counts under; undefined: the scope does not apply. */
function scopeValue(scope: BudgetScope, subject: BudgetSubject): string | undefined {
  switch (scope) {
    case "global":
      return "global";
    case "tenant":
      return subject.tenant === undefined || subject.tenant === "" ? undefined : subject.tenant;
    case "principal":
      return subject.principal;
    case "recipient":
      return subject.recipient;
  }
}

/** How a rule applies to this admission, or undefined when it does not. */
function apply(
  rule: BudgetRule,
  subject: BudgetSubject,
  estimate: CostEstimate,
  now: number,
): Applied | undefined {
  if (rule.kinds !== undefined && !rule.kinds.includes(subject.kind)) return undefined;
  const value = scopeValue(rule.scope, subject);
  if (value === undefined) return undefined;
  // `match` has no meaning for a global budget: it applies to everything.
  if (rule.scope !== "global" && rule.match !== undefined && rule.match !== value) return undefined;
  let amount: number;
  switch (rule.metric) {
    case "operations":
      amount = 1;
      break;
    case "prod_changes":
      if (!subject.production || subject.readOnly) return undefined;
      amount = 1;
      break;
    case "cost":
      amount = estimate.cost ?? 0;
      break;
    case "runtime_s":
      amount = estimate.runtime_s ?? 0;
      break;
    case "failures":
      // Nothing is held: the reservation only marks where a failure will count.
      amount = 0;
      break;
  }
  const scopeKey = rule.scope === "global" ? "global" : `${rule.scope}:${value}`;
  return { rule, budget: budgetName(rule), scopeKey, ...windowOf(rule, now), amount };
}

function fits(rule: BudgetRule, used: number, reserved: number, amount: number): boolean {
  if (rule.metric === "failures") return used < rule.limit;
  // An amount not known in advance (0) still needs something left: an exhausted budget refuses.
  if (amount === 0) return used + reserved < rule.limit;
  return used + reserved + amount <= rule.limit + EPSILON * Math.max(1, rule.limit);
}

function settledAmount(r: ReservationRow, outcome: BudgetOutcome): number {
  switch (r.metric) {
    case "operations":
    case "prod_changes":
      return r.amount;
    case "runtime_s":
      return outcome.runtime_s ?? r.amount;
    case "cost":
      return outcome.cost ?? r.amount;
    case "failures":
      return outcome.ok ? 0 : 1;
  }
}

function exceeded(
  subject: BudgetSubject,
  a: Applied,
  used: number,
  reserved: number,
): TermadaError {
  const details: BudgetExceededDetails & ErrorDetails = {
    budget: a.budget,
    scope: a.rule.scope,
    scope_key: a.scopeKey,
    metric: a.rule.metric,
    limit: a.rule.limit,
    used,
    reserved,
    reset_at: a.resetAt,
  };
  const standing = a.rule.metric === "failures"
    ? `${fmt(used)} of ${fmt(a.rule.limit)} failures`
    : `${fmt(used)} used and ${fmt(reserved)} reserved of ${fmt(a.rule.limit)} ${a.rule.metric}`;
  const hint = a.resetAt !== null
    ? `It resets at ${a.resetAt}: try again then, or ask an operator to raise its limit`
    : "It never resets: ask an operator to raise its limit in the policy" +
      (reserved > 0 ? " or to reconcile actions whose outcome is unknown" : "");
  return new TermadaError(
    "BUDGET_EXCEEDED",
    `Cannot admit ${subject.kind} action "${subject.actionId}": budget "${a.budget}" (${a.scopeKey}) is exhausted, ${standing}`,
    {
      details,
      retriable: a.resetAt !== null,
      hint,
    },
  );
}

const fmt = (n: number): string => String(Math.round(n * 1e6) / 1e6);
